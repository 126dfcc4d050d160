"""A built-in PII check for ``remember`` and a redactor for ``recall``.

Both look for the same four kinds of data: e-mail addresses, phone numbers,
payment card numbers (only those that pass the Luhn check) and secrets
(API-key-like tokens, and values given after words such as "password is").
The check refuses a text that holds any of them; the redactor masks them.
Neither ever repeats the matched value in its messages.

The text is normalised before matching, keeping every position in the
original: Unicode spaces (NBSP, thin and narrow spaces) read as a space, Unicode
dashes as ``-``, full-width and other decimal digits as ASCII digits, full-width
``@`` and ``.`` as themselves, and invisible format characters (zero-width
spaces, soft hyphens) are skipped. Addresses are matched with Unicode letters,
so internationalised addresses (``jörg@example.com``, ``ann@bücher.de``) count.

It is a safety net, not a guarantee: a determined writer can always spell a
number in words.
"""

from __future__ import annotations

import re
import unicodedata
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

# Characters read as another one of the same length (so positions stay put).
_SAME_AS = {
    **{c: " " for c in "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"},
    **{c: " " for c in "\u202f\u205f\u3000"},
    **{c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d"},
    "\uff20": "@",
    "\ufe6b": "@",
    "\uff0e": ".",
    "\u3002": ".",
    "\uff61": ".",
    "\uff0f": "/",
    "\u2044": "/",
    "\uff08": "(",
    "\uff09": ")",
    "\uff0b": "+",
}


def _normalise(text: str) -> tuple[str, list[int]]:
    """``text`` with look-alike characters mapped and invisible ones skipped; ``where[i]`` is the original index."""
    if text.isascii():
        return text, list(range(len(text) + 1))
    out: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        mapped = _SAME_AS.get(ch)
        if mapped is None:
            if ch.isascii():
                mapped = ch
            elif unicodedata.category(ch) == "Cf":  # zero-width space/joiner, soft hyphen, BOM, bidi marks
                continue
            elif ch.isdecimal():
                mapped = str(unicodedata.decimal(ch))
            else:
                mapped = ch
        out.append(mapped)
        where.append(i)
    where.append(len(text))
    return "".join(out), where


# --- e-mail -----------------------------------------------------------------------------------------------------------

# Unicode letters and digits in the local part and the domain (RFC 6531 addresses and IDNs);
# the top-level domain is letters (or an ``xn--`` A-label). ``(at)``/``[at]`` and
# ``(dot)``/``[dot]`` spellings count; ``at``/``dot`` as plain words do not (too common).
_AT = r"(?:@|[ \t]{1,2}@[ \t]{1,2}|\s*[(\[{<]\s*at\s*[)\]}>]\s*)"
_DOT = r"(?:\.|\s*[(\[{<]\s*dot\s*[)\]}>]\s*)"
_LABEL = r"[^\W_](?:[\w-]{0,61}[^\W_])?"
_EMAIL = re.compile(
    rf"(?<![\w.%+'-])[\w%+'-]+(?:\.[\w%+'-]+)*{_AT}(?:{_LABEL}{_DOT})+(?:[^\W\d_]{{2,}}|xn--[a-z0-9-]{{2,}})(?![\w@-])",
    re.IGNORECASE,
)
_EMAIL_HINT = re.compile(r"@|[(\[{<]\s*at\s*[)\]}>]", re.IGNORECASE)

# --- secrets ----------------------------------------------------------------------------------------------------------

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

# "my password is hunter2", "the wifi passcode: 4821", "API key = ...", "PIN was 0000".
_SECRET_WORD = (
    r"pass ?(?:word|wd|code|phrase|key)|pwd|pin(?:[ -]?(?:code|number))?|"
    r"(?:api|access|secret|private|license|licence|product|recovery|backup|master)[ _-]?(?:key|token|code)s?|"
    r"(?:auth|access|bearer|refresh|session)[ _-]?token|secret|token|"
    r"security[ _-]?code|cvv2?|cvc2?|access[ _-]?code|door[ _-]?code|alarm[ _-]?code|"
    r"passwort|kennwort|mot de passe|contrase[ñn]a|senha|wachtwoord|parola d'ordine"
)
_SECRET_SAID = re.compile(
    rf"\b(?P<word>{_SECRET_WORD})\b(?:\s+(?:for|of|to)\s+(?:[\w'.-]+\s+){{0,3}}?)?"
    r"(?:\s*(?:(?:is|was|are|will be)(?:\s+(?:now|still|currently|always|just))?|=|:|->|=>|ist|est|es|é|reads)\s*"
    r"|\s+)"
    r"(?P<q>[\"'“‘«`]?)(?P<value>[^\s\"'”’»`]{3,}?)(?P=q)?(?=[\s\"'”’»`]|[.,;:!?)\]]*(?:\s|$))",
    re.IGNORECASE,
)
_NUMERIC_SECRETS = re.compile(r"pin|code|cvv|cvc", re.IGNORECASE)
_PLAIN_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)?")

