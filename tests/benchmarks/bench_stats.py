"""Benchmark: ``anchorkit stats`` on generated anchored documents.

    python tests/benchmarks/bench_stats.py

Writes BENCH_STATS_DOCS documents (default 10,000; ~6 journal entries each, mixed Japanese/English,
shaped like transform's output) with sidecars into a temporary output folder, then audits the folder
with the four Bedrock-like chunkers (fixed, hierarchical, semantic, heading) and the chunk-length
table (256, 300, 512, 1,024), as ``anchorkit stats`` does by default:

- with cl100k_base, in one process pinned to one core, side by side with the floor: reading the
  documents and tiktoken encoding every document once, one after the other (the cheapest exact
  encode on one core, and what the audit does there: tiktoken's batch threads only add work when
  they cannot run side by side). The target is the audit in at most 3x the floor's time. Both are timed
  BENCH_STATS_ROUNDS times (default 3), alternating, and the best of each is compared, in wall time
  and in CPU time (the CPU ratio is the one to trust on a busy machine);
- with approx (target <= 5 s), and both tokenizers with --jobs 2;
- and, for reference, the LangChain splitters alone on BENCH_STATS_LANGCHAIN_DOCS documents (default 1,000);
- the memory of one huge document: scale_corpus.py's ticket whose journal pastes 50,000 log lines (~5 MB),
  measured with the four chunkers: its peak of Python allocations (tracemalloc) against the document's size
  (target: under 10x), and the CPU time it takes.

With ``BENCH_INSTRUCTIONS=1`` (and valgrind installed) the audit and its floor are also counted in
instructions, each in a child on BENCH_STATS_INSTRUCTION_DOCS (default 300) documents and on one, so
that start-up and the vocabulary's loading cancel out: the same ratio, as this shared machine's load
cannot move it.

Prints seconds, documents/s and the headline figures of each run.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support import instructions  # noqa: E402
from support.corpus import generated_document  # noqa: E402

from anchorkit import audit as stats  # noqa: E402
from anchorkit import tokens  # noqa: E402
from anchorkit.audit import chunkers as chunking  # noqa: E402

DOCUMENTS = int(os.environ.get("BENCH_STATS_DOCS", "10000"))
ROUNDS = int(os.environ.get("BENCH_STATS_ROUNDS", "3"))
FLOOR_TARGET = 3.0
LANGCHAIN_DOCUMENTS = int(os.environ.get("BENCH_STATS_LANGCHAIN_DOCS", "1000"))
JOBS = (1, 2)  # one process, and 2 (this machine's cores: what the default --jobs 0 picks here)
TARGETS = {tokens.APPROX: 5.0}
INSTRUCTION_DOCUMENTS = int(os.environ.get("BENCH_STATS_INSTRUCTION_DOCS", "300"))
MEMORY_TARGET = 10.0  # peak Python allocations, times the document's UTF-8 size

# The audit and the floor as children, for valgrind: the same work as ``run`` and ``floor`` on one core.
AUDIT_CHILD = """
import os, sys
from pathlib import Path
from anchorkit import audit as stats, tokens
from anchorkit.audit import chunkers as chunking
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as against_floor runs it
bedrock_like = [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE]
documents = stats.iter_output_folder(Path(sys.argv[1]))
stats.audit(documents, tokens.load_cl100k_base(), bedrock_like, {"path": "", "kind": "output"}, jobs=1)
"""
FLOOR_CHILD = """
import sys
from pathlib import Path
from anchorkit import tokens
encoding = tokens.load_cl100k_base()._encoding
for path in sorted(Path(sys.argv[1]).glob("*.md")):
    encoding.encode_ordinary(path.read_text(encoding="utf-8"))
