"""memoryport.ranking.query_dates and date_boost: dates named in a query lift the records written then."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryport import ranking
from memoryport.ranking import DATE_GRACE, date_boost, query_dates


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Ann cook on 7 July, 2023?", day(2023, 7, 7), day(2023, 7, 8)),
        ("what happened May 23, 2023", day(2023, 5, 23), day(2023, 5, 24)),
        ("the 3rd of March 2021", day(2021, 3, 3), day(2021, 3, 4)),
        ("notes from 2024-02-29", day(2024, 2, 29), day(2024, 3, 1)),
        ("any news in August 2023?", day(2023, 8, 1), day(2023, 9, 1)),
        ("trips in Dec 2022", day(2022, 12, 1), day(2023, 1, 1)),
        ("Sept. 2020 plans", day(2020, 9, 1), day(2020, 10, 1)),
        ("What did I read in 2022?", day(2022, 1, 1), day(2023, 1, 1)),
        ("31 June 2023", day(2023, 6, 1), day(2023, 7, 1)),  # no such day: its month
    ],
)
def test_explicit_dates_are_found(query: str, start: datetime, end: datetime) -> None:
    assert query_dates(query) == (start, end)


@pytest.mark.parametrize(
    "query",
    ["what did I do last week?", "in June", "room 2023", "call 555 2023 1999", "July", "", "🍵", "2023-13-45"],
)
def test_no_date_no_span(query: str) -> None:
    assert query_dates(query) is None


@given(st.text(max_size=300))
def test_any_text_is_safe(text: str) -> None:
    span = query_dates(text)
    assert span is None or (span[0] < span[1] and span[0].tzinfo is not None)


def test_boost_lifts_records_in_the_span_and_just_after() -> None:
    span = (day(2023, 7, 7), day(2023, 7, 8))
    created = {"before": day(2023, 6, 1), "on": day(2023, 7, 7), "told later": day(2023, 7, 10), "top": day(2022, 1, 1)}
    ranked = date_boost([("top", 1.0), ("before", 0.8), ("told later", 0.7), ("on", 0.6)], created, span, weight=0.5)
    assert [key for key, _ in ranked] == ["told later", "on", "top", "before"]
    assert dict(ranked)["on"] == pytest.approx(1.1)
    assert dict(ranked)["before"] == pytest.approx(0.8, abs=1e-3)  # weeks away: almost nothing


def test_boost_fades_outside_the_grace() -> None:
    span = (day(2023, 7, 7), day(2023, 7, 8))
    edge = span[1] + DATE_GRACE
    near, far = edge + timedelta(days=1), edge + timedelta(days=10)
    ranked = dict(date_boost([("near", 0.0), ("far", 0.0)], {"near": near, "far": far}, span))
    assert 0 < ranked["far"] < ranked["near"] < 0.5


def test_no_span_or_zero_weight_changes_nothing() -> None:
    scores = [("a", 0.9), ("b", 0.5)]
    created = {"b": day(2023, 7, 7)}
    assert date_boost(scores, created, None) == scores
    assert date_boost(scores, created, (day(2023, 7, 7), day(2023, 7, 8)), weight=0) == scores
    assert date_boost([], created, (day(2023, 7, 7), day(2023, 7, 8))) == []
    with pytest.raises(ValueError, match="weight"):
        date_boost(scores, created, None, weight=-1)


def test_unknown_keys_keep_their_score_and_ties_keep_input_order() -> None:
    span = (day(2023, 7, 7), day(2023, 7, 8))
    assert date_boost([("x", 0.5), ("y", 0.5)], {}, span) == [("x", 0.5), ("y", 0.5)]


def test_query_dates_scans_once_for_a_year_and_finds_what_the_patterns_find() -> None:
    """The one scan for a year that query_dates makes first never hides a date: on random strings (ASCII
    and other digits, month names, separators), whenever one of the patterns matches, so does the scan, and
    query_dates answers as the patterns alone do."""
    import random

    from memoryport.ranking import _ANY_YEAR, _DATE_PATTERNS

    def by_patterns(query: str) -> object:
        # query_dates without its first scan (the same loop)
        for kind, pattern, groups in _DATE_PATTERNS:
            for match in pattern.finditer(query):
                parts = [match.group(g) for g in groups]
                try:
                    year = int(parts[0])
                    month = (
                        1
                        if kind == "year"
                        else int(parts[1])
                        if parts[1].isdigit()
                        else ranking._MONTHS[parts[1].lower()]
                    )
                    day = int(parts[2]) if kind == "day" else 1
                    start = datetime(year, month, day, tzinfo=timezone.utc)
                except (ValueError, KeyError):
                    continue
                return kind, start
        return None

    rng = random.Random(11)
    pieces = [*"0123456789 -,.", "July ", "Sept. ", "may ", "2023", "1899", "2100", "31st ", "of ", "in ", "during ",
              "20", "19", "٢٠٢٣", "٢٣", "１９", "२०", "the 7th of "]  # fmt: skip
    matched = 0
    for _ in range(30_000):
        query = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        found = by_patterns(query)
        if any(pattern.search(query) for _, pattern, _ in _DATE_PATTERNS):
            matched += 1
            assert _ANY_YEAR.search(query), query
        got = query_dates(query)
        assert (got is None) == (found is None), query
        if found is not None and got is not None:
            assert got[0] == found[1], query
    assert matched > 500
    # a year whose last digits are not ASCII is a year to the patterns (int() reads any decimal digit)
    assert query_dates("what did I do in 20٢٣?") == (day(2023, 1, 1), day(2024, 1, 1))
    assert query_dates("on May 5, 19٩٩") == (day(1999, 5, 5), day(1999, 5, 6))