# Every secret above has a 16+ character run or one of these words: a cheap gate.
_SECRET_HINT = re.compile(
    r"[A-Za-z0-9_-]{16}|(?i:bearer|key|secret|token|pass|pwd|pin|code|cvv|cvc|wort|mot de|contrase|senha)"
)
_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{32,}(?![A-Za-z0-9_-])")

# --- numbers ----------------------------------------------------------------------------------------------------------

_DIGIT = re.compile(r"\d")

# 13 to 19 digits, optionally grouped by spaces (one to three), dashes, dots or slashes.
_CARD = re.compile(r"(?<![\d.,/-])\d(?:(?: {1,3}| ?[-./] ?)?\d){12,18}(?!\d)")

# A phone number: an international one (+ or 00, then 8-15 digits), or 10-15 digits in
# the usual groupings. Eight-digit runs such as ISO dates (2024-01-15) are not phones.
_PHONE = re.compile(r"(?<![\w+.,/-])(?:\+\s?|\b00\s?)?(?:\(\d{1,5}\)[ ./-]?)?\d[\d ./()-]{6,}\d(?![\w])")

_DATE = re.compile(
    r"\b(?:(?:19|20)\d{2}([-./])(?:0?[1-9]|1[0-2])\1(?:0?[1-9]|[12]\d|3[01])"
    r"|(?:0?[1-9]|[12]\d|3[01])([-./])(?:0?[1-9]|[12]\d|3[01])\2(?:19|20)\d{2})\b"
)
_TIME = re.compile(r"\b\d{1,2}[:h.]\d{2}\b")

# Words that name what a long number is. A phone word wins over the others when both are near.
_PHONE_WORDS = re.compile(
    r"(?i:phone|tel\b|tel\.|telephone|mobile|cell|call|ring|text(?:ed)? (?:me|him|her|them)|sms|whats ?app|"
    r"signal|fax|dial|hotline|landline|contact|reach|handy|portable|móvil|telefon|téléphone|celular)"
)
_CARD_WORDS = re.compile(r"(?i:card|visa|master|amex|american express|discover|maestro|credit|debit|\bcc\b|pay)")
_OTHER_NUMBER_WORDS = re.compile(
    r"(?i:\b(?:order|invoice|receipt|ticket|tracking|parcel|shipment|account|acct|iban|routing|sort code|swift|"
    r"reference|ref|booking|reservation|confirmation|serial|isbn|issn|ean|upc|gtin|sku|part|model|item|article|"
    r"policy|claim|case|customer|member|membership|loyalty|passport|licen[cs]e|ids?|nr|transaction|payment|"
    r"batch|lot|container|vin|imei|ip|version|build|timestamp|epoch|population|total|sum|amount)s?\b|\bno\.|#)"
)
_IP = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_AMOUNT = re.compile(r"[1-9]\d{0,2}(?:[ ,.]\d{3}){2,}")


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


