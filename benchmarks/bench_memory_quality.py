"""What offline consolidation and summaries write, measured on LoCoMo conversations.

Each conversation is imported into its own namespace of one store (its own memory file),
consolidated offline (``mm.consolidate(offline=True)``) and every session summarized offline.
Per conversation and as the mean:

* ``terms``: single-hop questions (category 4) whose answer's content words
  (:func:`gitmem.text.terms`) all occur in one fact; ``exact``: the normalised answer is a
  substring of the memory file;
* ``tokens`` of the memory file (the context's token counter), ``facts``;
* facts that are questions, that start with a role or speaker label, in the first person (%),
  and filed under another person's section than the one whose turn they came from;
* summary lines that start with a role or speaker label, summary sentences in the first
  person (%).

    python benchmarks/bench_memory_quality.py LOCOMO_JSON [--convs 0-2] [--json] [--summaries-first]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitmem import MemoryManager
from gitmem.importers.locomo import import_locomo
from gitmem.search.tokens import default_counter
from gitmem.text import split_sentences, terms
from gitmem.text.voice import first_person, is_question, person_section, role_prefix


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def _convs(spec: str, total: int) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return [n for n in out if n < total]


def measure(
    mm: MemoryManager, sample: dict[str, Any], data: Path, at: int, summaries_first: bool
) -> dict[str, Any]:
    """Import, consolidate and summarize one conversation; its figures."""
    import_locomo(mm, data, convs=str(at))
    if summaries_first:  # consolidation then reads the summaries' key points too
        for session in mm.list_sessions():
            mm.summarize(session.id, offline=True)
    started = time.perf_counter()
    result = mm.consolidate(offline=True)
    consolidate_s = time.perf_counter() - started
    facts = mm.facts()
    text = (mm.path / mm.facts_path).read_text(encoding="utf-8")
    people = {sample["conversation"]["speaker_a"], sample["conversation"]["speaker_b"]}
    speaker_of: dict[tuple[str, str], str] = {}
    sessions = mm.list_sessions()
    for session in sessions:
        for turn in session.interactions:
            if turn.messages:
                speaker_of[(session.id, turn.id)] = turn.messages[0].speaker
    fact_terms = [frozenset(terms(f.text)) for f in facts]
    body = _norm(text)
    questions = [q for q in sample["qa"] if q.get("category") == 4]
    hit_terms = sum(any(set(terms(str(q["answer"]))) <= f for f in fact_terms) for q in questions)
    hit_exact = sum(_norm(str(q["answer"])) in body for q in questions)
    misfiled = 0
    for fact in facts:
        said_by = {
            speaker_of.get((s.session, s.interaction or "")) for s in fact.sources if s.interaction
        } - {None}
        if (
            fact.section in people
            and said_by
            and fact.section not in {person_section(p) for p in said_by if p}
        ):
            misfiled += 1
    started = time.perf_counter()
    summary_lines = summary_sentences = prefixed = first = 0
    for session in sessions:
        if not summaries_first:
            mm.summarize(session.id, offline=True)
    summarize_s = time.perf_counter() - started
    for session in mm.list_sessions():
        if session.summary is None:
            continue
        for line in session.summary.text.splitlines():
            if not line.strip():
                continue
            summary_lines += 1
            prefixed += role_prefix(line, people) is not None
            for sentence in split_sentences(line):
                summary_sentences += 1
                first += first_person(sentence)
    return {
        "conversation": sample["sample_id"],
        "status": result.status,
        "facts": len(facts),
        "tokens": default_counter().count(text),
        "single_hop": len(questions),
        "terms": hit_terms / max(1, len(questions)),
        "exact": hit_exact / max(1, len(questions)),
        "questions": sum(is_question(f.text) for f in facts),
        "prefixed": sum(role_prefix(f.text, people) is not None for f in facts),
        "first_person": sum(first_person(f.text) for f in facts) / max(1, len(facts)),
        "misfiled": misfiled,
        "summary_lines": summary_lines,
        "summary_prefixed": prefixed,
        "summary_first_person": first / max(1, summary_sentences),
        "consolidate_s": consolidate_s,
        "summarize_s": summarize_s,
    }


_COLUMNS = [
    ("conversation", "{}"),
    ("facts", "{}"),
    ("tokens", "{}"),
    ("terms", "{:.1%}"),
    ("exact", "{:.1%}"),
    ("questions", "{}"),
    ("prefixed", "{}"),
    ("first_person", "{:.1%}"),
    ("misfiled", "{}"),
    ("summary_prefixed", "{}"),
    ("summary_first_person", "{:.1%}"),
    ("consolidate_s", "{:.2f}"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--convs", default="0-2")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--summaries-first",
        action="store_true",
        help="summarize every session before consolidating (key points become candidates)",
    )
    args = parser.parse_args(argv)
    samples = json.loads(args.data.read_text(encoding="utf-8"))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "memory"
        MemoryManager.init(store).close()
        for at in _convs(args.convs, len(samples)):
            with MemoryManager(store, namespace=samples[at]["sample_id"]) as mm:
                rows.append(measure(mm, samples[at], args.data, at, args.summaries_first))
    mean: dict[str, Any] = {"conversation": "mean"}
    for key, _ in _COLUMNS[1:]:
        mean[key] = sum(r[key] for r in rows) / len(rows)
    single = sum(r["single_hop"] for r in rows)
    mean["terms_pooled"] = sum(r["terms"] * r["single_hop"] for r in rows) / max(1, single)
    if args.json:
        print(json.dumps({"rows": rows, "mean": mean}, indent=2))
        return 0
    print(" | ".join(name for name, _ in _COLUMNS))
    for row in [*rows, mean]:
        print(
            " | ".join(
                fmt.format(round(row[k]) if fmt == "{}" and isinstance(row[k], float) else row[k])
                for k, fmt in _COLUMNS
            )
        )
    print(f"single-hop answers in one fact, pooled: {mean['terms_pooled']:.1%} of {single}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
