"""Per-document measurements (pure; runs in worker processes with --jobs).

For every document the audit also builds the same document without its anchors
(``anchors.anchor_cuts``: the anchors and the fences and table heads they brought), tokenizes both
once and chunks both with every chunker. Chunks are token index ranges; instead of decoding each chunk
and scanning it, each identifying line is located once per document (from the start of the line to the
colon after the id: the shortest prefix the anchor pattern accepts) and a chunk covers it or not.
"""

from __future__ import annotations

import gc
import itertools
import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

from anchorkit.anchors import (
    ANCHOR_PATTERN,
    TITLE_PATTERN,
    anchor_cuts,
    exposed_ticket_ids,
    identified_ticket_ids,
)
from anchorkit.audit import chunkers as chunking
from anchorkit.audit.chunkers import (
    Chunker,
    FixedSizeChunker,
    Span,
    TextLayout,
    block_layout,
    cached_attribute,
    has_complex_lines,
)
from anchorkit.audit.sources import (
    OversizedDocument,
    SourceDocument,
    SourceItem,
    UnreadableDocument,
)
from anchorkit.render.document import DEFAULT_CHUNK_TOKENS
from anchorkit.render.sidecar import MAX_FILE_BYTES as MAX_SIDECAR_BYTES
from anchorkit.render.sidecar import (
    MAX_LIST_ITEMS,
    MAX_STRING_CHARS,
    RESERVED_PREFIX,
    SIDECAR_SUFFIX,
)
from anchorkit.settings import default
from anchorkit.tokens import (
    Cut,
    TokenizedText,
    Tokenizer,
    TokensWithout,
    approx_tokens,
    byte_offsets,
    line_aligned,
    without,
)
from anchorkit.untrusted import parse_json

CHUNK_LENGTHS = tuple(int(part) for part in default("lengths").split(","))  # the rows of the chunk-length table
TABLE_OVERLAP_PERCENT = 20  # the table's windows overlap as Bedrock's fixed-size chunks do by default


# A plain-text ticket mention ("#123", not "&#123;"): a confusion-risk measure, not the anchor format.
# The "#" comes first and the character before it is checked after it: the scan then only stops
# at a "#" (three times faster than a look-behind tried at every position).
_MENTION = re.compile(r"#(?<![\w&#]#)(\d{1,12})(?!\d)")


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
        self._windows: dict[tuple[int, int], tuple[int, list[tuple[int, int]]]] = {}

    @cached_attribute
    def lines(self) -> LineMatches:
        return line_matches(self.text)

    @cached_attribute
    def identifying(self) -> list[Span]:
        """From the start of each anchor/title line naming the ticket to its id's colon."""
        return _token_spans(self.text, self.tokens, identifying_spans(self.lines, self.ticket_id))

    @cached_attribute
    def mentions(self) -> list[Span]:
        return _token_spans(self.text, self.tokens, mention_char_spans(self.text, self.ticket_id))

    @cached_attribute
    def longest_gap(self) -> int:
        return longest_gap(self.identifying, self.tokens.token_count)

    @cached_attribute
    def _identifying_starts(self) -> list[int]:
        return [start for start, _ in self.identifying]

    @cached_attribute
    def _mention_starts(self) -> list[int]:
        return [start for start, _ in self.mentions]

    def identified_windows(self, size: int, overlap: int) -> tuple[int, list[tuple[int, int]]]:
        """``covered_windows`` of the spans naming the ticket (the fixed chunker and the placement
        at the same length ask for the same windows)."""
        key = (size, overlap)
        if key not in self._windows:
            self._windows[key] = covered_windows(self.identifying, self.tokens.token_count, size, overlap)
        return self._windows[key]

    def identifies(self, chunk: Span) -> bool:
        """Whether the chunk's text names the ticket: ``ticket_id in identified_ticket_ids(chunk text)``."""
        return _covers(chunk, self.identifying, self._identifying_starts)

    def mentions_other(self, chunk: Span) -> bool:
        """Whether the chunk's text mentions another ticket's number (``#123``)."""
        return _covers(chunk, self.mentions, self._mention_starts)


