"""What the commands print: one JSON document on stdout (``--json``), or the human summary through rich on
stdout, problems (``failed:``, ``warning:`` …) on stderr, progress bars on stderr when it is a terminal.

Only printing lives here: every report is made by the library and handed in whole.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from anchorkit.pages import plural  # small: safe to load at start-up
from anchorkit.untrusted import printable

if TYPE_CHECKING:  # the library loads with the command that uses it, not at start-up
    from pathlib import Path

    from anchorkit.chunk.writers import ChunkReport
    from anchorkit.publish import upload as publishing
    from anchorkit.render import transform as transforming
    from anchorkit.source import pull as pulling
    from anchorkit.sync import StatelessSyncReport, StatePullReport, StateView, SyncProgress
    from anchorkit.verify import EvalSummary, VerifyReport
    from anchorkit.verify.inject import InjectReport


class PipeConsole(Console):
    """rich's Console, but a closed pipe is not its to end the run on (rich exits 1 at once): the error goes up
    to the one place that ends a run on it (``cli.app.stdout_settled``), as from any other write."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


# soft_wrap: never break a long line (paths, keys) in two; scripts grep this output. emoji off: rich would
# make an emoji of any ":name:" in a line, "answers.jsonl:100: …" a 💯 and a chunk id ":thumbs_up:" a 👍.
console = PipeConsole(soft_wrap=True, emoji=False)
err_console = PipeConsole(stderr=True, soft_wrap=True, emoji=False)


# ------------------------------------------------------------------------------------------------
# -v / -q: what is retried and why, or nothing but errors

log = logging.getLogger("anchorkit")


class ProblemHandler(logging.Handler):
    """anchorkit's log records (retries: what and why) as ``retry: ...`` lines on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print_problem("retry", record.getMessage())


log.addHandler(ProblemHandler())
log.propagate = False


def set_verbosity(*, verbose: bool, quiet: bool) -> None:
    """-v: log retries; -q: no summary on stdout and no warnings (see print_problem); errors always."""
    log.setLevel(logging.INFO if verbose else logging.WARNING)
    console.quiet = quiet


def verbose_callback(value: bool) -> bool:
    if value:
        log.setLevel(logging.INFO)
    return value


def quiet_callback(value: bool) -> bool:
    if value:
        set_verbosity(verbose=log.level == logging.INFO, quiet=True)
    return value


# ------------------------------------------------------------------------------------------------
# Progress: a bar on stderr while long work runs, on a terminal only

ProgressCallback = Callable[[int, int], None]  # (done, total): what a library function reports to


def progress_wanted(requested: bool) -> bool:
    """The one choke point of every bar: asked for (no --json), not -q, stderr is a terminal, and not a CI
    job (``CI`` set: the log gets the summary alone, never bar characters)."""
    return requested and not console.quiet and err_console.is_terminal and not os.environ.get("CI")


def new_progress(requested: bool, *counts: ProgressColumn, transient: bool = True) -> Progress:
    """A rich Progress on stderr: what, a bar, ``counts``, time elapsed and the ETA."""
    return Progress(
        TextColumn("{task.description:<10}"),
        BarColumn(),
        *counts,
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        disable=not progress_wanted(requested),
        transient=transient,  # the summary follows; a finished bar would only repeat it
    )


@contextlib.contextmanager
def progress_bar(description: str, unit: str, requested: bool = True) -> Iterator[ProgressCallback]:
    """A bar counting ``unit`` (``120/34,000 tickets``); yields the callback the library reports to. A
    command with long work needs two lines, e.g.::

        with output.progress_bar("chunking", "documents", not json_output) as on_progress:
            report = chunk_folder(folder, options, progress=on_progress)
    """
    progress = new_progress(requested, MofNCompleteColumn(), TextColumn(unit))
    task = progress.add_task(description, total=None)

    def on_progress(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    with progress:
        yield on_progress


UploadProgress = tuple[Callable[["publishing.Plan"], None], Callable[["publishing.OperationResult"], None]]


@contextlib.contextmanager
def upload_progress(requested: bool) -> Iterator[UploadProgress]:
    """The bar of an upload (objects and bytes); yields the callbacks `publishing.upload` reports to."""
    bytes_done = TextColumn("{task.fields[done_bytes]:,}/{task.fields[total_bytes]:,} bytes")
    progress = new_progress(requested, MofNCompleteColumn(), TextColumn("objects"), bytes_done, transient=False)
    task = progress.add_task("publishing", total=None, done_bytes=0, total_bytes=0)
    done_bytes = 0

    def on_plan(plan: publishing.Plan) -> None:
        progress.update(task, total=len(plan.uploads) + len(plan.deletes), total_bytes=plan.upload_bytes)

    def on_result(result: publishing.OperationResult) -> None:
        nonlocal done_bytes
        done_bytes += result.bytes
        progress.update(task, advance=1, done_bytes=done_bytes)

    with progress:
        yield on_plan, on_result


@contextlib.contextmanager
def sync_progress(requested: bool) -> Iterator[SyncProgress]:
    """One bar per stage of a sync (pulling, rendering, uploading)."""
    progress = new_progress(requested, MofNCompleteColumn())
    tasks: dict[str, Any] = {}

    def on_progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=total)
        progress.update(tasks[stage], completed=done, total=total)

    with progress:
        yield on_progress


def print_json(payload: Any, file: TextIO | None = None) -> None:
    """Machine-readable output: one JSON document on stdout (or ``file``), keys sorted for stable diffs."""
    (file or sys.stdout).write(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


_PROBLEM_COLOURS = {
    "retry": "cyan",
    "error": "red",
    "failed": "red",
    "refused": "red",
    "gate failed": "red",
    "warning": "yellow",
    "stopped": "yellow",
    "note": "yellow",
}


def print_problem(kind: str, message: str) -> None:
    """``failed: ...`` and the like on stderr. The message is data (paths, keys, server texts): escaped,
    so that a ``[...]`` in it is neither taken for markup nor dropped."""
    if console.quiet and kind in ("warning", "note"):  # -q
        return
    colour = _PROBLEM_COLOURS[kind]
    err_console.print(f"[{colour}]{kind}:[/{colour}] {escape(printable(message))}", highlight=False)


def print_ingestion_job(job: dict[str, str] | None) -> None:
    if job:
        console.print(f"ingestion job {job['ingestion_job_id']} ({job['status']})", highlight=False, markup=False)


def _print_problems_and_changes(
    report: transforming.TransformReport, out: Path | None, check: bool, on: Console
) -> None:
    """A transform-like report's warnings and failures, and with ``check`` what would change under ``out``."""
    for warning in report.warnings:
        print_problem("warning", warning)
    for failure in report.failed:
        print_problem("failed", failure.message)
    if check and out is not None:
        for verb, paths in (
            ("would create", report.created),
            ("would change", report.changed),
            ("would remove", report.removed),
        ):
            for path in paths:
                on.print(f"{verb} {out / path}", highlight=False, markup=False)


