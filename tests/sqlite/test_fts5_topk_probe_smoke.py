"""The FTS5 top-k probe runs, and its exact bound reproduces bm25() (no timing is asserted)."""

from __future__ import annotations

import re

from benchmarks.fts5_topk_probe import main, varints


def test_varints_reads_fts5_records() -> None:
    assert varints(bytes([0x05, 0x81, 0x00, 0x7F])) == [5, 128, 127]


def test_exact_bound_scores_are_fts5_bm25_bit_for_bit() -> None:
    text = main(["--records", "1500", "--n", "20"])
    found = re.search(r"bit-identical to bm25\(\) on (\d+) of (\d+) queries", text)
    assert found is not None, text
    same, asked = int(found.group(1)), int(found.group(2))
    assert asked >= 15 and same == asked, text
    # The store's large-scope ranking (word lists in RAM) finds bm25()'s top-10.
    overlap = re.search(r"overlap@10 with bm25\(\)'s top-10 ([0-9.]+)", text)
    assert overlap is not None and float(overlap.group(1)) == 1.0, text
