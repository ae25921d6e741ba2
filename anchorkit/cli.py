"""The `anchorkit` command line: a thin layer over the library modules.

Conventions shared by every command:
- exit code 0 = everything done, 1 = something failed (listed) or `--check` found differences,
  2 = usage error (bad option, missing file);
- `--json` prints one JSON object on stdout instead of the human summary;
- human output goes to stdout through rich, warnings and errors to stderr;
- secrets (API keys, AWS credentials) are never printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Optional
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from anchorkit import __version__
from anchorkit import chunking
from anchorkit import publish as publishing
from anchorkit import pull as pulling
from anchorkit import state as states
from anchorkit import stats as auditing
from anchorkit import sync as syncing
from anchorkit import tokens as tokenizing
from anchorkit import transform as transforming
from anchorkit import verify as verifying
from anchorkit.document import DEFAULT_ANCHOR_SUBJECT_CHARS, DEFAULT_CHUNK_TOKENS, LABELS, RenderOptions
from anchorkit.files import write_atomic
from anchorkit.redmine import RetryPolicy
from anchorkit.report_html import render_report
from anchorkit.sidecar import SCHEMAS
from anchorkit.snapshot import SnapshotError
from anchorkit.stats_html import format_percent, format_ratio, render_html
from anchorkit.textformat import TEXT_FORMATS
from anchorkit.verify_eval import EvalSummary, evaluate, load_cases
from anchorkit.verify_shapes import InputError, load_answer, load_context, load_retrieval

app = typer.Typer(
    name="anchorkit",
    help="Anchor every chunk of your Redmine tickets to its ticket ID, publish them for RAG, and prove it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# soft_wrap: never break a long line (paths, keys) in two; scripts grep this output.
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def print_json(payload: Any) -> None:
    """Machine-readable output: one JSON document on stdout, keys sorted for stable diffs."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


def usage_error(message: str) -> typer.Exit:
    print_problem("error", message)
    return typer.Exit(2)


_PROBLEM_COLOURS = {"error": "red", "failed": "red", "refused": "red", "gate failed": "red", "warning": "yellow", "stopped": "yellow", "note": "yellow"}


def print_problem(kind: str, message: str) -> None:
    """``failed: ...`` and the like on stderr. The message is data (paths, keys, server texts): escaped,
    so that a ``[...]`` in it is neither taken for markup nor dropped."""
    colour = _PROBLEM_COLOURS[kind]
    err_console.print(f"[{colour}]{kind}:[/{colour}] {escape(message)}", highlight=False)


def print_ingestion_job(job: dict[str, str] | None) -> None:
    if job:
        console.print(f"ingestion job {job['ingestion_job_id']} ({job['status']})", highlight=False, markup=False)


