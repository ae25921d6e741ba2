"""The audit: what the anchors cost in tokens, and how many chunks keep their ticket ID.

For every document the audit also builds the same document without its anchors
(``anchors.anchor_cuts``: the anchors and the fences and table heads they brought), tokenizes both
once, chunks both with every chunker, and counts:

- overhead: tokens with anchors vs without, per ticket and in total;
- efficiency: that overhead beside the lower bound, the fewest anchor tokens that put a whole anchor
  in every window of the chunk length the documents were made for (``anchors_needed``);
- the chunk-length table: coverage of fixed windows and the cost at other chunk lengths (a
  snapshot rendered at each one: ``SourceDocument.renditions``);
- coverage: the share of chunks that identify their own ticket, i.e. whose text contains a genuine
  anchor or title line naming it (``ticket_id in anchors.identified_ticket_ids(chunk_text)``);
- confusion risk: the share of chunks that mention another ticket's number (``#123``);
- the longest runs of tokens without anything naming the ticket;
- Bedrock limits and anchor hygiene (documents > 50 MB, sidecars > 10 KB or with over-long
  values, documents without anchors, anchors inside code blocks, duplicated or foreign anchors).

Chunks are token index ranges; instead of decoding each chunk and scanning it, the audit locates
each identifying line once per document (from the start of the line to the colon after the id:
the shortest prefix the anchor pattern accepts) and asks whether a chunk covers it.
The report is a JSON-ready dict whose shape ``anchorkit.stats_schema.REPORT_SCHEMA`` describes.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from anchorkit import chunking, parallel
from anchorkit.anchors import ANCHOR_PATTERN, TITLE_PATTERN, anchor_cuts, identified_ticket_ids
from anchorkit.chunking import Chunker, FixedSizeChunker, Span, TextLayout, block_layout, percentile
from anchorkit.markdown_blocks import COMPLEX_LINE
from anchorkit.sidecar import MAX_FILE_BYTES as MAX_SIDECAR_BYTES
from anchorkit.sidecar import MAX_LIST_ITEMS, MAX_STRING_CHARS, RESERVED_PREFIX, SIDECAR_SUFFIX
from anchorkit.tokens import APPROX, CL100K_BASE, Cut, TokenizedText, Tokenizer, TokenizerChoice, approx_tokens, byte_offsets, line_aligned, without
from anchorkit.document import DEFAULT_CHUNK_TOKENS
from anchorkit.transform import RenderedTicket, TransformOptions, iter_documents

SCHEMA_NAME = "anchorkit-stats"
SCHEMA_VERSION = 2
CHUNK_LENGTHS = (256, 300, 512, 1024)  # the rows of the chunk-length table
TABLE_OVERLAP_PERCENT = 20  # the table's windows overlap as Bedrock's fixed-size chunks do by default
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # Bedrock Knowledge Base's limit per source file
HISTOGRAM_BIN_PERCENT = 2
HISTOGRAM_BINS = 20  # 0-2%, 2-4%, ... 38-40%, then one bin for >= 40%
TOP_TICKETS = 10
TOKENIZER_NOTES = {
    CL100K_BASE: "cl100k_base (tiktoken): exact counts for OpenAI's embedding models; a stand-in for Bedrock's "
    "(the Titan and Cohere tokenizers are not public).",
    APPROX: "approx: an estimate of cl100k_base counts (1.15 per non-ASCII character, 0.2 per ASCII letter or space, "
    "0.5 per digit, 1 per other character); within 1% of cl100k_base in total and 4% per document on average on the fixtures, "
    "so chunk boundaries and counts here can be off by a few percent.",
}
LISTED_FINDINGS = 100  # each limits finding lists at most this many documents (the count is exact)
# A plain-text ticket mention ("#123", not "&#123;"): a confusion-risk measure, not the anchor format.
_MENTION = re.compile(r"(?<![\w&#])#(\d{1,12})(?!\d)")
_TICKET_DOCUMENT = re.compile(r"^(\d+)\.md$")


@dataclass(frozen=True)
class SourceDocument:
    ticket_id: int
    relpath: str  # "12345.md" or "helpdesk/12345.md"
    markdown: str
    sidecar: bytes | None  # the .metadata.json beside it, if any
    # The same ticket rendered for other chunk lengths (snapshot input): (chunk_tokens, markdown).
    renditions: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class InputError:
    path: str
    message: str


@dataclass(frozen=True)
class OversizedDocument:
    """A document Bedrock would refuse: it is listed, not analysed."""

    ticket_id: int
    relpath: str
    size_bytes: int


SourceItem = SourceDocument | InputError | OversizedDocument


# ---------------------------------------------------------------------------------------------
# Reading the input (the I/O edge)


def iter_output_folder(folder: Path) -> Iterator[SourceItem]:
    """``<id>.md`` documents (flat or one project folder deep) and their sidecars, in path order."""
    paths = sorted(
        (path for path in [*folder.glob("*.md"), *folder.glob("*/*.md")] if _TICKET_DOCUMENT.match(path.name)),
        key=lambda path: path.relative_to(folder).as_posix(),
    )
    for path in paths:
        relpath = path.relative_to(folder).as_posix()
        ticket_id = int(_TICKET_DOCUMENT.match(path.name)[1])  # type: ignore[index]
        sidecar_path = path.with_name(path.name + SIDECAR_SUFFIX)
        try:
            size = path.stat().st_size
            if size > MAX_DOCUMENT_BYTES:
                yield OversizedDocument(ticket_id, relpath, size)
                continue
            markdown = path.read_bytes().decode("utf-8")
            sidecar = sidecar_path.read_bytes() if sidecar_path.is_file() else None
        except UnicodeDecodeError as exc:
            yield InputError(relpath, f"{relpath}: not valid UTF-8 ({exc.reason} at byte {exc.start})")
            continue
        except OSError as exc:
            yield InputError(relpath, f"{relpath}: cannot read ({exc.strerror or exc})")
            continue
        yield SourceDocument(ticket_id, relpath, markdown, sidecar)


def iter_snapshot(snapshot_dir: Path, options: TransformOptions, other_lengths: Sequence[int] = ()) -> Iterator[SourceItem]:
    """Transform a snapshot in memory, as ``transform`` would write it.

    With ``other_lengths``, each ticket is also rendered with those ``--chunk-tokens`` (for the
    chunk-length table); the renders walk the snapshot side by side, one result per ticket each.
    """
    others = [iter_documents(snapshot_dir, with_chunk_tokens(options, length)) for length in other_lengths]
    for result, *variants in zip(iter_documents(snapshot_dir, options), *others):
        if isinstance(result, RenderedTicket):
            size = len(result.markdown.encode("utf-8"))
            if size > MAX_DOCUMENT_BYTES:
                yield OversizedDocument(result.ticket_id, result.relpath, size)
            else:
                renditions = tuple((length, v.markdown) for length, v in zip(other_lengths, variants) if isinstance(v, RenderedTicket))
                yield SourceDocument(result.ticket_id, result.relpath, result.markdown, result.sidecar, renditions)
        else:
            yield InputError(result.source, result.message)


def with_chunk_tokens(options: TransformOptions, chunk_tokens: int) -> TransformOptions:
    return replace(options, render=replace(options.render, chunk_tokens=chunk_tokens))


def is_snapshot(path: Path) -> bool:
    return (path / "issues").is_dir()


# ---------------------------------------------------------------------------------------------
# Per-document measurements (pure)


class DocumentVersion:
    """One version of a document (anchored, or stripped of its anchors): its tokens, and the token
    spans of what names the ticket and of what mentions other tickets."""

    def __init__(self, text: str, ticket_id: int, tokens: TokenizedText, layout: TextLayout | None = None) -> None:
        self.text = text
        self.tokens = tokens
        self.ticket_id = ticket_id
        self.layout = layout or TextLayout(text)

    @cached_property
    def identifying(self) -> list[Span]:
        """From the start of each anchor/title line naming the ticket to its id's colon."""
        return _token_spans(self.text, self.tokens, identifying_char_spans(self.text, self.ticket_id))

    @cached_property
    def mentions(self) -> list[Span]:
        return _token_spans(self.text, self.tokens, mention_char_spans(self.text, self.ticket_id))

    @cached_property
    def longest_gap(self) -> int:
        return longest_gap(self.identifying, self.tokens.token_count)

    @cached_property
    def _identifying_starts(self) -> list[int]:
        return [start for start, _ in self.identifying]

    @cached_property
    def _mention_starts(self) -> list[int]:
        return [start for start, _ in self.mentions]

    def identifies(self, chunk: Span) -> bool:
        """Whether the chunk's text names the ticket: ``ticket_id in identified_ticket_ids(chunk text)``."""
        return _covers(chunk, self.identifying, self._identifying_starts)

    def mentions_other(self, chunk: Span) -> bool:
        """Whether the chunk's text mentions another ticket's number (``#123``)."""
        return _covers(chunk, self.mentions, self._mention_starts)


