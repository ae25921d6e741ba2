"""Benchmark: anchorkit's own chunks, on the fixtures and on long tickets.

    python tests/benchmarks/bench_chunk.py     # BENCH_CHUNK_TICKETS (default 200,1000), BENCH_CHUNK_SEED (0)

For each corpus and N in (300, 512), exact cl100k_base counts (the vocabulary anchorkit ships):

- coverage: chunks holding a complete anchor or title line of their own ticket and none of another
  (the judge reads the lines, it does not ask the chunker): 100% expected;
- chunks over N tokens: 0 expected;
- chunk count against the packing lower bound: the fewest chunks of N tokens that could hold each
  ticket's content with one header each, ceil((content - header) / (N - header)) (target <= 1.25x);
- links: chunks with a ``url`` (target: all), and history chunks whose ``url`` ends in ``#note-n`` with n
  the Redmine note number of the journal the chunk begins in, found from where the chunk starts among
  the content's journal headings (target: all; that the numbers are Redmine's own is tested against a
  real Redmine in tests/test_chunk_notes.py). Both corpora are made as today's pull writes them: the
  journals numbered (source/notes.py) and the Redmine URL recorded;
- where chunks begin: at a section or journal, at a heading or block, at a line, after a sentence,
  or inside a line (the last resort);
- what the headers (and repeated fences and table heads) cost, as a share of all the chunks' tokens
  and as overhead on the content, beside today's documents at ``--chunk-tokens N`` (tokens of the
  document / tokens without anchors - 1).

Speed, on the largest corpus, side by side in one run, each in a fresh process on one core, the
best of BENCH_CHUNK_ATTEMPTS (2) alternating runs: ``transform --sidecars`` (default options, exact
cl100k) against ``chunk_source`` (what ``anchorkit chunk`` calls) at 300 tokens into JSON Lines and
into a Bedrock folder with sidecars (target: chunking at least as fast as transform), each with
``--jobs 1``; then both with their default ``--jobs 0`` on every core, not pinned; and each beside
the floor of its own work, timed the same way: read and parse each issue JSON, tokenize the text once
(transform's written document; chunk's content, the document without anchors) and write what it writes
(the document; the chunks' JSON Lines, as the chunk run wrote them), so that the ratio tells how much a
program adds to the work it cannot avoid. With
``BENCH_INSTRUCTIONS=1`` (and valgrind installed) transform and JSON Lines are also counted in
instructions on BENCH_INSTRUCTION_TICKETS (20) of those tickets, start-up subtracted: a ratio this
shared machine's load cannot move.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from bench_transform import LONG_FLOOR  # noqa: E402
from support import instructions  # noqa: E402
from support.long_tickets import write_long_snapshot  # noqa: E402
from support.retrieval_corpus import write_retrieval_snapshot  # noqa: E402

from anchorkit import anchor_chunks  # noqa: E402
from anchorkit.anchors import TITLE_PATTERN, strip_anchors  # noqa: E402
from anchorkit.bedrock.anchoring import Ticket, holds_complete_anchor, with_anchor  # noqa: E402
from anchorkit.chunk.core import ChunkedTicket, chunk_document  # noqa: E402
from anchorkit.chunk.sources import TicketDocument, iter_source  # noqa: E402
from anchorkit.note_ranges import parse_note_numbers  # noqa: E402
from anchorkit.render.document import Outline, RenderOptions  # noqa: E402
from anchorkit.render.transform import RenderedTicket, TransformOptions, iter_documents  # noqa: E402
from anchorkit.source.notes import with_note_numbers  # noqa: E402
from anchorkit.tokens import ExactTokens, TiktokenTokenizer, load_cl100k_base  # noqa: E402

TICKETS = [int(n) for n in os.environ.get("BENCH_CHUNK_TICKETS", "200,1000").split(",")]
SEED = int(os.environ.get("BENCH_CHUNK_SEED", "0"))
CHUNK_LENGTHS = (300, 512)
RATIO_TARGET = 1.25
ATTEMPTS = int(os.environ.get("BENCH_CHUNK_ATTEMPTS", "2"))
RETRIEVAL_TICKETS = 160  # bench_retrieval.py's default corpus
_SHAPE = re.compile(r"[>#] [^#\\\n]{1,40}? #(\d{1,12}):(?: .*)?")


def named_tickets(chunk: str) -> set[int]:
    """The tickets whose anchor or title line is in a chunk (forged ones in ticket text are escaped)."""
    return {int(match[1]) for line in chunk.split("\n") if (match := _SHAPE.fullmatch(line.strip()))}


@dataclass
class Figures:
    chunks: int = 0
    covered: int = 0
    over: int = 0
    lower_bound: int = 0
    tokens: int = 0
    header_tokens: int = 0
    content_tokens: int = 0
    document_tokens: int = 0  # today's documents at --chunk-tokens N
    starts: dict[str, int] = field(default_factory=dict)
    fitting_journals: int = 0  # journals short enough for one chunk
    split_journals: int = 0  # ... that a chunk boundary cuts all the same
    failed: int = 0
    with_url: int = 0
    history: int = 0  # chunks that begin in the history
    right_note: int = 0  # ... whose url links to the note they begin in


def where(chunk_start: int, content: str) -> str:
    """What a chunk (not a ticket's first) begins at, read off the content."""
    line_start = content.rfind("\n", 0, chunk_start) + 1
    if line_start != chunk_start:
        before = content[line_start:chunk_start]
        return (
            "after a sentence"
            if before.rstrip().endswith(("。", "．", "！", "？", ".", "!", "?", "」"))
            else "inside a line"
        )
    line = content[chunk_start : content.find("\n", chunk_start)]
    if line.startswith(("## ", "### ")):
        return "a section or journal"
    if content[chunk_start - 2 : chunk_start] == "\n\n":
        return "a heading or block"
    return "a line"


def measure(
    documents: list[TicketDocument], spaced: dict[int, str], tokenizer: TiktokenTokenizer, limit: int
) -> Figures:
    figures = Figures()
    for document in documents:
        try:
            chunked: ChunkedTicket = chunk_document(document.document, document.metadata, tokenizer, limit)
        except ValueError:
            figures.failed += 1
            continue
        assert isinstance(document.document, Outline)  # (a snapshot's ticket)
        content = document.document.content
        content_tokens = tokenizer.count(content)
        header = tokenizer.count(chunked.chunks[1].header) if len(chunked.chunks) > 1 else 0
        figures.lower_bound += max(1, math.ceil((content_tokens - header) / (limit - header)))
        figures.content_tokens += content_tokens
        figures.document_tokens += tokenizer.count(spaced[document.ticket_id])
        for index, chunk in enumerate(chunked.chunks):
            tokens = tokenizer.count(chunk.text)
            figures.chunks += 1
            figures.tokens += tokens
            figures.over += tokens > limit
            figures.covered += named_tickets(chunk.text) == {document.ticket_id}
            figures.header_tokens += tokenizer.count(chunk.header + chunk.reopened + chunk.closed) if index else 0
            if index:
                kind = where(chunk.start, content)
                figures.starts[kind] = figures.starts.get(kind, 0) + 1
        journals = journal_spans(content)
        numbers = parse_note_numbers(document.metadata.get("note_numbers"))
        for chunk in chunked.chunks:
            url = chunk.metadata.get("url")
            figures.with_url += bool(url)
            if chunk.metadata["section"] == "history":
                figures.history += 1
                # The journal a chunk begins in: the last whose heading is at or before its start (the
                # history's own heading goes with the first journal).
                journal = max(bisect_right([start for start, _ in journals], chunk.start) - 1, 0)
                expected = f"{document.metadata['url']}#note-{numbers[journal]}" if numbers else None
                figures.right_note += expected is not None and url == expected
        cuts = [chunk.own_start for chunk in chunked.chunks[1:]]
        for start, end in journals:
            if tokenizer.count(content[start:end]) <= limit - header:
                figures.fitting_journals += 1
                figures.split_journals += any(start < cut < end for cut in cuts)
    return figures


def journal_spans(content: str) -> list[tuple[int, int]]:
    """Where each journal of the history is in a ticket's content (from its ``### [date] user`` line)."""
    starts = [match.start() + 2 for match in re.finditer(r"\n\n### \[", content)]
    return list(pairwise([*starts, len(content)])) if starts else []


def report(name: str, limit: int, figures: Figures) -> None:
    ratio = figures.chunks / figures.lower_bound
    later = sum(figures.starts.values()) or 1
    starts = ", ".join(
        f"{kind} {count / later:.1%}" for kind, count in sorted(figures.starts.items(), key=lambda kv: -kv[1])
    )
    print(
        f"{name} N={limit}: coverage {figures.covered / figures.chunks:.2%} of {figures.chunks:,} chunks "
        "(target 100%), "
        f"over N {figures.over} (target 0), failed {figures.failed}; chunks {ratio:.3f}x the packing lower bound "
        f"{figures.lower_bound:,} (target <= {RATIO_TARGET}x)"
    )
    print(
        f"  links: {figures.with_url / figures.chunks:.2%} of the chunks have a url (target 100%); "
        f"{figures.right_note / max(figures.history, 1):.2%} of the {figures.history:,} history chunks link to "
        "the note they begin in (target 100%)"
    )
    print(
        f"  chunks after a ticket's first begin at: {starts}; journals that fit in a chunk split all the same: "
        f"{figures.split_journals / max(figures.fitting_journals, 1):.1%} of {figures.fitting_journals:,}"
    )
    print(
        f"  headers and repeated fences/table heads: {figures.header_tokens / figures.tokens:.1%} of all chunk tokens; "
        f"chunk tokens / content - 1 = {figures.tokens / figures.content_tokens - 1:.1%} "
        f"(today's documents at --chunk-tokens {limit}: {figures.document_tokens / figures.content_tokens - 1:.1%})"
    )


def as_pulled(snapshot: Path) -> Path:
    """The snapshot as today's pull writes it: every journal with its Redmine note number, and the
    Redmine's URL recorded (the fixtures have one, the generated tickets none)."""
    for path in (snapshot / "issues").glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(with_note_numbers(document), ensure_ascii=False), encoding="utf-8")
    state = json.loads((snapshot / "state.json").read_text(encoding="utf-8"))
    state.setdefault("redmine_url", "https://redmine.example.com")
    (snapshot / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return snapshot


def corpus(source: Path, limit: int) -> tuple[list[TicketDocument], dict[int, str]]:
    documents = [item for item in iter_source(source) if isinstance(item, TicketDocument)]
    options = TransformOptions(render=RenderOptions(chunk_tokens=limit), tokenizer="cl100k_base")
    spaced = {r.ticket_id: r.markdown for r in iter_documents(source, options) if isinstance(r, RenderedTicket)}
    return documents, spaced


# ---------------------------------------------------------------------------------------------
# Speed: each in its own process, pinned to one core

TRANSFORM = """
import json, sys, time
from pathlib import Path
from anchorkit.render.transform import TransformOptions, transform_snapshot
started = time.perf_counter()
options = TransformOptions(sidecars=True, tokenizer="cl100k_base")
report = transform_snapshot(Path(sys.argv[1]), Path(sys.argv[2]), options, jobs=int(sys.argv[3]))
seconds = time.perf_counter() - started
print(json.dumps({"tickets": report.tickets, "failed": len(report.failed), "seconds": seconds}))
"""

CHUNK = """
import json, sys, time
from pathlib import Path
from anchorkit.chunk.pipeline import ChunkOptions, chunk_source
from anchorkit.render.transform import TransformOptions
started = time.perf_counter()  # the vocabulary's loading included, as transform's is
options = ChunkOptions(TransformOptions(sidecars=True, tokenizer="cl100k_base"), chunk_tokens=300)
out = Path(sys.argv[2])
where = {"jsonl": out / "chunks.jsonl"} if sys.argv[3] == "jsonl" else {"out": out}
report = chunk_source(Path(sys.argv[1]), options=options, jobs=int(sys.argv[4]), **where)
seconds = time.perf_counter() - started
figures = {"tickets": report.tickets, "chunks": report.chunks, "failed": len(report.failed), "seconds": seconds}
print(json.dumps(figures))
"""


# chunk -> JSON Lines' floor, as bench_transform's LONG_FLOOR is transform's: read and parse each issue
# JSON, tokenize the ticket's content (its document without anchors) once, write its chunks' lines (as
# the chunk run wrote them), into a file renamed into place.
CHUNK_FLOOR = """
import json, os, sys, time
from pathlib import Path
from anchorkit.anchors import strip_anchors
from anchorkit.tokens import choose_tokenizer
issues, out, documents, written = Path(sys.argv[1]) / "issues", Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
out.mkdir()
tokenizer = choose_tokenizer()
lines = {}
for line in written.read_bytes().splitlines(keepends=True):
    lines.setdefault(json.loads(line)["ticket_id"], []).append(line)
names = sorted(os.listdir(issues))
work = [(name, strip_anchors((documents / (name[:-5] + ".md")).read_text(encoding="utf-8")),
         b"".join(lines.get(int(name[:-5]), []))) for name in names]
started, cpu = time.perf_counter(), time.process_time()
with open(out / "chunks.jsonl.tmp", "wb") as stream:
    for name, content, ticket_lines in work:
        json.loads((issues / name).read_bytes())
        tokenizer.count(content)
        stream.write(ticket_lines)
os.replace(out / "chunks.jsonl.tmp", out / "chunks.jsonl")
seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"tickets": len(names), "seconds": seconds, "cpu_seconds": cpu}))
"""


def run(code: str, *args: str, pinned: bool = True) -> dict[str, float]:
    command = [sys.executable, "-c", code, *args]
    if pinned and Path("/usr/bin/taskset").exists():
        command = ["taskset", "-c", "0", *command]
    return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def speed(snapshot: Path, scratch: Path) -> None:
    """The best of alternating runs of each (this machine is shared: one run may meet a busy spell)."""
    runs: dict[str, list[dict[str, float]]] = {"transform": [], "jsonl": [], "folder": [], "tfloor": [], "cfloor": []}
    documents, lines = scratch / "documents0", scratch / "jsonl0" / "chunks.jsonl"  # the floors write them again
    for attempt in range(ATTEMPTS):
        runs["transform"].append(run(TRANSFORM, str(snapshot), str(scratch / f"documents{attempt}"), "1"))
        runs["jsonl"].append(run(CHUNK, str(snapshot), str(scratch / f"jsonl{attempt}"), "jsonl", "1"))
        runs["folder"].append(run(CHUNK, str(snapshot), str(scratch / f"folder{attempt}"), "folder", "1"))
        runs["tfloor"].append(run(LONG_FLOOR, str(snapshot), str(scratch / f"tfloor{attempt}"), "1", str(documents)))
        runs["cfloor"].append(
            run(CHUNK_FLOOR, str(snapshot), str(scratch / f"cfloor{attempt}"), str(documents), str(lines))
        )
    transform, jsonl, folder, tfloor, cfloor = (
        min(runs[name], key=lambda figures: figures["seconds"]) for name in runs
    )
    rate = {
        name: figures["tickets"] / figures["seconds"]
        for name, figures in (("t", transform), ("j", jsonl), ("f", folder))
    }
    print(
        f"speed, {transform['tickets']:,} long tickets on one core: transform --sidecars {rate['t']:.0f} tickets/s "
        f"({transform['seconds']:.1f} s); chunk -> JSON Lines {rate['j']:.0f} tickets/s ({jsonl['seconds']:.1f} s, "
        f"{rate['j'] / rate['t']:.2f}x transform); chunk -> Bedrock folder with sidecars {rate['f']:.0f} tickets/s "
        f"({folder['seconds']:.1f} s, {rate['f'] / rate['t']:.2f}x transform, {folder['chunks']:,} chunks = "
        f"{2 * folder['chunks']:,} files); target >= 1.00x"
    )
    per_ticket = {
        name: 1000 * figures["seconds"] / figures["tickets"] for name, figures in (("t", tfloor), ("c", cfloor))
    }
    print(
        "  each against the floor of its own work (parse each issue, tokenize its text once, write what it "
        f"writes): transform's floor {per_ticket['t']:.2f} ms a ticket (its document), transform at "
        f"{tfloor['seconds'] / transform['seconds']:.2f}x it; chunk's floor {per_ticket['c']:.2f} ms (the content "
        f"without anchors, its chunks' JSON Lines), JSON Lines at {cfloor['seconds'] / jsonl['seconds']:.2f}x it"
    )
    every_core(snapshot, scratch)


def every_core(snapshot: Path, scratch: Path) -> None:
    """The commands as they run by default: ``--jobs 0`` (a process per core beyond one batch), not pinned."""
    runs: dict[str, list[dict[str, float]]] = {"transform": [], "jsonl": []}
    for attempt in range(ATTEMPTS):
        runs["transform"].append(
            run(TRANSFORM, str(snapshot), str(scratch / f"all-documents{attempt}"), "0", pinned=False)
        )
        runs["jsonl"].append(
            run(CHUNK, str(snapshot), str(scratch / f"all-jsonl{attempt}"), "jsonl", "0", pinned=False)
        )
    transform, jsonl = (min(runs[name], key=lambda figures: figures["seconds"]) for name in runs)
    print(
        f"  on every core ({os.cpu_count()}; --jobs 0, the default of both): transform --sidecars "
        f"{transform['seconds']:.1f} s, chunk -> JSON Lines {jsonl['seconds']:.1f} s "
        f"({transform['seconds'] / jsonl['seconds']:.2f}x transform's speed)"
    )


def count_speed(snapshot: Path, scratch: Path) -> None:
    """transform against chunk -> JSON Lines in instructions (valgrind), start-up subtracted."""
    sample, empty = instructions.sample_snapshots(snapshot, scratch)

    def transform(source: Path) -> int:
        return instructions.child(TRANSFORM, source, scratch / f"{source.name}-documents", "1")

    def jsonl(source: Path) -> int:
        return instructions.child(CHUNK, source, scratch / f"{source.name}-jsonl", "jsonl", "1")

    transform_figure = instructions.per_ticket(transform, sample, empty)
    jsonl_figure = instructions.per_ticket(jsonl, sample, empty)
    print(
        f"  by instructions (valgrind, {instructions.SAMPLE_TICKETS} long tickets, start-up subtracted): transform "
        f"--sidecars {transform_figure / 1e6:.1f} M a ticket, chunk -> JSON Lines {jsonl_figure / 1e6:.1f} M: "
        f"{transform_figure / jsonl_figure:.2f}x transform's speed (target >= 1.00x)"
    )


# ---------------------------------------------------------------------------------------------
# The Lambda (inject mode) and `inject` on the retrieval benchmark's corpus


def windows_of(text: str, tokens: ExactTokens, size: int = 300, step: int = 240) -> list[str]:
    """Fixed windows of ``size`` tokens every ``step`` (Bedrock's default 300 / 20%), cut at token offsets."""
    data, offsets = text.encode("utf-8"), tokens.offsets
    last = max(len(offsets) - 1 - size, 0)
    return [
        data[offsets[start] : offsets[min(start + size, len(offsets) - 1)]].decode("utf-8", "ignore")
        for start in range(0, last + step, step)
        if start <= last
    ]


def anchored_at_ingestion_and_query_time(scratch: Path, tokenizer: TiktokenTokenizer) -> None:
    """Documents without anchors (``--chunk-tokens 0``, anchors stripped) of the retrieval benchmark's corpus,
    cut by fixed 300/20% windows: what the Bedrock Lambda (inject mode: an anchor in front of each window
    that lacks one) adds to the embedded tokens, and what ``inject`` adds to each retrieved chunk of the
    prompt (nothing embedded). Both judged as the chunk-coverage figures are."""
    snapshot = scratch / "retrieval"
    write_retrieval_snapshot(snapshot, RETRIEVAL_TICKETS, seed=SEED)
    options = TransformOptions(render=RenderOptions(chunk_tokens=0), tokenizer="cl100k_base")
    documents = [r for r in iter_documents(snapshot, options) if isinstance(r, RenderedTicket)]
    texts = [strip_anchors(document.markdown) for document in documents]
    chunks = [
        (document.ticket_id, window)
        for document, text, tokens in zip(documents, texts, tokenizer.tokenize_many(texts), strict=True)
        for window in windows_of(text, tokens)  # type: ignore[arg-type]
    ]
    subjects = {d.ticket_id: TITLE_PATTERN.match(d.markdown)["subject"] for d in documents}  # type: ignore[index]
    plain = [tokenizer.count(window) for _, window in chunks]
    lambda_tokens, lambda_named = 0, 0
    for (ticket_id, window), tokens in zip(chunks, plain, strict=True):
        ticket = Ticket(ticket_id, subjects[ticket_id], None, "metadata")
        text = window if holds_complete_anchor(window, ticket) else with_anchor(window, ticket, "チケット")
        lambda_tokens += tokens if text is window else tokenizer.count(text)
        lambda_named += named_tickets(text) == {ticket_id}
    retrieval = [{"text": w, "metadata": {"ticket_id": t, "subject": subjects[t]}} for t, w in chunks]
    injected = anchor_chunks(retrieval).retrieval
    added = [tokenizer.count(after["text"]) - tokens for after, tokens in zip(injected, plain, strict=True)]
    named = sum(named_tickets(after["text"]) == {t} for after, (t, _) in zip(injected, chunks, strict=True))
    print(
        f"retrieval corpus ({len(documents)} tickets, seed {SEED}), fixed 300/20% windows of the documents "
        f"without anchors: {len(chunks):,} chunks, {sum(plain):,} tokens, "
        f"{sum(named_tickets(w) == {t} for t, w in chunks) / len(chunks):.1%} naming their ticket; "
        f"through the Lambda (inject mode) {lambda_named / len(chunks):.1%} naming it, {lambda_tokens:,} tokens "
        f"embedded (+{lambda_tokens / sum(plain) - 1:.1%}); through inject {named / len(chunks):.1%} naming it in "
        f"the prompt, 0 tokens more embedded, {sum(added) / len(added):.1f} tokens more a retrieved chunk "
        f"(max {max(added)})"
    )


def main() -> None:
    tokenizer = load_cl100k_base()
    scratch_root = Path(os.environ.get("BENCH_TMPDIR", REPO / "build"))
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-chunk-", dir=scratch_root) as tmp:
        fixtures = Path(tmp) / "fixtures"
        shutil.copytree(REPO / "fixtures", fixtures)
        sources = [("fixtures", as_pulled(fixtures))]
        for count in TICKETS:
            snapshot = Path(tmp) / f"long{count}"
            write_long_snapshot(snapshot, count, seed=SEED)
            sources.append((f"{count} long tickets", as_pulled(snapshot)))
        for name, source in sources:
            for limit in CHUNK_LENGTHS:
                documents, spaced = corpus(source, limit)
                report(name, limit, measure(documents, spaced, tokenizer, limit))
        anchored_at_ingestion_and_query_time(Path(tmp), tokenizer)
        speed(sources[-1][1], Path(tmp))
        if instructions.wanted():
            count_speed(sources[-1][1], Path(tmp))


if __name__ == "__main__":
    main()
