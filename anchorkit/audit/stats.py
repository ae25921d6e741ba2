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

This module runs the audit (sources → measure → collect) and checks the CI gates; :func:`run_audit` is
`anchorkit stats` from its settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from anchorkit import __version__, parallel
from anchorkit.audit import chunkers as chunking
from anchorkit.audit.chunk_layouts import CHUNK_KINDS, chunk_kind, iter_chunks, measure_chunks, read_lambda_log
from anchorkit.audit.chunkers import Chunker
from anchorkit.audit.collect import SCHEMA_NAME, SCHEMA_VERSION, TOKENIZER_NOTES, StatsCollector
from anchorkit.audit.measure import Lengths, Measurer, collector_paused
from anchorkit.audit.rendering import found_rendering, snapshot_rendering
from anchorkit.audit.sources import (
    SourceItem,
    UnreadableDocument,
    count_documents,
    is_snapshot,
    iter_output_folder,
    iter_snapshot,
)
from anchorkit.errors import UsageError
from anchorkit.files import shown
from anchorkit.render.document import DEFAULT_CHUNK_TOKENS
from anchorkit.render.private_marks import private_content_evidence
from anchorkit.render.transform import TransformOptions
from anchorkit.settings import TRANSFORM, default, option_name, resolve_here
from anchorkit.tokens import TOKENIZER_CHOICES, Tokenizer, choose_tokenizer
from anchorkit.untrusted import ascii_number

# What stats renders a snapshot with where transform's settings would say otherwise (None: transform's).
_SNAPSHOT_OPTIONS = ("anchor_basic_info", "anchor_subject_chars", "max_text_bytes")

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
    jobs: int = default("jobs"),
    lengths: Lengths = Lengths(),
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The whole audit over documents from ``iter_output_folder`` or ``iter_snapshot``.

    ``jobs`` > 1 measures batches in that many worker processes; the report is the same (batches
    come back in input order). ``jobs`` = 0: one process per CPU core once there is more than one
    batch of ``parallel.DEFAULT_BATCH_SIZE`` documents (a small corpus is not worth starting processes for).
    ``progress(done)`` is called after each document.
    """
    # An audit record names its input wherever it is read later: the folder's absolute path.
    source = {**source, "path": shown(os.path.abspath(source["path"]))}
    collector = StatsCollector(tokenizer, chunkers, source, lengths)
    measured = parallel.map_batches(
        Measurer.measure_batch, items, jobs, setup=Measurer, args=(tokenizer, chunkers, lengths)
    )
    with collector_paused():
        for done, item in enumerate(measured, start=1):
            collector.add(item)
            if progress is not None:
                progress(done)
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


def parse_lengths(text: str) -> tuple[int, ...]:
    """``--lengths``: ``256,300,512`` (ascending, duplicates dropped) or ``none``."""
    if text.strip().lower() == "none":
        return ()
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all((ascii_number(part) or 0) > 0 for part in parts):
        raise UsageError(
            f"--lengths must be positive token counts separated by commas (e.g. 256,300,512,1024) or none, not {text!r}"
        )
    return tuple(sorted({int(part) for part in parts}))


def run_audit(
    path: Path,
    values: Mapping[str, Any],
    progress: Callable[[int, int], None] | None = None,
    flags: Collection[str] | None = None,
) -> dict[str, Any]:
    """`anchorkit stats PATH` from stats' settings: the options checked (a usage error, exit 2, for a bad
    one), the documents of an output folder or a snapshot rendered in memory (or chunks as they are:
    ``audit_chunk_layout``), the audit, what made the documents measured (``rendering``), and the run's date,
    version and verdict (``ok``).
    ``progress(done, total)`` is called after each document.

    ``flags``: the settings given on the command line. Only those are refused where they do not apply (a
    snapshot option on an output folder, a documents option on chunks); one from the environment or the
    config file, which keep the options of every run (transform's --anchor-subject-chars among them), is
    left unused there. None: every value given counts as a flag."""
    if not path.exists():
        raise UsageError(f"{path}: not a folder, nor a chunk or log file (no such path)")
    tiktoken_file = values["tiktoken_file"]
    if values["tokenizer"] not in TOKENIZER_CHOICES:
        raise UsageError(f"--tokenizer must be one of {', '.join(TOKENIZER_CHOICES)}, not {values['tokenizer']!r}")
    kind = chunk_kind(path)
    if kind is not None:
        return _finished(audit_chunk_layout(path, kind, values, flags))
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder (expected a transform output folder or a snapshot)")
    chunk_tokens = values["chunk_tokens"]
    # The chunkers cut what the knowledge base cuts: --chunk-tokens, unless a --chunking SPEC says otherwise.
    chunk_length = chunk_tokens or DEFAULT_CHUNK_TOKENS
    try:
        specs = values["chunking"]
        chunkers = (
            [chunking.parse_chunker_spec(spec, chunk_length) for spec in specs]
            if specs
            else chunking.default_chunkers(chunk_length)
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    tokenizer = choose_tokenizer(values["tokenizer"], tiktoken_file)  # TokenizerUnavailable: exit 2
    table = parse_lengths(values["lengths"])
    given = {name: values[name] for name in _SNAPSHOT_OPTIONS if values[name] is not None}
    source: dict[str, Any] = {"path": str(path)}
    items: Iterable[SourceItem]
    if is_snapshot(path):
        # Rendered as transform would render it here: with transform's settings (environment, config file) for
        # what stats has no option of (lang, label, spacing anchors, text format, private content, ...), which
        # change the anchors and so every figure; stats' own for the rest. Spacing anchors are counted with the
        # audit's own tokenizer.
        settings = resolve_here(TRANSFORM, {}).values | given
        settings |= {"chunk_tokens": chunk_tokens, "sidecars": True, "tokenizer": tokenizer.name}
        options = TransformOptions.from_settings(settings | {"tiktoken_file": tiktoken_file})
        render = options.render
        items = iter_snapshot(path, options, [length for length in table if length != chunk_tokens])
        transform = {
            "chunk_tokens": chunk_tokens,
            "anchor_subject_chars": render.anchor_subject_chars,
            "anchor_basic_info": render.anchor_basic_info,
        }
        source |= {"kind": "snapshot", "transform": transform}
        rendering = snapshot_rendering(options)
    elif misplaced := _given_as_flags(values, _SNAPSHOT_OPTIONS, flags):
        raise UsageError(
            f"{', '.join(map(option_name, misplaced))}: options that apply to snapshot input only "
            "(an output folder is already anchored)"
        )
    else:
        items = iter_output_folder(path)
        source |= {"kind": "output", "transform": None}
        rendering = found_rendering(private_content_evidence(path))
    gates = Gates(values["fail_under_coverage"], values["fail_over_overhead"])
    lengths = Lengths(chunk_length, table)
    total, seen = count_documents(path), 0

    def counted(done: int) -> None:
        nonlocal seen
        seen = done
        if progress is not None:
            progress(done, max(done, total))

    report = audit(items, tokenizer, chunkers, source, gates, values["jobs"], lengths, counted)
    if progress is not None:
        progress(seen, seen)  # a snapshot's private issues are never measured: the count ends where the work did
    report["rendering"] = rendering
    return _finished(report)


def _given_as_flags(values: Mapping[str, Any], names: Sequence[str], flags: Collection[str] | None) -> list[str]:
    """Which of the settings ``names`` were given (as flags, when ``flags`` says which were: ``run_audit``)."""
    return [name for name in names if values[name] not in (None, []) and (flags is None or name in flags)]


def _finished(report: dict[str, Any]) -> dict[str, Any]:
    """The report with the run's date and version, and its verdict."""
    report["run"] = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "anchorkit_version": __version__,
    }
    report["ok"] = not report["errors"] and not report["gates"]["failures"]
    return report


