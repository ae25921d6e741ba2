"""Benchmark: `verify_citations` throughput.

1,000 answers, each with 10 citations (5 claims × 2) over its own 5 retrieved chunks of 2 KB
(UTF-8) cut from the anchored fixture documents. Quotes: 70 % verbatim, 20 % altered (they take
the fuzzy-matching path and are reported as quote_drift), 10 % phantom sources.

Target (issue 4): <= 2 s for the 1,000 answers, judged on the process's CPU time (printed with the
wall time: on a machine shared with other jobs the wall time mostly measures the neighbours).

    python tests/benchmarks/bench_verify.py
    BENCH_VERIFY_ANSWERS=10000 python tests/benchmarks/bench_verify.py
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from anchorkit.transform import RenderedTicket, TransformOptions, iter_documents  # noqa: E402
from anchorkit.verify import Answer, Chunk, Citation, Claim, verify_citations  # noqa: E402

TARGET_S = 2.0
CHUNK_BYTES = 2048
CHUNKS_PER_ANSWER = 5
CLAIMS_PER_ANSWER = 5
CITATIONS_PER_CLAIM = 2


def fixture_chunks() -> list[Chunk]:
    """The fixture tickets' documents cut into consecutive pieces of at most CHUNK_BYTES UTF-8 bytes."""
    chunks: list[Chunk] = []
    for rendered in iter_documents(REPO / "fixtures", TransformOptions()):
        if not isinstance(rendered, RenderedTicket):
            continue
        data = rendered.markdown.encode("utf-8")
        for start in range(0, len(data), CHUNK_BYTES):
            text = data[start : start + CHUNK_BYTES].decode("utf-8", "ignore")
            if len(text) > 200:
                uri = f"s3://kb/tickets/{rendered.ticket_id}.md"
                chunks.append(Chunk(f"{rendered.ticket_id}-{start}", text, uri))
    return chunks


def synthetic_answer(rng: random.Random, pool: list[Chunk], number: int) -> tuple[Answer, list[Chunk]]:
    # Each answer gets its own chunk objects (as separate requests would), so no cache is shared.
    retrieved = [Chunk(f"{c.id}-{number}", c.text, c.uri) for c in rng.sample(pool, CHUNKS_PER_ANSWER)]
    claims = []
    for _ in range(CLAIMS_PER_ANSWER):
        citations = []
        for _ in range(CITATIONS_PER_CLAIM):
            chunk = rng.choice(retrieved)
            start = rng.randrange(0, max(1, len(chunk.text) - 80))
            quote = chunk.text[start : start + rng.randrange(30, 80)]
            roll = rng.random()
            if roll < 0.1:
                citations.append(Citation("no-such-chunk", quote))
            elif roll < 0.3:
                words = list(quote)
                rng.shuffle(words)
                citations.append(Citation(chunk.id, "".join(words)))
            else:
                citations.append(Citation(chunk.id, quote))
        ticket = chunk.uri.rsplit("/", 1)[-1].removesuffix(".md") if chunk.uri else "0"
        claims.append(Claim(f"チケット #{ticket} によると {citations[0].quoted_span} とのことです。", tuple(citations)))
    return Answer("claims", claims=tuple(claims)), retrieved


def main() -> None:
    answers_count = int(os.environ.get("BENCH_VERIFY_ANSWERS", "1000"))
    rng = random.Random(4)
    pool = fixture_chunks()
    workload = [synthetic_answer(rng, pool, n) for n in range(answers_count)]
    started, started_cpu = time.perf_counter(), time.process_time()
    reports = [verify_citations(answer, chunks) for answer, chunks in workload]
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
    citations = sum(len(c.citations) for answer, _ in workload for c in answer.claims)
    findings = sum(len(r.findings) for r in reports)
    scale = answers_count / 1000
    print(
        f"verify: {answers_count} answers × {CLAIMS_PER_ANSWER * CITATIONS_PER_CLAIM} citations × "
        f"{CHUNKS_PER_ANSWER} chunks of {CHUNK_BYTES} B: {seconds:.2f} s wall, {cpu_seconds:.2f} s CPU "
        f"({answers_count / cpu_seconds:,.0f} answers/s, {citations / cpu_seconds:,.0f} citations/s of CPU; {findings} findings)"
    )
    # Judged on CPU time: on a shared machine the wall time mostly measures the neighbours.
    verdict = "ok" if cpu_seconds <= TARGET_S * scale else "MISSED"
    print(f"target: <= {TARGET_S * scale:.1f} s for {answers_count} answers: {verdict}")


if __name__ == "__main__":
    main()
