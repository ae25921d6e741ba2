"""The audit: what the anchors cost in tokens, and how many chunks keep their ticket ID.

For every document the audit also builds the same document without its anchors
(``anchors.strip_anchors``), tokenizes both once, chunks both with every chunker, and counts:

- overhead: tokens with anchors vs without, per ticket and in total;
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
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorkit import chunking
from anchorkit.anchors import ANCHOR_PATTERN, TITLE_PATTERN, find_anchors, strip_anchors
from anchorkit.chunking import Chunker, Span, byte_offsets
from anchorkit.markdown_blocks import COMPLEX_LINE, parse_blocks
from anchorkit.sidecar import MAX_FILE_BYTES as MAX_SIDECAR_BYTES
from anchorkit.sidecar import MAX_LIST_ITEMS, MAX_STRING_CHARS, RESERVED_PREFIX
from anchorkit.tokens import TokenizedText, Tokenizer, TokenizerChoice, approx_tokens

SCHEMA_NAME = "anchorkit-stats"
SCHEMA_VERSION = 1
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # Bedrock Knowledge Base's limit per source file
SIDECAR_SUFFIX = ".metadata.json"
HISTOGRAM_BIN_PERCENT = 2
HISTOGRAM_BINS = 20  # 0-2%, 2-4%, ... 38-40%, then one bin for >= 40%
TOP_TICKETS = 10
LISTED_FINDINGS = 100  # each limits finding lists at most this many documents (the count is exact)
BATCH_SIZE = 256
# A plain-text ticket mention ("#123", not "&#123;"): a confusion-risk measure, not the anchor format.
_MENTION = re.compile(r"(?<![\w&#])#(\d{1,12})(?!\d)")
_TICKET_DOCUMENT = re.compile(r"^(\d+)\.md$")
_CODE_BLOCKS = ("fence", "code_block")


@dataclass(frozen=True)
class SourceDocument:
    ticket_id: int
    relpath: str
    markdown: str
    size_bytes: int
    sidecar: bytes | None


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
        yield SourceDocument(ticket_id, relpath, markdown, size, sidecar)


def iter_snapshot(snapshot_dir: Path, options: Any) -> Iterator[SourceItem]:
    """Transform a snapshot in memory (``options``: transform.TransformOptions)."""
    from anchorkit.transform import RenderedTicket, iter_documents

    for result in iter_documents(snapshot_dir, options):
        if isinstance(result, RenderedTicket):
            size = len(result.markdown.encode("utf-8"))
            if size > MAX_DOCUMENT_BYTES:
                yield OversizedDocument(result.ticket_id, result.relpath, size)
            else:
                yield SourceDocument(result.ticket_id, result.relpath, result.markdown, size, result.sidecar)
        elif not result.message.startswith("private issue"):  # private issues are left out on purpose
            yield InputError(result.source, result.message)


def is_snapshot(path: Path) -> bool:
    return (path / "issues").is_dir()


# ---------------------------------------------------------------------------------------------
# Per-document measurements (pure)


@dataclass
class _Side:
    """One version of a document (anchored or stripped): its tokens and where things are."""

    text: str
    tokens: TokenizedText
    identifying: list[Span]  # token spans of lines naming the own ticket (line start → id colon)
    mentions: list[Span]  # token spans of mentions of other tickets


def _token_spans(text: str, tokens: TokenizedText, char_spans: list[tuple[int, int]]) -> list[Span]:
    """Token spans [first, last] covering ascending, non-overlapping character spans."""
    if not char_spans or tokens.token_count == 0:
        return []
    offsets = byte_offsets(text, [offset for span in char_spans for offset in span])
    return [(tokens.token_at(offsets[i]), tokens.token_at(offsets[i + 1] - 1)) for i in range(0, len(offsets), 2)]


def identifying_char_spans(text: str, ticket_id: int) -> list[tuple[int, int]]:
    """Character spans from the start of each anchor/title line naming ``ticket_id`` to its id's colon."""
    return sorted(
        (m.start(), m.end("id") + 1) for pattern in (ANCHOR_PATTERN, TITLE_PATTERN) for m in pattern.finditer(text) if int(m["id"]) == ticket_id
    )


def mention_char_spans(text: str, ticket_id: int) -> list[tuple[int, int]]:
    """Character spans of ``#<digits>`` mentions of tickets other than ``ticket_id``."""
    return [m.span() for m in _MENTION.finditer(text) if int(m[1]) != ticket_id]


def _side(text: str, ticket_id: int, tokens: TokenizedText) -> _Side:
    return _Side(
        text,
        tokens,
        _token_spans(text, tokens, identifying_char_spans(text, ticket_id)),
        _token_spans(text, tokens, mention_char_spans(text, ticket_id)),
    )


