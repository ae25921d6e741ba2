"""Benchmark: ``anchorkit stats`` on generated anchored documents.

    python tests/benchmarks/bench_stats.py

Writes BENCH_STATS_DOCS documents (default 10,000; ~6 journal entries each, mixed Japanese/English,
shaped like transform's output) with sidecars into a temporary output folder, then audits the folder
with the four Bedrock-like chunkers (fixed, hierarchical, semantic, heading):

- with cl100k_base (target <= 15 s; vocabulary from $ANCHORKIT_TIKTOKEN_FILE, else
  ../shared/data/cl100k_base.tiktoken beside the repository; skipped with a note if neither exists);
- with approx (target <= 5 s);
- each with --jobs 1 and --jobs 2;
- and, for reference, the LangChain splitters alone on BENCH_STATS_LANGCHAIN_DOCS documents (default 1,000).

Prints seconds, documents/s and the headline figures of each run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.corpus import generated_document  # noqa: E402

from anchorkit import chunking, stats, tokens  # noqa: E402

DOCUMENTS = int(os.environ.get("BENCH_STATS_DOCS", "10000"))
LANGCHAIN_DOCUMENTS = int(os.environ.get("BENCH_STATS_LANGCHAIN_DOCS", "1000"))
JOBS = (1, 2)  # one process, and 2 (this machine's cores: what the default --jobs 0 picks here)
TARGETS = {tokens.CL100K_BASE: 15.0, tokens.APPROX: 5.0}
SHARED_VOCABULARY = REPO.parent / "shared" / "data" / "cl100k_base.tiktoken"


def write_corpus(folder: Path, count: int) -> int:
    size = 0
    for ticket_id in range(1, count + 1):
        document, subject = generated_document(ticket_id, long_description=ticket_id % 50 == 0)
        data = document.encode("utf-8")
        (folder / f"{ticket_id}.md").write_bytes(data)
        sidecar = {"metadataAttributes": {"ticket_id": ticket_id, "subject": subject}}
        (folder / f"{ticket_id}.md.metadata.json").write_text(json.dumps(sidecar, ensure_ascii=False), encoding="utf-8")
        size += len(data)
    return size


def run(folder: Path, choice: tokens.TokenizerChoice, chunkers: list[chunking.Chunker], label: str, target: float | None, jobs: int = 1) -> None:
    started, cpu_started = time.perf_counter(), time.process_time()
    report = stats.audit(stats.iter_output_folder(folder), choice, chunkers, {"path": str(folder), "kind": "output"}, jobs=jobs)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    documents = report["source"]["documents"]
    verdict = "" if target is None else f" (target <= {target:.0f} s: {'met' if seconds <= target else 'MISSED'})"
    # CPU seconds of this process (its threads included, worker processes not): shows contention.
    cpu_note = f", main process CPU {cpu:.2f} s" if jobs == 1 else ""
    print(f"{label}, --jobs {jobs}: {documents:,} documents in {seconds:.2f} s = {documents / seconds:,.0f} documents/s{cpu_note}{verdict}")
    print(f"  overhead {report['overhead']['percent']}% (p50 {report['overhead']['per_ticket_percent']['p50']}%)")
    for row in report["chunking"]:
        print(
            f"  {row['chunker']}/{row['level']}: {row['anchored']['chunks']:,} chunks, coverage {row['anchored']['coverage_percent']}% "
            f"anchored vs {row['stripped']['coverage_percent']}% without anchors"
        )


def main() -> None:
    vocabulary = Path(os.environ.get(tokens.VOCABULARY_FILE_ENV) or SHARED_VOCABULARY)
    bedrock_like = [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE]
    with tempfile.TemporaryDirectory(prefix="bench-stats-") as tmp:
        folder = Path(tmp)
        size = write_corpus(folder, DOCUMENTS)
        print(f"corpus: {DOCUMENTS:,} generated documents, {size / 1e6:.1f} MB")
        for jobs in JOBS:
            if vocabulary.is_file():
                choice = tokens.choose_tokenizer(tokens.CL100K_BASE, vocabulary)
                run(folder, choice, bedrock_like, "cl100k_base, 4 chunkers", TARGETS[tokens.CL100K_BASE], jobs)
            else:
                print(f"cl100k_base: skipped, no vocabulary at {vocabulary} (set {tokens.VOCABULARY_FILE_ENV})")
            run(folder, tokens.choose_tokenizer(tokens.APPROX), bedrock_like, "approx, 4 chunkers", TARGETS[tokens.APPROX], jobs)
    if chunking.langchain_available():
        with tempfile.TemporaryDirectory(prefix="bench-stats-lc-") as tmp:
            write_corpus(Path(tmp), LANGCHAIN_DOCUMENTS)
            langchain = [chunking.CHUNKERS[name]() for name in chunking.LANGCHAIN]
            run(Path(tmp), tokens.choose_tokenizer(tokens.APPROX), langchain, "approx, LangChain splitters (reference)", None)


if __name__ == "__main__":
    main()