class StrippedVersion(DocumentVersion):
    """The document without its anchors, its tokens read through the anchored version's
    (``TokensWithout``): what names the ticket and what mentions others are the anchored version's
    spans in the runs of tokens read through, moved, and what the few lines encoded again hold. The
    patterns that find them look at one line at a time (the mention pattern at one character on each
    side), and the runs read through and the lines encoded again are whole lines of both texts, so
    this finds exactly what the stripped text itself gives."""

    def __init__(self, text: str, anchored: DocumentVersion, tokens: TokensWithout, layout: TextLayout) -> None:
        super().__init__(text, anchored.ticket_id, tokens, layout)
        self._anchored = anchored
        self._tokens_without = tokens

    @cached_attribute
    def identifying(self) -> list[Span]:
        return self._moved(self._anchored.identifying, lambda lines: identifying_char_spans(lines, self.ticket_id))

    @cached_attribute
    def mentions(self) -> list[Span]:
        return self._moved(self._anchored.mentions, lambda lines: mention_char_spans(lines, self.ticket_id))

    def _moved(self, anchored_spans: list[Span], find: Callable[[str], list[tuple[int, int]]]) -> list[Span]:
        """``anchored_spans`` read through, and the spans ``find`` gives in the lines encoded again."""
        spans = self._tokens_without.kept_spans(anchored_spans)
        if not self._tokens_without.reencoded:
            return spans
        for first_token, piece in self._tokens_without.reencoded:
            lines = self.text[piece.char_start : piece.char_end]
            spans += [
                (first + first_token, last + first_token)
                for first, last in _token_spans(lines, piece.tokens, find(lines))
            ]
        return sorted(spans)


def _token_spans(text: str, tokens: TokenizedText, char_spans: list[tuple[int, int]]) -> list[Span]:
    """Token spans [first, last] covering ascending, non-overlapping character spans."""
    if not char_spans or tokens.token_count == 0:
        return []
    offsets = byte_offsets(text, [offset for span in char_spans for offset in span])
    # A span's last token is the one holding its last byte.
    token_indices = tokens.tokens_at([offset - (index % 2) for index, offset in enumerate(offsets)])
    return list(zip(token_indices[::2], token_indices[1::2]))


class LineMatches(NamedTuple):
    """The anchor lines and the title lines of a text, any ticket's (found once, asked several times)."""

    anchors: list[re.Match[str]]
    titles: list[re.Match[str]]


def line_matches(text: str) -> LineMatches:
    return LineMatches(list(ANCHOR_PATTERN.finditer(text)), list(TITLE_PATTERN.finditer(text)))


def identifying_char_spans(text: str, ticket_id: int) -> list[tuple[int, int]]:
    """Character spans from the start of each anchor/title line naming ``ticket_id`` to its id's colon."""
    return identifying_spans(line_matches(text), ticket_id)


