"""A built-in PII check for ``remember`` and a redactor for ``recall``.

Both look for the same four kinds of data: e-mail addresses, phone numbers,
payment card numbers (only those that pass the Luhn check) and API-key-like
secrets. The check refuses a text that holds any of them; the redactor masks
them. Neither ever repeats the matched value in its messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["PIIKind", "PIIMatch", "find_pii", "pii_check", "redact_pii"]

PIIKind = Literal["email", "phone", "card", "secret"]
"""What a match is."""

_LABELS: dict[str, str] = {
    "email": "an e-mail address",
    "phone": "a phone number",
    "card": "a payment card number",
    "secret": "an API key or other secret",
}

_MASKS: dict[str, str] = {"email": "[email]", "phone": "[phone]", "card": "[card number]", "secret": "[secret]"}

_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")

# Known key formats first; then assignments such as ``api_key=...``; then long
# mixed-case alphanumeric tokens (lower-case hex, like record ids, is not enough).
_SECRET = re.compile(
    "|".join(
        f"(?:{p})"
        for p in (
            r"(?<![\w-])(?:sk|pk|rk)-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}",
            r"(?<![\w-])(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}",
            r"(?<![\w-])(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}",
            r"(?<![\w-])github_pat_[A-Za-z0-9_]{30,}",
            r"(?<![\w-])glpat-[A-Za-z0-9_-]{20,}",
            r"(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,}",
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])",
            r"(?<![\w-])AIza[0-9A-Za-z_-]{35}",
            r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
            r"(?i:\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*)",
            r"(?i:\b(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token|token|password|passwd|pwd)"
            r"\s*[:=]\s*[\"']?[^\s\"']{6,})",
        )
    )
)
# Every secret above has a 16+ character run or one of these words: a cheap gate.
_SECRET_HINT = re.compile(r"[A-Za-z0-9_-]{16}|(?i:bearer|key|secret|token|passw|pwd)")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])")

_DIGIT = re.compile(r"\d")

# 13 to 19 digits, optionally grouped by single spaces or dashes.
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")

# A phone number: an international one (+ and 8-15 digits), or 10-15 digits in
# the usual groupings. Eight-digit runs such as ISO dates (2024-01-15) are not phones.
_PHONE = re.compile(r"(?<![\w+])(?:\+\s?)?(?:\(\d{1,5}\)[ .-]?)?\d[\d .()-]{6,}\d(?![\w])")


@dataclass(frozen=True)
class PIIMatch:
    """One finding: its kind and where it is in the text (``text[start:end]``).

    Example:
        >>> find_pii("mail ann@example.com")[0].kind
        'email'
    """

    kind: PIIKind
    start: int
    end: int


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _is_token(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)


def _is_phone(value: str) -> bool:
    digits = sum(c.isdigit() for c in value)
    if not (8 if value.startswith("+") else 10) <= digits <= 15:
        return False
    # Many small groups, or runs of separators, look like a list of numbers.
    groups = re.findall(r"\d+", value)
    return len(groups) <= 6 and not re.search(r"[ .()-]{3,}", value)


def find_pii(text: str) -> list[PIIMatch]:
    """Every e-mail address, phone number, Luhn-valid card number and API-key-like secret in ``text``.

    Matches do not overlap; they are ordered by position.

    Example:
        >>> [m.kind for m in find_pii("call +44 20 7946 0958 or mail ann@example.com")]
        ['phone', 'email']
        >>> find_pii("meet on 2024-01-15 at 10:30")
        []
    """
    found: list[PIIMatch] = []

    def taken(start: int, end: int) -> bool:
        return any(start < m.end and m.start < end for m in found)

    hint = _SECRET_HINT.search(text) is not None
    if hint:
        for m in _SECRET.finditer(text):
            found.append(PIIMatch("secret", m.start(), m.end()))
    if "@" in text:
        for m in _EMAIL.finditer(text):
            if not taken(m.start(), m.end()):
                found.append(PIIMatch("email", m.start(), m.end()))
    if hint:
        for m in _TOKEN.finditer(text):
            if _is_token(m.group()) and not taken(m.start(), m.end()):
                found.append(PIIMatch("secret", m.start(), m.end()))
    # Cards and phones have at least 8 digits; most texts have far fewer.
    if len(_DIGIT.findall(text)) < 8:
        found.sort(key=lambda m: m.start)
        return found
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and _luhn(digits) and not taken(m.start(), m.end()):
            found.append(PIIMatch("card", m.start(), m.end()))
    for m in _PHONE.finditer(text):
        value = m.group()
        if _is_phone(value) and not taken(m.start(), m.end()):
            found.append(PIIMatch("phone", m.start(), m.end()))
    found.sort(key=lambda m: m.start)
    return found


def pii_check(text: str, context: Any = None) -> str | None:
    """The built-in write check: a refusal reason if ``text`` holds PII or a secret, else ``None``.

    Used by :func:`~memoryport.memory_tools` as ``write_check`` by default. The
    reason names the kinds found, never the values.

    Example:
        >>> pii_check("Ann likes green tea") is None
        True
        >>> pii_check("Ann's card is 4111 1111 1111 1111").split(".")[0]
        'the text contains a payment card number'
    """
    kinds = list(dict.fromkeys(m.kind for m in find_pii(text)))
    if not kinds:
        return None
    names = [_LABELS[k] for k in kinds]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (
        f"the text contains {listed}. Personal contact data, card numbers and secrets "
        "are not stored in memory; remember the fact without them."
    )


def redact_pii(text: str, context: Any = None) -> str:
    """The built-in read filter: ``text`` with every finding of :func:`find_pii` masked.

    Example:
        >>> redact_pii("Ann: ann@example.com, key sk-abcdefghijklmnopqrstuv")
        'Ann: [email], key [secret]'
    """
    matches = find_pii(text)
    if not matches:
        return text
    out: list[str] = []
    pos = 0
    for m in matches:
        out.append(text[pos : m.start])
        out.append(_MASKS[m.kind])
        pos = m.end
    out.append(text[pos:])
    return "".join(out)
