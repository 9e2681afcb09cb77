"""How well offline consolidation keeps what matters: the shared LoCoMo dev conversations.

Each conversation is imported into its own namespace (so each gets its own
``namespaces/<conv>/memory/MEMORY.md``, the unit the 2,000-token bound applies to) and
consolidated offline. Two string-level figures are reported over the single-hop questions
(category 4 in the data's README):

* ``exact``: the answer, case-folded with punctuation and spacing normalised, is a substring
  of the file's text. The answers are written by annotators, often as paraphrases ("Mel and
  her husband have been married for 5 years."), so even the whole transcript holds only
  97 of the 200 answers this way: 48.5% is this figure's ceiling, whatever the extractor.
* ``terms``: every content word of the answer (``gitmem.text.terms``: case-folded, stemmed,
  stopwords left out) occurs in one fact. The whole transcript's turns reach 155 of 200.

The asserts guard the figures measured when the extractor was written (see
docs/facts-consolidation.md); they are below the issue's 50% target, which extraction within
2,000 tokens does not reach.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path

import pytest

from gitmem import MemoryManager
from gitmem.importers.locomo import import_locomo
from gitmem.search.tokens import default_counter
from gitmem.text import terms

_REPO = Path(__file__).resolve().parents[1]
# the checkout sits beside ``shared/`` (main) or one folder deeper (a worktree under wt/)
_FOUND = [
    p
    for p in (
        Path(os.environ.get("GITMEM_LOCOMO", "/nonexistent")),
        *(
            b / "shared" / "data" / "locomo" / "locomo-dev.json"
            for b in (_REPO.parent, _REPO.parent.parent)
        ),
    )
    if p.is_file()
]
DATA = _FOUND[0] if _FOUND else Path("locomo-dev.json")


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


@pytest.mark.skipif(not DATA.is_file(), reason="the shared LoCoMo dev data is not here")
def test_offline_consolidation_keeps_answers_within_the_budget(tmp_path: Path) -> None:
    samples = json.loads(DATA.read_text(encoding="utf-8"))
    counter = default_counter()
    store = tmp_path / "memory"
    MemoryManager.init(store).close()
    exact = by_terms = total = 0
    lines = []
    for at, sample in enumerate(samples):
        mm = MemoryManager(store, namespace=sample["sample_id"])
        import_locomo(mm, DATA, convs=str(at))
        result = mm.consolidate(offline=True)
        assert result.status == "committed" and result.engine == "offline"
        text = (store / mm.facts_path).read_text(encoding="utf-8")
        tokens = counter.count(text)
        assert tokens < 2000, f"{sample['sample_id']}: {tokens} tokens"
        facts = [frozenset(terms(f.text)) for f in mm.facts()]
        assert all(f.sources and f.sources[0].interaction for f in mm.facts())
        body = _norm(text)
        questions = [q for q in sample["qa"] if q.get("category") == 4]
        hit_exact = sum(_norm(str(q["answer"])) in body for q in questions)
        hit_terms = sum(any(set(terms(str(q["answer"]))) <= f for f in facts) for q in questions)
        exact, by_terms, total = exact + hit_exact, by_terms + hit_terms, total + len(questions)
        lines.append(
            f"{sample['sample_id']}: {len(facts)} facts, {tokens} tokens "
            f"({counter.name}), exact {hit_exact}/{len(questions)}, "
            f"terms {hit_terms}/{len(questions)}"
        )
        mm.close()
    print(
        "\n".join(lines) + f"\nsingle-hop: exact {exact}/{total} = {exact / total:.1%}, "
        f"terms {by_terms}/{total} = {by_terms / total:.1%}"
    )
    assert exact / total >= 0.14
    assert by_terms / total >= 0.22
