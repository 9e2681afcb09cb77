"""Time the offline summarizer and gitmem's overhead around an LLM call, in one run.

    python benchmarks/bench_summarize.py --turns 200 --runs 30

Offline: ``ExtractiveSummarizer`` on a synthetic session of ``--turns`` user/assistant turns
(target: median <= 50 ms for 200 turns). Comparators measured on the same turns:
  parse      ``markdown.parse`` of the session's file (what loading it costs anyway)
  lead-k     a trivial "first sentences" summary (tokenizing floor)

LLM overhead: a Chat Completions server on 127.0.0.1 (stdlib http.server in a thread, answering
at once) is called through the ``openai`` client. Overhead = total time minus the server's own
handling time (target: median <= 10 ms). Rows:
  raw client     ``client.chat.completions.create`` alone (the openai + HTTP floor)
  LLMSummarizer  prompt building + the call + JSON parsing and validation
  mm.summarize   the whole summary: load, call, loss guard, render, commit (one new turn
                 saved, untimed, before each run so there is something to summarize)
  save (ref)     those saves, timed: the commit part of a summary costs about as much
Absolute times drift on a shared machine; compare the rows measured in the same run.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gitmem.format import parse as markdown
from gitmem.llm.config import LLMConfig
from gitmem.manager import MemoryManager
from gitmem.models import Interaction, Message, Session
from gitmem.store.repository import Housekeeping
from gitmem.summary.engines import ExtractiveSummarizer, LLMSummarizer
from gitmem.text import split_sentences, terms
from tests.fake_openai import FakeServer, completion, start, structured

T0 = datetime(2024, 1, 1, tzinfo=UTC)
TOPICS = [
    "python asyncio",
    "tomato garden",
    "tax return",
    "Lisbon apartment",
    "piano lessons",
    "marathon training",
    "sourdough bread",
    "kindle books",
]
WORDS = [
    "plan",
    "budget",
    "schedule",
    "teacher",
    "coach",
    "recipe",
    "deadline",
    "neighbour",
    "invoice",
    "landlord",
    "flour",
    "tempo",
    "chapter",
    "exercise",
    "interval",
    "compost",
    "seedling",
    "receipt",
    "mortgage",
]


def synthetic_turns(count: int, seed: int = 7) -> list[Interaction]:
    """Deterministic user/assistant turns drifting over a few topics (2-4 sentences each)."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        topic = TOPICS[(n // 25) % len(TOPICS)]
        user = " ".join(
            f"About the {topic}, my {rng.choice(WORDS)} said {rng.randint(2, 90)} "
            f"{rng.choice(WORDS)}s by {rng.choice(['Monday', 'June', 'Friday', 'March'])}."
            for _ in range(rng.randint(1, 2))
        )
        assistant = " ".join(
            f"For the {topic}, try the {rng.choice(WORDS)} and the {rng.choice(WORDS)} first."
            for _ in range(rng.randint(1, 2))
        )
        out.append(
            Interaction(
                id=f"t{n:04d}",
                timestamp=T0 + timedelta(minutes=n),
                messages=[
                    Message(speaker="User", content=user),
                    Message(speaker="Assistant", content=assistant),
                ],
            )
        )
    return out


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms"


def bench_offline(turns_count: int, runs: int) -> float:
    turns = synthetic_turns(turns_count)
    session = Session(id="bench", created=T0, last_active=turns[-1].timestamp, interactions=turns)
    text = markdown.render(session)
    summarizer = ExtractiveSummarizer()

    def lead_k() -> list[str]:
        sentences = [s for t in turns for m in t.messages for s in split_sentences(m.content)]
        return [s for s in sentences if terms(s)][:8]

    offline = timed(lambda: summarizer.summarize(turns), runs)
    print(f"offline summarizer, {turns_count} turns ({len(text) // 1024} KiB of Markdown)")
    print(f"  extractive      {ms(offline)}")
    print(f"  parse (ref)     {ms(timed(lambda: markdown.parse(text, 'bench.md'), runs))}")
    print(f"  lead-k (floor)  {ms(timed(lead_k, runs))}")
    median = statistics.median(offline) * 1000
    print(f"  target <= 50 ms: {'met' if median <= 50 else 'MISSED'} ({median:.2f} ms)")
    return median


def bench_llm(runs: int) -> float:
    fake = FakeServer()
    answer = structured(
        "User's needs:\n- a plan\nResolved:\n- the budget",
        ["The budget is 40 euros", "Lessons start in June"],
        ["June"],
        ["plan"],
    )
    fake.default = lambda request: completion(answer)
    server = start(fake)
    try:
        config = LLMConfig(model="bench", base_url=fake.base_url, api_key="x", max_retries=0)
        summarizer = LLMSummarizer(config)
        turns = synthetic_turns(20)
        client = summarizer.client
        messages = summarizer.messages(summarizer.fit(turns)[1], None, "json_schema")

        def overhead(
            fn: Callable[[], object], setup: Callable[[], object] = lambda: None
        ) -> list[float]:
            samples = []
            setup()
            fn()
            for _ in range(runs):
                setup()
                gc.collect()
                before = len(fake.server_seconds)
                started = time.perf_counter()
                fn()
                total = time.perf_counter() - started
                samples.append(total - sum(fake.server_seconds[before:]))
            return samples

        raw = overhead(
            lambda: client.chat.completions.create(
                model="bench", messages=messages, temperature=0.1
            )
        )
        wrapped = overhead(lambda: summarizer.summarize(turns))
        with tempfile.TemporaryDirectory() as folder:
            mm = MemoryManager.init(
                Path(folder) / "store", housekeeping=Housekeeping(enabled=False)
            )
            mm.summarizer = summarizer
            with mm.batch("20 turns"):
                for turn in turns:
                    mm.save_messages("s", turn.messages, turn.timestamp, turn.id)
            counter = iter(range(10_000))

            saves: list[float] = []

            def one_more_turn() -> None:  # not in the summary's time: something to summarize
                n = next(counter)
                started = time.perf_counter()
                mm.save_interaction(
                    "s",
                    f"question {n} about the plan",
                    "answer",
                    timestamp=T0 + timedelta(days=1, minutes=n),
                )
                saves.append(time.perf_counter() - started)

            full = overhead(lambda: mm.summarize("s"), one_more_turn)
            mm.close()
    finally:
        fake.stopping.set()
        server.shutdown()
        server.server_close()
    print("LLM call against a loopback server (server's own time subtracted)")
    print(f"  raw client      {ms(raw)}")
    print(f"  LLMSummarizer   {ms(wrapped)}")
    print(f"  mm.summarize    {ms(full)}   (the whole summary commit of a 20-50 turn session)")
    print(f"  save (ref)      {ms(saves)}   (one save into the same session, same run)")
    gitmem_only = statistics.median(wrapped) - statistics.median(raw)
    print(f"  gitmem's own part of LLMSummarizer (minus raw client): {gitmem_only * 1000:.2f} ms")
    median = statistics.median(wrapped) * 1000
    print(f"  target <= 10 ms: {'met' if median <= 10 else 'MISSED'} ({median:.2f} ms)")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    bench_offline(args.turns, args.runs)
    bench_llm(args.runs)


if __name__ == "__main__":
    main()