def identifying_spans(lines: LineMatches, ticket_id: int) -> list[tuple[int, int]]:
    return sorted((m.start(), m.end("id") + 1) for m in itertools.chain(*lines) if int(m["id"]) == ticket_id)


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
    if token_count <= size:  # one window, which holds every span
        return 1, [(0, 0)] if spans else []
    step = max(size - overlap, 1)
    count = -(-(token_count - size) // step) + 1
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
    count, identified = version.identified_windows(size, overlap)
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


# NamedTuples rather than frozen dataclasses: a document makes a dozen of them, and a frozen
# dataclass takes several times longer to build.
class ChunkTally(NamedTuple):
    """One document, one chunker level, one version (anchored or stripped)."""

    chunks: int
    identified: int
    mentioning_other: int
    longest_run_tokens: int  # tokens covered by consecutive chunks that do not identify the ticket


class Placement(NamedTuple):
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
Measured = DocumentMeasurement | UnreadableDocument | OversizedDocument


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
        with collector_paused():
            return self._measure_batch(items)

    def _measure_batch(self, items: Sequence[SourceItem]) -> list[Measured]:
        documents = [item for item in items if isinstance(item, SourceDocument)]
        cuts = [line_aligned(document.markdown, anchor_cuts(document.markdown)) for document in documents]
        stripped = [without(document.markdown, document_cuts) for document, document_cuts in zip(documents, cuts)]
        # Both versions of every document in one tokenizer call (cl100k encodes each document once).
        pairs = self.tokenizer.tokenize_pairs([document.markdown for document in documents], cuts)
        renditions = self._rendition_placements(documents)
        measurements = iter(
            [self._measure(*arguments) for arguments in zip(documents, stripped, cuts, pairs, renditions)]
        )
        return [next(measurements) if isinstance(item, SourceDocument) else item for item in items]

    def _rendition_placements(self, documents: Sequence[SourceDocument]) -> list[dict[int, Placement]]:
        """The placements of each document's other renditions (snapshot input), by chunk length."""
        texts = [
            (index, length, text) for index, document in enumerate(documents) for length, text in document.renditions
        ]
        cuts = [line_aligned(text, anchor_cuts(text)) for _, _, text in texts]
        stripped = [without(text, text_cuts) for (_, _, text), text_cuts in zip(texts, cuts)]
        pairs = self.tokenizer.tokenize_pairs([text for _, _, text in texts], cuts)
        placements: list[dict[int, Placement]] = [{} for _ in documents]
        for (index, length, text), bare, (tokens, bare_tokens) in zip(texts, stripped, pairs):
            ticket_id = documents[index].ticket_id
            anchored = DocumentVersion(text, ticket_id, tokens)
            placements[index][length] = placement(
                length, anchored, bare_tokens.token_count, len(identifying_char_spans(bare, ticket_id))
            )
        return placements

    def versions(
        self, document: SourceDocument, stripped_text: str, cuts: list[Cut], tokens: tuple[TokenizedText, TokenizedText]
    ) -> tuple[DocumentVersion, DocumentVersion]:
        """The document as it is, and without its anchors (which borrows the anchored layout)."""
        anchored = DocumentVersion(document.markdown, document.ticket_id, tokens[0])
        bare = tokens[1]
        if isinstance(bare, TokensWithout) and bare.whole is tokens[0]:
            layout = anchored.layout.without(stripped_text, bare.cut_bytes)
            return anchored, StrippedVersion(stripped_text, anchored, bare, layout)
        byte_cuts = byte_offsets(document.markdown, [offset for cut in cuts for offset in cut])
        layout = anchored.layout.without(stripped_text, list(zip(byte_cuts[::2], byte_cuts[1::2])))
        return anchored, DocumentVersion(stripped_text, document.ticket_id, bare, layout)

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
            tuple(limit_findings(document, anchored.lines)),
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


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused: a batch makes a few hundred thousand short-lived
    lists, sets and tuples and no reference cycles, so the collector would run about a hundred
    times a batch and find nothing (3% of the audit's time); the audit's own loop, which keeps every
    document's measurements, another 1.5%."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def placement(
    chunk_tokens: int, anchored: DocumentVersion, tokens_without_anchors: int, stripped_identifying: int
) -> Placement:
    """``anchored`` against windows of ``chunk_tokens``; ``stripped_identifying``: the lines naming the
    ticket that remain once the anchors are stripped (the title)."""
    token_count = anchored.tokens.token_count
    anchors = len(anchored.identifying) - stripped_identifying
    cost = (token_count - tokens_without_anchors) / anchors if anchors > 0 else _title_cost(anchored)
    windows, covered = anchored.identified_windows(chunk_tokens, chunk_tokens * TABLE_OVERLAP_PERCENT // 100)
    identified = sum(last - first + 1 for first, last in covered)
    return Placement(
        chunk_tokens,
        token_count,
        tokens_without_anchors,
        max(anchors, 0),
        cost,
        windows,
        identified,
        anchored.longest_gap,
    )


_FIRST_LINE = re.compile(r"[^\n]*\n*")


def _title_cost(version: DocumentVersion) -> int:
    """Tokens of the first line (the title) and the line breaks after it: what one anchor would add."""
    end = len(version.text[: _FIRST_LINE.match(version.text).end()].encode("utf-8"))  # type: ignore[union-attr]
    return (
        version.tokens.token_count
        if end >= version.tokens.byte_offset(version.tokens.token_count)
        else version.tokens.token_at(end)
    )


def _token_tallies(split: list[list[Span]], version: DocumentVersion) -> list[ChunkTally]:
    """Per level: its chunks, those that identify the ticket and those that mention another (what
    ``identifies`` and ``mentions_other`` say of each, asked here without a call per chunk: a few
    dozen chunks a document, each asked twice), and the longest run of tokens that consecutive chunks
    not identifying the ticket cover."""
    tallies = []
    spans, starts, mentions, mention_starts = (
        version.identifying,
        version._identifying_starts,
        version.mentions,
        version._mention_starts,
    )
    last_span, last_mention = len(spans) - 1, len(mentions) - 1
    for chunks in split:
        identified = mentioning = longest = 0
        run_start: int | None = None
        for start, end in chunks:
            # As _covers: the first span starting in the chunk is the one that may end in it.
            index = bisect_left(mention_starts, start)
            mentioning += index <= last_mention and mentions[index][1] < end
            index = bisect_left(starts, start)
            if index <= last_span and spans[index][1] < end:
                identified += 1
                run_start = None
            else:
                run_start = start if run_start is None else run_start
                longest = max(longest, end - run_start)
        tallies.append(ChunkTally(len(chunks), identified, mentioning, longest))
    return tallies


def limit_findings(document: SourceDocument, lines: LineMatches | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Bedrock limits and anchor hygiene problems of one document and its sidecar (``lines``: its
    ``line_matches``, when already found)."""
    markdown, ticket_id, relpath = document.markdown, document.ticket_id, document.relpath
    lines = lines or line_matches(markdown)
    where = {"ticket_id": ticket_id, "relpath": relpath}
    findings: list[tuple[str, dict[str, Any]]] = []
    anchors = lines.anchors  # the matches find_anchors makes, with positions
    if not anchors:
        findings.append(("documents_without_anchor", where))
    # What a chunk starting anywhere would read as another ticket's anchor or title, not only whole lines.
    foreign = sorted(exposed_ticket_ids(markdown) - {ticket_id})
    if foreign:
        findings.append(("anchors_of_other_tickets", {**where, "other_ticket_ids": foreign}))
    duplicates = sum(
        1
        for previous, anchor in itertools.pairwise(anchors)
        if previous[0] == anchor[0] and not markdown[previous.end() : anchor.start()].strip()
    )
    if duplicates:
        findings.append(("duplicated_anchors", {**where, "count": duplicates}))
    in_code = anchors_in_code_blocks(markdown, lines)
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
        attributes = parse_json(sidecar)["metadataAttributes"]
    except (ValueError, KeyError, TypeError):
        attributes = None
    if not isinstance(attributes, dict):
        return [
            *findings,
            ("sidecars_invalid", {**where, "problem": "not a JSON object with a metadataAttributes object"}),
        ]
    problems = sidecar_value_problems(attributes)
    if problems:
        findings.append(("sidecar_values_too_long", {**where, "problems": problems}))
    return findings


def anchors_in_code_blocks(markdown: str, lines: LineMatches) -> list[int]:
    """1-based line numbers of anchor or title lines that sit inside a code block."""
    if not has_complex_lines(markdown):
        return []  # no fence and no indented line: there is no code block
    code_lines: set[int] = set()
    for first, end in block_layout(markdown).code_lines:
        code_lines.update(range(first, end))
    if not code_lines:
        return []
    starts = sorted(m.start() for m in itertools.chain(*lines))
    # Line numbers counted on from the previous start: one pass over the text, not one per line.
    gaps = map(markdown.count, itertools.repeat("\n"), [0, *starts[:-1]], starts)
    return [number + 1 for number in itertools.accumulate(gaps) if number in code_lines]


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
        return next(
            (typed[key] for key in ("stringValue", "stringListValue", "numberValue", "booleanValue") if key in typed),
            None,
        )
    return raw
