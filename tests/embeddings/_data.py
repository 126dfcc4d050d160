"""Sentences for the embedding tests."""

from __future__ import annotations

import json
from pathlib import Path

# The data lives beside the repository (never inside the package: CC BY-NC).
LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo-dev.json"


def sentences(n: int) -> list[str]:
    """``n`` distinct sentences: LoCoMo dialogue turns when the data is beside the repo, else generated ones."""
    out: list[str] = []
    if LOCOMO.is_file():
        data = json.loads(LOCOMO.read_text(encoding="utf-8"))
        seen: set[str] = set()
        for sample in data:
            for key, session in sample["conversation"].items():
                if key.startswith("session_") and isinstance(session, list):
                    for turn in session:
                        if turn["text"] not in seen:
                            seen.add(turn["text"])
                            out.append(turn["text"])
    subjects = ["Ann", "My sister", "The old dog", "Our team", "A stranger", "Grandpa", "The café", "Li Wei"]
    verbs = ["painted", "visited", "forgot", "loved", "sold", "adopted", "cooked", "wrote about"]
    objects = ["a red bicycle", "the museum in Paris", "twelve lemons", "an é-mail", "the 3:15 train",
               "a song for her mother", "camping gear", "the Nobel prize speech"]
    tails = ["yesterday.", "last summer!", "because it rained", "— twice?", "with friends.", "", "in 2023.",
             "and then laughed a lot, which surprised everyone at the party"]
    i = 0
    while len(out) < n:
        a, b, c, d = i % 8, (i // 8) % 8, (i // 64) % 8, (i // 512) % 8
        out.append(f"{subjects[a]} {verbs[b]} {objects[c]} {tails[d]}".strip())
        i += 1
    return out[:n]
