"""The vector ranking's product in parts (hybrid search at SPLIT_FROM floats), or alone on another thread (one
part): the same scores to the bit."""

from __future__ import annotations

import numpy as np
import pytest

from memoryport.adapters.sqlite import _vectors
from memoryport.adapters.sqlite._vectors import Ranking, dot, rows_dot


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_products_in_parts_give_the_same_ranking_as_one_product(parts: int) -> None:
    rng = np.random.default_rng(parts)
    for trial in range(40):
        rows = int(rng.integers(0, 300))
        dim = int(rng.choice([3, 16, 64, 384]))
        matrix = rng.standard_normal((rows, dim)).astype(np.float32)
        if rows > 4:
            matrix[1] = matrix[0]  # a tie
            matrix[3] = matrix[2]
        rids = rng.permutation(10 * rows + 1)[:rows].astype(np.int64)
        expires = np.where(rng.random(rows) < 0.2, 50, 2**62).astype(np.int64)
        allowed = rids[rng.random(rows) < 0.7] if trial % 3 == 0 else None
        qvec = rng.standard_normal(dim).astype(np.float32)
        limit = int(rng.choice([1, 10, 50, 1000]))
        whole = Ranking(rids, matrix, expires, qvec, limit, 100, allowed)
        split = Ranking(rids, matrix, expires, qvec, limit, 100, allowed)
        jobs = split.products(parts)
        assert len(jobs) == (parts if rows >= parts else 0)
        for job in reversed(jobs):  # any order, any thread
            job()
        if jobs:
            assert split.scores is not None
            assert split.scores.tobytes() == dot(matrix, qvec).tobytes()
        assert split() == whole(), trial


def test_no_parts_for_none_or_a_blas_sized_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    matrix = np.ones((10, 4), dtype=np.float32)

    def job() -> Ranking:
        return Ranking(np.arange(10), matrix, np.full(10, 2**62), matrix[0], 3, 0, None)

    assert job().products(0) == []
    alone = job()
    [part] = alone.products(1)
    part()
    assert alone() == [(0, 4.0), (1, 4.0), (2, 4.0)]
    monkeypatch.setattr(_vectors, "_BLAS_FROM", 40)  # BLAS has threads of its own
    blas = job()
    assert blas.products(1) == blas.products(2) == []
    assert blas() == [(0, 4.0), (1, 4.0), (2, 4.0)]


@pytest.mark.parametrize("dim", [1, 16, 63, 64, 65, 384, 1536])
def test_rows_dot_sums_each_row_alone_whatever_the_loop(dim: int) -> None:
    """Each row's score the same bits whatever rows come with it (so parts on any thread agree), and close to
    float64's on either side of the vecdot / einsum switch."""
    rng = np.random.default_rng(dim)
    matrix = rng.standard_normal((97, dim)).astype(np.float32)
    q = rng.standard_normal(dim).astype(np.float32)
    whole = rows_dot(matrix, q)
    assert whole.dtype == np.float32 and whole.shape == (97,)
    for start, end in [(0, 1), (5, 9), (40, 97), (0, 97)]:
        out = np.empty(end - start, dtype=np.float32)
        assert rows_dot(matrix[start:end], q, out=out) is out
        assert out.tobytes() == whole[start:end].tobytes()
    exact = matrix.astype(np.float64) @ q.astype(np.float64)
    assert np.allclose(whole, exact, rtol=1e-4, atol=1e-4 * np.sqrt(dim))