"""


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


def run(
    folder: Path,
    tokenizer: tokens.Tokenizer,
    chunkers: list[chunking.Chunker],
    label: str,
    target: float | None,
    jobs: int = 1,
) -> tuple[float, float]:
    """One audit of the folder: prints its figures; returns (wall, CPU) seconds."""
    started, cpu_started = time.perf_counter(), time.process_time()
    report = stats.audit(
        stats.iter_output_folder(folder), tokenizer, chunkers, {"path": str(folder), "kind": "output"}, jobs=jobs
    )
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    documents = report["source"]["documents"]
    verdict = "" if target is None else f" (target <= {target:.0f} s: {'met' if seconds <= target else 'MISSED'})"
    # CPU seconds of this process (its threads included, worker processes not): shows contention.
    cpu_note = f", main process CPU {cpu:.2f} s" if jobs == 1 else ""
    print(
        f"{label}, --jobs {jobs}: {documents:,} documents in {seconds:.2f} s = {documents / seconds:,.0f} "
        f"documents/s{cpu_note}{verdict}"
    )
    print(f"  overhead {report['overhead']['percent']}% (p50 {report['overhead']['per_ticket_percent']['p50']}%)")
    for row in report["chunking"]:
        print(
            f"  {row['chunker']}/{row['level']}: {row['anchored']['chunks']:,} chunks, coverage "
            f"{row['anchored']['coverage_percent']}% "
            f"anchored vs {row['stripped']['coverage_percent']}% without anchors"
        )
    for row in report["chunk_lengths"]["rows"]:
        print(
            f"  length {row['chunk_tokens']:,}: coverage {row['coverage_percent']}%, {row['ratio_to_bound']}x the bound"
        )
    return seconds, cpu


def floor(folder: Path, cl100k: tokens.TiktokenTokenizer) -> tuple[float, float]:
    """Reading the documents and encoding each once with tiktoken: what no audit can go below."""
    started, cpu_started = time.perf_counter(), time.process_time()
    texts = [path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.md"))]
    for text in texts:
        cl100k._encoding.encode_ordinary(text)
    return time.perf_counter() - started, time.process_time() - cpu_started


def against_floor(folder: Path, cl100k: tokens.TiktokenTokenizer, chunkers: list[chunking.Chunker]) -> None:
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})  # one core: the floor and the audit alike
    floors, audits = [], []
    for round_number in range(1, ROUNDS + 1):
        floors.append(floor(folder, cl100k))
        audits.append(
            run(folder, cl100k, chunkers, f"cl100k_base, 4 chunkers + length table, round {round_number}", None)
        )
    os.sched_setaffinity(0, cores)
    best_floor = (min(wall for wall, _ in floors), min(cpu for _, cpu in floors))
    best_audit = (min(wall for wall, _ in audits), min(cpu for _, cpu in audits))
    wall_ratio, cpu_ratio = best_audit[0] / best_floor[0], best_audit[1] / best_floor[1]
    print(
        f"floor (read + tiktoken encode_ordinary of each document, one core, best of {ROUNDS}): "
        f"{best_floor[0]:.2f} s wall, "
        f"{best_floor[1]:.2f} s CPU; "
        f"audit best: {best_audit[0]:.2f} s wall, {best_audit[1]:.2f} s CPU"
    )
    verdict = "met" if cpu_ratio <= FLOOR_TARGET else "MISSED"
    print(f"audit / floor: {wall_ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (target <= {FLOOR_TARGET:.0f}x: {verdict})")


def count_against_floor(scratch: Path) -> None:
    """The audit's ratio to the floor in instructions: each child on a sample of the corpus less on one
    document of it (an empty folder is not a source the audit takes)."""
    sample, single = scratch / "instructions-sample", scratch / "instructions-single"
    for folder, count in ((sample, INSTRUCTION_DOCUMENTS + 1), (single, 1)):
        folder.mkdir()
        write_corpus(folder, count)

    def counted(code: str) -> float:
        return instructions.per_ticket(
            lambda folder: instructions.child(code, folder), sample, single, INSTRUCTION_DOCUMENTS
        )

    audit, floor_figure = counted(AUDIT_CHILD), counted(FLOOR_CHILD)
    ratio = audit / floor_figure
    print(
        f"  by instructions (valgrind, {INSTRUCTION_DOCUMENTS} documents, start-up subtracted): audit "
        f"{audit / 1e6:.2f} M a document, floor {floor_figure / 1e6:.2f} M: {ratio:.2f}x "
        f"(target <= {FLOOR_TARGET:.0f}x: {'met' if ratio <= FLOOR_TARGET else 'MISSED'})"
    )


def huge_document_memory(scratch: Path, chunkers: list[chunking.Chunker]) -> None:
    """One document of LOG_LINES pasted log lines: its measurement's peak allocations against its size."""
    from support.long_tickets import lookups
    from support.scale_corpus import LOG_LINES, MAX_TEXT_BYTES, _huge

    from anchorkit.audit.measure import Measurer
    from anchorkit.render.transform import TransformOptions

    snapshot = scratch / "huge"
    (snapshot / "issues").mkdir(parents=True)
    issue = _huge(0, 1)
    (snapshot / "issues" / "1.json").write_text(json.dumps({"issue": issue}, ensure_ascii=False), encoding="utf-8")
    (snapshot / "lookups.json").write_text(json.dumps(lookups(), ensure_ascii=False), encoding="utf-8")
    (snapshot / "state.json").write_text((REPO / "fixtures" / "state.json").read_text(encoding="utf-8"), "utf-8")
    (document,) = stats.iter_snapshot(snapshot, TransformOptions(max_text_bytes=MAX_TEXT_BYTES))
    assert isinstance(document, stats.SourceDocument)
    size = len(document.markdown.encode("utf-8"))
    measurer = Measurer(tokens.load_cl100k_base(), chunkers)
    cpu_started = time.process_time()
    measurer.measure_batch([document])
    cpu = time.process_time() - cpu_started
    chunking.block_layout.cache_clear()  # what is kept by text is dropped: measured again, as the first time
    tracemalloc.start()
    measurer.measure_batch([document])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    ratio = peak / size
    print(
        f"one huge document ({size / 1e6:.1f} MB, {LOG_LINES:,} log lines): {cpu:.2f} s CPU, peak Python allocations "
        f"{peak / 1e6:.1f} MB = {ratio:.1f}x the document (target < {MEMORY_TARGET:.0f}x: "
        f"{'met' if ratio < MEMORY_TARGET else 'MISSED'})"
    )


