"""The one text analyser: search, summaries and context agree on what "the same word" is."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta

import hypothesis.strategies as st
from hypothesis import given, settings

import gitmem.text as text_module
from gitmem.models import Interaction, Message, Session, StructuredSummary, Summary
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Ranker, snippet
from gitmem.search.tokens import EstimateCounter
from gitmem.summary.engines import ExtractiveSummarizer
from gitmem.summary.extractive import summary_terms
from gitmem.summary.loss import check_loss
from gitmem.text import (
    find_term,
    name_terms,
    terms,
    topic_terms,
)

T0 = datetime(2024, 4, 15, 15, 30, tzinfo=UTC)

# inflected forms, small talk, contractions, full-width letters and CJK runs
_VOCABULARY = [
    "decorated",
    "decorators",
    "decorating",
    "stories",
    "story",
    "painted",
    "paints",
    "Caroline's",
    "don't",
    "Let's",
    "great",
    "today",
    "totally",
    "the",
    "Ｐｙｔｈｏｎ",
    "café",
    "2023",
    "I",
    "装饰器",
    "我",
    "我的书",
    "王小明",
    "の",
    "한국어",
    "x",
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_VOCABULARY), max_size=12), st.sampled_from([" ", ", ", ". "]))
def test_every_summary_term_is_a_search_term_of_the_same_text(parts: list[str], sep: str) -> None:
    text = sep.join([*parts, "end"])
    searched = set(terms(text))
    assert set(topic_terms(text)) <= searched
    assert summary_terms(StructuredSummary(summary=text)) <= searched


def test_inflections_are_one_term_for_search_and_summaries() -> None:
    assert set(terms("decorated decorating decorators")) == {"decor"}
    assert set(topic_terms("decorated decorating decorators")) == {"decor"}
    # small talk is dropped before stemming: "totally" goes, "total" stays
    assert topic_terms("totally great, the total today") == ["total"]
    assert terms("totally great, the total today") == ["total", "great", "total", "todai"]


def test_loss_guard_keeps_a_fact_restated_with_other_inflections() -> None:
    previous = Summary(
        text="- Caroline painted, exhibited and sold landscapes.",
        generated=T0,
        facts=["Caroline painted, exhibited and sold landscapes."],
    )
    new = StructuredSummary(
        summary="- Caroline paints, exhibits and sells landscapes.",
        key_facts=["Caroline paints, exhibits and sells landscapes."],
    )
    report = check_loss(previous, new, [])
    assert report.dropped == ()
    assert not report.fires


def _index(*turns: tuple[str, str]) -> SearchIndex:
    interactions = [
        Interaction(
            id=f"t{n}",
            timestamp=T0 + timedelta(minutes=n),
            messages=[Message(speaker=speaker, content=content)],
        )
        for n, (speaker, content) in enumerate(turns)
    ]
    session = Session(
        id="s",
        created=T0,
        last_active=T0,
        interactions=interactions,
        participants=sorted({s for s, _ in turns}),
    )
    index = SearchIndex(":memory:")
    with index.writing():
        index.put_session(session, path="s", blob="b-s")
    return index


def test_a_three_character_chinese_speaker_is_recognised_in_a_query() -> None:
    # the speaker's name is cut like any other CJK text, so its pairs match the query's
    index = _index(("李华", "我买了一本新书"), ("王小明", "我买了一本新书"))
    hits = Ranker(index).rank("王小明买了什么书", k=2).hits
    assert hits[0].interaction_id == "t1"
    assert hits[0].components.get("speaker", 0.0) > 0
    assert {"王小", "小明"} <= name_terms("王小明")


def test_snippet_centres_on_a_non_ascii_or_full_width_match() -> None:
    filler = "filler words about nothing at all " * 12
    for word in ("café", "Ｐｙｔｈｏｎ"):
        text = f"{filler} the {word} on the corner {filler}"
        shown = snippet(text, terms(word), limit=80)
        assert word in shown, (word, shown)
    assert find_term("我喜欢Python装饰器", {"装饰"}) == 9
    assert find_term("nothing here", {"decor"}) is None


def test_keywords_are_words_as_written_in_the_conversation() -> None:
    turns = [
        Interaction(
            id=f"i{n}",
            timestamp=T0 + timedelta(minutes=n),
            messages=[
                Message(speaker="user", content=f"Stories, stories: she wants {thing} stories."),
                Message(speaker="assistant", content=f"Try a book about {thing} with a map."),
            ],
        )
        for n, thing in enumerate(["dragons", "pirates", "robots", "trains"])
    ]
    content = ExtractiveSummarizer().summarize(turns).content
    spoken = " ".join(t.text for t in turns).casefold()
    assert "stories" in content.entities
    assert all(keyword.casefold() in spoken for keyword in content.entities)


def test_token_estimate_uses_the_analysers_cjk_range() -> None:
    # CJK extension B ideographs cost like other ideographs (1.5 tokens each)
    assert EstimateCounter().count("\U00020000\U00020001\U00020002\U00020003") == 6
    assert EstimateCounter().count("装饰器装") == 6


@given(st.text(alphabet="abcdefgiklmnorstuy'’ 0123456789.,-", max_size=80))
def test_ascii_terms_read_from_the_word_table_match_the_general_path(text: str) -> None:
    folded = unicodedata.normalize("NFKC", text).translate(text_module._APOSTROPHES).casefold()
    folded = text_module._CONTRACTION.sub("", folded)
    assert text_module.normalize(text) == folded
    expected = [
        text_module.stem(p)
        for p, _ in text_module._pieces(folded)
        if p not in text_module.STOPWORDS and (len(p) > 1 or p.isdigit())
    ]
    assert terms(text) == expected
    assert terms(text) == expected  # again, now every word is in the table
