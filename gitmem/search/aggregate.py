"""Questions that gather ("What activities does Melanie do?", "Which cities has Jon
visited?", "她读过哪些书"): their answer is several turns, usually from several sessions,
so the final order spreads over sessions.

An aggregate question is told by its form only: "what"/"which" with a plural noun before
its verb ("What books has ...", "What kinds of art ..."), "what are (some|the) ...s", or
Chinese 哪些 / 什么样的; "What did Melanie paint?" asks for one thing and keeps the plain
order.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

# a plural noun: ends in s, but not in ss/us/is ("class", "status", "this")
_PLURAL = r"(?!(?:has|does|was|is)\b)[a-z][a-z'+/-]*[^sui']s"
_AUX = r"(?:has|have|had|does|do|did|is|are|was|were|can|could|would|will)"
_AGGREGATE = re.compile(
    rf"^\s*(?:what|which)\s+(?:(?:kinds?|types?|sorts?)\s+of\s+)?"
    rf"(?:[\w+/'-]+\s+){{0,2}}?{_PLURAL}\s+{_AUX}\b"
    r"|^\s*(?:what|which)\s+(?:kinds|types|sorts)\s+of\b"
    rf"|^\s*what\s+are\s+(?:some|the|all)\b.*?\b{_PLURAL}\b"
    r"|哪些|什么样的",
    re.IGNORECASE,
)

T = TypeVar("T")


def is_aggregate(text: str) -> bool:
    """Whether the question asks for several things (see the module docs)."""
    return _AGGREGATE.search(text.strip()) is not None


def spread(
    ordered: Sequence[T],
    score: Callable[[T], float],
    session: Callable[[T], int],
    repeat_weight: float,
) -> list[tuple[T, float]]:
    """``ordered`` (best first) re-picked greedily: each item's score is multiplied by
    ``(1 - repeat_weight)`` for every item of its session picked before it, so the first
    hits cover more sessions. Returns (item, factor) in the new order; score times factor
    never rises along it, since a pick only lowers the others."""
    if not repeat_weight or len(ordered) < 2:
        return [(item, 1.0) for item in ordered]
    keep = 1 - repeat_weight
    picked: Counter[int] = Counter()
    # lazy greedy: an entry priced before its session got another pick is priced again
    heap = [(-score(item), at, 0) for at, item in enumerate(ordered)]
    heapq.heapify(heap)
    out: list[tuple[T, float]] = []
    while heap:
        _price, at, seen = heapq.heappop(heap)
        item = ordered[at]
        done = picked[session(item)]
        if done != seen:
            heapq.heappush(heap, (-score(item) * keep**done, at, done))
            continue
        out.append((item, keep**done))
        picked[session(item)] += 1
    return out
