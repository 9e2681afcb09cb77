"""What the offline summarizer keeps: LoCoMo evidence turns found in its key facts.

    python benchmarks/bench_summary_locomo.py LOCOMO_JSON --convs 0-2

Each LoCoMo session is summarized on its own by ``ExtractiveSummarizer``. A question counts
as kept for a session when one of its evidence turns in that session has a sentence among
the summary's key facts (the facts a memory summary exists to keep), found by the turn id a key
point ends with. Also printed: how often
the loss guard fires when the second half of a session is summarized on top of the first,
and the topic-shift similarity of the three turns after the middle to the first half.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitmem.importers import locomo
from gitmem.models import Summary
from gitmem.summary.account import split_turn
from gitmem.summary.engines import ExtractiveSummarizer
from gitmem.summary.loss import check_loss
from gitmem.summary.triggers import topic_similarity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--convs", default=None, help="conversation range, e.g. 0-2")
    args = parser.parse_args()
    conversations = locomo.load(args.file)
    chosen = [conversations[at] for at in locomo.parse_range(args.convs, len(conversations))]
    summarizer = ExtractiveSummarizer()
    kept: Counter[int] = Counter()
    asked: Counter[int] = Counter()
    fires, similarities, sessions = 0, [], 0
    for conversation in chosen:
        for session in conversation.sessions:
            turns = session.interactions
            sessions += 1
            facts = summarizer.structured(turns).key_facts
            # a key point names the turn it came from; one without that is found by its text
            refs = [split_turn(fact) for fact in facts]
            picked = {ref for _, ref in refs if ref is not None}
            bodies = [body.split(": ", 1)[-1].rstrip("…") for body, ref in refs if ref is None]
            picked |= {t.id for t in turns if any(body and body in t.text for body in bodies)}
            ids = {t.id for t in turns}
            for question in conversation.questions:
                evidence = [e for e in question.evidence if e in ids]
                if evidence:
                    asked[question.category] += 1
                    kept[question.category] += any(e in picked for e in evidence)
            half = len(turns) // 2
            first = summarizer.structured(turns[:half])
            previous = Summary(
                text=first.summary,
                generated=datetime(2024, 1, 1, tzinfo=UTC),
                facts=first.key_facts,
                keywords=first.entities,
            )
            second = summarizer.structured(turns[half:], previous)
            fires += check_loss(previous, second, turns[half:]).fires
            if half >= 4:
                similarities.append(topic_similarity(turns[half : half + 3], turns[:half]))
    total = sum(asked.values())
    print(
        f"{sessions} sessions; evidence kept in the key facts: "
        f"{100 * sum(kept.values()) / total:.1f}% of {total} (question, session) pairs"
    )
    for category in sorted(asked):
        print(
            f"  category {category}: {100 * kept[category] / asked[category]:.1f}% "
            f"of {asked[category]}"
        )
    print(f"loss guard fires on {fires} of {sessions} two-step summaries")
    if similarities:
        low = sum(s < 0.02 for s in similarities)
        print(
            f"topic similarity after the middle: mean {sum(similarities) / len(similarities):.3f}"
            f", below the 0.02 trigger {low} of {len(similarities)}"
        )


if __name__ == "__main__":
    main()
