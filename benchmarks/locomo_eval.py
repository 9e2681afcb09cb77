"""Scoring retrieval on LoCoMo: turn recall R@k (share of a question's evidence turns among
the top k hits), recall_any@5 and recall_all@5 (any / all of its evidence turns among the
top 5: the form peers publish) and session recall S@k (share of its evidence sessions among
the first k distinct sessions of the hit list), per question category and overall.

:func:`bench_store` imports each conversation into a fresh store and asks every question
through ``search`` (``python benchmarks/bench_locomo.py FILE --store``); ``bench_locomo.py``
without ``--store`` ranks in memory with the same :class:`Scores`.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitmem.importers.locomo import LocomoSample, Question, import_locomo, load, parse_range
from gitmem.manager import MemoryManager
from gitmem.search.rankconfig import RankConfig

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

TURN_KS = (5, 10, 25)

SESSION_KS = (1, 3)

# a question counts 1 when any / all of its evidence turns are among this many hits
ANY_ALL_K = 5


@dataclass
class Scores:
    """Sums of per-question recalls, per category; ``table()`` turns them into percents."""

    sums: dict[int, dict[str, float]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0
    # each question's ranked interaction ids, to compare two rankings question by question
    rankings: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, question: Question, conv: LocomoSample, ranked: Sequence[tuple[str, str]]
    ) -> None:
        """Score one question given the ranked (session id, interaction id) hits."""
        self.rankings.append(
            {"conv": conv.sample_id, "question": question.text, "ranked": [i for _s, i in ranked]}
        )
        per = self.sums.setdefault(question.category, {})
        self.counts[question.category] = self.counts.get(question.category, 0) + 1
        evidence = set(question.evidence)
        for k in TURN_KS:
            top = {iid for _sid, iid in ranked[:k]}
            per[f"R@{k}"] = per.get(f"R@{k}", 0.0) + len(evidence & top) / len(evidence)
        top = {iid for _sid, iid in ranked[:ANY_ALL_K]}
        per[f"any@{ANY_ALL_K}"] = per.get(f"any@{ANY_ALL_K}", 0.0) + bool(evidence & top)
        per[f"all@{ANY_ALL_K}"] = per.get(f"all@{ANY_ALL_K}", 0.0) + (evidence <= top)
        wanted = {conv.session_of(e) for e in evidence}
        order = list(dict.fromkeys(sid for sid, _iid in ranked))
        for k in SESSION_KS:
            per[f"S@{k}"] = per.get(f"S@{k}", 0.0) + len(wanted & set(order[:k])) / len(wanted)

    def rows(self) -> list[dict[str, Any]]:
        """One row per category plus "overall": n, each metric in percent, ms/query."""
        metrics = [f"R@{k}" for k in TURN_KS] + [f"any@{ANY_ALL_K}", f"all@{ANY_ALL_K}"]
        metrics += [f"S@{k}" for k in SESSION_KS]
        total_n = sum(self.counts.values())
        out = []
        for cat in sorted(self.counts):
            n = self.counts[cat]
            out.append(
                {
                    "category": f"{cat} {CATEGORIES.get(cat, '')}".strip(),
                    "n": n,
                    **{m: round(100 * self.sums[cat].get(m, 0.0) / n, 1) for m in metrics},
                }
            )
        if total_n:
            out.append(
                {
                    "category": "overall",
                    "n": total_n,
                    **{
                        m: round(100 * sum(s.get(m, 0.0) for s in self.sums.values()) / total_n, 1)
                        for m in metrics
                    },
                    "ms/query": round(1000 * self.seconds / total_n, 2),
                }
            )
        return out


def table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :meth:`Scores.rows`."""
    head = ["category", "n", "R@5", "R@10", "R@25", "any@5", "all@5", "S@1", "S@3", "ms/query"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join(str(row.get(h, "")) for h in head) + " |")
    return "\n".join(lines)


def bench_store(
    path: str | Path,
    *,
    convs: str | None = None,
    depth: int = 50,
    workdir: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
    config: RankConfig | None = None,
) -> dict[str, Any]:
    """Score retrieval on a LoCoMo file through real stores.

    Each conversation is imported into a fresh store (under ``workdir``, else a temporary
    folder removed afterwards; a store already in ``workdir`` is reused with its index and
    vectors, so a model embeds the conversations once), then every question of categories
    1-4 goes through ``search`` (ranked with ``config`` when given). Returns the table rows
    and timings.
    """
    conversations = load(path)
    chosen = parse_range(convs, len(conversations))
    scores = Scores()
    timings = {"import_s": 0.0, "index_s": 0.0, "embed_s": 0.0}
    embedded: str | None = None  # the embedding model, when one is configured
    with _workdir(workdir) as base:
        for at in chosen:
            conv = conversations[at]
            if progress is not None:
                progress(f"conversation {at}: {conv.sample_id}")
            start = time.perf_counter()
            where = base / f"store-{at}"
            if (where / ".git").exists() and (where / ".imported").exists():
                mm = MemoryManager(where)
            else:
                mm = MemoryManager.init(where)
                import_locomo(mm, path, convs=str(at))
                timings["import_s"] += time.perf_counter() - start
                start = time.perf_counter()
                mm.reindex()
                timings["index_s"] += time.perf_counter() - start
                (where / ".imported").touch()
            if config is not None:
                mm.rank_config = config
            embedding = mm.embedding_config()
            if embedding is not None:  # every vector first, not a few per search
                start = time.perf_counter()
                mm.embed_pending()
                timings["embed_s"] += time.perf_counter() - start
                embedded = embedding.model
            for question in conv.questions:
                if question.category not in CATEGORIES:
                    continue
                start = time.perf_counter()
                hits = mm.search(question.text, k=depth)
                scores.seconds += time.perf_counter() - start
                scores.add(question, conv, [(h.session_id, h.interaction_id or "") for h in hits])
            mm.close_index()
            mm.close()
    return {
        "file": str(path),
        "conversations": [conversations[i].sample_id for i in chosen],
        "rows": scores.rows(),
        "rankings": scores.rankings,
        "embeddings": embedded,
        **{key: round(value, 2) for key, value in timings.items()},
    }


@contextmanager
def _workdir(path: str | Path | None) -> Iterator[Path]:
    """A given folder, or a temporary one removed afterwards."""
    if path is not None:
        given = Path(path)
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="gitmem-locomo-") as temp:
        yield Path(temp)