def version_callback(value: bool) -> None:
    if value:
        console.print(f"anchorkit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """anchorkit: pull → transform → upload → stats → verify."""


# Commands are defined below, one section per pipeline stage.


# ------------------------------------------------------------------------------------------------
# transform: snapshot → anchored Markdown (+ sidecars) (anchorkit.transform)


def transform_options(
    lang: str,
    label: str | None,
    include_private: bool,
    anchor_basic_info: bool,
    chunk_tokens: int,
    anchor_subject_chars: int,
    text_format: str | None,
    timezone: str,
    sidecars: bool,
    sidecar_schema: str,
    layout: str,
    max_text_bytes: int,
    link_issues: str | None = None,
    tokenizer: str = "auto",
    tiktoken_file: Path | None = None,
) -> transforming.TransformOptions:
    """Validate the transform flags (exit 2 with a clear message) and build the options."""
    for name, value, allowed in (
        ("--lang", lang, tuple(LABELS)),
        ("--text-format", text_format, TEXT_FORMATS),
        ("--sidecar-schema", sidecar_schema, SCHEMAS),
        ("--layout", layout, transforming.LAYOUTS),
        ("--tokenizer", tokenizer, tokenizing.TOKENIZER_CHOICES),
    ):
        if value is not None and value not in allowed:
            raise usage_error(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise usage_error(f"--timezone: unknown time zone {timezone!r} (use an IANA name such as Asia/Tokyo)") from None
    render = RenderOptions(
        lang=lang,
        include_private=include_private,
        anchor_basic_info=anchor_basic_info,
        chunk_tokens=chunk_tokens,
        anchor_subject_chars=anchor_subject_chars,
        timezone=timezone,
        labels={"ticket": label} if label else {},
        link_issues=link_issues.rstrip("/") if link_issues else None,
    )
    return transforming.TransformOptions(
        render=render,
        sidecars=sidecars,
        sidecar_schema=sidecar_schema,
        layout=layout,
        text_format=text_format,
        max_text_bytes=max_text_bytes,
        tokenizer=tokenizer,
        tiktoken_file=tiktoken_file,
    )


# Options that `sync` shares with `transform` and `pull`: defined once, so limits and help cannot drift apart
# (the commands give the defaults: sync's None means "from the environment or config file").
SidecarSchemaOption = typer.Option("--sidecar-schema", help="Sidecar attribute shape: simple (plain values) or typed (Bedrock's {value: {type, ...}, includeForEmbedding}).")
LayoutOption = typer.Option("--layout", help="flat: OUT/<id>.md; by-project: OUT/<project identifier>/<id>.md.")
LangOption = typer.Option("--lang", help="Document labels: ja (チケット, 基本情報, 説明, 対応履歴) or en (Ticket, Details, Description, History).")
LabelOption = typer.Option("--label", help="Ticket label in titles and anchors, overriding --lang's (e.g. Issue).")
ChunkTokensOption = typer.Option(
    "--chunk-tokens",
    min=0,
    help="Place anchors so that any window of this many tokens (your knowledge base's chunk length) holds a complete "
    "anchor or the title line; long blocks are split between items, rows, lines or sentences. 300: Bedrock's default "
    "fixed-size chunk. 0: only the anchors after headings.",
)
AnchorSubjectCharsOption = typer.Option(
    "--anchor-subject-chars",
    min=0,
    help="Cut the subject in anchor lines to this many characters (ending in …); the title keeps it whole. "
    "Long subjects make every anchor expensive. 0: the whole subject.",
)
TimezoneOption = typer.Option("--timezone", help="Time zone for the dates shown in documents (IANA name, e.g. Asia/Tokyo). Sidecar timestamps are always UTC.")
MaxTextBytesOption = typer.Option("--max-text-bytes", min=1, help="A description or note larger than this (UTF-8 bytes) fails its ticket instead of producing a huge document.")
ProjectOption = typer.Option("--project", help="Only this project (identifier or id; subprojects included). Repeatable.")
ConcurrencyOption = typer.Option("--concurrency", min=1, max=64, help="Issues fetched at the same time.")
FullEveryOption = typer.Option("--full-every", min=0, help="Make every K-th run a full listing (0: only with --full).")
OverlapOption = typer.Option("--overlap", min=0, help="Seconds before the cursor that incremental runs list again.")
LookupsMaxAgeOption = typer.Option("--lookups-max-age", min=0, help="Seconds before cached lookups.json is refreshed.")
TimeoutOption = typer.Option("--timeout", min=0.1, help="Read timeout per Redmine request, seconds.")
RetriesOption = typer.Option("--retries", min=1, help="Attempts per Redmine request, first included.")


@app.command()
def transform(
    snapshot: Path = typer.Argument(..., help="Snapshot folder (issues/<id>.json, lookups.json, state.json), e.g. fixtures."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder for <id>.md documents (created if missing)."),
    sidecars: bool = typer.Option(False, "--sidecars", help="Also write Bedrock Knowledge Base <id>.md.metadata.json sidecars."),
    sidecar_schema: Annotated[str, SidecarSchemaOption] = "simple",
    layout: Annotated[str, LayoutOption] = "flat",
    lang: Annotated[str, LangOption] = "ja",
    label: Annotated[Optional[str], LabelOption] = None,
    include_private: bool = typer.Option(False, "--include-private", help="Include private issues and private notes (left out by default)."),
    anchor_basic_info: bool = typer.Option(True, "--anchor-basic-info/--no-anchor-basic-info", help="Anchor the basic-info section too (heading-based splitters cut it away from the title)."),
    chunk_tokens: Annotated[int, ChunkTokensOption] = DEFAULT_CHUNK_TOKENS,
    anchor_subject_chars: Annotated[int, AnchorSubjectCharsOption] = DEFAULT_ANCHOR_SUBJECT_CHARS,
    tokenizer: str = typer.Option(
        "auto",
        "--tokenizer",
        help="How --chunk-tokens counts: auto: cl100k_base if its vocabulary is on this machine (never downloaded), else approx "
        "(the estimate with a safety margin); cl100k_base: exact (exit 2 if its vocabulary is missing).",
    ),
    tiktoken_file: Optional[Path] = typer.Option(
        None, "--tiktoken-file", help=f"cl100k_base.tiktoken vocabulary file (sha256-checked). Default: ${tokenizing.VOCABULARY_FILE_ENV}, then tiktoken's cache."
    ),
    text_format: Optional[str] = typer.Option(None, "--text-format", help="Redmine text format of all texts: textile or common_mark. Default: the snapshot's setting (state.json text_format), else textile."),
    timezone: Annotated[str, TimezoneOption] = "UTC",
    link_issues: Optional[str] = typer.Option(None, "--link-issues", metavar="URL", help="Redmine base URL: turn #123 in ticket text into links to URL/issues/123 (kept as plain text by default)."),
    max_text_bytes: Annotated[int, MaxTextBytesOption] = transforming.DEFAULT_MAX_TEXT_BYTES,
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 listing what would be created, changed or removed, 0 if OUT is up to date."),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Render and write tickets in this many processes (the output is identical). 0 (default): one per CPU core when there are more than 256 tickets."),
    json_output: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Turn a snapshot into one anchored Markdown document per ticket (and optional sidecars).

    Every section and every journal entry carries the anchor line `> チケット #ID: subject`, and more
    anchors are placed so that any window of --chunk-tokens tokens holds one: any chunk of that
    length names its ticket, wherever the chunker cuts. Output is deterministic: unchanged files are not
    rewritten, outputs of tickets no longer in the snapshot are removed, bad tickets are reported
    (file and reason) while the others are still done; exit code 1 if any ticket failed.
    """
    if link_issues and not re.match(r"https?://[^\s]+$", link_issues):
        raise usage_error(f"--link-issues must be an http(s) URL, not {link_issues!r}")
    options = transform_options(
        lang, label, include_private, anchor_basic_info, chunk_tokens, anchor_subject_chars, text_format, timezone,
        sidecars, sidecar_schema, layout, max_text_bytes, link_issues, tokenizer, tiktoken_file,
    )
    try:
        report = transforming.transform_snapshot(snapshot, out, options, check=check, jobs=jobs)
    except (SnapshotError, tokenizing.TokenizerUnavailable) as exc:
        raise usage_error(str(exc)) from None
    if json_output:
        print_json({"check": check, "out": str(out), **report.as_dict()})
    else:
        print_transform_report(report, out, check)
    if report.failed or (check and report.differs):
        raise typer.Exit(1)


def print_transform_report(report: transforming.TransformReport, out: Path, check: bool) -> None:
    if report.tokenizer_note:
        print_problem("note", f"--chunk-tokens counted with approx tokens (and a safety margin): {report.tokenizer_note}")
    for warning in report.warnings:
        print_problem("warning", warning)
    for failure in report.failed:
        print_problem("failed", failure.message)
    if check:
        for verb, paths in (("would create", report.created), ("would change", report.changed), ("would remove", report.removed)):
            for path in paths:
                console.print(f"{verb} {out / path}", highlight=False, markup=False)
        state = "differs from the snapshot" if report.differs else "is up to date"
        console.print(f"check: {out} {state} ({report.tickets} tickets, {len(report.failed)} failed)", highlight=False)
        return
    console.print(
        f"transform: {report.tickets} tickets → {out}: {len(report.created)} created, {len(report.changed)} changed, "
        f"{report.unchanged} unchanged, {len(report.removed)} removed, {len(report.failed)} failed, "
        f"{report.private_skipped} private skipped in {report.seconds:.2f} s",
        highlight=False,
    )


# ------------------------------------------------------------------------------------------------
# upload: publish OUT to s3://bucket/prefix or a folder, by content (anchorkit.publish)


DeleteFlag = Annotated[
    bool, typer.Option("--delete", help="Delete remote objects under the prefix that have no local counterpart.")
]
MaxDeleteOption = Annotated[
    Optional[str],
    typer.Option(
        "--max-delete",
        help="Refuse to delete more than this many objects: a count (25) or a percentage of the objects "
        f"under the prefix (10%). Default {publishing.DEFAULT_MAX_DELETE}.",
    ),
]
ForceFlag = Annotated[bool, typer.Option("--force", help="Delete even beyond --max-delete.")]
DryRunFlag = Annotated[bool, typer.Option("--dry-run", help="Print the plan (counts, first keys); change nothing.")]
ThreadsOption = Annotated[
    Optional[int],
    typer.Option("--threads", min=1, max=256, help=f"Parallel requests. Default {publishing.DEFAULT_THREADS}."),
]
EndpointOption = Annotated[
    Optional[str], typer.Option("--endpoint-url", help="S3 endpoint for S3-compatible stores (e.g. SeaweedFS, MinIO).")
]
RegionOption = Annotated[Optional[str], typer.Option("--region", help="AWS region (else the credential chain's).")]
ProfileOption = Annotated[Optional[str], typer.Option("--profile", help="AWS profile from ~/.aws/config.")]
RetryModeOption = Annotated[
    Optional[str],
    typer.Option(
        "--retry-mode",
        help="botocore retry mode for throttling, 5xx and dropped connections: standard or adaptive "
        "(adaptive also slows the client down when S3 throttles). Default standard.",
    ),
]
MaxAttemptsOption = Annotated[
    Optional[int],
    typer.Option(
        "--max-attempts", min=1, help=f"Attempts per request, first included. Default {publishing.DEFAULT_MAX_ATTEMPTS}."
    ),
]
StartIngestionOption = Annotated[
    Optional[str],
    typer.Option(
        "--start-ingestion",
        metavar="KB_ID:DATA_SOURCE_ID",
        help="After a fully successful upload, start a Bedrock Knowledge Base ingestion job for this data source.",
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout instead of the summary.")]
LeaseSecondsOption = Annotated[
    Optional[float],
    typer.Option(
        "--lease-seconds", min=1, help="With an S3 --state: how long a run's write lease lasts before another run may take it."
    ),
]


def publish_with_progress(
    local_objects: list[publishing.LocalObject],
    local_failures: list[publishing.Failure],
    target: publishing.Target,
    settings: publishing.PublishSettings,
    show_progress: bool,
) -> publishing.PublishReport:
    """Run `publishing.publish` with a rich progress bar (objects and bytes) on stderr."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} objects"),
        TextColumn("{task.fields[done_bytes]:,}/{task.fields[total_bytes]:,} bytes"),
        TimeElapsedColumn(),
        console=err_console,
        disable=not show_progress,
        transient=False,
    )
    task = progress.add_task("publishing", total=None, done_bytes=0, total_bytes=0)
    done_bytes = 0

    def on_plan(plan: publishing.Plan) -> None:
        progress.update(task, total=len(plan.uploads) + len(plan.deletes), total_bytes=plan.upload_bytes)

    def on_result(result: publishing.OperationResult) -> None:
        nonlocal done_bytes
        done_bytes += result.bytes
        progress.update(task, advance=1, done_bytes=done_bytes)

    with progress:
        return publishing.publish(
            local_objects,
            target,
            settings=settings,
            local_failures=local_failures,
            on_plan=on_plan,
            on_result=on_result,
        )


def print_publish_report(report: publishing.PublishReport, json_output: bool) -> None:
    if json_output:
        print_json(report.to_dict())
        return
    summary = report.to_dict()
    planned = summary["planned"]
    if report.dry_run:
        console.print(
            f"plan for {report.destination}: upload {planned['upload']} ({planned['upload_bytes']:,} bytes), "
            f"skip {planned['skip']}, delete {planned['delete']}"
            + (f", {planned['stale_kept']} stale kept (no --delete)" if planned["stale_kept"] else ""),
            highlight=False,
            markup=False,
        )
        for action in ("upload", "delete"):
            for key in summary["first_keys"][action]:
                console.print(f"  {action} {key}", highlight=False, markup=False)
    else:
        console.print(
            f"{report.destination}: uploaded {summary['uploaded']}, skipped {summary['skipped']}, "
            f"deleted {summary['deleted']}, failed {summary['failed']}, {summary['bytes']:,} bytes "
            f"in {summary['seconds']:.1f} s",
            highlight=False,
            markup=False,
        )
        if planned["stale_kept"]:
            console.print(f"{planned['stale_kept']} stale objects kept (pass --delete to remove them)")
    print_ingestion_job(report.ingestion_job)
    if report.refused:
        print_problem("refused", report.refused)
    for failure in report.failures:
        print_problem("failed", f"{failure.key}: {failure.error}")


def publish_command_settings(
    delete: bool,
    max_delete: str | None,
    force: bool,
    dry_run: bool,
    threads: int | None,
    retry_mode: str | None,
    max_attempts: int | None,
) -> publishing.PublishSettings:
    """PublishSettings from command-line values (None = default); PublishError on a bad value."""
    return publishing.PublishSettings(
        delete=delete,
        max_delete=publishing.parse_max_delete(max_delete or publishing.DEFAULT_MAX_DELETE),
        force=force,
        dry_run=dry_run,
        threads=threads or publishing.DEFAULT_THREADS,
        retry_mode=publishing.parse_retry_mode(retry_mode or publishing.DEFAULT_RETRY_MODE),
        max_attempts=max_attempts or publishing.DEFAULT_MAX_ATTEMPTS,
    )


@dataclass(frozen=True)
class PublishDestination:
    target: publishing.Target
    session: Any  # the boto3 session, also used for Bedrock
    ingestion: tuple[str, str] | None  # (knowledge base id, data source id) of --start-ingestion


def open_destination(
    source: Path, dest: str, settings: publishing.PublishSettings, aws: publishing.AwsSettings, start_ingestion: str | None
) -> PublishDestination:
    """Shared by `upload` and `sync`: the destination and --start-ingestion, checked before any work (exit 2)."""
    try:
        destination = publishing.parse_destination(dest)
        ingestion = publishing.parse_ingestion_target(start_ingestion) if start_ingestion else None
        if isinstance(destination, Path):
            publishing.check_folders_apart(source, destination)
        target, session = publishing.open_target(destination, aws, settings)
    except publishing.PublishError as error:
        raise usage_error(str(error)) from None
    return PublishDestination(target, session, ingestion)


def run_publish(
    source: Path, destination: PublishDestination, settings: publishing.PublishSettings, json_output: bool
) -> publishing.PublishReport:
    """Shared by `upload` and `sync`: scan the source, publish, optionally start the ingestion."""
    local_objects, local_failures = publishing.scan_folder(source)
    show_progress = not json_output and not settings.dry_run
    report = publish_with_progress(local_objects, local_failures, destination.target, settings, show_progress)
    if destination.ingestion is not None:
        publishing.ingest_after(report, lambda: destination.session.client("bedrock-agent"), *destination.ingestion)
    return report


@app.command("upload")
def upload_command(
    out: Annotated[Path, typer.Argument(help="Folder to publish (transform's output: documents and sidecars).")],
    dest: Annotated[str, typer.Argument(help="s3://bucket/prefix, or a local folder.")],
    delete: DeleteFlag = False,
    max_delete: MaxDeleteOption = None,
    force: ForceFlag = False,
    dry_run: DryRunFlag = False,
    threads: ThreadsOption = None,
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    retry_mode: RetryModeOption = None,
    max_attempts: MaxAttemptsOption = None,
    start_ingestion: StartIngestionOption = None,
    json_output: JsonFlag = False,
) -> None:
    """Publish OUT to S3 (or a folder) by content: only new/changed objects are uploaded."""
    if not out.is_dir():
        raise usage_error(f"{out} is not a folder")
    try:
        settings = publish_command_settings(delete, max_delete, force, dry_run, threads, retry_mode, max_attempts)
    except publishing.PublishError as error:
        raise usage_error(str(error)) from None
    aws = publishing.AwsSettings(endpoint_url=endpoint_url, region=region, profile=profile)
    destination = open_destination(out, dest, settings, aws, start_ingestion)
    report = run_publish(out, destination, settings, json_output)
    print_publish_report(report, json_output)
    if not report.ok:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------
# pull: fetch tickets from Redmine into a snapshot, incrementally (anchorkit.pull)


API_KEY_ENV = "REDMINE_API_KEY"


def read_api_key(api_key_file: Path | None) -> str:
    """The key from --api-key-file, else $REDMINE_API_KEY; a usage error (exit 2) when there is none."""
    if api_key_file is not None:
        try:
            key = api_key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise usage_error(f"{api_key_file}: cannot read the API key file ({type(error).__name__})") from None
        if not key:
            raise usage_error(f"{api_key_file}: the API key file is empty")
        return key
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        raise usage_error(f"no Redmine API key: set {API_KEY_ENV} or pass --api-key-file")
    return key


@contextlib.contextmanager
def pull_progress_bar(show_progress: bool) -> Iterator[pulling.ProgressCallback]:
    """A rich progress bar of the issue fetches on stderr; yields the callback pull reports to."""
    progress = Progress(
        TextColumn("pulling"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} issues"),
        TimeElapsedColumn(),
        console=err_console,
        disable=not show_progress,
        transient=True,  # the summary follows; a finished bar would only repeat it
    )
    task = progress.add_task("pull", total=0)

    def on_progress(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    with progress:
        yield on_progress


def pull_arguments(
    projects: list[str] | None,
    full: bool,
    concurrency: int,
    include_private: bool,
    full_every: int,
    overlap: float,
    lookups_max_age: float,
    text_format: str | None,
    retries: int,
    timeout: float,
) -> syncing.PullArguments:
    """What `pull` and `sync` were asked to pull, from their command-line values."""
    return syncing.PullArguments(
        projects=tuple(projects or ()), full=full, concurrency=concurrency, include_private=include_private,
        full_every=full_every, overlap_s=overlap, lookups_max_age_s=lookups_max_age, text_format=text_format,
        policy=RetryPolicy(attempts=retries, read_timeout_s=timeout),
    )


def pull_with_progress(
    show_progress: bool, url: str, snapshot_dir: Path, api_key: str, arguments: syncing.PullArguments
) -> pulling.PullReport:
    """Run the pull with a rich progress bar of the issue fetches on stderr."""
    with pull_progress_bar(show_progress) as on_progress:
        try:
            return syncing.run_pull(url, api_key, snapshot_dir, arguments, full=arguments.full, known={}, progress=on_progress)
        except pulling.PullError as error:
            raise usage_error(str(error)) from None


def print_pull_report(report: pulling.PullReport, json_output: bool) -> None:
    if json_output:
        print_json(report.to_json())
        return
    console.print(
        f"{'full' if report.full else 'incremental'} pull: listed {report.listed}, fetched {report.fetched}, "
        f"unchanged {report.unchanged}, removed {report.removed}, private skipped {report.skipped_private}, "
        f"failed {len(report.failed)}; {report.requests} requests ({report.retries} retries) "
        f"in {report.seconds:.1f} s",
        highlight=False,
    )
    for warning in report.warnings:
        print_problem("warning", warning)
    for error in report.errors:
        print_problem("error", error)
    for failure in report.failed:
        print_problem("failed", f"#{failure.issue_id}: {failure.reason}")
    if report.failed:
        err_console.print(f"failed issue ids: {' '.join(map(str, report.failed_ids))}", highlight=False)


@app.command("pull")
def pull_command(
    url: Annotated[str, typer.Option("--url", help="Redmine base URL, e.g. https://redmine.example.com.")],
    snapshot_dir: Annotated[
        Path, typer.Option("--snapshot", help="Snapshot folder to create or update (issues/, lookups.json, state.json).")
    ],
    project: Annotated[Optional[list[str]], ProjectOption] = None,
    full: Annotated[
        bool, typer.Option("--full", help="List every issue (removes deleted/hidden ones) and refresh the lookups.")
    ] = False,
    concurrency: Annotated[int, ConcurrencyOption] = pulling.DEFAULT_CONCURRENCY,
    include_private: Annotated[
        bool, typer.Option("--include-private", help="Keep private issues and private notes (left out by default).")
    ] = False,
    api_key_file: Annotated[
        Optional[Path],
        typer.Option("--api-key-file", help=f"File holding the API key (default: ${API_KEY_ENV})."),
    ] = None,
    full_every: Annotated[int, FullEveryOption] = pulling.DEFAULT_FULL_EVERY,
    overlap: Annotated[float, OverlapOption] = pulling.DEFAULT_OVERLAP_S,
    lookups_max_age: Annotated[float, LookupsMaxAgeOption] = pulling.DEFAULT_LOOKUPS_MAX_AGE_S,
    text_format: Annotated[
        Optional[str],
        typer.Option(
            "--text-format",
            help="Text format of the Redmine (textile or common_mark), recorded in a new snapshot's state.json "
            "(default textile); an existing value is never overwritten.",
        ),
    ] = None,
    timeout: Annotated[float, TimeoutOption] = RetryPolicy.read_timeout_s,
    retries: Annotated[int, RetriesOption] = RetryPolicy.attempts,
    state: Annotated[
        Optional[str],
        typer.Option(
            "--state",
            help="Keep the cursor and the raw issues in the sync state at s3://bucket/prefix/ or a local folder "
            "(the one `sync --state` uses): the --snapshot folder is first made a copy of it, then pulled, and what "
            "changed is stored back; the next `sync --state` publishes it. Exit code 3 when another run holds the state.",
        ),
    ] = None,
    lease_seconds: LeaseSecondsOption = None,
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    threads: ThreadsOption = None,
    json_output: JsonFlag = False,
) -> None:
    """Fetch new and changed issues (with journals) from Redmine into SNAPSHOT; exit 1 if any failed.

    With --state the bookkeeping and raw issues live in a sync state, and `sync --state` publishes what
    this stored (see README, pull --state).
    """
    if text_format is not None and text_format not in pulling.TEXT_FORMATS:
        raise usage_error(f"--text-format must be one of {', '.join(pulling.TEXT_FORMATS)}")
    arguments = pull_arguments(
        project, full, concurrency, include_private, full_every, overlap, lookups_max_age, text_format, retries, timeout
    )
    if state is not None:
        aws = publishing.AwsSettings(endpoint_url, region, profile)
        run_pull_with_state_command(
            url, snapshot_dir, read_api_key(api_key_file), arguments, state, aws, threads, lease_seconds, json_output
        )
        return
    report = pull_with_progress(not json_output, url, snapshot_dir, read_api_key(api_key_file), arguments)
    print_pull_report(report, json_output)
    if not report.ok:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------
# verify / eval: only ticket ids and citations that come from what was retrieved (anchorkit.verify)


UriPatternOption = Annotated[
    str,
    typer.Option(
        "--uri-pattern",
        help="Regular expression with one group that takes the ticket id out of a chunk's source URI "
        "(flat …/12345.md and by-project …/<project>/12345.md both match the default).",
    ),
]
QuoteThresholdOption = Annotated[
    float,
    typer.Option(
        "--quote-threshold",
        min=0.0,
        max=1.0,
        help="quote_drift below this similarity (0-1) between a quoted span and its best-matching part of the cited chunk.",
    ),
]
GroundingThresholdOption = Annotated[
    float,
    typer.Option(
        "--grounding-threshold",
        min=0.0,
        max=1.0,
        help="weak_grounding below this share (0-1) of a claim's tokens (CJK character bigrams, other words) found in its cited chunks.",
    ),
]
OnEmptyOption = Annotated[
    str,
    typer.Option(
        "--on-empty",
        help="When no retrieved chunk carries a ticket id: pass (keep ids, report 'unchecked') or block (treat every id as phantom).",
    ),
]
StrictFlag = Annotated[bool, typer.Option("--strict", help="Exit 1 if anything critical (phantom ticket ids or sources) was found.")]


def verify_settings(
    uri_pattern: str, quote_threshold: float, grounding_threshold: float, on_invalid: str, on_empty: str
) -> verifying.VerifyOptions:
    """Options checked up front: a bad pattern or mode is a usage error (exit 2), not a traceback."""
    if on_invalid not in ("drop", "flag"):
        raise usage_error("--on-invalid must be drop or flag")
    if on_empty not in ("pass", "block"):
        raise usage_error("--on-empty must be pass or block")
    try:
        pattern = verifying.compile_uri_pattern(uri_pattern)
    except (re.error, ValueError) as exc:
        raise usage_error(f"--uri-pattern: {exc}") from None
    return verifying.VerifyOptions(pattern, quote_threshold, grounding_threshold, on_invalid, on_empty)  # type: ignore[arg-type]


def read_verify_inputs(
    retrieval: Path, answer: Path | None, contexts: list[Path]
) -> tuple[list[verifying.Chunk], verifying.Answer, list[verifying.Chunk], list[str]]:
    """All input files, or exit: 2 for a missing file, an unreadable file, malformed JSON or an unknown shape."""
    with input_errors():
        shape, chunks = load_retrieval(retrieval)
        if answer is None and shape != "retrieve_and_generate":
            raise usage_error("--answer is required unless --retrieval is a RetrieveAndGenerate response")
        parsed_answer = load_answer(answer or retrieval)
        context_chunks: list[verifying.Chunk] = []
        context_texts: list[str] = []
        for path in contexts:
            more_chunks, text = load_context(path)
            context_chunks += more_chunks
            context_texts += [text] if text else []
    return chunks, parsed_answer, context_chunks, context_texts


@contextlib.contextmanager
def input_errors() -> Iterator[None]:
    """Exit 2 for an input file that is missing, unreadable, malformed or of an unknown shape."""
    try:
        yield
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise usage_error(f"{exc.filename}: {exc.strerror}") from None
    except InputError as exc:
        raise usage_error(str(exc)) from None


def write_html(path: Path, html: str) -> None:
    """The --html report, atomically; an unwritable path is a usage error (exit 2), not a traceback."""
    try:
        write_atomic(path, html.encode("utf-8"))
    except OSError as exc:
        raise usage_error(f"--html {path}: {exc.strerror or exc}") from None


def print_verify_report(report: verifying.VerifyReport) -> None:
    """Human summary; untrusted text (answers, chunks) is printed with markup off."""
    style = {"critical": "red", "warning": "yellow", "info": "cyan"}
    for finding in report.findings:
        console.print(f"[{style[finding.severity]}]{finding.severity}[/] {finding.kind}: ", end="", highlight=False)
        console.print(finding.message, markup=False, highlight=False)
    filtered = report.filtered_answer
    if filtered["text"]:
        console.print("answer (filtered):", highlight=False)
        console.print(filtered["text"], markup=False, highlight=False)
    for number, claim in enumerate(filtered["claims"], start=1):
        sources = ", ".join(c["source_id"] for c in claim["citations"])
        console.print(f"{number}. {claim['text']} [{sources}]", markup=False, highlight=False)
    for result in filtered["results"]:
        console.print(json.dumps(result, ensure_ascii=False, sort_keys=True), markup=False, highlight=False)
    console.print(
        f"verify: grounding score {report.grounding_score:.2f}, {report.critical} critical, {report.warnings} warnings, "
        f"valid ids: {' '.join(f'#{i}' for i in sorted(report.valid_ids)) or 'none'}",
        highlight=False,
        markup=False,
    )


@app.command("verify")
def verify_command(
    retrieval: Annotated[
        Path,
        typer.Option(
            "--retrieval", "-r", help="What was retrieved: a Bedrock Retrieve or RetrieveAndGenerate response, or a JSON list of {id, text, uri}."
        ),
    ],
    answer: Annotated[
        Optional[Path],
        typer.Option(
            "--answer",
            "-a",
            help="The answer: structured claims, a list of {issue_id, ...} results, or plain text (any non-.json file). "
            "Default: the --retrieval file when it is a RetrieveAndGenerate response.",
        ),
    ] = None,
    context: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--context",
            help="Later turns: the context message sent to the model (text file; its genuine anchors count) or an "
            "earlier retrieval (.json, any retrieval shape). Its ticket ids are valid too. Repeatable.",
        ),
    ] = None,
    uri_pattern: UriPatternOption = verifying.DEFAULT_URI_PATTERN,
    quote_threshold: QuoteThresholdOption = verifying.DEFAULT_QUOTE_THRESHOLD,
    grounding_threshold: GroundingThresholdOption = verifying.DEFAULT_GROUNDING_THRESHOLD,
    on_invalid: Annotated[
        str,
        typer.Option(
            "--on-invalid",
            help="drop: remove phantom ids, citations and results from the filtered answer; flag: keep everything, only report.",
        ),
    ] = "drop",
    on_empty: OnEmptyOption = "pass",
    strict: StrictFlag = False,
    html_file: Annotated[
        Optional[Path],
        typer.Option("--html", help="Also write the answer as a self-contained HTML page with numbered, flagged citations."),
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """Check an answer against the chunks retrieved for it; print the filtered answer and the findings.

    Findings: phantom ticket ids and sources (critical), quote drift, weak grounding, wrong tickets.

    Exit 0 (findings are reported, not fatal), 1 with --strict when something critical was found,
    2 for a usage error or input that cannot be read (missing file, malformed JSON, unknown shape).
    """
    options = verify_settings(uri_pattern, quote_threshold, grounding_threshold, on_invalid, on_empty)
    chunks, parsed_answer, context_chunks, context_texts = read_verify_inputs(retrieval, answer, context or [])
    report = verifying.verify_citations(
        parsed_answer,
        chunks,
        context=context_texts,
        extra_valid_ids=verifying.valid_ids(context_chunks, options.uri_pattern),
        options=options,
    )
    if html_file is not None:
        write_html(html_file, render_report(report))
    if json_output:
        print_json(report.to_json())
    else:
        print_verify_report(report)
    if strict and report.critical:
        raise typer.Exit(1)


@app.command("eval")
def eval_command(
    cases_file: Annotated[
        Path,
        typer.Argument(
            help="JSONL file, one case a line: {id?, query, retrieved, answer, expected_ids?, context?} "
            "(retrieved and answer in any shape verify accepts)."
        ),
    ],
    uri_pattern: UriPatternOption = verifying.DEFAULT_URI_PATTERN,
    quote_threshold: QuoteThresholdOption = verifying.DEFAULT_QUOTE_THRESHOLD,
    grounding_threshold: GroundingThresholdOption = verifying.DEFAULT_GROUNDING_THRESHOLD,
    on_empty: OnEmptyOption = "pass",
    strict: StrictFlag = False,
    min_grounding: Annotated[
        Optional[float],
        typer.Option("--min-grounding", min=0.0, max=1.0, help="Exit 1 if the mean grounding score is below this."),
    ] = None,
    max_phantom_rate: Annotated[
        Optional[float],
        typer.Option("--max-phantom-rate", min=0.0, max=1.0, help="Exit 1 if the phantom rate is above this."),
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """Verify every case of an eval set (JSONL); print grounding, phantom rate, recall, precision.

    Per-case findings are listed too.

    Exit 1 if a case could not be read (the others are still evaluated), with --strict if any case has a
    critical finding, or if --min-grounding / --max-phantom-rate are not met; 2 for a usage error.
    """
    options = verify_settings(uri_pattern, quote_threshold, grounding_threshold, "flag", on_empty)
    with input_errors():
        cases, errors = load_cases(cases_file)
    summary = evaluate(cases, errors, options)
    if json_output:
        print_json(summary.to_json())
    else:
        print_eval_summary(summary)
    failed_gates = (
        bool(summary.errors)
        or (strict and any(r.has_phantom for r in summary.results))
        or (min_grounding is not None and (summary.mean_grounding or 0.0) < min_grounding)
        or (max_phantom_rate is not None and (summary.phantom_rate or 0.0) > max_phantom_rate)
    )
    if failed_gates:
        raise typer.Exit(1)


def print_eval_summary(summary: EvalSummary) -> None:
    for error in summary.errors:
        print_problem("error", error)
    for result in summary.results:
        kinds = ", ".join(sorted({f.kind for f in result.report.findings})) or "no findings"
        console.print(
            f"{result.case.case_id}: grounding {result.report.grounding_score:.2f}, cited "
            f"{' '.join(f'#{i}' for i in sorted(result.report.cited_ids)) or '-'}: {kinds}",
            markup=False,
            highlight=False,
        )

    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    console.print(
        f"eval: {len(summary.results)} cases, {len(summary.errors)} unreadable; mean grounding {shown(summary.mean_grounding)}, "
        f"phantom rate {shown(summary.phantom_rate)}, source recall {shown(summary.source_recall)}, "
        f"citation precision {shown(summary.citation_precision)}",
        highlight=False,
        markup=False,
    )


# ------------------------------------------------------------------------------------------------
# stats: what the anchors cost in tokens, and how many chunks keep their ticket ID (anchorkit.stats)


@app.command("stats")
def stats_command(
    path: Path = typer.Argument(
        ...,
        help="A transform output folder (<id>.md documents, flat or in project folders, with optional .md.metadata.json sidecars) "
        "or a snapshot folder (has issues/; transformed in memory, with sidecars).",
    ),
    tokenizer: str = typer.Option(
        "auto",
        "--tokenizer",
        help="auto: cl100k_base if its vocabulary can be loaded without network, else approx; "
        "cl100k_base: exact (may download the vocabulary; exit 2 if impossible); approx: the cheap estimate.",
    ),
    tiktoken_file: Optional[Path] = typer.Option(
        None,
        "--tiktoken-file",
        help=f"cl100k_base.tiktoken vocabulary file (sha256-checked). Default: ${tokenizing.VOCABULARY_FILE_ENV}, then tiktoken's cache (TIKTOKEN_CACHE_DIR).",
    ),
    chunking_specs: Optional[list[str]] = typer.Option(
        None,
        "--chunking",
        help="A chunker to measure, repeatable: NAME or NAME:key=value,... with NAME in "
        f"{', '.join(chunking.CHUNKERS)} (e.g. fixed:max_tokens=512,overlap=10). "
        "Default: fixed, hierarchical, semantic, heading with Bedrock's defaults, plus the LangChain splitters when installed.",
    ),
    chunk_tokens: int = typer.Option(
        auditing.DEFAULT_CHUNK_TOKENS,
        "--chunk-tokens",
        min=0,
        help="Snapshot input: transform with this --chunk-tokens (0: structural anchors only; see transform). "
        "Either input: the chunk length the anchors' cost is compared with the lower bound for "
        f"(an output folder: the --chunk-tokens it was made with; 0 compares with {auditing.DEFAULT_CHUNK_TOKENS}).",
    ),
    lengths: str = typer.Option(
        ",".join(map(str, auditing.CHUNK_LENGTHS)),
        "--lengths",
        help="The chunk lengths of the choice table, comma-separated (snapshot input: rendered at each one); 'none' for no table.",
    ),
    anchor_subject_chars: Optional[int] = typer.Option(
        None,
        "--anchor-subject-chars",
        min=0,
        help=f"Snapshot input only: transform with this --anchor-subject-chars (default: transform's, {DEFAULT_ANCHOR_SUBJECT_CHARS}).",
    ),
    anchor_basic_info: Optional[bool] = typer.Option(
        None,
        "--anchor-basic-info/--no-anchor-basic-info",
        help="Snapshot input only: transform with or without --anchor-basic-info (default: transform's).",
    ),
    json_output: bool = typer.Option(
        False, "--json", help=f"Print the report as one JSON object (schema anchorkit-stats, version {auditing.SCHEMA_VERSION}; see docs/stats.md)."
    ),
    html: Optional[Path] = typer.Option(
        None,
        "--html",
        help="Also write the audit page to this file: self-contained HTML (inline SVG charts) with the date, version, options, tokenizer and gate verdict.",
    ),
    fail_under_coverage: Optional[float] = typer.Option(
        None, "--fail-under-coverage", min=0, max=100, help="Exit 1 if any chunker's coverage of the anchored documents is under P percent."
    ),
    fail_over_overhead: Optional[float] = typer.Option(
        None, "--fail-over-overhead", min=0, help="Exit 1 if the anchors add more than P percent tokens in total."
    ),
    jobs: int = typer.Option(0, "--jobs", "-j", min=0, help="Measure documents in this many processes (the report is identical). 0 (default): one per CPU core when there are more than 256 documents."),
) -> None:
    """Audit anchored documents: token overhead of the anchors, and chunk coverage with and without them.

    Every document is measured as it is and with its anchors removed; every chunker cuts both, and
    coverage is the share of chunks whose text names their own ticket (an anchor or the title line).
    The anchors' cost is shown beside the lower bound (the fewest anchor tokens that put a whole anchor
    in every window of --chunk-tokens), and a table gives coverage and cost at other chunk lengths.
    Exit code 1 if a document could not be read or a --fail-* gate failed (a gate over no documents fails).

    Example: anchorkit stats snapshot --chunk-tokens 512 --html stats.html --fail-under-coverage 99
    """
    if not path.is_dir():
        raise usage_error(f"{path}: not a folder (expected a transform output folder or a snapshot)")
    if tokenizer not in tokenizing.TOKENIZER_CHOICES:
        raise usage_error(f"--tokenizer must be one of {', '.join(tokenizing.TOKENIZER_CHOICES)}, not {tokenizer!r}")
    try:
        chunkers = [chunking.parse_chunker_spec(spec) for spec in chunking_specs] if chunking_specs else chunking.default_chunkers()
        choice = tokenizing.choose_tokenizer(tokenizer, tiktoken_file, allow_download=tokenizer == tokenizing.CL100K_BASE)
    except (ValueError, tokenizing.TokenizerUnavailable) as exc:
        raise usage_error(str(exc)) from None
    table = parse_lengths(lengths)
    source: dict[str, Any] = {"path": str(path)}
    if auditing.is_snapshot(path):
        given = {"anchor_basic_info": anchor_basic_info, "anchor_subject_chars": anchor_subject_chars}
        render = RenderOptions(chunk_tokens=chunk_tokens, **{name: value for name, value in given.items() if value is not None})
        # Spacing anchors are counted with the audit's own tokenizer.
        options = transforming.TransformOptions(render=render, sidecars=True, tokenizer=choice.tokenizer.name, tiktoken_file=tiktoken_file)
        others = [length for length in table if length != chunk_tokens]
        items = auditing.iter_snapshot(path, options, others)
        transform = {"chunk_tokens": chunk_tokens, "anchor_subject_chars": render.anchor_subject_chars, "anchor_basic_info": render.anchor_basic_info}
        source |= {"kind": "snapshot", "transform": transform}
    elif anchor_subject_chars is not None or anchor_basic_info is not None:
        raise usage_error("--anchor-subject-chars and --anchor-basic-info apply to snapshot input only (an output folder is already anchored)")
    else:
        items = auditing.iter_output_folder(path)
        source |= {"kind": "output", "transform": None}
    gates = auditing.Gates(fail_under_coverage, fail_over_overhead)
    measured_lengths = auditing.Lengths(chunk_tokens or auditing.DEFAULT_CHUNK_TOKENS, table)
    try:
        report = auditing.audit(items, choice, chunkers, source, gates, jobs, measured_lengths)
    except SnapshotError as exc:
        raise usage_error(str(exc)) from None
    report["run"] = {"generated_at": datetime.now(ZoneInfo("UTC")).isoformat(timespec="seconds"), "anchorkit_version": __version__}
    if html is not None:
        write_html(html, render_html(report))
    if json_output:
        print_json(report)
    else:
        print_stats_report(report)
    if report["errors"] or report["gates"]["failures"]:
        raise typer.Exit(1)


def parse_lengths(text: str) -> tuple[int, ...]:
    """``--lengths``: ``256,300,512`` (ascending, duplicates dropped) or ``none``."""
    if text.strip().lower() == "none":
        return ()
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise usage_error(f"--lengths must be positive token counts separated by commas (e.g. 256,300,512,1024) or none, not {text!r}")
    return tuple(sorted({int(part) for part in parts}))


def print_stats_report(report: dict[str, Any]) -> None:
    tokenizer = report["tokenizer"]
    if tokenizer["fallback_reason"]:
        print_problem("note", f"using approx tokens: {tokenizer['fallback_reason']}")
    for error in report["errors"]:
        print_problem("error", error["message"])
    overhead = report["overhead"]
    console.print(
        f"stats: {report['source']['documents']} documents ({report['source']['kind']} {report['source']['path']}), tokenizer {tokenizer['name']}",
        highlight=False,
        markup=False,
    )
    console.print(
        f"overhead: {overhead['anchor_tokens']:,} anchor tokens on {overhead['tokens_without_anchors']:,} = {format_percent(overhead['percent'])}; "
        f"per ticket p50 {format_percent(overhead['per_ticket_percent']['p50'])}, p90 {format_percent(overhead['per_ticket_percent']['p90'])}, "
        f"max {format_percent(overhead['per_ticket_percent']['max'])}",
        highlight=False,
    )
    table = Table(title="chunks that identify their own ticket", box=box.SIMPLE)
    longest_name = max((len(f"{row['chunker']}/{row['level']}") for row in report["chunking"]), default=7)
    table.add_column("chunker", no_wrap=True, min_width=longest_name)
    # Short headers keep the table within 80 columns; the README explains each one.
    for header in ("chunks", "anchored", "no anchors", "mentions", "max run"):
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
    console.print("limits: " + (", ".join(f"{name.replace('_', ' ')} {count}" for name, count in problems.items()) or "all within limits"), highlight=False)
    if not report["source"]["documents"] and not report["gates"]["failures"]:
        print_problem("note", f"no documents found in {report['source']['path']}")
    for failure in report["gates"]["failures"]:
        print_problem("gate failed", failure)


def print_efficiency(efficiency: dict[str, Any]) -> None:
    ratios = efficiency["per_ticket_ratio"]
    too_long = efficiency["documents_anchor_too_long"]
    console.print(
        f"efficiency at {efficiency['chunk_tokens']:,}-token chunks: {efficiency['anchor_tokens']:,} anchor tokens in {efficiency['anchors']:,} anchors "
        f"({format_percent(efficiency['overhead_percent'])}); lower bound {efficiency['bound_tokens']:,} tokens in {efficiency['bound_anchors']:,} anchors "
        f"({format_percent(efficiency['bound_overhead_percent'])}) = {format_ratio(efficiency['ratio_to_bound'])} the bound; "
        f"per ticket p50 {format_ratio(ratios['p50'])}, p90 {format_ratio(ratios['p90'])}, max {format_ratio(ratios['max'])}"
        + (f"; {too_long:,} documents whose anchor is too long for the window" if too_long else ""),
        highlight=False,
        markup=False,
    )


def print_length_table(lengths: dict[str, Any]) -> None:
    if not lengths["rows"]:
        return
    table = Table(
        title=f"chunk lengths: fixed windows sharing {lengths['overlap_percent']}%, documents {lengths['documents']}", box=box.SIMPLE
    )
    for header in ("chunk tokens", "coverage", "overhead", "bound", "x bound", "max run"):
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


# ------------------------------------------------------------------------------------------------
# sync: pull → transform → upload with one set of options (anchorkit.sync resolves them)


StateOption = Annotated[
    Optional[str],
    typer.Option(
        "--state",
        help="Keep the sync state (cursor, checksums, raw issues) at s3://bucket/prefix/ or a local folder, outside "
        "the documents' prefix, so a run on an empty disk stays incremental; exit code 3 when another run holds "
        "the state (see README, scheduled sync).",
    ),
]


def switch(name: str, help_text: str) -> Any:
    """A --name/--no-name flag that is None when not given, so the environment or config file decide."""
    return typer.Option(f"--{name}/--no-{name}", help=help_text)


@app.command("sync")
def sync_command(
    dest: Annotated[
        Optional[str], typer.Argument(help="s3://bucket/prefix or a local folder (or ANCHORKIT_DEST / config dest).")
    ] = None,
    config: Annotated[
        Optional[Path],
        typer.Option("--config", help=f"Config file (default: ${syncing.CONFIG_ENV}, else ./{syncing.CONFIG_FILE_NAME})."),
    ] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="Redmine base URL (or REDMINE_URL).")] = None,
    snapshot: Annotated[Optional[Path], typer.Option("--snapshot", help="Snapshot folder pull keeps up to date.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="Output folder transform writes and upload publishes.")] = None,
    project: Annotated[Optional[list[str]], ProjectOption] = None,
    full: Annotated[Optional[bool], switch("full", "Full listing (removes deleted/hidden issues) and fresh lookups.")] = None,
    concurrency: Annotated[Optional[int], ConcurrencyOption] = None,
    include_private: Annotated[
        Optional[bool], switch("include-private", "Keep private issues and private notes (pull and transform).")
    ] = None,
    api_key_file: Annotated[
        Optional[Path], typer.Option("--api-key-file", help="File holding the Redmine API key (default: $REDMINE_API_KEY).")
    ] = None,
    full_every: Annotated[Optional[int], FullEveryOption] = None,
    overlap: Annotated[Optional[float], OverlapOption] = None,
    lookups_max_age: Annotated[Optional[float], LookupsMaxAgeOption] = None,
    text_format: Annotated[
        Optional[str], typer.Option("--text-format", help="Redmine text format: textile or common_mark.")
    ] = None,
    timeout: Annotated[Optional[float], TimeoutOption] = None,
    retries: Annotated[Optional[int], RetriesOption] = None,
    sidecars: Annotated[Optional[bool], switch("sidecars", "Write Bedrock .metadata.json sidecars.")] = None,
    sidecar_schema: Annotated[Optional[str], SidecarSchemaOption] = None,
    layout: Annotated[Optional[str], LayoutOption] = None,
    lang: Annotated[Optional[str], LangOption] = None,
    label: Annotated[Optional[str], LabelOption] = None,
    anchor_basic_info: Annotated[
        Optional[bool], switch("anchor-basic-info", "Anchor the basic-info section too (on by default).")
    ] = None,
    chunk_tokens: Annotated[Optional[int], ChunkTokensOption] = None,
    anchor_subject_chars: Annotated[Optional[int], AnchorSubjectCharsOption] = None,
    timezone: Annotated[Optional[str], TimezoneOption] = None,
    max_text_bytes: Annotated[Optional[int], MaxTextBytesOption] = None,
    delete: Annotated[Optional[bool], switch("delete", "Delete remote objects with no local counterpart.")] = None,
    max_delete: MaxDeleteOption = None,
    force: Annotated[Optional[bool], switch("force", "Delete even beyond --max-delete.")] = None,
    dry_run: Annotated[
        Optional[bool], switch("dry-run", "Pull and transform, then only print the upload plan.")
    ] = None,
    threads: ThreadsOption = None,
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    retry_mode: RetryModeOption = None,
    max_attempts: MaxAttemptsOption = None,
    start_ingestion: StartIngestionOption = None,
    state: StateOption = None,
    lease_seconds: LeaseSecondsOption = None,
    json_output: JsonFlag = False,
) -> None:
    """Pull from Redmine, transform, and upload by content, in one go (flags > ANCHORKIT_*/REDMINE_* > anchorkit.toml)."""
    flags = {name: value for name, value in locals().items() if name in syncing.SETTINGS_BY_NAME}
    try:
        settings = syncing.resolve_from_environment(flags, config)
        publish_settings = publish_command_settings(
            settings["delete"], settings["max_delete"], settings["force"], settings["dry_run"],
            settings["threads"], settings["retry_mode"], settings["max_attempts"],
        )
    except (syncing.SyncConfigError, publishing.PublishError) as error:
        raise usage_error(str(error)) from None
    transform_settings = transform_options(
        settings["lang"], settings["label"], settings["include_private"], settings["anchor_basic_info"],
        settings["chunk_tokens"], settings["anchor_subject_chars"], settings["text_format"], settings["timezone"], settings["sidecars"],
        settings["sidecar_schema"], settings["layout"], settings["max_text_bytes"],
    )
    arguments = pull_arguments(
        settings["project"], settings["full"], settings["concurrency"], settings["include_private"],
        settings["full_every"], settings["overlap"], settings["lookups_max_age"], settings["text_format"],
        settings["retries"], settings["timeout"],
    )
    if settings["state"]:
        run_stateless_sync_command(settings, arguments, transform_settings, publish_settings, json_output)
        return
    snapshot_dir: Path = settings["snapshot"]
    out_dir: Path = settings["out"]
    aws = publishing.AwsSettings(settings["endpoint_url"], settings["region"], settings["profile"])
    destination = open_destination(out_dir, settings["dest"], publish_settings, aws, settings["start_ingestion"])
    pull_report = pull_with_progress(
        not json_output, settings["url"], snapshot_dir, read_api_key(settings["api_key_file"]), arguments
    )
    # The snapshot stays consistent even when some issues failed (they keep their previous copy),
    # so transform and upload still run; the exit code reports the failure.
    try:
        transform_report = transforming.transform_snapshot(snapshot_dir, out_dir, transform_settings)
    except SnapshotError as error:
        raise usage_error(str(error)) from None
    upload_report = run_publish(out_dir, destination, publish_settings, json_output)
    ok = pull_report.ok and not transform_report.failed and upload_report.ok
    if json_output:
        print_json(
            {
                "ok": ok,
                "pull": pull_report.to_json(),
                "transform": {"out": str(out_dir), **transform_report.as_dict()},
                "upload": upload_report.to_dict(),
            }
        )
    else:
        print_pull_report(pull_report, json_output=False)
        print_transform_report(transform_report, out_dir, check=False)
        print_publish_report(upload_report, json_output=False)
    if not ok:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------
# sync --state: the state beside the destination, for runners without a persistent disk (anchorkit.sync.run_sync)

CONFLICT_EXIT_CODE = 3  # another sync holds or changed the state: this run stopped, nothing of it was written


@contextlib.contextmanager
def state_run_exit_codes() -> Iterator[None]:
    """A run against a --state: exit 3 when another run holds or changed the state, 2 for unusable input."""
    try:
        yield
    except states.StateConflict as conflict:
        print_problem("stopped", str(conflict))
        raise typer.Exit(CONFLICT_EXIT_CODE) from None
    except (states.StateError, pulling.PullError, SnapshotError) as error:
        raise usage_error(str(error)) from None


def run_stateless_sync_command(
    settings: syncing.ResolvedSettings,
    arguments: syncing.PullArguments,
    transform_settings: transforming.TransformOptions,
    publish_settings: publishing.PublishSettings,
    json_output: bool,
) -> None:
    """Open the state store and the destination, run `syncing.run_sync`, print, exit 0/1/2/3."""
    import tempfile

    if publish_settings.dry_run:
        raise usage_error("--dry-run is not supported together with --state")
    try:
        destination = publishing.parse_destination(settings["dest"])
        location = publishing.parse_destination(settings["state"])
        states.check_state_apart(location, destination)
        aws = publishing.AwsSettings(settings["endpoint_url"], settings["region"], settings["profile"])
        target, session = publishing.open_target(destination, aws, publish_settings)
        store = states.open_store(
            location, aws, publish_settings, settings["lease_seconds"], client=getattr(target, "client", None)
        )
        ingestion = publishing.parse_ingestion_target(settings["start_ingestion"]) if settings["start_ingestion"] else None
    except publishing.PublishError as error:
        raise usage_error(str(error)) from None
    api_key = read_api_key(settings["api_key_file"])
    with tempfile.TemporaryDirectory(prefix="anchorkit-sync-") as scratch, state_run_exit_codes():
        report = syncing.run_sync(
            settings["url"], api_key, store, target, transform_settings, arguments,
            work_dir=settings["snapshot"] or Path(scratch) / "snapshot",
            delete=publish_settings.delete, max_delete=publish_settings.max_delete,
            force=publish_settings.force, threads=publish_settings.threads,
        )
    ingestion_job = None
    if ingestion is not None and report.ok:
        ingestion_job, error = publishing.try_start_ingestion(lambda: session.client("bedrock-agent"), *ingestion)
        if error:
            report.failures.append(publishing.Failure("--start-ingestion", error))
    print_stateless_sync_report(report, ingestion_job, json_output)
    if not report.ok:
        raise typer.Exit(1)


def print_stateless_sync_report(
    report: syncing.StatelessSyncReport, ingestion_job: dict[str, str] | None, json_output: bool
) -> None:
    if json_output:
        print_json({**report.to_dict(), "ingestion_job": ingestion_job})
        return
    for pull_report in report.pulls:
        print_pull_report(pull_report, json_output=False)
    console.print(
        f"{report.destination}: rendered {report.rendered}{' (all: output fingerprint changed)' if report.regenerated_all else ''}, "
        f"uploaded {len(report.uploaded)}, deleted {len(report.deleted)}, failed {len(report.failures)}; "
        f"state {report.state}: {'committed' if report.state_written else 'unchanged'} ({report.tickets} tickets) "
        f"in {report.seconds:.1f} s",
        highlight=False,
        markup=False,
    )
    print_ingestion_job(ingestion_job)
    if report.refused:
        print_problem("refused", report.refused)
    for failure in report.transform_failures:
        print_problem("failed", failure.message)
    for failure in report.failures:
        print_problem("failed", f"{failure.key}: {failure.error}")


# ------------------------------------------------------------------------------------------------
# pull --state: the snapshot's bookkeeping and raw issues kept in the sync state (anchorkit.sync.pull_with_state)


def run_pull_with_state_command(
    url: str,
    snapshot_dir: Path,
    api_key: str,
    arguments: syncing.PullArguments,
    state_url: str,
    aws: publishing.AwsSettings,
    threads: int | None,
    lease_seconds: float | None,
    json_output: bool,
) -> None:
    """Open the state store, run `syncing.pull_with_state`, print, exit 0/1/2/3."""
    publish_settings = publishing.PublishSettings(threads=threads or publishing.DEFAULT_THREADS)
    try:
        location = publishing.parse_destination(state_url)
        states.check_state_apart(location, snapshot_dir, folder_name="snapshot")
        store = states.open_store(location, aws, publish_settings, lease_seconds or states.DEFAULT_LEASE_SECONDS)
    except publishing.PublishError as error:
        raise usage_error(str(error)) from None
    with state_run_exit_codes(), pull_progress_bar(not json_output) as on_progress:
        report = syncing.pull_with_state(
            url, api_key, store, snapshot_dir, arguments, threads=publish_settings.threads, progress=on_progress
        )
    print_state_pull_report(report, json_output)
    if not report.ok:
        raise typer.Exit(1)


def print_state_pull_report(report: syncing.StatePullReport, json_output: bool) -> None:
    if json_output:
        print_json(report.to_dict())
        return
    if report.pull_report is not None:
        print_pull_report(report.pull_report, json_output=False)
    console.print(
        f"state {report.state}: restored {report.restored} issues into {report.snapshot}, stored "
        f"{report.state_issues_written}, dropped {report.state_issues_deleted}; "
        f"{'committed' if report.state_written else 'unchanged'} ({report.tickets} tickets) in {report.seconds:.1f} s",
        highlight=False,
        markup=False,
    )
    for failure in report.failures:
        print_problem("failed", f"{failure.key}: {failure.error}")
