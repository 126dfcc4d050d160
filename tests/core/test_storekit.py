"""memoryport.storekit and memoryport._time: the helpers every built-in store uses."""

from __future__ import annotations

import doctest
import logging
from datetime import datetime, timezone
from typing import Any

import pytest

from memoryport import InvalidInput, MemoryRecord, MemoryScope, UsageError, _time, storekit, testing
from memoryport.storekit import Undo, chunks, duplicate_id, id_of, ids_of, parse_time, recent

pytestmark = pytest.mark.anyio
ANN = MemoryScope(user_id="ann")


@pytest.mark.parametrize("module", [storekit, _time, testing])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0


def test_chunks_cover_everything_in_order() -> None:
    assert [list(c) for c in chunks(range(7), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks([], 3)) == []
    with pytest.raises(ValueError):
        list(chunks([1], 0))


def test_ids_are_read_without_asserts() -> None:
    assert ids_of([MemoryRecord(id="a", scope=ANN, text="x"), MemoryRecord(id="b", scope=ANN, text="y")]) == ["a", "b"]
    with pytest.raises(UsageError, match="through GuardedMemory"):
        id_of(MemoryRecord(scope=ANN, text="no id"))


def test_duplicate_id_names_the_field() -> None:
    err = duplicate_id(2)
    assert isinstance(err, InvalidInput) and err.field == "records[2].id"


def test_recent_is_newest_first_with_one_score_convention() -> None:
    t = [datetime(2024, 1, d, tzinfo=timezone.utc) for d in (1, 3, 2)]
    records = [MemoryRecord(id=str(i), scope=ANN, text=f"r{i}", created_at=t[i]) for i in range(3)]
    hits = recent(records, 2)
    assert hits.mode == "recent"
    assert [h.record.id for h in hits] == ["1", "2"]
    assert [h.score for h in hits] == [1.0, 0.5] and {h.signal for h in hits} == {"recent"}


def test_parse_time_makes_aware_utc_or_none() -> None:
    assert parse_time(datetime(2024, 1, 1, 12)) == datetime(2024, 1, 1, 12, tzinfo=timezone.utc)
    assert parse_time("2024-01-01T13:00:00+01:00") == datetime(2024, 1, 1, 12, tzinfo=timezone.utc)
    assert parse_time(12) is None and parse_time("not a time") is None


async def test_undo_runs_newest_first_and_survives_a_failing_step(caplog: pytest.LogCaptureFixture) -> None:
    done: list[str] = []

    async def step(name: str) -> None:
        done.append(name)

    async def broken() -> None:
        raise OSError("secret text")

    with caplog.at_level(logging.WARNING, logger="memoryport"), pytest.raises(ConnectionError):
        async with Undo("store x") as undo:
            undo.push(lambda: step("first"))
            undo.push(broken)
            undo.push(lambda: step("third"))
            raise ConnectionError
    assert done == ["third", "first"]
    assert "store x: undoing a failed write failed: OSError" in caplog.text and "secret" not in caplog.text


async def test_undo_does_nothing_on_success() -> None:
    done: list[str] = []

    async def step() -> None:
        done.append("undone")

    async with Undo("s") as undo:
        undo.push(step)
    assert done == []


@pytest.mark.parametrize("scale", [1e-30, 1e-3, 1.0, 1e3, 1e18, 1e37])
async def test_unit_rows_are_numpys_norm_division_bit_for_bit(scale: float) -> None:
    import numpy as np

    from memoryport import CallableEmbedder
    from memoryport.storekit import embed_unit

    rng = np.random.default_rng(17)
    rows = (rng.standard_normal((64, 384)) * scale).astype(np.float32)
    rows[3] = 0.0  # a zero row stays zero
    rows[5, :7] = np.float32(1e-45)  # subnormals
    rows[7] = np.finfo(np.float32).max  # the largest finite values: their squares overflow
    with np.errstate(over="ignore"):  # 1e37 squared: both ways overflow to an infinite norm, a zero row
        got = await embed_unit(CallableEmbedder(lambda texts: rows, dim=384, name="fixed"), ["t"] * 64)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
    expected = np.ascontiguousarray(rows / np.maximum(norms, 1e-12), dtype=np.float32)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert np.array_equal(got, expected)
    assert not got[3].any()
    # What lets _unit_rows skip a finiteness check of its output: every input row finite gives finite rows.
    assert np.isfinite(got).all() and float(np.abs(got).max()) <= 1.0 + 1e-6


def _rows_variants(rows: Any) -> list[Any]:
    """``rows`` as the fast path takes it (float32, C-contiguous) and as it does not (each goes via check_matrix)."""
    import numpy as np

    return [
        rows,  # native float32, C-contiguous: the fast path
        rows.astype(np.float64),
        rows.astype(">f4"),  # big-endian float32
        np.asfortranarray(rows),
        *([rows.tolist()] if len(rows) else []),  # [] has no second dimension: refused on its own
    ]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("where", [(0, 0), (2, 383), (1, 17)])
def test_a_non_finite_value_is_refused_on_every_path_with_the_same_error(bad: float, where: tuple[int, int]) -> None:
    import numpy as np

    from memoryport import CallableEmbedder, EmbeddingError
    from memoryport.storekit import _unit_rows

    rows = np.random.default_rng(3).standard_normal((3, 384)).astype(np.float32)
    rows[where] = bad
    embedder = CallableEmbedder(lambda texts: rows, dim=384, name="fixed")
    for given in _rows_variants(rows):
        with pytest.raises(EmbeddingError, match=r"^embedder 'fixed' returned NaN or infinity$"):
            _unit_rows(embedder, given, 3)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_unit_rows_are_the_same_on_every_path(n: int) -> None:
    import numpy as np

    from memoryport import CallableEmbedder
    from memoryport.storekit import _unit_rows

    rows = (np.random.default_rng(n).standard_normal((n, 384)) * 1e3).astype(np.float32)
    if n:
        rows[0] = np.finfo(np.float32).max  # finite, its squares overflow: not refused, a zero row
    embedder = CallableEmbedder(lambda texts: rows, dim=384, name="fixed")
    with np.errstate(over="ignore"):
        results = [_unit_rows(embedder, given, n) for given in _rows_variants(rows)]
    for got in results:
        assert got.dtype == np.float32 and got.flags.c_contiguous and got.shape == (n, 384)
        assert np.array_equal(got, results[0]) and np.isfinite(got).all()
    if n:
        assert not results[0][0].any()
    with pytest.raises(Exception, match="shape"):
        _unit_rows(embedder, rows[:, :100].copy(), n)
