"""memoryport.ranking: speakers the query names (speaker_of, speaker_boost), questions asking when (time_boost)."""

from __future__ import annotations

import pytest

from memoryport.ranking import asks_when, mentions_time, speaker_boost, speaker_of, time_boost


@pytest.mark.parametrize(
    ("text", "speaker"),
    [
        ("Caroline: I went to a support group.", "Caroline"),
        ("  Dr. Smith: take two a day", "Dr. Smith"),
        ("Jean-Luc Picard: engage", "Jean-Luc Picard"),
        ("O’Brien : fine", "O’Brien"),
        ("user: hello", "user"),
        ("Zoë: ça va", "Zoë"),
        ("Meeting moved to 10:30", None),
        ("https://example.com: a link", None),
        ("Note:buy milk", None),
        ("one two three four: too many words", None),
        ("R2D2: beep", "R2D2"),
        ("2024: a good year", None),
        ("", None),
        ("no colon at all", None),
    ],
)  # fmt: skip
def test_speaker_of(text: str, speaker: str | None) -> None:
    assert speaker_of(text) == speaker


TEXTS = {
    "greets": "Gina: Hey Jon! How did the fair go?",
    "jon": "Jon: I showed my studio at a fair yesterday.",
    "plain": "Jon showed his studio at a fair.",
    "gina": "Gina: I opened an online store.",
}


def test_speaker_boost_lifts_the_named_speakers_turns_only() -> None:
    scores = [("greets", 1.0), ("plain", 0.95), ("jon", 0.9), ("gina", 0.5)]
    out = dict(speaker_boost(scores, TEXTS, "Which fair did Jon go to?", weight=0.2))
    assert out == pytest.approx({"greets": 1.0, "plain": 0.95, "jon": 1.1, "gina": 0.5})
    order = [k for k, _ in speaker_boost(scores, TEXTS, "Which fair did Jon go to?", weight=0.2)]
    assert order == ["jon", "greets", "plain", "gina"]


def test_speaker_boost_matches_words_case_insensitively_and_any_word_of_the_name() -> None:
    texts = {"a": "Dr. Smith: rest", "b": "Nurse: water"}
    out = speaker_boost([("b", 0.5), ("a", 0.4)], texts, "what did SMITH advise", weight=0.3)
    assert out == [("a", pytest.approx(0.7)), ("b", 0.5)]


def test_speaker_boost_keeps_order_when_nothing_matches() -> None:
    scores = [("gina", 0.9), ("plain", 0.8), ("missing", 0.7)]
    assert speaker_boost(scores, TEXTS, "Where is the studio?", weight=0.5) == scores
    assert speaker_boost(scores, TEXTS, "Jon", weight=0.0) == scores
    assert speaker_boost([], TEXTS, "Jon", weight=0.2) == []
    with pytest.raises(ValueError):
        speaker_boost(scores, TEXTS, "Jon", weight=-0.1)


@pytest.mark.parametrize(
    ("query", "asks"),
    [("When did Jon open his studio?", True), ("what year was that", True), ("How long ago did you move?", True),
     ("Which month is the fair?", True), ("Where is the studio?", False), ("whenever you like", False),
     ("What did Jon paint?", False)],
)  # fmt: skip
def test_asks_when(query: str, asks: bool) -> None:
    assert asks_when(query) is asks


@pytest.mark.parametrize(
    ("text", "mentions"),
    [("I went yesterday", True), ("two years ago", True), ("on Friday", True), ("in July 2023", True),
     ("since 2019", True), ("on 5/12", True), ("on May 5", True), ("may I join?", False),
     ("I love my studio", False), ("the weekly plan", False)],
)  # fmt: skip
def test_mentions_time(text: str, mentions: bool) -> None:
    assert mentions_time(text) is mentions


def test_time_boost_lifts_records_naming_a_time_for_when_questions_only() -> None:
    texts = {"a": "The support group was powerful.", "b": "I went to a support group yesterday.", "c": "Rain."}
    scores = [("a", 1.0), ("b", 0.9), ("c", 0.1)]
    assert time_boost(scores, texts, "When did Ann go to the support group?", weight=0.2) == [
        ("b", pytest.approx(1.1)),
        ("a", 1.0),
        ("c", 0.1),
    ]
    assert time_boost(scores, texts, "What did Ann do at the support group?", weight=0.2) == scores
    assert time_boost(scores, texts, "When?", weight=0.0) == scores
    assert time_boost([], texts, "When?", weight=0.2) == []
    with pytest.raises(ValueError):
        time_boost(scores, texts, "When?", weight=-1.0)


@pytest.mark.parametrize(
    ("text", "before", "reply"),
    [
        ("Ann: Yes, twice!", "Ben: Did you go anywhere nice?", True),
        ("ann: yes", "ANN: did you?", False),  # the same speaker, case ignored
        ("Ann: And I loved it.", "Ann: Yes, twice!", False),
        ("Yes, twice!", "Ben: Did you go anywhere nice?", False),  # no prefix: a note, a fact
        ("Ann: Yes, twice!", "Did you go anywhere nice?", False),
        ("Meeting moved to 10:30: be there", "Ben: ok", False),  # "10:30" is no speaker
        ("", "", False),
    ],
)
def test_is_reply(text: str, before: str, reply: bool) -> None:
    from memoryport.ranking import is_reply

    assert is_reply(text, before) is reply


def test_mixes_previous_modes_and_gap() -> None:
    from datetime import timedelta

    from memoryport.ranking import SESSION_GAP, mixes_previous

    reply = ("Ann: Yes, twice!", "Ben: Did you go anywhere nice?")
    assert mixes_previous("replies", *reply, 5.0)
    assert not mixes_previous("replies", *reply, SESSION_GAP.total_seconds())  # a new session
    assert not mixes_previous("replies", *reply, -1.0)
    assert mixes_previous("replies", *reply, 3600.0, gap=timedelta(hours=2))
    assert not mixes_previous("replies", "Paris is lovely.", "I went to Paris.", 5.0)
    assert mixes_previous("all", "Paris is lovely.", "I went to Paris.", 1e9)
    with pytest.raises(ValueError, match="mode"):
        mixes_previous("every", *reply, 5.0)


def test_mentions_time_answers_the_same_twice_and_for_long_texts() -> None:
    """Short texts' answers are kept (a search ranks the same turns again); long ones are computed each time."""
    padding = "word " * 200  # beyond the kept length
    for text in ["I went there yesterday", "I love fairs", "on 5/7/2023", padding + "in July", padding + "nothing"]:
        first = mentions_time(text)
        assert mentions_time(text) == first == mentions_time("".join(text))  # an equal string, another object
    assert mentions_time(padding + "in July") and not mentions_time(padding + "nothing")