def _token_spans(text: str, tokens: TokenizedText, char_spans: list[tuple[int, int]]) -> list[Span]:
    """Token spans [first, last] covering ascending, non-overlapping character spans."""
    if not char_spans or tokens.token_count == 0:
        return []
    offsets = byte_offsets(text, [offset for span in char_spans for offset in span])
    # A span's last token is the one holding its last byte.
    token_indices = tokens.tokens_at([offset - (index % 2) for index, offset in enumerate(offsets)])
    return list(zip(token_indices[::2], token_indices[1::2]))


def identifying_char_spans(text: str, ticket_id: int) -> list[tuple[int, int]]:
    """Character spans from the start of each anchor/title line naming ``ticket_id`` to its id's colon."""
    return sorted(
        (m.start(), m.end("id") + 1) for pattern in (ANCHOR_PATTERN, TITLE_PATTERN) for m in pattern.finditer(text) if int(m["id"]) == ticket_id
    )


def mention_char_spans(text: str, ticket_id: int) -> list[tuple[int, int]]:
    """Character spans of ``#<digits>`` mentions of tickets other than ``ticket_id``."""
    return [m.span() for m in _MENTION.finditer(text) if int(m[1]) != ticket_id]


def _covers(chunk: Span, spans: list[Span], starts: list[int]) -> bool:
    """Whether the chunk's token range holds one of the spans entirely."""
    index = bisect_left(starts, chunk[0])
    return index < len(spans) and spans[index][1] < chunk[1]


def identified_windows(spans: list[Span], token_count: int, size: int, overlap: int) -> tuple[int, int]:
    """(windows, windows holding a whole span) of ``chunking.windows(0, token_count, size, overlap)``."""
    count, covered = covered_windows(spans, token_count, size, overlap)
    return count, sum(last - first + 1 for first, last in covered)


