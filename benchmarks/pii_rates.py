"""Detection and false-positive rates of the built-in PII check (``memoryport.find_pii``).

Two sets are measured:

* the table of ``tests/tools/pii_table.jsonl``, written by hand: realistic texts
  with e-mail addresses, phone numbers, card numbers and secrets in many
  spellings, and texts that look similar but hold none (ISBNs, order numbers,
  dates, prices, IP addresses, talk about passwords);
* a held-out list (``tests/tools/pii_heldout.jsonl``), written after the
  detectors and never used to tune them; it names only the kind of each
  positive;
* a generated set (seeded): values built from their real formats (country phone
  plans, card issuer prefixes with a valid Luhn digit, Unicode and IDN
  addresses, secrets after the usual words) put into sentences, with their
  separators varied, and look-alike numbers built the same way.

A positive counts as detected when the check refuses the text and the
redactor leaves none of the value; a negative counts as a false positive when
anything is found.

Run (from a checkout, the package installed)::

    python benchmarks/pii_rates.py              # both sets
    python benchmarks/pii_rates.py --n 2000     # a larger generated set
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "tests" / "tools" / "pii_table.jsonl"
HELD_OUT = TABLE.with_name("pii_heldout.jsonl")

Case = tuple[str | None, str, str | None]  # (kind or None, text, value)


def table(path: Path = TABLE) -> list[Case]:
    """The hand-written table (or the held-out list)."""
    out: list[Case] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out.append((row["kind"], row["text"], row.get("value")))
    return out


# --- the generated set -----------------------------------------------------------------------------------------------

NB, NNB, THIN, EN, EM = "\u00a0", "\u202f", "\u2009", "\u2013", "\u2014"

LOCALS = ["ann", "ben.smith", "jörg", "zoë", "françois", "søren.k", "ana.lópez", "li.lei", "иван", "δοκιμή", "mehmet",
          "o'neil", "j_doe99", "sam+news", "ÅSA", "nguyễn", "raj.patel", "用户", "kōji", "eva-maria"]
DOMAINS = ["example.com", "bücher.de", "société.fr", "mail.example.co.uk", "почта.рф", "例子.广告",
           "post.example.at", "uni.example.edu", "firma.no", "xn--bcher-kva.de", "correo.example.es",
           "example.org", "müller.ch", "exämple.net", "sub.domain.example.io"]
EMAIL_TEMPLATES = ["my email is {}", "write to {} please", "{} is Ann's address", "contact: {}",
                   "send the files to {}.",
                   "Ben ({}) will join", "her new address, {}, works now"]

PHONE_PLANS = [  # (format with X for random digits)
    "(2XX) 5XX-XXXX", "4XX-5XX-XXXX", "+1 6XX 5XX XXXX", "+44 20 7XXX XXXX", "07700 9XXXXX", "+49 30 XXXXXXXX",
    "030 XXXXXXX", "+33 6 XX XX XX XX", "06 XX XX XX XX", "+91 9XXXX XXXXX", "+81-3-XXXX-XXXX", "+61 2 XXXX XXXX",
    "+34 6XX XXX XXX", "+39 3XX XXX XXXX", "0171 XXXXXXX", "+86 13X XXXX XXXX", "+55 11 9XXXX-XXXX",
    "2XX.5XX.XXXX", "+46 70 XXX XX XX", "+31 6 XXXX XXXX",
]
PHONE_SEPARATORS = [" ", NB, NNB, THIN, "-", EN, EM, "."]
PHONE_TEMPLATES = ["call me on {}", "her number is {}", "{} (mobile)", "reach Ben at {}", "you can text {} tonight",
                   "phone: {}", "the office line is {}", "{} is the landline", "ring {} after six"]

CARD_ISSUERS = [("4", 16), ("51", 16), ("52", 16), ("53", 16), ("54", 16), ("55", 16), ("2221", 16), ("34", 15),
                ("37", 15), ("6011", 16), ("65", 16), ("3528", 16), ("62", 16), ("4", 19)]
CARD_SEPARATORS = ["", " ", "-", ".", "  ", NB, "/", " - ", THIN, EN]
CARD_TEMPLATES = ["my card is {}", "visa {}", "pay with {} next time", "card number {}", "{} expires 12/29",
                  "the company card: {}"]

SECRET_WORDS = ["password", "wifi password", "passcode", "PIN", "API key", "access token", "door code", "Passwort",
                "pass phrase", "alarm code", "secret key", "login password", "bank PIN", "passphrase"]
SECRET_LINKS = [" is ", ": ", " = ", " was ", " is now ", " "]
SECRET_TEMPLATES = ["my {} {}", "the {} {}", "Ann's {} {}", "{} {}, don't share it", "remember: {} {}"]

ADJECTIVES = ["strong", "required", "weak", "private", "long", "expired", "changed", "missing", "secret", "reset",
              "wrong", "correct", "stored", "hidden", "new", "shared"]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def _email(rng: random.Random) -> str:
    local, domain = rng.choice(LOCALS), rng.choice(DOMAINS)
    style = rng.random()
    if style < 0.65:
        return f"{local}@{domain}"
    if style < 0.75:
        return f"{local} @ {domain}"
    if style < 0.85:
        return f"{local} (at) {domain.replace('.', ' (dot) ')}"
    if style < 0.92:
        return f"{local}\uff20{domain}"
    return f"{local}@{domain}".upper()


def _phone(rng: random.Random) -> str:
    plan = rng.choice(PHONE_PLANS)
    number = "".join(rng.choice("0123456789") if c == "X" else c for c in plan)
    if rng.random() < 0.5:
        sep = rng.choice(PHONE_SEPARATORS)
        number = number.replace(" ", sep) if " " in number else number.replace("-", sep)
    return number


def _card(rng: random.Random) -> str:
    prefix, length = rng.choice(CARD_ISSUERS)
    body = prefix + _digits(rng, length - len(prefix) - 1)
    number = body + _luhn_digit(body)
    groups = [number[:4], number[4:10], number[10:]] if length == 15 else [number[i:i + 4] for i in range(0, length, 4)]
    return rng.choice(CARD_SEPARATORS).join(groups)


def _secret_value(rng: random.Random, word: str) -> str:
    if any(w in word.lower() for w in ("pin", "code")):
        return _digits(rng, rng.choice([4, 4, 5, 6]))
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(["hunter", "summer", "dragon", "monkey", "sunshine", "Passw0rd", "letmein", "Tr0ub4dor"]) + \
            _digits(rng, rng.choice([2, 3, 4])) + rng.choice(["", "!", "#", "?"])
    if kind < 0.7:
        alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!$%&*"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(8, 16)))
    return "".join(rng.choice("0123456789abcdef") for _ in range(rng.randint(16, 40)))


def _isbn13(rng: random.Random) -> str:
    body = rng.choice(["978", "979"]) + _digits(rng, 9)
    check = (10 - sum(int(d) * (1 if i % 2 == 0 else 3) for i, d in enumerate(body)) % 10) % 10
    digits = body + str(check)
    return rng.choice([digits, f"{digits[:3]}-{digits[3]}-{digits[4:6]}-{digits[6:12]}-{digits[12]}",
                       f"{digits[:3]}-{digits[3:5]}-{digits[5:9]}-{digits[9:12]}-{digits[12]}"])


def _isbn10(rng: random.Random) -> str:
    body = _digits(rng, 9)
    check = (11 - sum((10 - i) * int(c) for i, c in enumerate(body)) % 11) % 11
    last = "X" if check == 10 else str(check)
    return f"{body[0]}-{body[1:4]}-{body[4:9]}-{last}"


def _negative(rng: random.Random) -> str:
    pick = rng.randrange(14)
    if pick == 0:
        return rng.choice(["ISBN {}", "the book {} arrived", "read {} next", "{} is out of print"]).format(
            _isbn13(rng) if rng.random() < 0.7 else _isbn10(rng))
    if pick == 1:
        word = rng.choice(["order", "invoice", "booking ref", "ticket", "tracking number", "confirmation",
                           "customer id", "order no.", "receipt #", "reference"])
        return f"{word} {_digits(rng, 1).replace('0', '4')}{_digits(rng, rng.randint(9, 13))} is on its way"
    if pick == 2:
        return f"the parcel {rng.randint(10**11, 10**14 - 1)} arrived"
    if pick == 3:
        y, m, d = rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28)
        return rng.choice([
            f"from {y}-{m:02d}-{d:02d} to {y}-{m:02d}-{d + 1:02d}",
            f"{d:02d}/{m:02d}/{y} - {d + 1:02d}/{m:02d}/{y}",
            f"on {d}.{m}.{y} at {rng.randint(8, 20)}:30",
        ])
    if pick == 4:
        return "prices: " + " ".join(f"{rng.randint(10, 999)}.{rng.randint(0, 99):02d}" for _ in range(4))
    if pick == 5:
        return "server " + ".".join(str(rng.randint(1, 255)) for _ in range(4))
    if pick == 6:
        return f"version {rng.randint(1, 20)}.{rng.randint(0, 30)}.{rng.randint(0, 99)} of the app"
    if pick == 7:
        return f"the {rng.choice(SECRET_WORDS).lower()} is {rng.choice(ADJECTIVES)}"
    if pick == 8:
        return f"timestamp {rng.randint(1_000_000_000, 1_999_999_999)} in the log"
    if pick == 9:
        return f"population {rng.randint(1, 9)} {rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(100, 999)}"
    if pick == 10:
        return f"at {rng.uniform(-89, 89):.4f}, {rng.uniform(-179, 179):.4f}"
    if pick == 11:
        return f"scores {' '.join(str(rng.randint(1, 99)) for _ in range(rng.randint(5, 9)))}"
    if pick == 12:
        body = rng.choice(["4", "51", "6011"]) + _digits(rng, 14)
        bad = str((int(_luhn_digit(body[:15])) + rng.randint(1, 9)) % 10)
        number = body[:15] + bad
        return f"room code {' '.join(number[i : i + 4] for i in range(0, 16, 4))}"
    handle = rng.choice(LOCALS).split(".")[0]
    return f"follow @{handle} and use lib@{rng.randint(1, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"


def generated(n: int, seed: int = 0) -> list[Case]:
    """``n`` positives of each kind and ``n`` negatives, from ``seed``."""
    rng = random.Random(seed)
    makers: list[tuple[str, Callable[[random.Random], str], list[str]]] = [
        ("email", _email, EMAIL_TEMPLATES),
        ("phone", _phone, PHONE_TEMPLATES),
        ("card", _card, CARD_TEMPLATES),
    ]
    out: list[Case] = []
    for kind, make, templates in makers:
        for _ in range(n):
            value = make(rng)
            out.append((kind, rng.choice(templates).format(value), value))
    for _ in range(n):
        word = rng.choice(SECRET_WORDS)
        value = _secret_value(rng, word)
        said = word + rng.choice(SECRET_LINKS) + value
        out.append(("secret", rng.choice(SECRET_TEMPLATES).format(*said.split(" ", 1)) if " " in said else said, value))
    out.extend((None, _negative(rng), None) for _ in range(n))
    return out


# --- measuring -------------------------------------------------------------------------------------------------------


def detected(text: str, kind: str, value: str | None) -> bool:
    """The check refuses ``text`` and the redactor leaves nothing of ``value`` (without a value: ``kind`` is found)."""
    from memoryport import find_pii, pii_check, redact_pii

    if value is None:
        return any(m.kind == kind for m in find_pii(text))
    return pii_check(text) is not None and value not in redact_pii(text)


def rates(cases: list[Case]) -> tuple[dict[str, tuple[int, int]], tuple[int, int], list[str], list[str]]:
    """Per kind (found, total), negatives (flagged, total), and the misses and false positives."""
    from memoryport import find_pii

    found: Counter[str] = Counter()
    total: Counter[str] = Counter()
    misses: list[str] = []
    flagged: list[str] = []
    negatives = 0
    for kind, text, value in cases:
        if kind is None:
            negatives += 1
            if find_pii(text):
                flagged.append(text)
            continue
        total[kind] += 1
        if detected(text, kind, value):
            found[kind] += 1
        else:
            misses.append(f"{kind}: {text!r}")
    return {k: (found[k], total[k]) for k in total}, (len(flagged), negatives), misses, flagged


def _report(name: str, cases: list[Case], show: int) -> Iterator[str]:
    per_kind, (fp, negatives), misses, flagged = rates(cases)
    hit = sum(f for f, _ in per_kind.values())
    pos = sum(t for _, t in per_kind.values())
    yield f"{name}: {pos} positives, {negatives} negatives"
    yield f"  detection      {hit}/{pos} = {hit / pos:.1%}"
    for kind, (f, t) in per_kind.items():
        yield f"    {kind:<8} {f}/{t} = {f / t:.1%}"
    yield f"  false positive {fp}/{negatives} = {fp / negatives:.1%}"
    for line in misses[:show]:
        yield f"    missed   {line}"
    for line in flagged[:show]:
        yield f"    flagged  {line!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=500, help="generated cases per kind (and negatives); default 500")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=0, help="list up to this many misses and false positives")
    args = parser.parse_args(argv)
    for line in _report("table (tests/tools/pii_table.jsonl)", table(), args.show):
        print(line)
    for line in _report("held out (tests/tools/pii_heldout.jsonl)", table(HELD_OUT), args.show):
        print(line)
    for line in _report(f"generated (n={args.n} per kind, seed {args.seed})", generated(args.n, args.seed), args.show):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