def _isbn13(digits: str) -> bool:
    return (
        len(digits) == 13
        and digits[:3] in ("978", "979")
        and sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(digits)) % 10 == 0
    )


def _isbn10(value: str) -> bool:
    chars = re.sub(r"[^\dXx]", "", value)
    if len(chars) != 10 or not chars[:9].isdigit() or not (chars[9].isdigit() or chars[9] in "Xx"):
        return False
    total = sum((10 - i) * int(c) for i, c in enumerate(chars[:9])) + (10 if chars[9] in "Xx" else int(chars[9]))
    return total % 11 == 0


def _is_token(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)


def _issuer_ok(digits: str) -> bool:
    """Whether an issuer (IIN) uses this first digits and length: no card starts with 0, 7, 8 or 9."""
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16 or (51 <= two <= 55 and n == 19)
    if two in (34, 37):
        return n == 15
    if two == 36:
        return n == 14 or n >= 16
    if 300 <= int(digits[:3]) <= 305 or two in (30, 35, 38, 39):
        return n >= 14
    if digits[0] == "6" or two in (50, 81) or 2200 <= four <= 2204:
        return n >= 13  # Discover, UnionPay, Maestro, Mir, RuPay
    return digits[0] == "1" and n == 15  # UATP


def _card_groups_ok(value: str) -> bool:
    """Card numbers are printed in groups of four (Amex 4-6-5): no short group before the last one."""
    groups = re.findall(r"\d+", value)
    if len(groups) == 1:
        return True
    if len({sep.strip() for sep in re.findall(r"\D+", value)}) > 1:  # mixed separators: several numbers
        return False
    return all(len(g) >= 4 for g in groups[:-1]) and len(groups[-1]) >= 3


def _context_before(text: str, start: int, width: int = 32) -> str:
    return text[max(0, start - width) : start]


def _other_number_nearer(before: str, own: re.Pattern[str]) -> bool:
    """Whether the nearest word naming a number in ``before`` names another kind than ``own`` does."""
    mine = max((m.start() for m in own.finditer(before)), default=-1)
    other = max((m.start() for m in _OTHER_NUMBER_WORDS.finditer(before)), default=-1)
    return other > mine


def _is_phone(value: str, text: str, start: int) -> bool:
    digits = re.sub(r"\D", "", value)
    international = value.startswith("+") or (value.startswith("00") and not value.startswith("000"))
    if not (8 if international else 10) <= len(digits) <= 15:
        return False
    # Many small groups, or runs of separators, look like a list of numbers.
    groups = re.findall(r"\d+", value)
    if len(groups) > 6 or re.search(r"[ ./()-]{3,}", value):
        return False
    # Shapes of other numbers: dates, times, IP addresses, ISBNs, decimals in a list.
    if not international and (_DATE.search(value) or _TIME.fullmatch(value.split()[-1]) or _IP.fullmatch(value)):
        return False
    if _isbn13(digits) or (len(groups) == 4 and len(groups[-1]) == 1 and _isbn10(value)):
        return False
    if not international and "." in value and " " in value:
        return False  # "12.50 13.75 14.20": prices or measures
    before = _context_before(text, start)
    phone_word = _PHONE_WORDS.search(before)
    if _other_number_nearer(before, _PHONE_WORDS):
        return False  # "order 4401234567", "ISBN 0-306-40615-2": the nearest word says what it is
    if international:
        return True
    if len(groups) == 1:
        # An unbroken run is a national number of 10 digits (not starting with 1 unless a phone
        # word says so: timestamps and counts do) or 11 starting with a trunk 0 or 1; longer
        # runs are ids and order numbers.
        if len(digits) == 10:
            return digits[0] != "1" or phone_word is not None
        return len(digits) == 11 and (digits[0] in "01" or phone_word is not None)
    if phone_word is not None:
        return True
    if _AMOUNT.fullmatch(value):
        return False  # "1 234 567 890": an amount with thousands separators
    # Groups of one or two digits only ("10 20 30 40 50") read as a list unless a trunk 0 starts them.
    return not (all(len(g) <= 2 for g in groups) and not digits.startswith("0"))