def covered_windows(spans: list[Span], token_count: int, size: int, overlap: int) -> tuple[int, list[tuple[int, int]]]:
    """The number of windows of ``chunking.windows(0, token_count, size, overlap)``, and the ranges
    of window indices [first, last] that hold a whole span (ascending, disjoint).

    Counted from the spans rather than window by window: window k starts at k * step and holds the
    span [s, e] when k * step <= s and e < k * step + size (the last window ends the text, so it
    holds every span that starts inside it). Spans ascend, so the window ranges they give do too.
    """
    if token_count <= 0:
        return 0, []
    step = max(size - overlap, 1)
    count = 1 if token_count <= size else -(-(token_count - size) // step) + 1
    covered: list[tuple[int, int]] = []
    for start, end in spans:
        first = min(max((end - size) // step + 1, 0), count - 1)
        last = min(start // step, count - 1)
        if covered and first <= covered[-1][1] + 1:
            if last > covered[-1][1]:
                covered[-1] = (covered[-1][0], last)
        elif first <= last:
            covered.append((first, last))
    return count, covered


def window_tally(version: DocumentVersion, size: int, overlap: int) -> ChunkTally:
    """``_token_tallies`` of fixed windows, from the spans alone (no per-window work)."""
    token_count = version.tokens.token_count
    count, identified = covered_windows(version.identifying, token_count, size, overlap)
    _, mentioning = covered_windows(version.mentions, token_count, size, overlap)
    step = max(size - overlap, 1)
    longest = 0
    previous = -1
    for first, last in [*identified, (count, count)]:
        if first > previous + 1:  # windows previous+1 .. first-1 do not identify the ticket
            longest = max(longest, min((first - 1) * step + size, token_count) - (previous + 1) * step)
        previous = last
    return ChunkTally(count, sum(b - a + 1 for a, b in identified), sum(b - a + 1 for a, b in mentioning), longest)


def anchors_needed(content_tokens: int, window: int, anchor_tokens: float) -> int | None:
    """The fewest anchors (besides the title) that put a whole anchor in every window of ``window`` tokens.

    Consecutive anchor starts may be at most ``window - anchor_tokens`` apart, and each gap holds one
    anchor, so a text of ``content_tokens`` needs about (T - N) / (N - 2A) of them (the title covers
    the first window). None when no placement can work: the anchor takes half the window or more.
    """
    if content_tokens <= window:
        return 0
    room = window - 2 * anchor_tokens
    return math.ceil((content_tokens - window) / room) if room > 0 else None


def longest_gap(spans: list[Span], token_count: int) -> int:
    """The most tokens in a row outside every span (before the first, between two, after the last)."""
    gaps = []
    previous_end = -1
    for start, end in spans:
        gaps.append(start - previous_end - 1)
        previous_end = max(previous_end, end)
    gaps.append(token_count - previous_end - 1)
    return max(gaps)


# ---------------------------------------------------------------------------------------------
# Measuring documents (pure; runs in worker processes with --jobs)


@dataclass(frozen=True)
class ChunkTally:
    """One document, one chunker level, one version (anchored or stripped)."""

    chunks: int
    identified: int
    mentioning_other: int
    longest_run_tokens: int  # tokens covered by consecutive chunks that do not identify the ticket


@dataclass(frozen=True)
class Placement:
    """One rendering of a document against windows of ``chunk_tokens`` tokens: what its anchors cost,
    what the lower bound says they could cost, and how many windows identify the ticket."""

    chunk_tokens: int
    tokens_with_anchors: int
    tokens_without_anchors: int
    anchors: int  # anchor lines (the title not counted)
    anchor_cost: float  # tokens one anchor adds: the mean over its anchors, or the title line's when it has none
    windows: int  # fixed windows of chunk_tokens sharing TABLE_OVERLAP_PERCENT
    identified: int
    longest_gap: int  # tokens in a row with nothing naming the ticket

    @property
    def anchor_tokens(self) -> int:
        return self.tokens_with_anchors - self.tokens_without_anchors

    @property
    def bound_anchors(self) -> int | None:
        return anchors_needed(self.tokens_without_anchors, self.chunk_tokens, self.anchor_cost)

    @property
    def bound_tokens(self) -> float | None:
        needed = self.bound_anchors
        return None if needed is None else needed * self.anchor_cost


@dataclass(frozen=True)
class DocumentMeasurement:
    ticket_id: int
    relpath: str
    tokens_with_anchors: int
    tokens_without_anchors: int
    approx_estimate: int | None  # approx_tokens of the document, when the tokenizer is exact
    longest_gap: tuple[int, int]  # anchored, stripped: tokens in a row with nothing naming the ticket
    tallies: tuple[tuple[ChunkTally, ChunkTally], ...]  # per chunker level: anchored, stripped
    findings: tuple[tuple[str, dict[str, Any]], ...]  # (LIMIT_FINDINGS name, item)
    placement: Placement  # against the chunk length the documents were made for
    lengths: tuple[Placement, ...]  # one per row of the chunk-length table


LIMIT_FINDINGS = (
    "documents_over_50mb",
    "sidecars_over_10kb",
    "sidecar_values_too_long",
    "sidecars_invalid",
    "documents_without_anchor",
    "anchors_in_code_blocks",
    "duplicated_anchors",
    "anchors_of_other_tickets",
)
Measured = DocumentMeasurement | InputError | OversizedDocument


@dataclass(frozen=True)
class Lengths:
    """The chunk length the documents were made for (``--chunk-tokens``; the efficiency is measured
    against it) and the rows of the chunk-length table."""

    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    table: tuple[int, ...] = CHUNK_LENGTHS


class Measurer:
    """Measures batches of documents: tokenize each version once, chunk, count."""

    def __init__(self, tokenizer: Tokenizer, chunkers: Sequence[Chunker], lengths: Lengths = Lengths()) -> None:
        self.tokenizer = tokenizer
        self.chunkers = chunkers
        self.lengths = lengths

    def measure_batch(self, items: Sequence[SourceItem]) -> list[Measured]:
        """Measurements of the batch's documents; errors and oversized documents pass through, in order."""
        documents = [item for item in items if isinstance(item, SourceDocument)]
        cuts = [line_aligned(document.markdown, anchor_cuts(document.markdown)) for document in documents]
        stripped = [without(document.markdown, document_cuts) for document, document_cuts in zip(documents, cuts)]
        # Both versions of every document in one tokenizer call (cl100k encodes each document once).
        pairs = self.tokenizer.tokenize_pairs([document.markdown for document in documents], cuts)
        renditions = self._rendition_placements(documents)
        measurements = iter([self._measure(*arguments) for arguments in zip(documents, stripped, cuts, pairs, renditions)])
        return [next(measurements) if isinstance(item, SourceDocument) else item for item in items]

    def _rendition_placements(self, documents: Sequence[SourceDocument]) -> list[dict[int, Placement]]:
        """The placements of each document's other renditions (snapshot input), by chunk length."""
        texts = [(index, length, text) for index, document in enumerate(documents) for length, text in document.renditions]
        cuts = [line_aligned(text, anchor_cuts(text)) for _, _, text in texts]
        stripped = [without(text, text_cuts) for (_, _, text), text_cuts in zip(texts, cuts)]
        pairs = self.tokenizer.tokenize_pairs([text for _, _, text in texts], cuts)
        placements: list[dict[int, Placement]] = [{} for _ in documents]
        for (index, length, text), bare, (tokens, bare_tokens) in zip(texts, stripped, pairs):
            ticket_id = documents[index].ticket_id
            anchored = DocumentVersion(text, ticket_id, tokens)
            placements[index][length] = placement(length, anchored, bare_tokens.token_count, len(identifying_char_spans(bare, ticket_id)))
        return placements

    def versions(
        self, document: SourceDocument, stripped_text: str, cuts: list[Cut], tokens: tuple[TokenizedText, TokenizedText]
    ) -> tuple[DocumentVersion, DocumentVersion]:
        """The document as it is, and without its anchors (which borrows the anchored layout)."""
        anchored = DocumentVersion(document.markdown, document.ticket_id, tokens[0])
        byte_cuts = byte_offsets(document.markdown, [offset for cut in cuts for offset in cut])
        stripped_layout = anchored.layout.without(stripped_text, list(zip(byte_cuts[::2], byte_cuts[1::2])))
        return anchored, DocumentVersion(stripped_text, document.ticket_id, tokens[1], stripped_layout)

    def _measure(
        self,
        document: SourceDocument,
        stripped_text: str,
        cuts: list[Cut],
        tokens: tuple[TokenizedText, TokenizedText],
        renditions: dict[int, Placement],
    ) -> DocumentMeasurement:
        anchored, stripped = self.versions(document, stripped_text, cuts, tokens)
        own = {
            length: placement(length, anchored, stripped.tokens.token_count, len(stripped.identifying))
            for length in {self.lengths.chunk_tokens, *self.lengths.table} - renditions.keys()
        }
        placements = {**own, **renditions}
        versions = (anchored, stripped)
        tallies: list[tuple[ChunkTally, ChunkTally]] = []
        for chunker in self.chunkers:
            if chunking.is_text_chunker(chunker):
                per_version = [self._text_tallies(chunker.split_text(v.text), document.ticket_id) for v in versions]  # type: ignore[union-attr]
            elif isinstance(chunker, FixedSizeChunker):
                overlap = chunker.max_tokens * chunker.overlap // 100
                per_version = [[window_tally(v, chunker.max_tokens, overlap)] for v in versions]
            else:
                per_version = [_token_tallies(chunker.split(v.layout, v.tokens), v) for v in versions]  # type: ignore[union-attr]
            tallies.extend(zip(*per_version))
        return DocumentMeasurement(
            document.ticket_id,
            document.relpath,
            anchored.tokens.token_count,
            stripped.tokens.token_count,
            approx_tokens(document.markdown) if self.tokenizer.exact else None,
            (anchored.longest_gap, stripped.longest_gap),
            tuple(tallies),
            tuple(limit_findings(document)),
            placements[self.lengths.chunk_tokens],
            tuple(placements[length] for length in self.lengths.table),
        )

    def _text_tallies(self, split: list[list[str]], ticket_id: int) -> list[ChunkTally]:
        tallies = []
        for chunks in split:
            identified = mentioning = longest = run = 0
            for chunk, size in zip(chunks, self.tokenizer.count_many(chunks)):
                mentioning += bool(mention_char_spans(chunk, ticket_id))
                if ticket_id in identified_ticket_ids(chunk):
                    identified += 1
                    run = 0
                else:
                    # Text chunks have no positions: the run adds up chunk sizes (overlaps count twice).
                    run += size
                    longest = max(longest, run)
            tallies.append(ChunkTally(len(chunks), identified, mentioning, longest))
        return tallies


def placement(chunk_tokens: int, anchored: DocumentVersion, tokens_without_anchors: int, stripped_identifying: int) -> Placement:
    """``anchored`` against windows of ``chunk_tokens``; ``stripped_identifying``: the lines naming the
    ticket that remain once the anchors are stripped (the title)."""
    token_count = anchored.tokens.token_count
    anchors = len(anchored.identifying) - stripped_identifying
    cost = (token_count - tokens_without_anchors) / anchors if anchors > 0 else _title_cost(anchored)
    windows, identified = identified_windows(anchored.identifying, token_count, chunk_tokens, chunk_tokens * TABLE_OVERLAP_PERCENT // 100)
    return Placement(
        chunk_tokens, token_count, tokens_without_anchors, max(anchors, 0), cost, windows, identified, anchored.longest_gap
    )


_FIRST_LINE = re.compile(r"[^\n]*\n*")


def _title_cost(version: DocumentVersion) -> int:
    """Tokens of the first line (the title) and the line breaks after it: what one anchor would add."""
    end = len(version.text[: _FIRST_LINE.match(version.text).end()].encode("utf-8"))  # type: ignore[union-attr]
    return version.tokens.token_count if end >= version.tokens.byte_offset(version.tokens.token_count) else version.tokens.token_at(end)


def _token_tallies(split: list[list[Span]], version: DocumentVersion) -> list[ChunkTally]:
    tallies = []
    for chunks in split:
        identified = mentioning = longest = 0
        run_start: int | None = None
        for chunk in chunks:
            mentioning += version.mentions_other(chunk)
            if version.identifies(chunk):
                identified += 1
                run_start = None
            else:
                run_start = chunk[0] if run_start is None else run_start
                longest = max(longest, chunk[1] - run_start)
        tallies.append(ChunkTally(len(chunks), identified, mentioning, longest))
    return tallies


def limit_findings(document: SourceDocument) -> list[tuple[str, dict[str, Any]]]:
    """Bedrock limits and anchor hygiene problems of one document and its sidecar."""
    markdown, ticket_id, relpath = document.markdown, document.ticket_id, document.relpath
    where = {"ticket_id": ticket_id, "relpath": relpath}
    findings: list[tuple[str, dict[str, Any]]] = []
    anchors = list(ANCHOR_PATTERN.finditer(markdown))  # the matches find_anchors makes, with positions
    if not anchors:
        findings.append(("documents_without_anchor", where))
    foreign = sorted({int(anchor["id"]) for anchor in anchors} - {ticket_id})
    if foreign:
        findings.append(("anchors_of_other_tickets", {**where, "other_ticket_ids": foreign}))
    duplicates = sum(
        1 for previous, anchor in zip(anchors, anchors[1:]) if previous[0] == anchor[0] and not markdown[previous.end() : anchor.start()].strip()
    )
    if duplicates:
        findings.append(("duplicated_anchors", {**where, "count": duplicates}))
    in_code = anchors_in_code_blocks(markdown)
    if in_code:
        findings.append(("anchors_in_code_blocks", {**where, "lines": in_code}))
    if document.sidecar is not None:
        findings += sidecar_findings(document.sidecar, ticket_id, relpath + SIDECAR_SUFFIX)
    return findings


def sidecar_findings(sidecar: bytes, ticket_id: int, relpath: str) -> list[tuple[str, dict[str, Any]]]:
    where = {"ticket_id": ticket_id, "relpath": relpath}
    findings: list[tuple[str, dict[str, Any]]] = []
    if len(sidecar) > MAX_SIDECAR_BYTES:
        findings.append(("sidecars_over_10kb", {**where, "bytes": len(sidecar)}))
    try:
        attributes = json.loads(sidecar)["metadataAttributes"]
    except (ValueError, KeyError, TypeError):
        attributes = None
    if not isinstance(attributes, dict):
        return findings + [("sidecars_invalid", {**where, "problem": "not a JSON object with a metadataAttributes object"})]
    problems = sidecar_value_problems(attributes)
    if problems:
        findings.append(("sidecar_values_too_long", {**where, "problems": problems}))
    return findings


# ---------------------------------------------------------------------------------------------
# Aggregation


@dataclass
class CoverageCounts:
    chunks: int = 0
    identified: int = 0
    mentioning_other: int = 0
    longest_run_tokens: int = 0
    longest_run_ticket_id: int | None = None

    def add(self, tally: ChunkTally, ticket_id: int) -> None:
        self.chunks += tally.chunks
        self.identified += tally.identified
        self.mentioning_other += tally.mentioning_other
        self.add_run(tally.longest_run_tokens, ticket_id)

    def add_run(self, tokens: int, ticket_id: int) -> None:
        if tokens > self.longest_run_tokens:
            self.longest_run_tokens, self.longest_run_ticket_id = tokens, ticket_id

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunks": self.chunks,
            "identified": self.identified,
            "coverage_percent": _percent(self.identified, self.chunks),
            "mentioning_other": self.mentioning_other,
            "mentioning_other_percent": _percent(self.mentioning_other, self.chunks),
            "longest_unidentified_run_tokens": self.longest_run_tokens,
            "longest_unidentified_run_ticket_id": self.longest_run_ticket_id,
        }


@dataclass
class _LevelCounts:
    chunker: Chunker
    level: str
    anchored: CoverageCounts = field(default_factory=CoverageCounts)
    stripped: CoverageCounts = field(default_factory=CoverageCounts)


@dataclass
class _TicketTokens:
    ticket_id: int
    relpath: str
    with_anchors: int
    without_anchors: int

    @property
    def percent(self) -> float:
        return _overhead_percent(self.with_anchors, self.without_anchors)


@dataclass
class _Finding:
    count: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)

    def add(self, item: dict[str, Any]) -> None:
        self.count += 1
        if len(self.items) < LISTED_FINDINGS:
            self.items.append(item)


@dataclass
class _PlacementTotals:
    """Placements of many documents at one chunk length, added up."""

    chunk_tokens: int
    with_anchors: int = 0
    without_anchors: int = 0
    anchors: int = 0
    bounded_anchor_tokens: int = 0  # the anchor tokens of the documents the bound applies to
    bound_anchors: int = 0
    bound_tokens: float = 0.0
    anchor_too_long: int = 0  # documents whose anchor takes half a window or more: no bound
    windows: int = 0
    identified: int = 0
    gap: CoverageCounts = field(default_factory=CoverageCounts)

    def add(self, placement: Placement, ticket_id: int) -> None:
        self.with_anchors += placement.tokens_with_anchors
        self.without_anchors += placement.tokens_without_anchors
        self.anchors += placement.anchors
        bound = placement.bound_anchors
        if bound is None:
            self.anchor_too_long += 1
        else:
            self.bounded_anchor_tokens += placement.anchor_tokens
            self.bound_anchors += bound
            self.bound_tokens += bound * placement.anchor_cost
        self.windows += placement.windows
        self.identified += placement.identified
        self.gap.add_run(placement.longest_gap, ticket_id)

    def as_dict(self) -> dict[str, Any]:
        anchor_tokens = self.with_anchors - self.without_anchors
        return {
            "chunk_tokens": self.chunk_tokens,
            "windows": self.windows,
            "identified": self.identified,
            "coverage_percent": _percent(self.identified, self.windows),
            "anchors": self.anchors,
            "anchor_tokens": anchor_tokens,
            "overhead_percent": _round(_overhead_percent(self.with_anchors, self.without_anchors)) if self.without_anchors else None,
            "bound_anchors": self.bound_anchors,
            "bound_tokens": round(self.bound_tokens),
            "bound_overhead_percent": _round(self.bound_tokens * 100 / self.without_anchors) if self.without_anchors else None,
            "ratio_to_bound": _ratio(self.bounded_anchor_tokens, self.bound_tokens),
            "documents_anchor_too_long": self.anchor_too_long,
            "longest_anchorless_run": {"tokens": self.gap.longest_run_tokens, "ticket_id": self.gap.longest_run_ticket_id},
        }


def _ratio(actual: float, bound: float) -> float | None:
    return round(actual / bound, 3) if bound else None


@dataclass(frozen=True)
class _TicketPlacement:
    ticket_id: int
    relpath: str
    placement: Placement

    @property
    def excess_tokens(self) -> float:
        """Anchor tokens above the bound (all of them when the bound is 0 anchors)."""
        return self.placement.anchor_tokens - (self.placement.bound_tokens or 0)

    def as_dict(self) -> dict[str, Any]:
        placement = self.placement
        return {
            "ticket_id": self.ticket_id,
            "relpath": self.relpath,
            "tokens_without_anchors": placement.tokens_without_anchors,
            "anchors": placement.anchors,
            "anchor_cost_tokens": round(placement.anchor_cost, 1),
            "anchor_tokens": placement.anchor_tokens,
            "bound_anchors": placement.bound_anchors,
            "bound_tokens": None if placement.bound_tokens is None else round(placement.bound_tokens),
            "ratio_to_bound": _ratio(placement.anchor_tokens, placement.bound_tokens or 0),
        }


class StatsCollector:
    """Adds up document measurements (in input order), then makes the report."""

    def __init__(self, choice: TokenizerChoice, chunkers: Sequence[Chunker], source: dict[str, Any], lengths: Lengths = Lengths()) -> None:
        self.tokenizer: Tokenizer = choice.tokenizer
        self.lengths = lengths
        self.placement = _PlacementTotals(lengths.chunk_tokens)
        self.table = [_PlacementTotals(length) for length in lengths.table]
        self.placements: list[_TicketPlacement] = []
        self.fallback_reason = choice.fallback_reason
        self.source = source
        self.levels = [_LevelCounts(chunker, level) for chunker in chunkers for level in chunker.levels]
        self.tickets: list[_TicketTokens] = []
        self.findings = {name: _Finding() for name in LIMIT_FINDINGS}
        self.errors: list[InputError] = []
        self.gap = {"anchored": CoverageCounts(), "stripped": CoverageCounts()}
        self.approx_total = 0
        self.approx_abs_error_percent = 0.0

    def add(self, measured: Measured) -> None:
        if isinstance(measured, InputError):
            self.errors.append(measured)
            return
        if isinstance(measured, OversizedDocument):
            self.findings["documents_over_50mb"].add({"ticket_id": measured.ticket_id, "relpath": measured.relpath, "bytes": measured.size_bytes})
            return
        ticket_id = measured.ticket_id
        self.tickets.append(_TicketTokens(ticket_id, measured.relpath, measured.tokens_with_anchors, measured.tokens_without_anchors))
        if measured.approx_estimate is not None and measured.tokens_with_anchors:
            self.approx_total += measured.approx_estimate
            self.approx_abs_error_percent += abs(measured.approx_estimate - measured.tokens_with_anchors) * 100 / measured.tokens_with_anchors
        self.gap["anchored"].add_run(measured.longest_gap[0], ticket_id)
        self.gap["stripped"].add_run(measured.longest_gap[1], ticket_id)
        for level, (anchored, stripped) in zip(self.levels, measured.tallies):
            level.anchored.add(anchored, ticket_id)
            level.stripped.add(stripped, ticket_id)
        for name, item in measured.findings:
            self.findings[name].add(item)
        self.placement.add(measured.placement, ticket_id)
        self.placements.append(_TicketPlacement(ticket_id, measured.relpath, measured.placement))
        for totals, placement in zip(self.table, measured.lengths):
            totals.add(placement, ticket_id)

    def report(self) -> dict[str, Any]:
        percents = [ticket.percent for ticket in self.tickets]
        with_anchors = sum(ticket.with_anchors for ticket in self.tickets)
        without_anchors = sum(ticket.without_anchors for ticket in self.tickets)
        top = sorted(self.tickets, key=lambda ticket: (-ticket.percent, ticket.ticket_id))[:TOP_TICKETS]
        return {
            "schema": SCHEMA_NAME,
            "version": SCHEMA_VERSION,
            "source": {**self.source, "documents": len(self.tickets)},
            "tokenizer": {
                "name": self.tokenizer.name,
                "exact": self.tokenizer.exact,
                "note": TOKENIZER_NOTES[self.tokenizer.name],
                "fallback_reason": self.fallback_reason,
                "approx_error_percent": self._approx_error(with_anchors),
            },
            "overhead": {
                "tokens_with_anchors": with_anchors,
                "tokens_without_anchors": without_anchors,
                "anchor_tokens": with_anchors - without_anchors,
                "percent": _round(_overhead_percent(with_anchors, without_anchors)) if self.tickets else None,
                "per_ticket_percent": {key: _round(percentile(percents, p)) for key, p in (("p50", 50), ("p90", 90), ("max", 100))},
                "histogram": histogram(percents),
                "top": [
                    {
                        "ticket_id": t.ticket_id,
                        "relpath": t.relpath,
                        "tokens_with_anchors": t.with_anchors,
                        "tokens_without_anchors": t.without_anchors,
                        "percent": _round(t.percent),
                    }
                    for t in top
                ],
                "longest_anchorless_run": {
                    side: {"tokens": counts.longest_run_tokens, "ticket_id": counts.longest_run_ticket_id} for side, counts in self.gap.items()
                },
            },
            "chunking": [
                {
                    "chunker": level.chunker.name,
                    "level": level.level,
                    "spec": chunking.spec_of(level.chunker),
                    "unit": "characters" if chunking.is_text_chunker(level.chunker) else "tokens",
                    "note": chunking.chunker_note(level.chunker),
                    "anchored": level.anchored.as_dict(),
                    "stripped": level.stripped.as_dict(),
                }
                for level in self.levels
            ],
            "efficiency": self._efficiency(),
            "chunk_lengths": {
                "documents": "rendered at each length" if any(self.lengths.table) and self.source.get("kind") == "snapshot" else "as they are",
                "overlap_percent": TABLE_OVERLAP_PERCENT,
                "rows": [totals.as_dict() for totals in self.table],
            },
            "limits": {name: {"count": finding.count, "items": finding.items} for name, finding in self.findings.items()},
            "errors": [{"path": error.path, "message": error.message} for error in self.errors],
        }

    def _efficiency(self) -> dict[str, Any]:
        """The anchors' cost beside the lower bound, in total and per ticket."""
        ratios = [ratio for ticket in self.placements if (ratio := _ratio(ticket.placement.anchor_tokens, ticket.placement.bound_tokens or 0)) is not None]
        worst = sorted(self.placements, key=lambda ticket: (-ticket.excess_tokens, ticket.ticket_id))[:TOP_TICKETS]
        return {
            **self.placement.as_dict(),
            "per_ticket_ratio": {key: _round(percentile(ratios, p)) for key, p in (("p50", 50), ("p90", 90), ("max", 100))},
            "top": [ticket.as_dict() for ticket in worst if ticket.excess_tokens > 0],
        }

    def _approx_error(self, exact_total: int) -> dict[str, float] | None:
        if not self.tokenizer.exact or not exact_total:
            return None
        return {
            "total": _round((self.approx_total - exact_total) * 100 / exact_total),
            "mean_absolute": _round(self.approx_abs_error_percent / len(self.tickets)),
        }


def anchors_in_code_blocks(markdown: str) -> list[int]:
    """1-based line numbers of anchor or title lines that sit inside a code block."""
    if not COMPLEX_LINE.search(markdown):
        return []  # no fence and no indented line: there is no code block
    code_lines: set[int] = set()
    for first, end in block_layout(markdown).code_lines:
        code_lines.update(range(first, end))
    if not code_lines:
        return []
    starts = sorted(m.start() for pattern in (ANCHOR_PATTERN, TITLE_PATTERN) for m in pattern.finditer(markdown))
    numbers = [markdown.count("\n", 0, start) for start in starts]
    return [number + 1 for number in numbers if number in code_lines]


def sidecar_value_problems(attributes: dict[str, Any]) -> list[str]:
    """What breaks Bedrock's metadata limits: reserved keys, over-long strings, over-long lists."""
    problems = []
    for key, raw in attributes.items():
        value = _sidecar_value(raw)
        if key.startswith(RESERVED_PREFIX):
            problems.append(f"{key}: reserved key prefix {RESERVED_PREFIX}")
        if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
            problems.append(f"{key}: {len(value)} characters (limit {MAX_STRING_CHARS})")
        if isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS:
                problems.append(f"{key}: {len(value)} items (limit {MAX_LIST_ITEMS})")
            if any(isinstance(item, str) and len(item) > MAX_STRING_CHARS for item in value):
                problems.append(f"{key}: an item over {MAX_STRING_CHARS} characters")
    return problems


def _sidecar_value(raw: Any) -> Any:
    """The value of a simple attribute, or of a typed one (``{"value": {"stringValue": ...}}``)."""
    if isinstance(raw, dict) and isinstance(raw.get("value"), dict):
        typed = raw["value"]
        return next((typed[key] for key in ("stringValue", "stringListValue", "numberValue", "booleanValue") if key in typed), None)
    return raw


def histogram(percents: Sequence[float]) -> dict[str, Any]:
    counts = [0] * (HISTOGRAM_BINS + 1)
    for value in percents:
        counts[min(max(int(value // HISTOGRAM_BIN_PERCENT), 0), HISTOGRAM_BINS)] += 1
    bins = [
        {"from": i * HISTOGRAM_BIN_PERCENT, "to": (i + 1) * HISTOGRAM_BIN_PERCENT if i < HISTOGRAM_BINS else None, "count": count}
        for i, count in enumerate(counts)
    ]
    return {"bin_width_percent": HISTOGRAM_BIN_PERCENT, "bins": bins}


def _overhead_percent(with_anchors: int, without_anchors: int) -> float:
    return (with_anchors - without_anchors) * 100 / without_anchors if without_anchors else 0.0


def _percent(part: int, whole: int) -> float | None:
    return _round(part * 100 / whole) if whole else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# ---------------------------------------------------------------------------------------------
# Running the audit, and CI gates


@dataclass(frozen=True)
class Gates:
    """CI thresholds: fail when a chunker's anchored coverage is under, or the overhead over, a percentage."""

    min_coverage_percent: float | None = None
    max_overhead_percent: float | None = None

    @property
    def active(self) -> bool:
        return self.min_coverage_percent is not None or self.max_overhead_percent is not None


def audit(
    items: Iterable[SourceItem],
    choice: TokenizerChoice,
    chunkers: Sequence[Chunker],
    source: dict[str, Any],
    gates: Gates = Gates(),
    jobs: int = 0,
    lengths: Lengths = Lengths(),
) -> dict[str, Any]:
    """The whole audit over documents from ``iter_output_folder`` or ``iter_snapshot``.

    ``jobs`` > 1 measures batches in that many worker processes; the report is the same (batches
    come back in input order). ``jobs`` = 0: one process per CPU core once there is more than one
    batch of ``parallel.DEFAULT_BATCH_SIZE`` documents (a small corpus is not worth starting processes for).
    """
    collector = StatsCollector(choice, chunkers, source, lengths)
    measured = parallel.map_batches(_measure_in_worker, items, jobs, initializer=_start_worker, initargs=(choice.tokenizer, chunkers, lengths))
    for item in measured:
        collector.add(item)
    report = collector.report()
    report["gates"] = {
        "fail_under_coverage": gates.min_coverage_percent,
        "fail_over_overhead": gates.max_overhead_percent,
        "failures": gate_failures(report, gates),
    }
    return report


_worker_measurer: Measurer | None = None


def _start_worker(tokenizer: Tokenizer, chunkers: Sequence[Chunker], lengths: Lengths) -> None:
    global _worker_measurer
    _worker_measurer = Measurer(tokenizer, chunkers, lengths)


def _measure_in_worker(batch: list[SourceItem]) -> list[Measured]:
    assert _worker_measurer is not None, "worker not started"
    return _worker_measurer.measure_batch(batch)


def gate_failures(report: dict[str, Any], gates: Gates) -> list[str]:
    """Why the report fails the CI gates (empty: it passes)."""
    failures = []
    if gates.active and not report["source"]["documents"]:
        # A gate over nothing proves nothing: a wrong folder must not pass CI.
        failures.append(f"no documents to measure in {report['source']['path']}: the gates cannot pass")
    if gates.min_coverage_percent is not None:
        for row in report["chunking"]:
            coverage = row["anchored"]["coverage_percent"]
            if coverage is not None and coverage < gates.min_coverage_percent:
                failures.append(f"{row['chunker']} ({row['level']}): coverage {coverage}% is under {gates.min_coverage_percent}%")
    overhead = report["overhead"]["percent"]
    if gates.max_overhead_percent is not None and overhead is not None and overhead > gates.max_overhead_percent:
        failures.append(f"token overhead {overhead}% is over {gates.max_overhead_percent}%")
    return failures