def _covers(chunk: Span, spans: list[Span], starts: list[int]) -> bool:
    """Whether the chunk's token range holds one of the spans entirely."""
    index = bisect_left(starts, chunk[0])
    return index < len(spans) and spans[index][1] < chunk[1]


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
# Aggregation


@dataclass
class CoverageCounts:
    chunks: int = 0
    identified: int = 0
    mentioning_other: int = 0
    longest_run_tokens: int = 0
    longest_run_ticket_id: int | None = None

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

    def add(self, **item: Any) -> None:
        self.count += 1
        if len(self.items) < LISTED_FINDINGS:
            self.items.append(item)


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


class StatsCollector:
    """Feed it documents (in batches), then ask for the report."""

    def __init__(self, choice: TokenizerChoice, chunkers: Sequence[Chunker], source: dict[str, Any]) -> None:
        self.tokenizer: Tokenizer = choice.tokenizer
        self.fallback_reason = choice.fallback_reason
        self.source = source
        self.levels = [[_LevelCounts(chunker, level) for level in chunker.levels] for chunker in chunkers]
        self.tickets: list[_TicketTokens] = []
        self.findings = {name: _Finding() for name in LIMIT_FINDINGS}
        self.errors: list[InputError] = []
        self.gap = {"anchored": CoverageCounts(), "stripped": CoverageCounts()}
        self.approx_total = 0
        self.approx_abs_error_percent = 0.0

    def add_all(self, items: Iterable[SourceItem]) -> None:
        batch: list[SourceDocument] = []
        for item in items:
            if isinstance(item, InputError):
                self.errors.append(item)
            elif isinstance(item, OversizedDocument):
                self.findings["documents_over_50mb"].add(ticket_id=item.ticket_id, relpath=item.relpath, bytes=item.size_bytes)
            else:
                batch.append(item)
                if len(batch) == BATCH_SIZE:
                    self.add_batch(batch)
                    batch = []
        if batch:
            self.add_batch(batch)

    def add_batch(self, documents: Sequence[SourceDocument]) -> None:
        stripped = [strip_anchors(document.markdown) for document in documents]
        tokenized = self.tokenizer.tokenize_many([d.markdown for d in documents] + stripped)
        for index, document in enumerate(documents):
            anchored = _side(document.markdown, document.ticket_id, tokenized[index])
            bare = _side(stripped[index], document.ticket_id, tokenized[len(documents) + index])
            self._add_document(document, anchored, bare)

    def _add_document(self, document: SourceDocument, anchored: _Side, stripped: _Side) -> None:
        ticket_id = document.ticket_id
        self.tickets.append(_TicketTokens(ticket_id, document.relpath, anchored.tokens.token_count, stripped.tokens.token_count))
        if self.tokenizer.exact and anchored.tokens.token_count:
            estimate = approx_tokens(document.markdown)
            self.approx_total += estimate
            self.approx_abs_error_percent += abs(estimate - anchored.tokens.token_count) * 100 / anchored.tokens.token_count
        for side_name, side in (("anchored", anchored), ("stripped", stripped)):
            self.gap[side_name].add_run(longest_gap(side.identifying, side.tokens.token_count), ticket_id)
        for chunker, levels in zip((levels[0].chunker for levels in self.levels), self.levels):
            for side_name, side in (("anchored", anchored), ("stripped", stripped)):
                if chunking.is_text_chunker(chunker):
                    self._count_text_chunks(chunker.split_text(side.text), levels, side_name, ticket_id)  # type: ignore[union-attr]
                else:
                    self._count_token_chunks(chunker.split(side.text, side.tokens), levels, side_name, side, ticket_id)  # type: ignore[union-attr]
        self._audit_limits(document)

    @staticmethod
    def _count_token_chunks(split: list[list[Span]], levels: list[_LevelCounts], side_name: str, side: _Side, ticket_id: int) -> None:
        identifying_starts = [start for start, _ in side.identifying]
        mention_starts = [start for start, _ in side.mentions]
        for chunks, level in zip(split, levels):
            counts: CoverageCounts = getattr(level, side_name)
            counts.chunks += len(chunks)
            run_start: int | None = None
            for chunk in chunks:
                if _covers(chunk, side.mentions, mention_starts):
                    counts.mentioning_other += 1
                if _covers(chunk, side.identifying, identifying_starts):
                    counts.identified += 1
                    run_start = None
                else:
                    run_start = chunk[0] if run_start is None else run_start
                    counts.add_run(chunk[1] - run_start, ticket_id)

    def _count_text_chunks(self, split: list[list[str]], levels: list[_LevelCounts], side_name: str, ticket_id: int) -> None:
        for chunks, level in zip(split, levels):
            counts: CoverageCounts = getattr(level, side_name)
            counts.chunks += len(chunks)
            sizes = self.tokenizer.count_many(chunks)
            run = 0
            for chunk, size in zip(chunks, sizes):
                if mention_char_spans(chunk, ticket_id):
                    counts.mentioning_other += 1
                if identifying_char_spans(chunk, ticket_id):
                    counts.identified += 1
                    run = 0
                else:
                    # Text chunks have no positions: the run adds up chunk sizes (overlaps count twice).
                    run += size
                    counts.add_run(run, ticket_id)

    def _audit_limits(self, document: SourceDocument) -> None:
        markdown, ticket_id, relpath = document.markdown, document.ticket_id, document.relpath
        anchors = list(ANCHOR_PATTERN.finditer(markdown))
        if not anchors:
            self.findings["documents_without_anchor"].add(ticket_id=ticket_id, relpath=relpath)
        foreign = sorted({a.ticket_id for a in find_anchors(markdown) if a.ticket_id != ticket_id})
        if foreign:
            self.findings["anchors_of_other_tickets"].add(ticket_id=ticket_id, relpath=relpath, other_ticket_ids=foreign)
        duplicates = sum(
            1 for previous, anchor in zip(anchors, anchors[1:]) if previous[0] == anchor[0] and not markdown[previous.end() : anchor.start()].strip()
        )
        if duplicates:
            self.findings["duplicated_anchors"].add(ticket_id=ticket_id, relpath=relpath, count=duplicates)
        in_code = anchors_in_code_blocks(markdown)
        if in_code:
            self.findings["anchors_in_code_blocks"].add(ticket_id=ticket_id, relpath=relpath, lines=in_code)
        if document.sidecar is not None:
            self._audit_sidecar(document.sidecar, ticket_id, relpath + SIDECAR_SUFFIX)

    def _audit_sidecar(self, sidecar: bytes, ticket_id: int, relpath: str) -> None:
        if len(sidecar) > MAX_SIDECAR_BYTES:
            self.findings["sidecars_over_10kb"].add(ticket_id=ticket_id, relpath=relpath, bytes=len(sidecar))
        try:
            attributes = json.loads(sidecar)["metadataAttributes"]
            assert isinstance(attributes, dict)
        except (ValueError, KeyError, TypeError, AssertionError):
            self.findings["sidecars_invalid"].add(ticket_id=ticket_id, relpath=relpath, problem="not a JSON object with metadataAttributes")
            return
        problems = sidecar_value_problems(attributes)
        if problems:
            self.findings["sidecar_values_too_long"].add(ticket_id=ticket_id, relpath=relpath, problems=problems)

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
                for levels in self.levels
                for level in levels
            ],
            "limits": {name: {"count": finding.count, "items": finding.items} for name, finding in self.findings.items()},
            "errors": [{"path": error.path, "message": error.message} for error in self.errors],
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
    for token in parse_blocks(markdown):
        if token.type in _CODE_BLOCKS and token.map:
            code_lines.update(range(token.map[0], token.map[1]))
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


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile, interpolated linearly between ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


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