def print_transform_report(report: transforming.TransformReport, out: Path, check: bool) -> None:
    _print_problems_and_changes(report, out, check, console)
    if check:
        state = "differs from the snapshot" if report.differs else "is up to date"
        console.print(
            f"check: {out} {state} ({plural(report.tickets, 'ticket')}, {len(report.failed)} failed)", highlight=False
        )
        return
    console.print(
        f"transform: {plural(report.tickets, 'ticket')} → {out}: {len(report.created)} created, "
        f"{len(report.changed)} changed, "
        f"{report.unchanged} unchanged, {len(report.removed)} removed, {len(report.failed)} failed, "
        f"{report.private_skipped} private skipped in {report.seconds:.2f} s",
        highlight=False,
    )


def print_chunk_report(report: ChunkReport, target: str, folder: Path | None, check: bool) -> None:
    """chunk's summary of what it wrote to ``target`` (the files named in the report are in ``folder``), on
    stdout; on stderr when the chunks went to stdout (``folder`` None), and then nothing with -q."""
    on = console if folder is not None or console.quiet else err_console
    _print_problems_and_changes(report, folder, check, on)
    counts = f"{plural(report.tickets, 'ticket')}, {plural(report.chunks, 'chunk')}"
    if check:
        state = "differs from the source" if report.differs else "is up to date"
        on.print(f"check: {target} {state} ({counts}, {len(report.failed)} failed)", highlight=False, markup=False)
        return
    on.print(
        f"chunk: {counts} → {target}: {len(report.created)} created, {len(report.changed)} changed, "
        f"{report.unchanged} unchanged, {len(report.removed)} removed, {len(report.failed)} failed, "
        f"{report.private_skipped} private skipped in {report.seconds:.2f} s",
        highlight=False,
        markup=False,
    )