def main() -> None:
    bedrock_like = [chunking.CHUNKERS[name]() for name in chunking.BEDROCK_LIKE]
    with tempfile.TemporaryDirectory(prefix="bench-stats-") as tmp:
        folder = Path(tmp)
        size = write_corpus(folder, DOCUMENTS)
        print(f"corpus: {DOCUMENTS:,} generated documents, {size / 1e6:.1f} MB")
        cl100k = tokens.load_cl100k_base()
        against_floor(folder, cl100k, bedrock_like)
        if instructions.wanted():
            with tempfile.TemporaryDirectory(prefix="bench-stats-counted-") as counted:
                count_against_floor(Path(counted))
        run(folder, cl100k, bedrock_like, "cl100k_base, 4 chunkers + length table", None, jobs=2)
        huge_document_memory(folder, bedrock_like)
        for jobs in JOBS:
            run(
                folder,
                tokens.choose_tokenizer(tokens.APPROX),
                bedrock_like,
                "approx, 4 chunkers + length table",
                TARGETS[tokens.APPROX],
                jobs,
            )
    if chunking.langchain_available():
        with tempfile.TemporaryDirectory(prefix="bench-stats-lc-") as tmp:
            write_corpus(Path(tmp), LANGCHAIN_DOCUMENTS)
            langchain = [chunking.CHUNKERS[name]() for name in chunking.LANGCHAIN]
            run(
                Path(tmp),
                tokens.choose_tokenizer(tokens.APPROX),
                langchain,
                "approx, LangChain splitters (reference)",
                None,
            )


if __name__ == "__main__":
    main()
