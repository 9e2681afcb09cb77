"""The extra latency of ``retrieve_context(rerank=True)`` over the lexical one, in one run.

    python benchmarks/bench_rerank.py --sessions 1000 --queries 100

A synthetic store (``bench_search``'s corpus, ``--sessions`` x ``--turns`` interactions) and a
Chat Completions server on 127.0.0.1 (``tests/fake_openai.py``, a real HTTP server in a thread)
that answers at once, choosing the first three candidates it was shown with a condensed text.
Rows, each over the same queries:
  lexical           ``retrieve_context(..., k=8)`` (the comparator)
  rerank            ``rerank=True, rerank_candidates=20``: a second, wider ranking, the prompt,
                    the HTTP call through the ``openai`` client, parsing, mapping back
  rerank fallback   ``rerank=True`` with the server answering HTTP 500 (no retries)
  model (server)    the fake server's own handling time per request (the model's share)
  raw client        ``client.chat.completions.create`` alone on the same server: the openai +
                    loopback HTTP floor (on Linux often ~40 ms of delayed ACK, not gitmem)
gitmem's overhead = rerank - lexical - raw client. Absolute times drift on a shared machine: read
the ratios, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_search import Corpus, synthetic_store
from timing import median_p95_ms, print_comparison, timed

from gitmem.llm.config import LLMConfig
from gitmem.summary.engines import LLMSummarizer
from tests.fake_openai import FakeServer, Reply, completion, error, start

REF = re.compile(r"^\[([^\]]+)\] \(session ", re.M)


def choose_first_three(request: dict[str, Any]) -> Reply:
    """Answer like a fast model: the first three candidate ids, condensed."""
    ids = REF.findall(request["messages"][1]["content"])[:3]
    rows = [{"id": i, "text": "condensed", "why": "first"} for i in ids]
    return completion(json.dumps({"chosen": rows}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10, help="interactions per session")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    fake = FakeServer(default=choose_first_three)
    server = start(fake)
    os.environ.update(
        {
            "GITMEM_LLM_BASE_URL": fake.base_url,
            "GITMEM_LLM_MODEL": "fake",
            "GITMEM_LLM_RETRIES": "0",
            "GITMEM_LLM_TIMEOUT": "10",
        }
    )
    base = Path(tempfile.mkdtemp(prefix="gitmem-bench-rerank-"))
    corpus = Corpus()
    mm, texts, ids = synthetic_store(base / "store", corpus, args.sessions, args.turns)
    rng = random.Random(11)
    picks = [rng.randrange(len(texts)) for _ in range(args.queries)]
    queries = [(ids[n], corpus.query(texts[n])) for n in picks]
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"{len(texts)} interactions, {len(queries)} queries"
    )
    mm.retrieve_context(*queries[0])  # open the index

    samples: dict[str, list[float]] = {
        "lexical": [],
        "rerank": [],
        "rerank fallback": [],
        "model (server)": [],
        "raw client": [],
    }
    client = LLMSummarizer(LLMConfig(model="fake", base_url=fake.base_url, max_retries=0)).client

    def raw() -> object:
        return client.chat.completions.create(
            model="fake",
            messages=[
                {"role": "system", "content": "s"},
                {"role": "user", "content": "[t1] (session s)"},
            ],
            response_format={"type": "json_object"},
        )

    fallbacks: list[str | None] = []
    for session, query in queries:

        def lexical(session: str = session, query: str = query) -> object:
            return mm.retrieve_context(session, query, k=8)

        def rerank(session: str = session, query: str = query) -> None:
            out = mm.retrieve_context(session, query, k=8, rerank=True, explain=True)
            fallbacks.append((out.explanation or {})["rerank"]["fallback"])

        samples["lexical"].append(timed(lexical))
        samples["raw client"].append(timed(raw))
        fake.server_seconds.clear()
        samples["rerank"].append(timed(rerank))
        samples["model (server)"].append(sum(fake.server_seconds))
        fake.script.append(lambda request: error(500, "down"))
        samples["rerank fallback"].append(timed(rerank))
        fake.script.clear()  # not asked when the query found no candidate
    server.shutdown()
    mm.close()
    medians = {name: median_p95_ms(values) for name, values in samples.items() if values}
    print_comparison(
        [
            ("lexical", "-", "-", ""),
            ("rerank", "-", "lexical", "lexical"),
            ("rerank fallback", "-", "lexical", "lexical"),
            ("model (server)", "-", "-", ""),
            ("raw client", "-", "-", ""),
        ],
        medians,
    )
    overhead = [
        r - lx - c
        for r, lx, c in zip(
            samples["rerank"], samples["lexical"], samples["raw client"], strict=True
        )
    ]
    print(
        f"\ngitmem's rerank overhead (rerank - lexical - raw client, per query): median "
        f"{statistics.median(overhead) * 1000:.2f} ms"
    )
    print(
        f"fell back: {sum(f is not None for f in fallbacks[0::2])} of {len(queries)} with "
        f"the server answering (no candidates, or a failure), "
        f"{sum(f is not None for f in fallbacks[1::2])} of {len(queries)} on HTTP 500"
    )


if __name__ == "__main__":
    main()
