"""The PII table: at least 80 realistic positives and 30 look-alike negatives, every one right.

The rates on this table, on a held-out list and on a generated set are in
docs/security.md (``python benchmarks/pii_rates.py``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from memoryport import find_pii, pii_check, redact_pii

HERE = Path(__file__).resolve().parent
ROWS = [json.loads(line) for line in (HERE / "pii_table.jsonl").read_text(encoding="utf-8").splitlines()]
POSITIVES = [r for r in ROWS if r["kind"] is not None]
NEGATIVES = [r["text"] for r in ROWS if r["kind"] is None]


def test_the_table_is_large_enough_and_covers_every_kind() -> None:
    assert len(POSITIVES) >= 80 and len(NEGATIVES) >= 30
    assert {r["kind"] for r in POSITIVES} == {"email", "phone", "card", "secret"}
    assert all(r["value"] in r["text"] for r in POSITIVES)


@pytest.mark.parametrize("row", POSITIVES, ids=lambda r: f"{r['kind']}:{r['text'][:40]}")
def test_positive_is_refused_and_masked(row: dict[str, str]) -> None:
    text, value, kind = row["text"], row["value"], row["kind"]
    matches = find_pii(text)
    assert kind in {m.kind for m in matches}
    reason = pii_check(text)
    assert reason is not None and value not in reason
    masked = redact_pii(text)
    assert value not in masked
    assert find_pii(masked) == []
    # Positions refer to the text as given, whatever spaces or digits it uses.
    start = text.index(value)
    assert any(m.start <= start and start + len(value) <= m.end + 1 for m in matches)


@pytest.mark.parametrize("text", NEGATIVES)
def test_negative_is_left_alone(text: str) -> None:
    assert find_pii(text) == []
    assert redact_pii(text) == text


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_variants(seed: int) -> None:
    """Values built from their real formats with varied separators, and look-alikes built the same way."""
    sys.path.insert(0, str(HERE.parent.parent))
    try:
        from benchmarks.pii_rates import generated, rates
    finally:
        sys.path.pop(0)
    per_kind, (flagged, negatives), misses, false_positives = rates(generated(200, seed))
    for kind, (found, total) in per_kind.items():
        assert found / total >= 0.97, (kind, misses[:5])
    assert flagged / negatives <= 0.02, false_positives[:5]


def test_invisible_characters_do_not_hide_a_number_and_masks_keep_the_rest() -> None:
    text = "Ann\u200b: call +44\u00a020\u200b 7946\u20130958, mail ann\u00ad@example.com; ok"
    assert [m.kind for m in find_pii(text)] == ["phone", "email"]
    assert redact_pii(text) == "Ann\u200b: call [phone], mail [email]; ok"
