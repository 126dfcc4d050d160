"""The built-in PII check and redactor: what they catch, and what they leave alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memoryport import find_pii, pii_check, redact_pii

CAUGHT = [
    ("write to ann.smith+work@mail.example.co.uk", "email"),
    ("call +1 (415) 555-0134 tonight", "phone"),
    ("call +44 20 7946 0958", "phone"),
    ("office 555-123-4567", "phone"),
    ("mobile 0612345678", "phone"),
    ("visa 4111 1111 1111 1111", "card"),
    ("amex 3782-822463-10005", "card"),
    ("card 5555555555554444 exp 12/29", "card"),
    ("OPENAI_API_KEY is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv", "secret"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "secret"),
    ("aws AKIAIOSFODNN7EXAMPLE", "secret"),
    ("slack xoxb-123456789012-abcdefghijkl", "secret"),
    ("github ghp_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2", "secret"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "secret"),
    ("password: hunter2hunter2", "secret"),
    ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345", "secret"),
    ("token Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0LmNbVc", "secret"),
]

LEFT_ALONE = [
    "Ann likes green tea",
    "Ann was born in 1985 and moved in 2019",
    "The meeting moved to 2024-01-15 at 10:30",
    "Room 4111 1111 1111 1112 is not a card (fails Luhn)",
    "record id 3f0c9a8b7c6d5e4f3a2b1c0d9e8f7a6b",
    "scores 1 2 3 4 5 6 7 8 9 10 11",
    "it costs 1,299.00 EUR, or 12 345 678 yen",
    "version 3.11.7 of python",
    "ann at example dot com",
]


@pytest.mark.parametrize(("text", "kind"), CAUGHT)
def test_caught(text: str, kind: str) -> None:
    assert [m.kind for m in find_pii(text)] == [kind]
    reason = pii_check(text)
    assert reason is not None and reason.startswith("the text contains")
    masked = redact_pii(text)
    [m] = find_pii(text)
    assert text[m.start : m.end] not in masked and text[m.start : m.end] not in reason
    assert find_pii(masked) == []


@pytest.mark.parametrize("text", LEFT_ALONE)
def test_left_alone(text: str) -> None:
    assert find_pii(text) == []
    assert pii_check(text) is None
    assert redact_pii(text) == text


def test_several_kinds_are_named_and_masked_in_place() -> None:
    text = "Ann: ann@example.com, +1 415 555 0134, card 4111-1111-1111-1111."
    assert pii_check(text) == (
        "the text contains an e-mail address, a phone number and a payment card number. Personal contact data, "
        "card numbers and secrets are not stored in memory; remember the fact without them."
    )
    assert redact_pii(text) == "Ann: [email], [phone], card [card number]."


def test_import_memoryport_stays_light() -> None:
    code = (
        "import sys, memoryport\n"
        "assert 'memoryport.tools' not in sys.modules\n"
        "memoryport.memory_tools\n"
        "assert 'memoryport.tools' in sys.modules\n"
        "assert not any(m == 'mcp' or m.startswith('mcp.') for m in sys.modules), 'mcp imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