SHOWN_UPLOAD_KEYS = 10  # a first upload plans thousands; deletes are always listed in full


def print_planned_keys(planned_keys: dict[str, list[str]], list_keys: bool, how_to_see_all: str) -> None:
    """A dry run's keys: every delete (the part to review before it happens), the first uploads or all."""
    uploads = planned_keys["upload"]
    shown = uploads if list_keys else uploads[:SHOWN_UPLOAD_KEYS]
    for key in shown:
        console.print(f"  upload {key}", highlight=False, markup=False)
    if len(shown) < len(uploads):
        console.print(
            f"  … and {plural(len(uploads) - len(shown), 'more upload')} ({how_to_see_all})",
            highlight=False,
            markup=False,
        )
    for key in planned_keys["delete"]:
        console.print(f"  delete {key}", highlight=False, markup=False)


def print_publish_report(report: publishing.PublishReport, json_output: bool, list_keys: bool = False) -> None:
    if json_output:
        print_json(report.to_json())
        return
    summary = report.to_json()
    planned = summary["planned"]
    if report.dry_run:
        console.print(
            f"plan for {report.destination}: upload {planned['upload']} ({plural(planned['upload_bytes'], 'byte')}), "
            f"skip {planned['skip']}, delete {planned['delete']}"
            + (f", {planned['stale_kept']} stale kept (no --delete)" if planned["stale_kept"] else ""),
            highlight=False,
            markup=False,
        )
        print_planned_keys(summary["planned_keys"], list_keys, "--list-keys prints them all")
    else:
        console.print(
            f"{report.destination}: uploaded {summary['uploaded']}, skipped {summary['skipped']}, "
            f"deleted {summary['deleted']}, failed {summary['failed']}, {plural(summary['bytes'], 'byte')} "
            f"in {summary['seconds']:.1f} s",
            highlight=False,
            markup=False,
        )
        if planned["stale_kept"]:
            console.print(
                f"{plural(planned['stale_kept'], 'stale object')} kept (pass --delete to remove them)", highlight=False
            )
    print_ingestion_job(report.ingestion_job)
    if report.refused:
        print_problem("refused", report.refused)
    for failure in report.failures:
        print_problem("failed", f"{failure.key}: {failure.error}")


def print_pull_report(report: pulling.PullReport, json_output: bool) -> None:
    if json_output:
        print_json(report.to_json())
        return
    console.print(
        f"{'full' if report.full else 'incremental'} pull{', every issue fetched again' if report.refetched else ''}: "
        f"listed {report.listed}, fetched {report.fetched}, "
        f"unchanged {report.unchanged}, removed {report.removed}, private skipped {report.skipped_private}, "
        f"failed {len(report.failed)}; {plural(report.requests, 'request')} "
        f"({plural(report.retries, 'retry', 'retries')}) "
        f"in {report.seconds:.1f} s",
        highlight=False,
    )
    for warning in report.warnings:
        print_problem("warning", warning)
    for error in report.errors:  # a listing page that failed: exit 1, the rest was done
        print_problem("failed", error)
    for failure in report.failed:
        print_problem("failed", f"#{failure.issue_id}: {failure.reason}")
    if report.failed:
        err_console.print(f"failed issue ids: {' '.join(map(str, report.failed_ids))}", highlight=False)


def print_verify_report(report: VerifyReport, origin: str | None = None) -> None:
    """The filtered answer on stdout, alone (``verify … > filtered.txt``: the product of the command): its
    summary, its text, its kept claims (numbered as in the answer) with their quotes, its kept results.
    The findings, the dropped claims and the summary line on stderr (nothing with -q). With ``origin``
    (one answer of many), stdout marks where each answer starts and stderr names it on every line.

    Untrusted text (answers, chunks) is written without its control characters (no escape sequence of
    an answer reaches the terminal), never through rich's markup, and in one write: a huge answer costs
    what the --json output costs."""
    filtered = report.filtered_answer
    product = [f"== {origin}"] if origin else []
    product += [filtered[key].rstrip("\n") for key in ("summary", "text") if filtered[key]]
    notes = [f"{f.severity} {f.kind} ({f.where}): {f.message}" for f in report.findings]
    kept = iter(filtered["claims"])
    for index, claim in enumerate(report.answer.claims):
        if index in report.dropped_claims:
            notes.append(f"dropped claim {index + 1}: {claim.text}")
            continue
        shown = next(kept)
        sources = ", ".join(c["source_id"] for c in shown["citations"])
        product.append(f"{index + 1}. {shown['text']}" + (f" [{sources}]" if sources else ""))
        product += [f"   > {c['quoted_span']}" for c in shown["citations"] if c["quoted_span"]]
    product += [json.dumps(result, ensure_ascii=False, sort_keys=True) for result in filtered["results"]]
    notes.append(
        f"verify: grounding score {report.grounding_score:.2f}, {report.critical} critical, "
        f"{plural(report.warnings, 'warning')}, "
        f"valid ids: {' '.join(f'#{i}' for i in sorted(report.valid_ids)) or 'none'}"
    )
    sys.stdout.write(printable("\n".join(product) + "\n"))
    if not console.quiet:
        prefix = f"{origin}: " if origin else ""
        sys.stderr.write(printable("".join(f"{prefix}{line}\n" for line in notes)))


