"""The LoCoMo hit digests are stable run to run and change when a single score does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from benchmarks import locomo_digest
from benchmarks.locomo import DEFAULT_DATA

pytestmark = pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not found at {DEFAULT_DATA}")


def test_same_hits_same_digests(capsys: pytest.CaptureFixture[str]) -> None:
    assert locomo_digest.main(["--modes", "keyword", "--conversations", "1"]) == 0
    first = capsys.readouterr().out
    assert locomo_digest.main(["--modes", "keyword", "--conversations", "1"]) == 0
    assert capsys.readouterr().out == first
    assert [line.split()[:2] for line in first.splitlines()] == [["keyword", "k50"], ["keyword", "k10"]]


def test_one_score_changed_by_one_ulp_changes_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    import math

    from memoryport import GuardedMemory

    before = asyncio.run(locomo_digest.digests(DEFAULT_DATA, modes=["keyword"], conversations=1))
    search = GuardedMemory.search

    async def nudged(self: Any, *args: Any, **kwargs: Any) -> Any:
        hits = await search(self, *args, **kwargs)
        return [hits[0].model_copy(update={"score": math.nextafter(hits[0].score, 2.0)}), *hits[1:]] if hits else hits

    monkeypatch.setattr(GuardedMemory, "search", nudged)
    after = asyncio.run(locomo_digest.digests(DEFAULT_DATA, modes=["keyword"], conversations=1))
    assert before.keys() == after.keys() and all(before[k] != after[k] for k in before)


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(SystemExit) as exc:
        locomo_digest.main(["--modes", "keywords"])
    assert exc.value.code == 2