def audit(
    items: Iterable[SourceItem], choice: TokenizerChoice, chunkers: Sequence[Chunker], source: dict[str, Any], gates: Gates = Gates()
) -> dict[str, Any]:
    """The whole audit over documents from ``iter_output_folder`` or ``iter_snapshot``."""
    collector = StatsCollector(choice, chunkers, source)
    collector.add_all(items)
    report = collector.report()
    report["gates"] = {
        "fail_under_coverage": gates.min_coverage_percent,
        "fail_over_overhead": gates.max_overhead_percent,
        "failures": gate_failures(report, gates),
    }
    return report


def gate_failures(report: dict[str, Any], gates: Gates) -> list[str]:
    """Why the report fails the CI gates (empty: it passes)."""
    failures = []
    if gates.min_coverage_percent is not None:
        for row in report["chunking"]:
            coverage = row["anchored"]["coverage_percent"]
            if coverage is not None and coverage < gates.min_coverage_percent:
                failures.append(f"{row['chunker']} ({row['level']}): coverage {coverage}% is under {gates.min_coverage_percent}%")
    overhead = report["overhead"]["percent"]
    if gates.max_overhead_percent is not None and overhead is not None and overhead > gates.max_overhead_percent:
        failures.append(f"token overhead {overhead}% is over {gates.max_overhead_percent}%")
    return failures
