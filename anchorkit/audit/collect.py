"""Aggregation of the per-document measurements into the report (a JSON-ready dict whose shape
``anchorkit.audit.schema.REPORT_SCHEMA`` describes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from anchorkit.audit import chunkers as chunking
from anchorkit.audit.chunkers import (
    Chunker,
    percentile,
)
from anchorkit.audit.measure import (
    LIMIT_FINDINGS,
    TABLE_OVERLAP_PERCENT,
    ChunkTally,
    Lengths,
    Measured,
    Placement,
)
from anchorkit.audit.sources import OversizedDocument, UnreadableDocument
from anchorkit.tokens import (
    APPROX,
    CL100K_BASE,
    Tokenizer,
)

SCHEMA_NAME = "anchorkit-stats"
# 4: ``layout``, and the reports of chunks as they are (audit/chunk_layouts.py); 5: ``rendering`` (required)
SCHEMA_VERSION = 5


HISTOGRAM_BIN_PERCENT = 2
HISTOGRAM_BINS = 20  # 0-2%, 2-4%, ... 38-40%, then one bin for >= 40%
TOP_TICKETS = 10
TOKENIZER_NOTES = {
    CL100K_BASE: "cl100k_base (tiktoken): exact counts for OpenAI's embedding models; a stand-in for Bedrock's "
    "(the Titan and Cohere tokenizers are not public).",
    APPROX: "approx: an estimate of cl100k_base counts (1.15 per non-ASCII character, 0.2 per ASCII letter or space, "
    "0.5 per digit, 1 per other character); within 1.5% of cl100k_base in total and 3.4% per document on average on "
    "the fixtures (5.9% and 5.9% on long generated tickets), so chunk boundaries and counts here can be off by a few "
    "percent.",
}
LISTED_FINDINGS = 100  # each limits finding lists at most this many documents (the count is exact)


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

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
        anchor_tokens = self.with_anchors - self.without_anchors
        return {
            "chunk_tokens": self.chunk_tokens,
            "windows": self.windows,
            "identified": self.identified,
            "coverage_percent": _percent(self.identified, self.windows),
            "anchors": self.anchors,
            "anchor_tokens": anchor_tokens,
            "overhead_percent": _round(_overhead_percent(self.with_anchors, self.without_anchors))
            if self.without_anchors
            else None,
            "bound_anchors": self.bound_anchors,
            "bound_tokens": round(self.bound_tokens),
            "bound_overhead_percent": _round(self.bound_tokens * 100 / self.without_anchors)
            if self.without_anchors
            else None,
            "ratio_to_bound": _ratio(self.bounded_anchor_tokens, self.bound_tokens),
            "documents_anchor_too_long": self.anchor_too_long,
            "longest_anchorless_run": {
                "tokens": self.gap.longest_run_tokens,
                "ticket_id": self.gap.longest_run_ticket_id,
            },
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

    def to_json(self) -> dict[str, Any]:
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

    def __init__(
        self, tokenizer: Tokenizer, chunkers: Sequence[Chunker], source: dict[str, Any], lengths: Lengths = Lengths()
    ) -> None:
        self.tokenizer = tokenizer
        self.lengths = lengths
        self.placement = _PlacementTotals(lengths.chunk_tokens)
        self.table = [_PlacementTotals(length) for length in lengths.table]
        self.placements: list[_TicketPlacement] = []
        self.source = source
        self.levels = [_LevelCounts(chunker, level) for chunker in chunkers for level in chunker.levels]
        self.tickets: list[_TicketTokens] = []
        self.findings = {name: _Finding() for name in LIMIT_FINDINGS}
        self.errors: list[UnreadableDocument] = []
        self.gap = {"anchored": CoverageCounts(), "stripped": CoverageCounts()}
        self.approx_total = 0
        self.approx_abs_error_percent = 0.0

    def add(self, measured: Measured) -> None:
        if isinstance(measured, UnreadableDocument):
            self.errors.append(measured)
            return
        if isinstance(measured, OversizedDocument):
            self.findings["documents_over_50mb"].add(
                {"ticket_id": measured.ticket_id, "relpath": measured.relpath, "bytes": measured.size_bytes}
            )
            return
        ticket_id = measured.ticket_id
        self.tickets.append(
            _TicketTokens(ticket_id, measured.relpath, measured.tokens_with_anchors, measured.tokens_without_anchors)
        )
        if measured.approx_estimate is not None and measured.tokens_with_anchors:
            self.approx_total += measured.approx_estimate
            self.approx_abs_error_percent += (
                abs(measured.approx_estimate - measured.tokens_with_anchors) * 100 / measured.tokens_with_anchors
            )
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
            "layout": "documents",
            "source": {**self.source, "documents": len(self.tickets)},
            "tokenizer": {
                "name": self.tokenizer.name,
                "exact": self.tokenizer.exact,
                "note": TOKENIZER_NOTES[self.tokenizer.name],
                "approx_error_percent": self._approx_error(with_anchors),
            },
            "overhead": {
                "tokens_with_anchors": with_anchors,
                "tokens_without_anchors": without_anchors,
                "anchor_tokens": with_anchors - without_anchors,
                "percent": _round(_overhead_percent(with_anchors, without_anchors)) if self.tickets else None,
                "per_ticket_percent": {
                    key: _round(percentile(percents, p)) for key, p in (("p50", 50), ("p90", 90), ("max", 100))
                },
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
                    side: {"tokens": counts.longest_run_tokens, "ticket_id": counts.longest_run_ticket_id}
                    for side, counts in self.gap.items()
                },
            },
            "chunking": [
                {
                    "chunker": level.chunker.name,
                    "level": level.level,
                    "spec": chunking.spec_of(level.chunker),
                    "unit": "characters" if chunking.is_text_chunker(level.chunker) else "tokens",
                    "note": chunking.chunker_note(level.chunker),
                    "anchored": level.anchored.to_json(),
                    "stripped": level.stripped.to_json(),
                }
                for level in self.levels
            ],
            "efficiency": self._efficiency(),
            "chunk_lengths": {
                "documents": "rendered at each length"
                if any(self.lengths.table) and self.source.get("kind") == "snapshot"
                else "as they are",
                "overlap_percent": TABLE_OVERLAP_PERCENT,
                "rows": [totals.to_json() for totals in self.table],
            },
            "limits": {
                name: {"count": finding.count, "items": finding.items} for name, finding in self.findings.items()
            },
            "errors": [{"path": error.path, "message": error.message} for error in self.errors],
        }

    def _efficiency(self) -> dict[str, Any]:
        """The anchors' cost beside the lower bound, in total and per ticket."""
        ratios = [
            ratio
            for ticket in self.placements
            if (ratio := _ratio(ticket.placement.anchor_tokens, ticket.placement.bound_tokens or 0)) is not None
        ]
        worst = sorted(self.placements, key=lambda ticket: (-ticket.excess_tokens, ticket.ticket_id))[:TOP_TICKETS]
        return {
            **self.placement.to_json(),
            "per_ticket_ratio": {
                key: _round(percentile(ratios, p)) for key, p in (("p50", 50), ("p90", 90), ("max", 100))
            },
            "top": [ticket.to_json() for ticket in worst if ticket.excess_tokens > 0],
        }

    def _approx_error(self, exact_total: int) -> dict[str, float | None] | None:
        if not self.tokenizer.exact or not exact_total:
            return None
        return {
            "total": _round((self.approx_total - exact_total) * 100 / exact_total),
            "mean_absolute": _round(self.approx_abs_error_percent / len(self.tickets)),
        }


def histogram(percents: Sequence[float]) -> dict[str, Any]:
    counts = [0] * (HISTOGRAM_BINS + 1)
    for value in percents:
        counts[min(max(int(value // HISTOGRAM_BIN_PERCENT), 0), HISTOGRAM_BINS)] += 1
    bins = [
        {
            "from": i * HISTOGRAM_BIN_PERCENT,
            "to": (i + 1) * HISTOGRAM_BIN_PERCENT if i < HISTOGRAM_BINS else None,
            "count": count,
        }
        for i, count in enumerate(counts)
    ]
    return {"bin_width_percent": HISTOGRAM_BIN_PERCENT, "bins": bins}


def _overhead_percent(with_anchors: int, without_anchors: int) -> float:
    return (with_anchors - without_anchors) * 100 / without_anchors if without_anchors else 0.0


def _percent(part: int, whole: int) -> float | None:
    return _round(part * 100 / whole) if whole else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