def audit_chunk_layout(
    path: Path, kind: str, values: Mapping[str, Any], flags: Collection[str] | None = None
) -> dict[str, Any]:
    """The report on chunks as they are (``chunk_layouts``): ``kind`` says what ``path`` holds.

    Options about documents (snapshot rendering, --fail-over-overhead, the chunkers to emulate) given as flags
    (``run_audit``) are a usage error here: ignored, a --chunking SPEC would look measured. A bad --lengths is
    one too, as it is on documents, though the table is not made for chunks."""
    names = (*_SNAPSHOT_OPTIONS, "fail_over_overhead", "chunking")
    misplaced = [option_name(name) for name in _given_as_flags(values, names, flags)]
    if misplaced:
        raise UsageError(f"{', '.join(misplaced)}: documents only ({path} holds {kind.replace('-', ' ')})")
    parse_lengths(values["lengths"])
    tokenizer = choose_tokenizer(values["tokenizer"], values["tiktoken_file"])  # TokenizerUnavailable: exit 2
    chunk_tokens = values["chunk_tokens"] or DEFAULT_CHUNK_TOKENS
    report: dict[str, Any] = {
        "schema": SCHEMA_NAME,
        "version": SCHEMA_VERSION,
        "layout": CHUNK_KINDS[kind],
        "source": {"path": shown(os.path.abspath(path)), "kind": kind},
        "rendering": found_rendering(private_content_evidence(path)),
        "tokenizer": {
            "name": tokenizer.name,
            "exact": tokenizer.exact,
            "note": TOKENIZER_NOTES[tokenizer.name],
            "approx_error_percent": None,
        },
    }
    errors: list[UnreadableDocument] = []
    if kind == "lambda-log":
        report["lambda"], errors = read_lambda_log(path)
        coverage = report["lambda"]["coverage_percent"]
        measured = report["lambda"]["chunks_out"]
    else:
        report["chunks"], errors = measure_chunks(iter_chunks(path, kind), tokenizer, chunk_tokens)
        coverage, measured = report["chunks"]["coverage_percent"], report["chunks"]["chunks"]
    report["source"]["chunks"] = measured
    report["errors"] = [{"path": error.path, "message": error.message} for error in errors]
    gate = values["fail_under_coverage"]
    failures = []
    if gate is not None and not measured:
        failures.append(f"no chunks to measure in {path}: the gates cannot pass")
    elif gate is not None and coverage is not None and coverage < gate:
        failures.append(f"chunks as they are: coverage {coverage}% is under {gate}%")
    report["gates"] = {"fail_under_coverage": gate, "fail_over_overhead": None, "failures": failures}
    return report
