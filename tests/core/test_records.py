"""Records: every validation and limit, and the covers rule."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memoryport import DEFAULT_LIMITS, InvalidInput, Limits, MemoryHit, MemoryRecord, MemoryScope
from memoryport._records import utcnow

ANN = MemoryScope(user_id="ann")
SECRET = "my-secret-text"


def record(**kw: object) -> MemoryRecord:
    data: dict[str, object] = {"scope": ANN, "text": "hello"}
    data.update(kw)
    return MemoryRecord(**data)  # type: ignore[arg-type]


def refused(field: str, fn: object, *args: object, **kw: object) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        fn(*args, **kw)  # type: ignore[operator]
    assert info.value.field == field, info.value.field
    assert SECRET not in str(info.value)
    return info.value


# -- scopes -------------------------------------------------------------------


def test_scope_needs_an_id() -> None:
    refused("scope", MemoryScope)
    refused("scope", MemoryScope, user_id=None, session_id=None, agent_id=None)


@pytest.mark.parametrize("name", ["user_id", "session_id", "agent_id"])
@pytest.mark.parametrize("value", ["", "a\x00b", "a\nb", "a\x1bb", "a\ud800b"])
def test_scope_ids_are_clean_strings(name: str, value: str) -> None:
    refused(f"scope.{name}", MemoryScope, **{name: value})


def test_scope_id_must_be_a_string() -> None:
    refused("scope.user_id", MemoryScope, user_id=5)


def test_scope_is_frozen_and_hashable() -> None:
    with pytest.raises(ValueError):
        ANN.user_id = "ben"  # type: ignore[misc]
    assert {ANN, MemoryScope(user_id="ann")} == {ANN}


COVERS = [
    # query, record, covers?
    (dict(user_id="ann"), dict(user_id="ann"), True),
    (dict(user_id="ann"), dict(user_id="ann", session_id="s1"), True),
    (dict(user_id="ann"), dict(user_id="ann", agent_id="a1"), True),
    (dict(user_id="ann"), dict(user_id="ann", session_id="s1", agent_id="a1"), True),
    (dict(user_id="ann"), dict(user_id="ben"), False),
    (dict(user_id="ann"), dict(user_id="ann2"), False),
    (dict(user_id="ann"), dict(session_id="s1"), False),
    (dict(user_id="ann", session_id="s1"), dict(user_id="ann"), False),
    (dict(user_id="ann", session_id="s1"), dict(user_id="ann", session_id="s1"), True),
    (dict(user_id="ann", session_id="s1"), dict(user_id="ann", session_id="s1", agent_id="a"), True),
    (dict(user_id="ann", session_id="s1"), dict(user_id="ann", session_id="s2"), False),
    (dict(user_id="ann", session_id="s1"), dict(user_id="ben", session_id="s1"), False),
    (dict(user_id="ann", agent_id="a1"), dict(user_id="ann", agent_id="a2"), False),
    (dict(user_id="ann", agent_id="a1"), dict(user_id="ann", session_id="s", agent_id="a1"), True),
    (dict(session_id="s1"), dict(session_id="s1"), True),
    (dict(session_id="s1"), dict(user_id="ann", session_id="s1"), False),  # user ids differ: None vs ann
    (dict(agent_id="a1"), dict(agent_id="a1", session_id="s"), True),
    (dict(agent_id="a1"), dict(user_id="ann", agent_id="a1"), False),
]


@pytest.mark.parametrize(("query", "rec", "expected"), COVERS)
def test_covers_rule(query: dict[str, str], rec: dict[str, str], expected: bool) -> None:
    assert MemoryScope(**query).covers(MemoryScope(**rec)) is expected


def test_kind_names_the_ids_set() -> None:
    assert ANN.kind == "user"
    assert MemoryScope(user_id="a", session_id="s").kind == "user+session"
    assert MemoryScope(user_id="a", agent_id="x").kind == "user+agent"
    assert MemoryScope(user_id="a", session_id="s", agent_id="x").kind == "user+session+agent"
    assert MemoryScope(session_id="s").kind == "session"


# -- records ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_text_must_not_be_blank(text: str) -> None:
    refused("record.text", record, text=text)


@pytest.mark.parametrize("bad", ["\x00", "\x07", "\x1b[31m", "\ud800", "\x7f"])
def test_text_refuses_nul_and_control_characters(bad: str) -> None:
    err = refused("record.text", record, text=SECRET + bad)
    assert "must not contain" in str(err)


def test_text_keeps_whitespace_controls_and_unicode() -> None:
    text = "line one\n\tline two\r\nnaïve café ☕ 日本語"
    assert record(text=text).text == text


def test_text_must_be_a_string() -> None:
    refused("record.text", record, text=5)


def test_id_rules() -> None:
    refused("record.id", record, id="")
    refused("record.id", record, id="a b\n")
    refused("record.id", record, id="a\x00")
    assert record(id="abc").id == "abc"
    assert record().id is None


def test_unknown_fields_are_refused() -> None:
    refused("record.colour", record, colour="red")


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ([("a", 1)], "flat mapping"),
        ({"": 1}, "non-empty"),
        ({1: 1}, "non-empty strings"),
        ({"a\x00": 1}, "key must not contain"),
        ({"a\nb": 1}, "key must not contain"),
        ({"a": [1]}, "JSON scalar"),
        ({"a": {"b": 1}}, "JSON scalar"),
        ({"a": float("nan")}, "finite"),
        ({"a": float("inf")}, "finite"),
        ({"a": "x\x00"}, "NUL"),
        ({"a": b"bytes"}, "JSON scalar"),
    ],
)
def test_metadata_is_a_flat_mapping_of_scalars(metadata: object, why: str) -> None:
    err = refused("record.metadata", record, metadata=metadata)
    assert why in str(err)


def test_metadata_scalars_keep_their_types() -> None:
    md = {"s": "x", "i": 3, "f": 0.5, "b": True, "n": None}
    got = record(metadata=md).metadata
    assert got == md
    assert [type(v) for v in got.values()] == [str, int, float, bool, type(None)]


def test_times_must_be_aware_and_are_normalised_to_utc() -> None:
    refused("record.created_at", record, created_at=datetime(2024, 1, 1))
    refused("record.expires_at", record, expires_at=datetime(2030, 1, 1))
    plus2 = timezone(timedelta(hours=2))
    r = record(created_at=datetime(2024, 1, 1, 12, tzinfo=plus2))
    assert r.created_at == datetime(2024, 1, 1, 10, tzinfo=timezone.utc)
    assert r.created_at.utcoffset() == timedelta(0)


def test_expires_at_must_come_after_created_at() -> None:
    now = utcnow()
    refused("record", record, created_at=now, expires_at=now)
    refused("record", record, created_at=now, expires_at=now - timedelta(seconds=1))
    r = record(created_at=now - timedelta(hours=2), expires_at=now - timedelta(hours=1))
    assert r.is_expired(now) and not r.is_expired(now - timedelta(hours=1, seconds=1))


def test_created_at_defaults_to_now() -> None:
    before = utcnow()
    assert before <= record().created_at <= utcnow()


def test_validate_and_validate_json_raise_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        MemoryRecord.model_validate({"scope": {"user_id": "ann"}, "text": ""})
    with pytest.raises(InvalidInput):
        MemoryScope.model_validate_json("{}")
    rec = record(metadata={"k": 1})
    assert MemoryRecord.model_validate_json(rec.model_dump_json()) == rec


def test_invalid_input_is_a_value_error() -> None:
    err = refused("scope", MemoryScope)
    assert isinstance(err, ValueError)
    assert err.limit is None


def test_hit_score_and_signal() -> None:
    rec = record()
    assert MemoryHit(record=rec, score=1.0).signal == "backend"
    refused("hit.score", MemoryHit, record=rec, score=float("nan"))
    refused("hit.signal", MemoryHit, record=rec, score=1.0, signal="magic")


# -- limits -------------------------------------------------------------------


def limit_refused(limit: str, field: str, rec: MemoryRecord, limits: Limits = DEFAULT_LIMITS) -> None:
    with pytest.raises(InvalidInput) as info:
        limits.check_record(rec, "records[0]", utcnow())
    assert (info.value.field, info.value.limit) == (field, limit)
    assert limit in str(info.value) and SECRET not in str(info.value)


def test_text_length_limit() -> None:
    limits = Limits(max_text_chars=20)
    limits.check_record(record(text="x" * 20), "records[0]", utcnow())
    limit_refused("max_text_chars", "records[0].text", record(text=SECRET + "x" * 20), limits)
    limit_refused("max_text_chars", "records[0].text", record(text="x" * 32_001))


def test_id_length_limits() -> None:
    limit_refused("max_id_chars", "records[0].id", record(id="i" * 257))
    limit_refused("max_id_chars", "records[0].scope.user_id", record(scope=MemoryScope(user_id="u" * 257)))
    limit_refused(
        "max_id_chars", "records[0].scope.session_id", record(scope=MemoryScope(user_id="u", session_id="s" * 257))
    )
    DEFAULT_LIMITS.check_record(record(id="i" * 256, scope=MemoryScope(user_id="u" * 256)), "r", utcnow())


def test_metadata_limits() -> None:
    limit_refused("max_metadata_keys", "records[0].metadata", record(metadata={f"k{i}": i for i in range(33)}))
    limit_refused("max_metadata_key_chars", "records[0].metadata", record(metadata={"k" * 65: 1}))
    limit_refused("max_metadata_bytes", "records[0].metadata", record(metadata={"k": "é" * 4_100}))
    DEFAULT_LIMITS.check_record(record(metadata={f"k{i}": i for i in range(32)}), "r", utcnow())


def test_future_created_at_is_refused_within_clock_skew() -> None:
    now = utcnow()
    limit_refused("clock_skew", "records[0].created_at", record(created_at=now + timedelta(minutes=1)))
    DEFAULT_LIMITS.check_record(record(created_at=now + timedelta(seconds=2)), "r", now)
    strict = Limits(clock_skew=timedelta(0))
    limit_refused("clock_skew", "records[0].created_at", record(created_at=now + timedelta(seconds=2)), strict)


def test_check_id() -> None:
    assert DEFAULT_LIMITS.check_id("abc", "id") == "abc"
    for bad in ("", None, 5, "a\nb", "x" * 257):
        with pytest.raises(InvalidInput) as info:
            DEFAULT_LIMITS.check_id(bad, "id")
        assert info.value.field == "id"


def test_limits_are_configurable_and_frozen() -> None:
    limits = Limits(max_k=10)
    assert limits.max_k == 10 and DEFAULT_LIMITS.max_k == 1_000
    with pytest.raises(AttributeError):
        limits.max_k = 5  # type: ignore[misc]