def print_eval_summary(summary: EvalSummary) -> None:
    """The unreadable case lines on stderr; each case and the metrics on stdout (nothing with -q)."""
    for error in summary.errors:  # that case line failed (exit 1); the others were evaluated
        print_problem("failed", error)
    if console.quiet:
        return

    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = []
    for result in summary.results:
        kinds = ", ".join(sorted({f.kind for f in result.report.findings})) or "no findings"
        cited = " ".join(f"#{i}" for i in sorted(result.report.cited_ids)) or "-"
        lines.append(f"{result.case.case_id}: grounding {result.report.grounding_score:.2f}, cited {cited}: {kinds}")
    lines.append(
        f"eval: {plural(len(summary.results), 'case')}, {len(summary.errors)} unreadable; "
        f"mean grounding {shown(summary.mean_grounding)}, "
        f"phantom rate {shown(summary.phantom_rate)}, source recall {shown(summary.source_recall)} by ticket, "
        f"{shown(summary.source_id_recall)} by source id, citation precision {shown(summary.citation_precision)}"
    )
    sys.stdout.write(printable("\n".join(lines) + "\n"))


def print_inject_summary(report: InjectReport, file: TextIO) -> None:
    """inject's summary on ``file`` (stderr when the retrieval goes to stdout); nothing with -q."""
    if console.quiet:
        return
    lines = [f"{o.status} [{o.position}] {o.chunk_id}: {o.message}" for o in report.outcomes if o.message]
    lines += [f"note: {note}" for note in report.notes]
    counts = report.to_json()["counts"]
    lines.append(
        f"inject: {plural(len(report.outcomes), 'chunk')} ({report.shape}): {counts['anchored']} anchored, "
        f"{counts['already_anchored']} already anchored, "
        f"{counts['unknown_ticket']} unknown ticket, {plural(counts['conflict'], 'metadata/URI conflict')}, "
        f"{counts['empty']} empty"
    )
    file.write(printable("\n".join(lines) + "\n"))


