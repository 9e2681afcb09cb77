"""LoCoMo retrieval benchmark: turn R@5/10/25 and session S@1/3 per question category.

Direct mode (default) ranks each conversation in an in-memory index, no store, so ranking
changes can be measured in seconds; ``--store`` imports each conversation into a fresh
gitmem store (``gitmem import locomo``) and asks through ``mm.search``, with the embedding
model when one is configured (``GITMEM_EMBED_MODEL``).

    python benchmarks/bench_locomo.py LOCOMO_JSON
    python benchmarks/bench_locomo.py FILE --store --convs 0-2
    python benchmarks/bench_locomo.py FILE --set prf_weight=0 --set neighbour_weight=0
    python benchmarks/bench_locomo.py FILE --baseline      # plain BM25 over the same terms
    python benchmarks/bench_locomo.py FILE --dump before.json  # every question's ranking
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo_eval

from gitmem.errors import ValidationError
from gitmem.importers import locomo
from gitmem.search.index import SearchIndex
from gitmem.search.rank import Ranker
from gitmem.search.rankconfig import RankConfig

# plain BM25 (k1 1.2, b 0.75) over the same terms: every other component off
BASELINE = dict(
    k1=1.2,
    b=0.75,
    prf_weight=0.0,
    neighbour_weight=0.0,
    session_weight=0.0,
    summary_weight=0.0,
    fuzzy_weight=0.0,
    speaker_weight=0.0,
    temporal_weight=0.0,
    decay_weight=0.0,
    activation_weight=0.0,
    min_score=0.0,
    relative_min=0.0,
)


def _value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def direct(convs: list[locomo.LocomoSample], config: RankConfig, depth: int) -> locomo_eval.Scores:
    scores = locomo_eval.Scores()
    for conv in convs:
        index = SearchIndex(":memory:")
        with index.writing():
            for session in conv.sessions:
                index.put_session(session, path=session.id, blob="")
        ranker = Ranker(index, config)
        for question in conv.questions:
            if question.category not in locomo_eval.CATEGORIES:
                continue
            start = time.perf_counter()
            ranking = ranker.rank(question.text, k=depth)
            scores.seconds += time.perf_counter() - start
            ranked = [(h.session_id, h.interaction_id or "") for h in ranking.hits]
            scores.add(question, conv, ranked)
        index.close()
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--convs", default=None, help="conversation indexes, e.g. 0-2")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a RankConfig field",
    )
    parser.add_argument("--baseline", action="store_true", help="plain BM25 only")
    parser.add_argument("--depth", type=int, default=50, help="hits asked per question")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--dump", metavar="PATH", help="write every question's ranked interaction ids here"
    )
    parser.add_argument("--store", action="store_true", help="through real stores and mm.search")
    parser.add_argument(
        "--workdir",
        help="keep the --store stores here (default: a temp folder); stores found there are "
        "reused with their vectors",
    )
    args = parser.parse_args()
    if args.store:
        try:
            _store(args)
        except ValidationError as error:
            sys.exit(f"error: {error}")
        return
    convs = locomo.load(args.file)
    convs = [convs[i] for i in locomo.parse_range(args.convs, len(convs))]
    config = RankConfig().tuned(**_changes(args))
    scores = direct(convs, config, args.depth)
    _dump(args.dump, scores.rankings)
    rows = scores.rows()
    if args.json:
        print(json.dumps(rows))
    else:
        print(locomo_eval.table(rows))


def _dump(path: str | None, rankings: list[dict[str, object]]) -> None:
    if path:
        Path(path).write_text(json.dumps(rankings, indent=0) + "\n", encoding="utf-8")


def _changes(args: argparse.Namespace) -> dict[str, object]:
    changes: dict[str, object] = dict(BASELINE) if args.baseline else {}
    for item in args.set:
        key, _, value = item.partition("=")
        changes[key] = _value(value)
    return changes


def _store(args: argparse.Namespace) -> None:
    result = locomo_eval.bench_store(
        args.file,
        convs=args.convs,
        depth=args.depth,
        workdir=args.workdir,
        config=RankConfig().tuned(**_changes(args)),
        progress=None if args.json else (lambda text: print(text, file=sys.stderr)),
    )
    _dump(args.dump, result.pop("rankings"))
    if args.json:
        print(json.dumps(result))
        return
    print(locomo_eval.table(result["rows"]))
    print(
        f"import {result['import_s']} s, index {result['index_s']} s "
        f"({', '.join(result['conversations'])})"
        + (
            f"; embeddings {result['embeddings']}, {result['embed_s']} s"
            if result["embeddings"]
            else "; offline"
        )
    )


if __name__ == "__main__":
    main()