def _secret_value(word: str, value: str) -> bool:
    """Whether ``value``, said after ``word`` ("password is ..."), looks like the secret itself."""
    value = value.rstrip(".,;:!?)")
    if len(value) < 3 or (value.startswith("[") and value[1:].split("]")[0] in ("email", "phone", "card", "secret")):
        return False  # too short, or one of our own masks: a redacted text stays as it is
    if value.isdigit():
        return len(value) >= 3 if _NUMERIC_SECRETS.search(word) else len(value) >= 4
    if _PLAIN_WORD.fullmatch(value) and (value.islower() or value.istitle() or value.isupper()):
        # A word cased like prose ("required", "Strong", "STORED") describes the secret,
        # unless it is too long for a word: "correcthorsebatterystaple".
        return len(value) >= 14 and value.islower()
    return len(value) >= 4


def find_pii(text: str) -> list[PIIMatch]:
    """Every e-mail address, phone number, Luhn-valid card number and secret in ``text``.

    Matches do not overlap; they are ordered by position. Positions refer to
    ``text`` as given, whatever spaces, dashes or digits it is written with.

    Example:
        >>> [m.kind for m in find_pii("call +44 20 7946 0958 or mail ann@example.com")]
        ['phone', 'email']
        >>> [m.kind for m in find_pii("jörg@bücher.de, card 4111.1111.1111.1111, my password is hunter2")]
        ['email', 'card', 'secret']
        >>> find_pii("meet on 2024-01-15 at 10:30; ISBN 978-3-16-148410-0")
        []
    """
    norm, where = _normalise(text)
    found: list[tuple[PIIKind, int, int]] = []

    def taken(start: int, end: int) -> bool:
        return any(start < e and s < end for _, s, e in found)

    def add(kind: PIIKind, start: int, end: int) -> None:
        if not taken(start, end):
            found.append((kind, start, end))

    hint = _SECRET_HINT.search(norm) is not None
    if hint:
        for m in _SECRET.finditer(norm):
            add("secret", m.start(), m.end())
        for m in _SECRET_SAID.finditer(norm):
            if _secret_value(m.group("word"), m.group("value")):
                value_end = m.start("value") + len(m.group("value").rstrip(".,;:!?)"))
                add("secret", m.start("value"), value_end)
    if _EMAIL_HINT.search(norm):
        for m in _EMAIL.finditer(norm):
            add("email", m.start(), m.end())
    if hint:
        for m in _TOKEN.finditer(norm):
            if _is_token(m.group()):
                add("secret", m.start(), m.end())
    # Cards and phones have at least 8 digits; most texts have far fewer.
    if len(_DIGIT.findall(norm)) >= 8:
        for m in _CARD.finditer(norm):
            digits = re.sub(r"\D", "", m.group())
            if (
                13 <= len(digits) <= 19
                and _luhn(digits)
                and _issuer_ok(digits)
                and _card_groups_ok(m.group())
                and not _isbn13(digits)
                # "parcel 6713999728521": an unbroken run named as another number is that number
                and not (digits == m.group() and _other_number_nearer(_context_before(norm, m.start()), _CARD_WORDS))
            ):
                add("card", m.start(), m.end())
        for m in _PHONE.finditer(norm):
            value = m.group()
            if _is_phone(value, norm, m.start()):
                add("phone", m.start(), m.end())
    found.sort(key=lambda f: f[1])
    return [PIIMatch(kind, where[start], where[end - 1] + 1) for kind, start, end in found]


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