def print_stats_report(report: dict[str, Any]) -> None:
    from anchorkit.audit import rendering
    from anchorkit.audit.chunk_layouts import summary_lines
    from anchorkit.audit.html import LIMIT_LABELS, format_percent

    tokenizer = report["tokenizer"]
    rendering_line = f"rendering: {rendering.describe(report['rendering'])}"
    for error in report["errors"]:  # that document failed (exit 1); the others were measured
        print_problem("failed", error["message"])
    if report["layout"] != "documents":  # chunks as they are
        heading, *lines = summary_lines(report)
        for line in (heading, rendering_line, *lines):  # chunk ids and file names are the input's: no escape passes
            console.print(printable(line), highlight=False, markup=False)
        chunks = report.get("chunks")
        if chunks is not None and not chunks["chunks"] and not report["errors"] and not report["gates"]["failures"]:
            print_problem("note", f"no chunks found in {report['source']['path']}")
        for failure in report["gates"]["failures"]:
            print_problem("gate failed", failure)
        return
    overhead, source = report["overhead"], report["source"]
    per_ticket = overhead["per_ticket_percent"]
    console.print(
        f"stats: {plural(source['documents'], 'document')} ({source['kind']} {source['path']}), "
        f"tokenizer {tokenizer['name']}",
        highlight=False,
        markup=False,
    )
    console.print(printable(rendering_line), highlight=False, markup=False)  # a label is the config's text
    console.print(
        f"overhead: {plural(overhead['anchor_tokens'], 'anchor token')} on {overhead['tokens_without_anchors']:,} = "
        f"{format_percent(overhead['percent'])}; per ticket p50 {format_percent(per_ticket['p50'])}, "
        f"p90 {format_percent(per_ticket['p90'])}, max {format_percent(per_ticket['max'])}",
        highlight=False,
    )
    table = Table(title="chunks that identify their own ticket", box=box.SIMPLE)
    longest_name = max((len(f"{row['chunker']}/{row['level']}") for row in report["chunking"]), default=7)
    table.add_column("chunker", no_wrap=True, min_width=longest_name)
    # Short headers keep the table narrow; docs/stats.md explains each one. "chunk run": the longest
    # run of consecutive chunks none of which names its ticket, in tokens.
    for header in ("chunks", "anchored", "no anchors", "mentions", "chunk run"):
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    for row in report["chunking"]:
        anchored, stripped = row["anchored"], row["stripped"]
        table.add_row(
            f"{row['chunker']}/{row['level']}",
            f"{anchored['chunks']:,}",
            format_percent(anchored["coverage_percent"]),
            format_percent(stripped["coverage_percent"]),
            format_percent(anchored["mentioning_other_percent"]),
            f"{anchored['longest_unidentified_run_tokens']:,}",
        )
    console.print(table)
    print_efficiency(report["efficiency"])
    print_length_table(report["chunk_lengths"])
    problems = {name: finding["count"] for name, finding in report["limits"].items() if finding["count"]}
    console.print(
        "limits: "
        + (
            ", ".join(f"{LIMIT_LABELS.get(name, name)}: {count:,}" for name, count in problems.items())
            or "all within limits"
        ),
        highlight=False,
        markup=False,
    )
    if not source["documents"] and not report["gates"]["failures"]:
        print_problem("note", f"no documents found in {source['path']}")
    for failure in report["gates"]["failures"]:
        print_problem("gate failed", failure)


def print_efficiency(efficiency: dict[str, Any]) -> None:
    from anchorkit.audit.html import format_percent, format_ratio

    ratios = efficiency["per_ticket_ratio"]
    too_long = efficiency["documents_anchor_too_long"]
    console.print(
        f"efficiency at {efficiency['chunk_tokens']:,}-token chunks: "
        f"{plural(efficiency['anchor_tokens'], 'anchor token')} "
        f"in {plural(efficiency['anchors'], 'anchor')} ({format_percent(efficiency['overhead_percent'])}); "
        f"lower bound {plural(efficiency['bound_tokens'], 'token')} in {plural(efficiency['bound_anchors'], 'anchor')} "
        f"({format_percent(efficiency['bound_overhead_percent'])}) = {format_ratio(efficiency['ratio_to_bound'])} "
        f"the bound; per ticket p50 {format_ratio(ratios['p50'])}, p90 {format_ratio(ratios['p90'])}, "
        f"max {format_ratio(ratios['max'])}"
        + (f"; {plural(too_long, 'document')} whose anchor is too long for the window" if too_long else ""),
        highlight=False,
        markup=False,
    )


def print_length_table(lengths: dict[str, Any]) -> None:
    from anchorkit.audit.html import format_percent, format_ratio

    if not lengths["rows"]:
        return
    table = Table(
        title=f"chunk lengths: fixed windows sharing {lengths['overlap_percent']}%, documents {lengths['documents']}",
        box=box.SIMPLE,
    )
    # "stretch": the longest stretch of tokens without the ticket ID in any document made for that length.
    for header in ("chunk tokens", "coverage", "overhead", "bound", "x bound", "stretch"):
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    for row in lengths["rows"]:
        table.add_row(
            f"{row['chunk_tokens']:,}",
            format_percent(row["coverage_percent"]),
            format_percent(row["overhead_percent"]),
            format_percent(row["bound_overhead_percent"]),
            format_ratio(row["ratio_to_bound"]),
            f"{row['longest_anchorless_run']['tokens']:,}",
        )
    console.print(table)


