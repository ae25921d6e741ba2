"""The audit: what the anchors cost in tokens, and how many chunks keep their ticket ID.

It counts, over every document:

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

This module runs the audit (sources → measure → collect) and checks the CI gates.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from anchorkit import parallel
from anchorkit.audit.chunkers import (
    Chunker,
)
from anchorkit.audit.collect import StatsCollector
from anchorkit.audit.measure import Lengths, Measured, Measurer
from anchorkit.audit.sources import SourceItem
from anchorkit.tokens import Tokenizer

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
    tokenizer: Tokenizer,
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
    collector = StatsCollector(tokenizer, chunkers, source, lengths)
    measured = parallel.map_batches(
        _measure_in_worker, items, jobs, initializer=_start_worker, initargs=(tokenizer, chunkers, lengths)
    )
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
                failures.append(
                    f"{row['chunker']} ({row['level']}): coverage {coverage}% is under {gates.min_coverage_percent}%"
                )
    overhead = report["overhead"]["percent"]
    if gates.max_overhead_percent is not None and overhead is not None and overhead > gates.max_overhead_percent:
        failures.append(f"token overhead {overhead}% is over {gates.max_overhead_percent}%")
    return failures
