"""Leave-one-conversation-out choice of ranking parameters over LoCoMo dev conversations.

For each conversation in turn, every combination of the ``--grid`` values is scored on the
OTHER conversations (the fit), the best is kept, and the held-out conversation is scored
with it: turn R@5 and R@10, recall_any@5 and recall_all@5 of its LoCoMo questions, and R@5
of its period questions of both sets (benchmarks/period_questions.py, written from its
turns: ``period`` shares a rare word with its turn, ``blind`` none). The objective of the
fit is LoCoMo R@5 plus both period-question R@5 over the fit conversations (each a share
of its questions, so all three count alike). The default grid is every field below (144
combinations); ``--grid`` narrows it. Prints each fold, the mean and the
spread (largest minus smallest).

    python benchmarks/loo_weights.py /work/shared/data/locomo/locomo-dev.json
    python benchmarks/loo_weights.py FILE --grid period_weight=0,0.5,0.7,0.85
    python benchmarks/loo_weights.py FILE --grid repeat_session_weight=0,0.05,0.1,0.15
    python benchmarks/loo_weights.py FILE --grid answer_context=0,0.25,0.5,0.75,1
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import period_questions
from bench_locomo import direct

from gitmem.importers import locomo
from gitmem.search.rankconfig import RankConfig

DEFAULT_GRID = {
    "period_weight": [0.0, 0.5, 0.7, 0.85],
    "period_half_life_days": [3.0, 7.0, 14.0],
    "repeat_session_weight": [0.0, 0.05, 0.1, 0.15],
    "answer_context": [0.0, 0.5, 1.0],
}


def measure(conv: locomo.LocomoSample, config: RankConfig) -> dict[str, float]:
    """One conversation's overall LoCoMo row (percents) plus period-question R@5."""
    row = direct([conv], config, 50).rows()[-1]
    asked = period_questions.build(conv.sessions)
    found = period_questions.score(conv.sessions, asked, config)
    blind = period_questions.score(
        conv.sessions, period_questions.build_blind(conv.sessions), config
    )
    return {
        "n": row["n"],
        "R@5": row["R@5"],
        "R@10": row["R@10"],
        "any@5": row["any@5"],
        "all@5": row["all@5"],
        "period n": found["n"],
        "period R@5": round(100 * found["R@5"] / (found["n"] or 1), 1),
        "blind R@5": round(100 * blind["R@5"] / (blind["n"] or 1), 1),
    }


def _parse_grid(items: list[str]) -> dict[str, list[Any]]:
    if not items:
        return DEFAULT_GRID
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, _, values = item.partition("=")
        grid[key] = [json.loads(v) for v in values.split(",")]
    return grid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--convs", default="0-2", help="conversation indexes, e.g. 0-2")
    parser.add_argument("--grid", action="append", default=[], metavar="FIELD=V1,V2")
    args = parser.parse_args()
    everything = locomo.load(args.file)
    convs = [everything[i] for i in locomo.parse_range(args.convs, len(everything))]
    grid = _parse_grid(args.grid)
    combos = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    # every combination on every conversation, once
    results = {
        (at, i): measure(conv, RankConfig().tuned(**combo))
        for at, conv in enumerate(convs)
        for i, combo in enumerate(combos)
    }
    print("| fold | fit on | chosen | R@5 | R@10 | any@5 | all@5 | period R@5 | blind R@5 |")
    print("|---|---|---|---|---|---|---|---|---|")
    folds = []
    for held, conv in enumerate(convs):
        fit = [at for at in range(len(convs)) if at != held]

        def objective(i: int, fit: list[int] = fit) -> float:
            return sum(
                results[at, i]["R@5"] + results[at, i]["period R@5"] + results[at, i]["blind R@5"]
                for at in fit
            )

        best = max(range(len(combos)), key=lambda i: (objective(i), -i))
        row = results[held, best]
        folds.append(row)
        chosen = ", ".join(f"{k}={v}" for k, v in combos[best].items())
        fit_names = "+".join(convs[at].sample_id for at in fit)
        print(
            f"| {conv.sample_id} | {fit_names} | {chosen} | {row['R@5']} | {row['R@10']} "
            f"| {row['any@5']} | {row['all@5']} | {row['period R@5']} | {row['blind R@5']} |"
        )
    for label, pick in (("mean", _mean), ("spread", _spread)):
        cells = " | ".join(
            f"{pick([f[m] for f in folds]):.1f}"
            for m in ("R@5", "R@10", "any@5", "all@5", "period R@5", "blind R@5")
        )
        print(f"| {label} | | | {cells} |")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _spread(values: list[float]) -> float:
    return max(values) - min(values)


if __name__ == "__main__":
    main()