def print_stateless_sync_report(report: StatelessSyncReport, json_output: bool, list_keys: bool = False) -> None:
    if json_output:
        print_json(report.to_json())
        return
    for pull_report in report.pulls:
        print_pull_report(pull_report, json_output=False)
    if report.dry_run and report.plan is not None:
        print_sync_plan(report, list_keys)
    else:
        regenerated = regenerated_because(report)
        written, unchanged = report.state_issues_written, report.state_issues_unchanged
        raw = f"; raw issues stored {written}{unchanged_raw(unchanged)}" if written or unchanged else ""
        console.print(
            f"{report.destination}: rendered {report.rendered}{regenerated}, "
            f"uploaded {len(report.uploaded)}, deleted {len(report.deleted)}, failed {len(report.failures)}; "
            f"state {report.state}: {'committed' if report.state_written else 'unchanged'} "
            f"({plural(report.tickets, 'ticket')}{raw}) "
            f"in {report.seconds:.1f} s",
            highlight=False,
            markup=False,
        )
    print_ingestion_job(report.ingestion_job)
    for warning in report.warnings:
        print_warning(warning)
    if report.refused:
        print_problem("refused", report.refused)
    for ticket in report.transform_failures:
        print_problem("failed", ticket.message)
    for failure in report.failures:
        print_problem("failed", f"{failure.key}: {failure.error}")


def regenerated_because(report: StatelessSyncReport) -> str:
    """Why the run rendered every document again, when it did."""
    return f" (all: {report.regenerated_because})" if report.regenerated_because else ""


def unchanged_raw(count: int) -> str:
    """The raw issues a `sync --state` fetched again whose bytes the state holds already, when there are any."""
    return f" ({count:,} fetched again unchanged, not rewritten)" if count else ""


def print_sync_plan(report: StatelessSyncReport, list_keys: bool = False) -> None:
    """`sync --state --dry-run`: what the run would write, nothing of which was."""
    assert report.plan is not None
    planned = report.plan.summary()
    cursor = planned["cursor"]
    console.print(
        f"plan for {report.destination} (dry run, nothing written): rendered {report.rendered}"
        f"{regenerated_because(report)}, upload {planned['upload']} "
        f"({planned['upload_bytes']:,} bytes), delete {planned['delete']}"
        + (f", {planned['gone_kept']} of gone issues kept (no --delete)" if planned["gone_kept"] else "")
        + f"; state {report.state}: store {plural(planned['store_issues'], 'raw issue')}"
        f"{unchanged_raw(planned['unchanged_issues'])}, drop {planned['drop_issues']}, "
        f"cursor {cursor['from'] or '(none)'} -> {cursor['to'] or '(none)'}, "
        f"{'would be committed' if planned['state_rewritten'] else 'unchanged'}",
        highlight=False,
        markup=False,
    )
    print_planned_keys(planned["planned_keys"], list_keys, "--list-keys prints them all")


def print_state_pull_report(report: StatePullReport, json_output: bool) -> None:
    if json_output:
        print_json(report.to_json())
        return
    if report.pull_report is not None:
        print_pull_report(report.pull_report, json_output=False)
    console.print(
        f"state {report.state}: restored {plural(report.restored, 'issue')} into {report.snapshot}, stored "
        f"{report.state_issues_written}, dropped {report.state_issues_deleted}; "
        f"{'committed' if report.state_written else 'unchanged'} ({plural(report.tickets, 'ticket')}) "
        f"in {report.seconds:.1f} s",
        highlight=False,
        markup=False,
    )
    for failure in report.failures:
        print_problem("failed", f"{failure.key}: {failure.error}")


def print_state_view(view: StateView) -> None:
    """`state show` for a person: scope, cursor, ticket counts, and the lease."""
    manifest, lease = view.manifest, view.lease
    counts = manifest.counts()
    lines = [
        f"state {view.state}" + ("" if view.exists else " (empty: no run committed yet)"),
        f"scope: {manifest.scope.describe() if manifest.scope else '(not recorded: the next sync --state records it)'}",
        f"cursor: {manifest.cursor or '(none)'}",
        f"tickets: {counts['tickets']} ({counts['published']} published, {counts['unpublished']} not yet published, "
        f"{counts['gone']} gone with documents left; {plural(counts['objects'], 'object')})",
    ]
    if lease is None:
        lines.append("lease: free")
    else:
        described = lease.to_json(view.now)
        expiry = f", expires {described['expires_at']}" if described["expires_at"] else ""
        lines.append(
            f"lease: {described['status']}, held by {lease.holder} since {described['taken_at'] or '?'}{expiry}"
        )
    for line in lines:
        console.print(line, highlight=False, markup=False)


def print_warning(message: str) -> None:
    print_problem("warning", message)
