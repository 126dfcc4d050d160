"""The numpy engine's BLAS thread count: set for a forward pass, restored after, never changing a vector."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memoryport import InvalidInput, LocalEmbedder
from memoryport.embedders import _blas
from memoryport.embedders.local import SMALL_FORWARD_TOKENS

from ._data import sentences


def _lib() -> _blas._OpenBLAS:
    lib = _blas.openblas()
    if lib is None:
        pytest.skip("numpy's BLAS is not a pthreads OpenBLAS: the count is left alone")
    return lib


def test_block_sets_and_restores_the_count() -> None:
    lib = _lib()
    before = lib.get()
    with _blas.blas_threads(1):
        assert lib.get() == 1
        with _blas.blas_threads(1):
            assert lib.get() == 1
        assert lib.get() == 1
    assert lib.get() == before
    with pytest.raises(RuntimeError), _blas.blas_threads(1):
        raise RuntimeError("boom")
    assert lib.get() == before


def test_none_leaves_the_count_alone() -> None:
    lib = _lib()
    before = lib.get()
    with _blas.blas_threads(None):
        assert lib.get() == before


def test_overlapping_blocks_in_threads_restore_the_first_count() -> None:
    """Two threads whose blocks overlap: the count comes back to what it was before the first."""
    lib = _lib()
    before = lib.get()
    inside = threading.Barrier(2)
    leave = threading.Event()

    def hold() -> None:
        with _blas.blas_threads(1):
            inside.wait(timeout=10)
            leave.wait(timeout=10)

    worker = threading.Thread(target=hold)
    worker.start()
    with _blas.blas_threads(1):
        inside.wait(timeout=10)
    assert lib.get() == 1  # the other block is still open
    leave.set()
    worker.join(timeout=10)
    assert lib.get() == before


def test_bad_blas_threads(model_path: object) -> None:
    for bad in (0, -1, True, "one", 1.5):
        with pytest.raises(InvalidInput, match="blas_threads"):
            LocalEmbedder(blas_threads=bad)  # type: ignore[arg-type]


def test_a_question_runs_on_one_thread_and_batches_on_the_default(model_path: object) -> None:
    lib = _lib()
    local = LocalEmbedder(engine="numpy")
    before = lib.get()
    seen: list[tuple[int, int]] = []
    encoder = local._encoder
    forward = encoder.forward

    def spy(ids: list[np.typing.NDArray[np.int64]], types: object = None) -> object:
        seen.append((sum(len(i) for i in ids), lib.get()))
        return forward(ids, types)  # type: ignore[arg-type]

    encoder.forward = spy  # type: ignore[method-assign]
    try:
        local.embed_sync(["What did Ann drink this morning?"])
        local.embed_sync(sentences(40))
    finally:
        del encoder.forward
    assert seen[0][0] <= SMALL_FORWARD_TOKENS and seen[0][1] == 1
    assert all(count == before for tokens, count in seen[1:] if tokens > SMALL_FORWARD_TOKENS)
    assert lib.get() == before


def test_thread_counts_give_the_same_vectors(model_path: object) -> None:
    texts = ["tea", "What did Ann drink this morning?", *sentences(12)]
    rows = {
        setting: LocalEmbedder(blas_threads=setting, engine="numpy").embed_sync(texts)  # type: ignore[arg-type]
        for setting in (None, 1, 2, "auto")
    }
    for setting, got in rows.items():
        np.testing.assert_allclose(got, rows[None], rtol=0, atol=1e-6, err_msg=str(setting))
