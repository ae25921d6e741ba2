"""The audit of chunks as they are: anchorkit's own (``anchorkit chunk``) and the Bedrock Lambda's.

Documents are audited by emulating the chunkers a knowledge base may use (measure.py). Where the
chunks themselves are at hand there is nothing to emulate: each chunk is judged by its text.

- ``anchorkit chunk --jsonl``: one ``{"id", "ticket_id", "text", "metadata"}`` a line;
- ``anchorkit chunk --out``: ``<id>/<id>-NNN.md`` with the ``.md.metadata.json`` sidecar beside it
  (the ticket: the sidecar's ``ticket_id``, else the folder's name);
- the Lambda's output batch files (``*.json``, either shape of anchorkit/bedrock/batches.py; the
  ticket: the chunk's ``ticket_id`` metadata);
- the Lambda's log (a CloudWatch export, plain or JSON records): its audit lines, summed
  (anchorkit/bedrock/audit.py); other lines are ignored.

A chunk is covered when its text holds a complete anchor or title line of its own ticket and none
of another ticket's (``anchors.identified_ticket_ids(text) == {ticket_id}``); a chunk whose ticket
cannot be known is not. Chunks are counted with the audit's tokenizer (cl100k_base: exact) against
``--chunk-tokens`` N, and their number against the fewest chunks that could hold each ticket's
content with one header each: ceil((content - header) / (N - header)), content being the chunks'
tokens without their headers, and the first chunk (the one that begins with the title line, wherever
it is in the input) paying no header (tests/benchmarks/bench_chunk.py uses the same bound). Chunks made
with ``--chunk-overlap`` repeat text of the chunk before: the report counts them (from the ``chunk_index``,
``char_start`` and ``char_end`` of their metadata) and says that the bound holds their repeats as content.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from anchorkit.anchors import ANCHOR_PATTERN, identified_ticket_ids
from anchorkit.audit.sources import (
    UnreadableDocument,
    document_paths,
    list_folder,
    not_utf8,
    read_failure,
    read_if_there,
)
from anchorkit.bedrock.audit import read_audit_lines
from anchorkit.bedrock.batches import BatchError, read_batch
from anchorkit.bedrock.counts import Counts
from anchorkit.errors import UsageError
from anchorkit.files import read_regular_file, shown
from anchorkit.note_ranges import metadata_int
from anchorkit.pages import plural
from anchorkit.render.sidecar import SIDECAR_SUFFIX, read_sidecar
from anchorkit.tokens import Tokenizer
from anchorkit.untrusted import parse_json
from anchorkit.verify.ids import parse_ticket_id

# The layout a report says it audited (``layout``; documents: collect.py) for each input read (``source.kind``).
CHUNK_KINDS = {
    "chunks-jsonl": "chunks",
    "chunk-folder": "chunks",
    "lambda-batches": "lambda output",
    "lambda-log": "lambda output",
}
MAX_LISTED = 50  # chunks listed by name under "problems" (all are counted)
PROBLEMS = ("unknown_ticket", "no_own_anchor", "other_ticket_anchor", "over_chunk_tokens")

_CHUNK_FILE = re.compile(r"^(\d+)-\d{3,}\.md$", re.ASCII)
_TICKET_FOLDER = re.compile(r"\d", re.ASCII)  # where chunk files are: a ticket's folder, named by its number
# A chunk's header: its ticket's anchor line and the blank line after it, at the start of the chunk.
_HEADER = re.compile(ANCHOR_PATTERN.pattern.removesuffix("$") + r"\n\n", re.M)


@dataclass(frozen=True)
class AuditedChunk:
    where: str  # the file, and the line or item in it
    ticket_id: int | None  # None: no ticket could be known for it
    text: str
    span: tuple[int, int, int] | None = None  # its metadata's chunk_index, char_start and char_end, if it has them
    id: str | None = None  # its id, where the input gives one (JSON Lines)


def chunk_span(metadata: object) -> tuple[int, int, int] | None:
    """Where a chunk is in its ticket by its metadata (index, start, end), or None if it does not say."""
    if not isinstance(metadata, dict):
        return None
    span = tuple(metadata_int(metadata.get(key)) for key in ("chunk_index", "char_start", "char_end"))
    return span if None not in span else None  # type: ignore[return-value]


ChunkItem = AuditedChunk | UnreadableDocument


# ---------------------------------------------------------------------------------------------
# What a path holds (the I/O edge)


def chunk_kind(path: Path) -> str | None:
    """Which chunk input ``path`` is (a key of ``CHUNK_KINDS``), or None: documents or a snapshot."""
    if path.is_file():
        return _file_kind(path)
    if not path.is_dir() or (path / "issues").is_dir():
        return None
    chunk_file = next((entry for entry in path.glob("[0-9]*/*.md") if _CHUNK_FILE.match(entry.name)), None)
    if chunk_file is not None:
        _refuse_documents_beside_chunks(path, chunk_file)
        return "chunk-folder"
    if any(entry.is_file() for entry in path.rglob("*.md")):  # documents (Bedrock names batch folders x.md/)
        return None
    if any(not entry.name.endswith(SIDECAR_SUFFIX) for entry in path.rglob("*.json")):
        return "lambda-batches"
    return None


def _refuse_documents_beside_chunks(folder: Path, chunk_file: Path) -> None:
    """A folder of chunks that also holds documents (``12301.md``, ``ops/12301.md``: what the documents'
    audit reads) is a usage error: audited as chunks, its documents would be ignored without a word, and
    publishing it would publish both layouts (transform and chunk refuse such an --out folder)."""
    documents = document_paths(folder)
    if documents:
        raise UsageError(
            f"{folder} holds both layouts: documents (e.g. {documents[0][0]}) and chunks (e.g. "
            f"{chunk_file.relative_to(folder).as_posix()}); stats audits one layout at a time, and both layouts "
            "would be published from it: audit (and publish) a folder of one layout"
        )


def _file_kind(path: Path) -> str:
    """JSON Lines of chunks when the file's head holds a chunk (or it is empty: no chunk to audit), else a
    Lambda log when it holds audit lines (a chunk's text may quote one); else UsageError: every line of a
    Markdown document or a JSON file, taken for a broken chunk, would each be an error of its own."""
    with path.open("rb") as file:
        data = file.read(1 << 16)
        if not data.endswith(b"\n"):  # the head's last line (a long chunk, maybe the first) is read whole
            data += file.readline()
    head = data.decode("utf-8", "replace").splitlines()
    if not data.strip() or any(map(_is_chunk_record, head)):
        return "chunks-jsonl"
    if any(audit_line_counts(line) is not None for line in head):
        return "lambda-log"
    raise UsageError(
        f"{path}: not chunks (no line of its head is a JSON object with a string 'text', as anchorkit chunk's "
        "JSON Lines are) nor a Bedrock Lambda log (no audit line); documents are audited as a folder: "
        "a transform output or a snapshot"
    )


def _is_chunk_record(line: str) -> bool:
    if not line.lstrip().startswith("{"):
        return False
    try:
        record = parse_json(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("text"), str)


def iter_chunks(path: Path, kind: str) -> Iterator[ChunkItem]:
    """The chunks of a chunk input (not ``lambda-log``: its lines are counts, see ``read_lambda_log``)."""
    readers = {"chunks-jsonl": iter_jsonl, "chunk-folder": iter_chunk_folder, "lambda-batches": iter_batches}
    return readers[kind](path)


def iter_jsonl(path: Path) -> Iterator[ChunkItem]:
    """``anchorkit chunk --jsonl``'s lines; a line that is not such a chunk (or not UTF-8) is an error naming it."""
    # Bytes, each line decoded strictly on its own: a broken byte would otherwise become U+FFFD and its
    # chunk pass as good, where every loader (docs/layouts.md) fails on the file; the other lines are measured.
    with path.open("rb") as lines:
        for number, data in enumerate(lines, start=1):
            where = f"{shown(path.name)}:{number}"
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield UnreadableDocument(where, f"{where}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)")
                continue
            if not line.strip():
                continue
            try:  # without its line break: the parser's "line 1 column N" is then where in this line
                record = parse_json(line.rstrip("\r\n"))
            except ValueError as exc:
                yield UnreadableDocument(where, f"{where}: not JSON ({exc})")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                yield UnreadableDocument(where, f"{where}: not a chunk (expected an object with a string 'text')")
                continue
            ticket_id, span = parse_ticket_id(record.get("ticket_id")), chunk_span(record.get("metadata"))
            chunk_id = record.get("id")
            chunk_id = chunk_id if isinstance(chunk_id, str) else None
            yield AuditedChunk(f"{where} ({record.get('id', '?')})", ticket_id, record["text"], span, chunk_id)


def iter_chunk_folder(folder: Path) -> Iterator[ChunkItem]:
    """``anchorkit chunk --out``'s chunk files, ticket by ticket, in file order. Symbolic links are not followed
    (upload publishes nothing through one): a ticket folder that is one is an error naming it, and so is a
    chunk file or a sidecar that is one, or a named pipe."""
    for relpath, path in _chunk_folder_paths(folder):
        if isinstance(path, str):  # a ticket folder not read, and why
            yield UnreadableDocument(relpath, f"{relpath}: {path}")
            continue
        sidecar = f"{path}{SIDECAR_SUFFIX}"
        try:
            text = read_regular_file(path).decode("utf-8")
        except OSError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: {read_failure(exc)}")
            continue
        except UnicodeDecodeError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: {not_utf8(exc)}")
            continue
        try:
            data = read_if_there(sidecar)
            metadata = {} if data is None else read_sidecar(data)
        except (OSError, ValueError) as exc:
            reason = read_failure(exc) if isinstance(exc, OSError) else str(exc)
            yield UnreadableDocument(relpath, f"{relpath}{SIDECAR_SUFFIX}: {reason}")
            continue
        # The ticket: the sidecar's, else the folder's name if it is a ticket id (else unknown: "0", "12x").
        ticket_id = parse_ticket_id(metadata.get("ticket_id"))
        ticket_id = parse_ticket_id(path.parent.name) if ticket_id is None else ticket_id
        yield AuditedChunk(relpath, ticket_id, text, chunk_span(metadata))


def _chunk_folder_paths(folder: Path) -> list[tuple[str, Path | str]]:
    """The chunk files ``<id>/<id>-NNN.md`` by relative path, in path order, and the ticket folders holding chunk
    files that are not read, with the reason (``sources.unread_folder``)."""
    listing = list_folder(folder, _CHUNK_FILE, top_level=False, subfolder=_TICKET_FOLDER)
    found: list[tuple[str, Path | str]] = [*listing.documents, *listing.unread_folders]
    return sorted(found, key=lambda item: item[0])


def iter_batches(folder: Path) -> Iterator[ChunkItem]:
    """The text chunks of the Lambda's output batch files (any ``*.json`` under ``folder``, sidecars aside).

    UsageError, once all are read, when not one of them is a batch file: a folder of other JSON (a snapshot's
    issues/) is no Lambda output, and each file taken for a broken batch would be an error of its own."""
    batches, not_batches = 0, []
    for path in sorted(folder.rglob("*.json")):
        if path.name.endswith(SIDECAR_SUFFIX):
            continue
        relpath = shown(path.relative_to(folder).as_posix())
        try:
            batch = read_batch(read_regular_file(path))
        except OSError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: {read_failure(exc)}")
            continue
        except BatchError as exc:
            not_batches.append(f"{relpath}: {exc}")
            yield UnreadableDocument(relpath, f"{relpath}: not a batch file anchorkit reads ({exc})")
            continue
        batches += 1
        for position, item in enumerate(batch.items):
            text = batch.text(item)
            if text is not None:  # an image or a table row has no anchor to hold
                ticket_id = parse_ticket_id(batch.metadata(item).get("ticket_id"))
                yield AuditedChunk(f"{relpath}[{position}] ({batch.shape})", ticket_id, text)
    if not batches and not_batches:
        snapshot = folder.name == "issues" and (folder.parent / "lookups.json").is_file()
        raise UsageError(
            f"{folder}: not the Bedrock Lambda's output batches: none of its {len(not_batches):,} .json files is a "
            f"batch file anchorkit reads (e.g. {not_batches[0]})"
            + (f"; a snapshot is audited as the folder that holds issues/: {folder.parent}" if snapshot else "")
        )


def read_lambda_log(path: Path) -> tuple[dict[str, Any], list[UnreadableDocument]]:
    """The sums of the Lambda's audit lines in a log file: what the knowledge base really ingested; and the
    audit lines left out of them, each an error naming it: a count that is no number, or counts no handler
    writes (summed, a negative count or more chunks sorted than went out made coverage 650 %)."""
    counts, found, errors = Counts(), 0, []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            line_counts = audit_line_counts(line)
            if isinstance(line_counts, str):
                where = f"{shown(path.name)}:{number}"
                errors.append(UnreadableDocument(where, f"{where}: an audit line left out of the sums: {line_counts}"))
            elif line_counts is not None:
                counts, found = counts + line_counts, found + 1
    coverage = counts.coverage
    section = {
        "invocations": found,
        **counts.to_json(),
        "named": counts.named,
        "coverage_percent": None if coverage is None else round(coverage * 100, 2),
    }
    return section, errors


def audit_line_counts(line: str) -> Counts | str | None:
    """The counts of one of the Lambda's audit lines; None: the line is no audit line; a string: why its
    counts cannot be summed."""
    try:
        counts, found = read_audit_lines([line])
    except (ValueError, TypeError, OverflowError) as exc:  # int() of what the line holds for a count
        return f"a count that is not a whole number ({exc})"
    return (impossible_counts(counts) or counts) if found else None


def impossible_counts(counts: Counts) -> str | None:
    """What no invocation of the handler logs (None: nothing): a negative count, or more chunks sorted into
    already anchored, anchored, ticket unknown and not text than chunks out (each chunk out is one of those)."""
    negative = [
        name
        for name, value in [*counts.to_json().items(), *counts.shapes.items()]
        if isinstance(value, int) and value < 0
    ]
    if negative:
        return f"negative counts ({', '.join(negative)})"
    sorted_out = counts.already_anchored + counts.anchored + counts.unknown_ticket + counts.not_text
    if sorted_out > counts.chunks_out:
        return (
            f"{sorted_out:,} chunks sorted (already anchored, anchored, ticket unknown, not text) of "
            f"{counts.chunks_out:,} out"
        )
    return None


# ---------------------------------------------------------------------------------------------
# Judging chunks (pure)


def chunk_problems(chunk: AuditedChunk, tokens: int, chunk_tokens: int) -> list[str]:
    """What is wrong with one chunk (empty: it names its own ticket, no other, and fits)."""
    problems = []
    named = identified_ticket_ids(chunk.text)
    if chunk.ticket_id is None:
        problems.append("unknown_ticket")
        # The one ticket it names may well be its own: only with two or more is one surely another's.
        foreign = len(named) > 1
    else:
        if chunk.ticket_id not in named:
            problems.append("no_own_anchor")
        foreign = bool(named - {chunk.ticket_id})
    if foreign:
        problems.append("other_ticket_anchor")
    if tokens > chunk_tokens:
        problems.append("over_chunk_tokens")
    return problems


@dataclass
class _Ticket:
    chunks: int = 0
    content_tokens: int = 0  # the chunks' tokens without their headers
    header_tokens: int = 0  # one header's tokens (0: no chunk but the first)
    headless: bool = False  # a chunk without a header: the first, which begins with the title line
    spans: list[tuple[int, int, int]] = field(default_factory=list)  # (index, start, end) of those that say

    def fewest(self, chunk_tokens: int) -> int | None:
        """The fewest chunks of ``chunk_tokens`` that hold the content, each but a headless first with a header
        (None: the header alone fills a chunk)."""
        room = chunk_tokens - self.header_tokens
        if room <= 0:
            return None
        return max(1, math.ceil((self.content_tokens - self.header_tokens * self.headless) / room))

    def overlapping(self) -> int:
        """How many of its chunks begin before the chunk before them ends (by their metadata)."""
        spans = sorted(self.spans)
        return sum(start < previous_end for (_, _, previous_end), (_, start, _) in pairwise(spans))


def measure_chunks(
    items: Iterable[ChunkItem], tokenizer: Tokenizer, chunk_tokens: int, batch_size: int = 512
) -> tuple[dict[str, Any], list[UnreadableDocument]]:
    """The ``chunks`` section of the report, and the inputs that could not be read."""
    counts = dict.fromkeys(PROBLEMS, 0)
    listed: list[dict[str, Any]] = []
    tickets: dict[int, _Ticket] = {}
    errors: list[UnreadableDocument] = []
    total = covered = tokens_total = longest = repeated = 0
    seen_ids: set[str] = set()
    batch: list[AuditedChunk] = []

    def judge(chunks: list[AuditedChunk]) -> None:
        nonlocal total, covered, tokens_total, longest, repeated
        texts = [chunk.text for chunk in chunks]
        headers = [found.group() if (found := _HEADER.match(text)) else "" for text in texts]
        for chunk, tokens, header in zip(chunks, tokenizer.count_many(texts), tokenizer.count_many(headers)):
            total, tokens_total, longest = total + 1, tokens_total + tokens, max(longest, tokens)
            if chunk.id is not None:
                repeated += chunk.id in seen_ids
                seen_ids.add(chunk.id)
            problems = chunk_problems(chunk, tokens, chunk_tokens)
            covered += not problems or problems == ["over_chunk_tokens"]
            for problem in problems:
                counts[problem] += 1
            if problems and len(listed) < MAX_LISTED:
                listed.append(
                    {"where": chunk.where, "ticket_id": chunk.ticket_id, "tokens": tokens, "problems": problems}
                )
            if chunk.ticket_id is not None:
                ticket = tickets.setdefault(chunk.ticket_id, _Ticket())
                ticket.chunks += 1
                ticket.content_tokens += tokens - header
                ticket.header_tokens = ticket.header_tokens or header
                ticket.headless = ticket.headless or not header
                if chunk.span is not None:
                    ticket.spans.append(chunk.span)

    for item in items:
        if isinstance(item, UnreadableDocument):
            errors.append(item)
            continue
        batch.append(item)
        if len(batch) >= batch_size:
            judge(batch)
            batch = []
    judge(batch)
    bounds = [ticket.fewest(chunk_tokens) for ticket in tickets.values()]
    fewest, unbounded = sum(bound or 0 for bound in bounds), bounds.count(None)
    ticket_chunks = sum(ticket.chunks for ticket in tickets.values())
    section = {
        "chunk_tokens": chunk_tokens,
        "chunks": total,
        "tickets": len(tickets),
        "identified": covered,
        "coverage_percent": _percent(covered, total),
        **counts,
        "tokens": tokens_total,
        "longest_chunk_tokens": longest,
        "ticket_chunks": ticket_chunks,
        "fewest_chunks": fewest,
        "tickets_header_too_long": unbounded,
        "ratio_to_fewest": round(ticket_chunks / fewest, 3) if fewest else None,
        "overlapping_chunks": sum(ticket.overlapping() for ticket in tickets.values()),
        "repeated_chunks": repeated,
        "problems": listed,
    }
    return section, errors


def _percent(part: int, whole: int) -> float | None:
    return round(part * 100 / whole, 2) if whole else None


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A chunk report in a few lines, for the terminal and the audit page."""
    source = report["source"]
    lines = [f"stats: {report['layout']} ({source['kind']} {source['path']}), tokenizer {report['tokenizer']['name']}"]
    if "lambda" in report:
        counts = report["lambda"]
        lines.append(
            f"{plural(counts['invocations'], 'audit line')}: {plural(counts['files'], 'file')}, "
            f"{plural(counts['chunks_in'], 'chunk')} in, "
            f"{counts['chunks_out']:,} out; {counts['already_anchored']:,} already anchored, {counts['anchored']:,} "
            f"anchored by the Lambda, {counts['unknown_ticket']:,} passed through (ticket unknown), "
            f"{counts['not_text']:,} not text; coverage {_shown(counts['coverage_percent'])}"
        )
        return lines
    chunks = report["chunks"]
    ratio = "-" if chunks["ratio_to_fewest"] is None else f"{chunks['ratio_to_fewest']:.3f}x"
    lines += [
        f"{plural(chunks['chunks'], 'chunk')} of {plural(chunks['tickets'], 'ticket')}: "
        f"{chunks['identified']:,} {'names its' if chunks['identified'] == 1 else 'name their'} own ticket "
        f"and no other ({_shown(chunks['coverage_percent'])})",
        f"problems: {chunks['unknown_ticket']:,} ticket unknown, {chunks['no_own_anchor']:,} without their ticket's "
        f"anchor, {chunks['other_ticket_anchor']:,} with another ticket's, {chunks['over_chunk_tokens']:,} over "
        f"{plural(chunks['chunk_tokens'], 'token')} (longest {chunks['longest_chunk_tokens']:,})",
        f"chunk count: {plural(chunks['ticket_chunks'], 'chunk')} of known tickets against the fewest possible "
        f"{chunks['fewest_chunks']:,} = {ratio}",
        *(
            [
                f"over: {plural(chunks['over_chunk_tokens'], 'chunk')} longer than "
                f"{plural(chunks['chunk_tokens'], 'token')}, "
                "which the fewest count is for: against chunks that do not fit, the ratio can fall below 1 "
                "(give the --chunk-tokens they were made with)"
            ]
            if chunks["over_chunk_tokens"]
            else []
        ),
        *(
            [
                f"overlap: {plural(chunks['overlapping_chunks'], 'chunk')} repeating text of the chunk before; "
                "the fewest count "
                "holds the repeats as content (compare with a run without --chunk-overlap for their cost)"
            ]
            if chunks["overlapping_chunks"]
            else []
        ),
        *(
            [
                f"repeated: {plural(chunks['repeated_chunks'], 'chunk')} with the id of a chunk before "
                "(the same chunks "
                "written twice: a file appended to?); each is counted, as a retriever would find each"
            ]
            if chunks["repeated_chunks"]
            else []
        ),
        *(f"  {item['where']}: {', '.join(item['problems'])}" for item in chunks["problems"]),
    ]
    return lines


def _shown(percent: float | None) -> str:
    return "-" if percent is None else f"{percent:.2f}%"
