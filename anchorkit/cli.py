"""The `anchorkit` command line: a thin layer over the library modules.

Conventions shared by every command:
- exit code 0 = everything done, 1 = something failed (listed) or `--check` found differences,
  2 = usage or setup error, 3 = another run holds the lock (anchorkit.errors); library errors carry
  their code and are turned into one line on stderr in one place, :class:`AnchorkitGroup`;
- `--json` prints one JSON object on stdout instead of the human summary;
- human output goes to stdout through rich, warnings and errors to stderr;
- secrets (API keys, AWS credentials) are never printed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from anchorkit import __version__
from anchorkit import audit as auditing
from anchorkit import sync as syncing
from anchorkit import tokens as tokenizing
from anchorkit import verify as verifying
from anchorkit.anchors import DEFAULT_LABEL
from anchorkit.audit import chunkers as chunking
from anchorkit.audit.html import format_percent, format_ratio, render_html
from anchorkit.errors import EXIT_FAILED, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, AnchorkitError, UsageError
from anchorkit.files import check_writable_folder, write_atomic
from anchorkit.publish import state as states
from anchorkit.publish import upload as publishing
from anchorkit.publish.aws import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_MODE,
    AwsSettings,
    RetryMode,
    S3Location,
    SseAlgorithm,
    as_setup_error,
    describe_error,
    parse_ingestion_target,
    parse_location,
    parse_retry_mode,
    try_start_ingestion,
)
from anchorkit.render import transform as transforming
from anchorkit.render.document import (
    DEFAULT_ANCHOR_SUBJECT_CHARS,
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_SPACING_ANCHORS,
    LABELS,
    SPACING_ANCHOR_FORMS,
    RenderOptions,
)
from anchorkit.render.sidecar import SCHEMAS
from anchorkit.render.textformat import TEXT_FORMATS
from anchorkit.source import pull as pulling
from anchorkit.source.redmine import RetryPolicy
from anchorkit.verify import inject as injecting
from anchorkit.verify.evaluation import EvalSummary, evaluate, load_cases
from anchorkit.verify.html import render_report
from anchorkit.verify.shapes import (
    CARRYING_SHAPES,
    InputError,
    load_answers,
    load_context,
    load_retrieval,
    load_retrieval_json,
)

# soft_wrap: never break a long line (paths, keys) in two; scripts grep this output.
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

# What a problem is called on stderr, by the exit code it ends the run with.
PROBLEM_KINDS = {EXIT_FAILED: "failed", EXIT_USAGE: "error", EXIT_LOCKED: "stopped"}


class AnchorkitGroup(typer.core.TyperGroup):
    """The one place where errors become exit codes: an :class:`AnchorkitError` ends the command with
    its ``exit_code`` and one line on stderr, never a traceback; so do the everyday errors of the layers
    below (S3 unreachable or misconfigured, a folder that cannot be written), as usage or setup errors."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        apply_option_conventions(self.commands)

    def invoke(self, ctx: typer.Context) -> Any:
        set_verbosity(verbose=False, quiet=False)  # per run: tests invoke many runs in one process
        try:
            return super().invoke(ctx)
        except AnchorkitError as error:
            code, message = error.exit_code, str(error)
        except (BotoCoreError, ClientError) as error:
            code, message = EXIT_USAGE, str(as_setup_error(error) or f"S3: {describe_error(error)}")
        except BrokenPipeError:  # `anchorkit ... | head`: the reader has what it wanted
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - Python flushes stdout at exit; it must not fail
            raise typer.Exit(EXIT_OK) from None
        except OSError as error:
            code, message = EXIT_USAGE, describe_os_error(error)
        print_problem(PROBLEM_KINDS[code], message)
        if ctx.meta.get(JSON_OUTPUT):  # a script reading stdout gets an answer too
            print_json({"ok": False, "error": message, "exit_code": code})
        raise typer.Exit(code)


# ------------------------------------------------------------------------------------------------
# Option sources, the same for every command: flag > ANCHORKIT_<NAME> (REDMINE_URL for --url) >
# anchorkit.toml > default. `sync` resolves its own (anchorkit.sync.options, which also reports where each
# value came from); pull, transform, upload and stats get the same through click: each option's envvar,
# and the config file's values as the command's default_map.

CONFIGURED_COMMANDS = ("pull", "transform", "upload", "stats")
NOT_FROM_ENVIRONMENT = {"json_output", "verbose", "quiet", "version", "help"}  # per invocation, never inherited
# The help panels of the commands with many options.
PANELLED_COMMANDS = ("sync", "pull")
PANELS = {
    "Redmine (pull)": (
        "url",
        "api_key_file",
        "snapshot",
        "project",
        "full",
        "include_private",
        "concurrency",
        "full_every",
        "overlap",
        "lookups_max_age",
        "timeout",
        "retries",
    ),
    "Documents (transform)": (
        "out",
        "text_format",
        "sidecars",
        "sidecar_schema",
        "layout",
        "lang",
        "label",
        "anchor_basic_info",
        "chunk_tokens",
        "anchor_subject_chars",
        "timezone",
        "max_text_bytes",
    ),
    "Destination (upload)": (
        "delete",
        "max_delete",
        "force",
        "dry_run",
        "threads",
        "endpoint_url",
        "region",
        "profile",
        "retry_mode",
        "max_attempts",
        "sse",
        "sse_kms_key_id",
        "start_ingestion",
    ),
    "State (runs without a persistent disk)": ("state", "lease_seconds"),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


def environment_names(name: str) -> list[str]:
    setting = syncing.SETTINGS_BY_NAME.get(name)
    return list(setting.env_names) if setting else [syncing.ENV_PREFIX + name.upper()]


def apply_option_conventions(commands: dict[str, Any]) -> None:
    """Every option of pull/transform/upload/stats reads ANCHORKIT_<NAME> (and --help says so), as do the
    arguments that are sync settings (OUT, DEST, SNAPSHOT); sync's help names the variables it reads; the
    options of sync and pull are grouped into panels. Done here once rather than on every declaration."""
    for command_name, command in commands.items():
        for param in command.params:
            is_option = param.param_type_name == "option"
            if command_name in PANELLED_COMMANDS and is_option and param.name in PANEL_OF:
                param.rich_help_panel = PANEL_OF[param.name]
            if param.name in NOT_FROM_ENVIRONMENT:
                continue
            if command_name == "sync" and param.name in syncing.SETTINGS_BY_NAME:
                shown = escape(f"[env var: {', '.join(environment_names(param.name))}]")  # help is rich markup
                param.help = f"{param.help or ''} {shown}".strip()
            elif command_name in CONFIGURED_COMMANDS and (is_option or param.name in syncing.SETTINGS_BY_NAME):
                param.envvar = environment_names(param.name)
                param.show_envvar = True


def config_defaults(parameter_names: set[str]) -> dict[str, Any]:
    """The values anchorkit.toml ($ANCHORKIT_CONFIG, else ./anchorkit.toml) gives these parameters."""
    path = syncing.find_config_file(None, os.environ, Path.cwd())
    if path is None:
        return {}
    return {
        name: syncing.from_config(syncing.SETTINGS_BY_NAME[name], value, f"config {path}", path.parent)
        for name, value in syncing.load_config(path).items()
        if name in parameter_names
    }


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


VerboseFlag = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        callback=verbose_callback,
        expose_value=False,
        help="Also say what is retried and why (Redmine and S3 requests).",
    ),
]
QuietFlag = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        callback=quiet_callback,
        expose_value=False,
        help="Print nothing but errors (for cron); --json output is still printed.",
    ),
]


JSON_OUTPUT = "anchorkit.json_output"  # ctx.meta key: the command was asked for --json


def remember_json_output(ctx: typer.Context, value: bool) -> bool:
    """--json's callback: the error handler, which sees only the group's context, prints JSON too."""
    ctx.meta[JSON_OUTPUT] = value  # meta is shared by the group's and the command's contexts
    return value


JsonFlag = Annotated[
    bool,
    typer.Option(
        "--json",
        callback=remember_json_output,
        help='Print one JSON object on stdout instead of the summary (with "ok"; on an error {ok: false, error, exit_code}).',
    ),
]


def describe_os_error(error: OSError) -> str:
    """``PATH: reason`` (``PATH -> OTHER: reason`` for a rename), as the shell would say it."""
    where = " -> ".join(str(name) for name in (error.filename, error.filename2) if name is not None)
    reason = error.strerror or describe_error(error)
    return f"{where}: {reason}" if where else reason


EXIT_CODES_HELP = (
    "Exit codes (every command): 0 done · 1 some work failed (listed; the rest was done, nothing written is "
    "corrupt) · 2 usage or setup error (bad option or destination, wrong API key, missing bucket, unwritable "
    "folder: nothing was done) · 3 another run holds the lock (nothing of this run was written)."
)

app = typer.Typer(
    name="anchorkit",
    help="Anchor every chunk of your Redmine tickets to its ticket ID, publish them for RAG, and prove it.\n\n"
    "Every option comes from the command line, else an ANCHORKIT_<OPTION> variable (REDMINE_URL for --url), "
    "else anchorkit.toml ($ANCHORKIT_CONFIG, else ./anchorkit.toml); each command's --help names the variables.",
    epilog=EXIT_CODES_HELP,
    cls=AnchorkitGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def print_json(payload: Any) -> None:
    """Machine-readable output: one JSON document on stdout, keys sorted for stable diffs."""
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True) + "\n")


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
    err_console.print(f"[{colour}]{kind}:[/{colour}] {escape(message)}", highlight=False)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 request``, ``2 requests``."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def print_ingestion_job(job: dict[str, str] | None) -> None:
    if job:
        console.print(f"ingestion job {job['ingestion_job_id']} ({job['status']})", highlight=False, markup=False)


def version_callback(value: bool) -> None:
    if value:
        console.print(f"anchorkit {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """anchorkit: pull → transform → upload → stats → verify."""
    command = ctx.invoked_subcommand
    if command in CONFIGURED_COMMANDS:
        parameters = {param.name for param in app_group(ctx).commands[command].params if param.name}
        ctx.default_map = {command: config_defaults(parameters)}


def app_group(ctx: typer.Context) -> AnchorkitGroup:
    group = ctx.command
    assert isinstance(group, AnchorkitGroup)
    return group


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
    spacing_anchors: str = DEFAULT_SPACING_ANCHORS,
) -> transforming.TransformOptions:
    """Validate the transform flags (exit 2 with a clear message) and build the options."""
    for name, value, allowed in (
        ("--lang", lang, tuple(LABELS)),
        ("--text-format", text_format, TEXT_FORMATS),
        ("--sidecar-schema", sidecar_schema, SCHEMAS),
        ("--layout", layout, transforming.LAYOUTS),
        ("--tokenizer", tokenizer, tokenizing.TOKENIZER_CHOICES),
        ("--spacing-anchors", spacing_anchors, SPACING_ANCHOR_FORMS),
    ):
        if value is not None and value not in allowed:
            raise UsageError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--timezone: unknown time zone {timezone!r} (use an IANA name such as Asia/Tokyo)") from None
    render = RenderOptions(
        lang=lang,
        include_private=include_private,
        anchor_basic_info=anchor_basic_info,
        chunk_tokens=chunk_tokens,
        anchor_subject_chars=anchor_subject_chars,
        spacing_anchors=spacing_anchors,
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


# Choices as types, so that --help and shell completion list them (and a typo is refused by name).
Layout = Literal[transforming.LAYOUTS]  # type: ignore[valid-type]
Lang = Literal[tuple(LABELS)]  # type: ignore[valid-type]
SidecarSchema = Literal[SCHEMAS]  # type: ignore[valid-type]
TextFormat = Literal[TEXT_FORMATS]  # type: ignore[valid-type]
SpacingAnchors = Literal[SPACING_ANCHOR_FORMS]  # type: ignore[valid-type]


# Options that `sync` shares with `transform` and `pull`: defined once, so limits and help cannot drift apart
# (the commands give the defaults: sync's None means "from the environment or config file").
SidecarSchemaOption = typer.Option(
    "--sidecar-schema",
    help="Sidecar attribute shape: simple (plain values) or typed (Bedrock's {value: {type, ...}, includeForEmbedding}).",
)
LayoutOption = typer.Option("--layout", help="flat: OUT/<id>.md; by-project: OUT/<project identifier>/<id>.md.")
LangOption = typer.Option(
    "--lang",
    help="Document labels: ja (チケット, 基本情報, 説明, 対応履歴) or en (Ticket, Details, Description, History).",
)
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
TimezoneOption = typer.Option(
    "--timezone",
    help="Time zone for the dates shown in documents (IANA name, e.g. Asia/Tokyo). Sidecar timestamps are always UTC.",
)
MaxTextBytesOption = typer.Option(
    "--max-text-bytes",
    min=1,
    help="A description or note larger than this (UTF-8 bytes) fails its ticket instead of producing a huge document.",
)
ProjectOption = typer.Option(
    "--project", help="Only this project (identifier or id; subprojects included). Repeatable, or comma-separated."
)
ConcurrencyOption = typer.Option("--concurrency", min=1, max=64, help="Issues fetched at the same time.")
FullEveryOption = typer.Option("--full-every", min=0, help="Make every K-th run a full listing (0: only with --full).")
OverlapOption = typer.Option("--overlap", min=0, help="Seconds before the cursor that incremental runs list again.")
LookupsMaxAgeOption = typer.Option("--lookups-max-age", min=0, help="Seconds before cached lookups.json is refreshed.")
TimeoutOption = typer.Option("--timeout", min=0.1, help="Read timeout per Redmine request, seconds.")
RetriesOption = typer.Option("--retries", min=1, help="Attempts per Redmine request, first included.")


@app.command()
def transform(
    snapshot: Path = typer.Argument(
        ..., help="Snapshot folder (issues/<id>.json, lookups.json, state.json), e.g. fixtures."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder for <id>.md documents (created if missing)."),
    sidecars: bool = typer.Option(
        False, "--sidecars", help="Also write Bedrock Knowledge Base <id>.md.metadata.json sidecars."
    ),
    sidecar_schema: Annotated[SidecarSchema, SidecarSchemaOption] = "simple",
    layout: Annotated[Layout, LayoutOption] = "flat",
    lang: Annotated[Lang, LangOption] = "ja",
    label: Annotated[str | None, LabelOption] = None,
    include_private: bool = typer.Option(
        False, "--include-private", help="Include private issues and private notes (left out by default)."
    ),
    anchor_basic_info: bool = typer.Option(
        True,
        "--anchor-basic-info/--no-anchor-basic-info",
        help="Anchor the basic-info section too (heading-based splitters cut it away from the title).",
    ),
    chunk_tokens: Annotated[int, ChunkTokensOption] = DEFAULT_CHUNK_TOKENS,
    anchor_subject_chars: Annotated[int, AnchorSubjectCharsOption] = DEFAULT_ANCHOR_SUBJECT_CHARS,
    spacing_anchors: SpacingAnchors = typer.Option(
        DEFAULT_SPACING_ANCHORS,
        "--spacing-anchors",
        help="The anchors placed for --chunk-tokens: short (> チケット #12345:, about 10 tokens) or full (with the "
        "subject, like the anchors after headings). The anchors after headings always carry the subject.",
    ),
    tokenizer: str = typer.Option(
        "auto",
        "--tokenizer",
        help="How --chunk-tokens counts: auto: cl100k_base if its vocabulary is on this machine (never downloaded), else approx "
        "(the estimate with a safety margin); cl100k_base: exact (exit 2 if its vocabulary is missing).",
    ),
    tiktoken_file: Path | None = typer.Option(
        None,
        "--tiktoken-file",
        help=f"cl100k_base.tiktoken vocabulary file (sha256-checked). Default: ${tokenizing.VOCABULARY_FILE_ENV}, then tiktoken's cache.",
    ),
    text_format: TextFormat | None = typer.Option(
        None,
        "--text-format",
        help="Redmine text format of all texts: textile or common_mark. Default: the snapshot's setting (state.json text_format), else textile.",
    ),
    timezone: Annotated[str, TimezoneOption] = "UTC",
    link_issues: str | None = typer.Option(
        None,
        "--link-issues",
        metavar="URL",
        help="Redmine base URL: turn #123 in ticket text into links to URL/issues/123 (kept as plain text by default).",
    ),
    max_text_bytes: Annotated[int, MaxTextBytesOption] = transforming.DEFAULT_MAX_TEXT_BYTES,
    check: bool = typer.Option(
        False,
        "--check",
        help="Write nothing; exit 1 listing what would be created, changed or removed, 0 if OUT is up to date.",
    ),
    jobs: int = typer.Option(
        0,
        "--jobs",
        "-j",
        min=0,
        help="Render and write tickets in this many processes (the output is identical). 0 (default): one per CPU core when there are more than 256 tickets.",
    ),
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Turn a snapshot into one anchored Markdown document per ticket (and optional sidecars).

    Every section and every journal entry carries the anchor line `> チケット #ID: subject`, and more
    anchors are placed so that any window of --chunk-tokens tokens holds one: any chunk of that
    length names its ticket, wherever the chunker cuts. Output is deterministic: unchanged files are not
    rewritten, outputs of tickets no longer in the snapshot are removed, bad tickets are reported
    (file and reason) while the others are still done; exit code 1 if any ticket failed.

    Example:

        anchorkit transform snap --out out --sidecars --lang en --timezone Asia/Tokyo
    """
    if link_issues and not re.match(r"https?://[^\s]+$", link_issues):
        raise UsageError(f"--link-issues must be an http(s) URL, not {link_issues!r}")
    options = transform_options(
        lang,
        label,
        include_private,
        anchor_basic_info,
        chunk_tokens,
        anchor_subject_chars,
        text_format,
        timezone,
        sidecars,
        sidecar_schema,
        layout,
        max_text_bytes,
        link_issues,
        tokenizer,
        tiktoken_file,
        spacing_anchors,
    )
    if not check:
        check_writable_folder(out, "--out")
    report = transforming.transform_snapshot(snapshot, out, options, check=check, jobs=jobs)
    if json_output:
        ok = not report.failed and not (check and report.differs)
        print_json({"ok": ok, "check": check, "out": str(out), **report.as_dict()})
    else:
        print_transform_report(report, out, check)
    if report.failed or (check and report.differs):
        raise typer.Exit(1)


def print_transform_report(report: transforming.TransformReport, out: Path, check: bool) -> None:
    if report.tokenizer_note:
        print_problem(
            "note", f"--chunk-tokens counted with approx tokens (and a safety margin): {report.tokenizer_note}"
        )
    for warning in report.warnings:
        print_problem("warning", warning)
    for failure in report.failed:
        print_problem("failed", failure.message)
    if check:
        for verb, paths in (
            ("would create", report.created),
            ("would change", report.changed),
            ("would remove", report.removed),
        ):
            for path in paths:
                console.print(f"{verb} {out / path}", highlight=False, markup=False)
        state = "differs from the snapshot" if report.differs else "is up to date"
        console.print(
            f"check: {out} {state} ({plural(report.tickets, 'ticket')}, {len(report.failed)} failed)", highlight=False
        )
        return
    console.print(
        f"transform: {plural(report.tickets, 'ticket')} → {out}: {len(report.created)} created, {len(report.changed)} changed, "
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
    str | None,
    typer.Option(
        "--max-delete",
        help="Refuse to delete more than this many objects: a count (25) or a percentage of the objects "
        f"under the prefix (10%). Default {publishing.DEFAULT_MAX_DELETE}.",
    ),
]
ForceFlag = Annotated[bool, typer.Option("--force", help="Delete even beyond --max-delete.")]
SHOWN_UPLOAD_KEYS = 10  # a first upload plans thousands; deletes are always listed in full
DryRunFlag = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the plan and change nothing: counts, every key to delete, the first "
        f"{SHOWN_UPLOAD_KEYS} to upload (--json: every key).",
    ),
]
ListKeysFlag = Annotated[
    bool, typer.Option("--list-keys", help="With --dry-run: print every key to upload, not only the first ones.")
]
ThreadsOption = Annotated[
    int | None,
    typer.Option("--threads", min=1, max=256, help=f"Parallel requests. Default {publishing.DEFAULT_THREADS}."),
]
EndpointOption = Annotated[
    str | None, typer.Option("--endpoint-url", help="S3 endpoint for S3-compatible stores (e.g. SeaweedFS, MinIO).")
]
RegionOption = Annotated[str | None, typer.Option("--region", help="AWS region (else the credential chain's).")]
ProfileOption = Annotated[str | None, typer.Option("--profile", help="AWS profile from ~/.aws/config.")]
SseOption = Annotated[
    SseAlgorithm | None,
    typer.Option(
        "--sse",
        help="Server-side encryption of every object written (documents, sidecars, the sync state), as the aws cli's.",
    ),
]
SseKmsKeyIdOption = Annotated[
    str | None,
    typer.Option(
        "--sse-kms-key-id", help="With --sse aws:kms: the KMS key (id, ARN or alias) instead of the AWS managed key."
    ),
]
RetryModeOption = Annotated[
    RetryMode | None,
    typer.Option(
        "--retry-mode",
        help="botocore retry mode for throttling, 5xx and dropped connections: standard or adaptive "
        "(adaptive also slows the client down when S3 throttles). Default standard.",
    ),
]
MaxAttemptsOption = Annotated[
    int | None,
    typer.Option(
        "--max-attempts", min=1, help=f"Attempts per request, first included. Default {DEFAULT_MAX_ATTEMPTS}."
    ),
]
StartIngestionOption = Annotated[
    str | None,
    typer.Option(
        "--start-ingestion",
        metavar="KB_ID:DATA_SOURCE_ID",
        help="After a fully successful upload, start a Bedrock Knowledge Base ingestion job for this data source.",
    ),
]
LeaseSecondsOption = Annotated[
    float | None,
    typer.Option(
        "--lease-seconds",
        min=1,
        help="With an S3 --state: how long a run's write lease lasts before another run may take it.",
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
        disable=not (show_progress and err_console.is_terminal),  # no bar characters in CI logs
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


def print_planned_keys(planned_keys: dict[str, list[str]], list_keys: bool, how_to_see_all: str) -> None:
    """A dry run's keys: every delete (the part to review before it happens), the first uploads or all."""
    uploads = planned_keys["upload"]
    shown = uploads if list_keys else uploads[:SHOWN_UPLOAD_KEYS]
    for key in shown:
        console.print(f"  upload {key}", highlight=False, markup=False)
    if len(shown) < len(uploads):
        console.print(
            f"  … and {len(uploads) - len(shown)} more uploads ({how_to_see_all})", highlight=False, markup=False
        )
    for key in planned_keys["delete"]:
        console.print(f"  delete {key}", highlight=False, markup=False)


def print_publish_report(report: publishing.PublishReport, json_output: bool, list_keys: bool = False) -> None:
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
        print_planned_keys(summary["planned_keys"], list_keys, "--list-keys prints them all")
    else:
        console.print(
            f"{report.destination}: uploaded {summary['uploaded']}, skipped {summary['skipped']}, "
            f"deleted {summary['deleted']}, failed {summary['failed']}, {summary['bytes']:,} bytes "
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
        retry_mode=parse_retry_mode(retry_mode or DEFAULT_RETRY_MODE),
        max_attempts=max_attempts or DEFAULT_MAX_ATTEMPTS,
    )


@dataclass(frozen=True)
class PublishDestination:
    target: publishing.Target
    session: Any  # the boto3 session, also used for Bedrock
    ingestion: tuple[str, str] | None  # (knowledge base id, data source id) of --start-ingestion


def open_destination(
    source: Path, dest: str, settings: publishing.PublishSettings, aws: AwsSettings, start_ingestion: str | None
) -> PublishDestination:
    """Shared by `upload` and `sync`: the destination and --start-ingestion, checked before any work (exit 2)."""
    destination = parse_location(dest)
    ingestion = parse_ingestion_target(start_ingestion) if start_ingestion else None
    if isinstance(destination, Path):
        publishing.check_folders_apart(source, destination)
    target, session = publishing.open_target(destination, aws, settings)
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
    list_keys: ListKeysFlag = False,
    threads: ThreadsOption = None,
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    sse: SseOption = None,
    sse_kms_key_id: SseKmsKeyIdOption = None,
    retry_mode: RetryModeOption = None,
    max_attempts: MaxAttemptsOption = None,
    start_ingestion: StartIngestionOption = None,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Publish OUT to S3 (or a folder) by content: only new/changed objects are uploaded.

    Example:

        anchorkit upload out s3://kb-docs/tickets --delete --dry-run
        anchorkit upload out s3://kb-docs/tickets --delete --sse aws:kms --start-ingestion KB12345678:DS12345678
    """
    if not out.is_dir():
        raise UsageError(f"{out} is not a folder")
    settings = publish_command_settings(delete, max_delete, force, dry_run, threads, retry_mode, max_attempts)
    aws = AwsSettings(endpoint_url, region, profile, sse, sse_kms_key_id)
    destination = open_destination(out, dest, settings, aws, start_ingestion)
    report = run_publish(out, destination, settings, json_output)
    print_publish_report(report, json_output, list_keys)
    if not report.ok:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------
# pull: fetch tickets from Redmine into a snapshot, incrementally (anchorkit.pull)


API_KEY_ENV = "REDMINE_API_KEY"


def warn_if_readable_by_others(path: Path) -> None:
    """A key file other users may read is a leaked key on a shared runner: say so (the run goes on)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # reading it reports the problem
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        print_problem("warning", f"{path} is readable by other users (mode {stat.S_IMODE(mode):04o}); chmod 600 {path}")


def read_api_key(api_key_file: Path | None) -> str:
    """The key from --api-key-file, else $REDMINE_API_KEY; a usage error (exit 2) when there is none."""
    if api_key_file is not None:
        warn_if_readable_by_others(api_key_file)
        try:
            key = api_key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"{api_key_file}: cannot read the API key file ({type(error).__name__})") from None
        if not key:
            raise UsageError(f"{api_key_file}: the API key file is empty")
        return key
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        raise UsageError(f"no Redmine API key: set {API_KEY_ENV} or pass --api-key-file")
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
        disable=not (show_progress and err_console.is_terminal),  # no bar characters in CI logs
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
) -> pulling.PullSettings:
    """What `pull` and `sync` were asked to pull, from their command-line values."""
    return pulling.PullSettings(
        projects=tuple(part.strip() for value in projects or () for part in value.split(",") if part.strip()),
        full=full,
        concurrency=concurrency,
        include_private=include_private,
        full_every=full_every,
        overlap_s=overlap,
        lookups_max_age_s=lookups_max_age,
        text_format=text_format,
        policy=RetryPolicy(attempts=retries, read_timeout_s=timeout),
    )


def pull_with_progress(
    show_progress: bool, url: str, snapshot_dir: Path, api_key: str, arguments: pulling.PullSettings
) -> pulling.PullReport:
    """Run the pull with a rich progress bar of the issue fetches on stderr."""
    with pull_progress_bar(show_progress) as on_progress:
        return syncing.run_pull(
            url, api_key, snapshot_dir, arguments, full=arguments.full, known={}, progress=on_progress
        )


def print_pull_report(report: pulling.PullReport, json_output: bool) -> None:
    if json_output:
        print_json(report.to_json())
        return
    console.print(
        f"{'full' if report.full else 'incremental'} pull: listed {report.listed}, fetched {report.fetched}, "
        f"unchanged {report.unchanged}, removed {report.removed}, private skipped {report.skipped_private}, "
        f"failed {len(report.failed)}; {plural(report.requests, 'request')} ({plural(report.retries, 'retry', 'retries')}) "
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
    snapshot: Annotated[
        Path,
        typer.Option("--snapshot", help="Snapshot folder to create or update (issues/, lookups.json, state.json)."),
    ],
    project: Annotated[list[str] | None, ProjectOption] = None,
    full: Annotated[
        bool, typer.Option("--full", help="List every issue (removes deleted/hidden ones) and refresh the lookups.")
    ] = False,
    concurrency: Annotated[int, ConcurrencyOption] = pulling.DEFAULT_CONCURRENCY,
    include_private: Annotated[
        bool, typer.Option("--include-private", help="Keep private issues and private notes (left out by default).")
    ] = False,
    api_key_file: Annotated[
        Path | None,
        typer.Option("--api-key-file", help=f"File holding the API key (default: ${API_KEY_ENV})."),
    ] = None,
    full_every: Annotated[int, FullEveryOption] = pulling.DEFAULT_FULL_EVERY,
    overlap: Annotated[float, OverlapOption] = pulling.DEFAULT_OVERLAP_S,
    lookups_max_age: Annotated[float, LookupsMaxAgeOption] = pulling.DEFAULT_LOOKUPS_MAX_AGE_S,
    text_format: Annotated[
        TextFormat | None,
        typer.Option(
            "--text-format",
            help="Text format of the Redmine (textile or common_mark), recorded in a new snapshot's state.json "
            "(default textile); an existing value is never overwritten.",
        ),
    ] = None,
    timeout: Annotated[float, TimeoutOption] = RetryPolicy.read_timeout_s,
    retries: Annotated[int, RetriesOption] = RetryPolicy.attempts,
    state: Annotated[
        str | None,
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
    sse: SseOption = None,
    sse_kms_key_id: SseKmsKeyIdOption = None,
    threads: ThreadsOption = None,
    retry_mode: RetryModeOption = None,
    max_attempts: MaxAttemptsOption = None,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Fetch new and changed issues (with journals) from Redmine into SNAPSHOT; exit 1 if any failed.

    With --state the bookkeeping and raw issues live in a sync state, and `sync --state` publishes what
    this stored (see README, pull --state).

    Example:

        anchorkit pull --url https://redmine.example.com --snapshot snap --project helpdesk
        anchorkit pull --url https://redmine.example.com --snapshot snap --state s3://kb-docs/anchorkit-state/
    """
    if text_format is not None and text_format not in pulling.TEXT_FORMATS:
        raise UsageError(f"--text-format must be one of {', '.join(pulling.TEXT_FORMATS)}")
    arguments = pull_arguments(
        project, full, concurrency, include_private, full_every, overlap, lookups_max_age, text_format, retries, timeout
    )
    pulling.check_snapshot_folder(snapshot)
    if state is not None:
        aws = AwsSettings(endpoint_url, region, profile, sse, sse_kms_key_id)
        publish_settings = publish_command_settings(False, None, False, False, threads, retry_mode, max_attempts)
        run_pull_with_state_command(
            url,
            snapshot,
            read_api_key(api_key_file),
            arguments,
            state,
            aws,
            publish_settings,
            lease_seconds,
            json_output,
        )
        return
    report = pull_with_progress(not json_output, url, snapshot, read_api_key(api_key_file), arguments)
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
    Literal["pass", "block"],
    typer.Option(
        "--on-empty",
        help="When chunks were retrieved but none carries a ticket id (an unknown URI layout): pass (keep ids, report "
        "'unchecked') or block (treat every id as phantom). Nothing retrieved at all always makes every id phantom.",
    ),
]
StrictFlag = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Exit 1 if anything critical was found (phantom ticket ids or sources, an answer that should have refused).",
    ),
]
MinIdDigitsOption = Annotated[
    int,
    typer.Option(
        "--min-id-digits",
        min=1,
        max=12,
        help="A bare #n (no label such as チケット/Ticket/Redmine before it, not in a Redmine URL) counts as a ticket id "
        "only with at least this many digits, or when n was retrieved: '手順 #2' is a step, not ticket #2.",
    ),
]
MinScoreOption = Annotated[
    float | None,
    typer.Option(
        "--min-score",
        help="When every retrieved chunk has a score below this (Bedrock's score), treat it as nothing retrieved: "
        "the answer should refuse (critical not_refused if it names tickets or cites sources).",
    ),
]


def verify_settings(
    uri_pattern: str,
    quote_threshold: float,
    grounding_threshold: float,
    on_invalid: str,
    on_empty: str,
    min_id_digits: int = verifying.DEFAULT_MIN_ID_DIGITS,
    min_score: float | None = None,
) -> verifying.VerifyOptions:
    """Options checked up front: a bad pattern or mode is a usage error (exit 2), not a traceback."""
    if on_invalid not in ("drop", "flag"):
        raise UsageError("--on-invalid must be drop or flag")
    if on_empty not in ("pass", "block"):
        raise UsageError("--on-empty must be pass or block")
    try:
        pattern = verifying.compile_uri_pattern(uri_pattern)
    except (re.error, ValueError) as exc:
        raise UsageError(f"--uri-pattern: {exc}") from None
    return verifying.VerifyOptions(
        pattern,
        quote_threshold,
        grounding_threshold,
        on_invalid,
        on_empty,
        min_id_digits,
        min_score,  # type: ignore[arg-type]
    )


@dataclass
class VerifyInputs:
    chunks: list[verifying.Chunk]
    notes: list[str]
    answers: list[tuple[str, verifying.Answer]]
    errors: list[str]  # unreadable lines of a JSON Lines answer file
    context_chunks: list[verifying.Chunk]
    context_texts: list[str]


def read_verify_inputs(retrieval: Path | None, answer: Path | None, contexts: list[Path]) -> VerifyInputs:
    """All input files, or exit: 2 for a missing file, an unreadable file, malformed JSON or an unknown shape."""
    with input_errors():
        if retrieval is None and answer is None:
            raise UsageError("give --retrieval, --answer, or both")
        read = load_retrieval(retrieval) if retrieval is not None and answer is not None else None
        if answer is None:
            try:
                answers, errors = load_answers(retrieval)  # type: ignore[arg-type]
            except InputError:
                answers, errors = [], []
            if not answers or any(a.shape not in CARRYING_SHAPES for _, a in answers):
                raise UsageError(
                    "--answer is required unless --retrieval holds the answer too (RetrieveAndGenerate, LlamaIndex)"
                )
        else:
            answers, errors = load_answers(answer)
        if read is None and retrieval is None and any(a.shape not in CARRYING_SHAPES for _, a in answers):
            raise UsageError(
                "--retrieval is required unless the answer carries its retrieval (RetrieveAndGenerate, LlamaIndex, LangChain context)"
            )
        context_chunks: list[verifying.Chunk] = []
        context_texts: list[str] = []
        for path in contexts:
            more_chunks, texts = load_context(path)
            context_chunks += more_chunks
            context_texts += texts
    return VerifyInputs(
        read.chunks if read else [], read.notes if read else [], answers, errors, context_chunks, context_texts
    )


@contextlib.contextmanager
def input_errors() -> Iterator[None]:
    """Exit 2 for an input file that is missing, unreadable, malformed or of an unknown shape."""
    try:
        yield
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise UsageError(f"{exc.filename}: {exc.strerror}") from None


def write_html(path: Path, html: str) -> None:
    """The --html report, atomically; an unwritable path is a usage error (exit 2), not a traceback."""
    try:
        write_atomic(path, html.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"--html {path}: {exc.strerror or exc}") from None


def print_verify_report(report: verifying.VerifyReport, origin: str | None = None) -> None:
    """Human summary: each finding with where it is, the filtered answer, dropped claims marked.

    Untrusted text (answers, chunks) is written as it is, never through rich's markup, and in one
    write: a huge answer costs what the --json output costs."""
    lines = [f"== {origin}"] if origin else []
    lines += [f"{f.severity} {f.kind} ({f.where}): {f.message}" for f in report.findings]
    filtered = report.filtered_answer
    for label, key in (("summary", "summary"), ("answer (filtered)", "text")):
        if filtered[key]:
            lines += [f"{label}:", filtered[key]]
    kept = iter(filtered["claims"])
    for index, claim in enumerate(report.answer.claims):
        if index in report.dropped_claims:
            lines.append(f"{index + 1}. [dropped] {claim.text}")
            continue
        shown = next(kept)
        sources = ", ".join(c["source_id"] for c in shown["citations"])
        lines.append(f"{index + 1}. {shown['text']}" + (f" [{sources}]" if sources else ""))
        lines += [f"   > {c['quoted_span']}" for c in shown["citations"] if c["quoted_span"]]
    lines += [json.dumps(result, ensure_ascii=False, sort_keys=True) for result in filtered["results"]]
    lines.append(
        f"verify: grounding score {report.grounding_score:.2f}, {report.critical} critical, {report.warnings} warnings, "
        f"valid ids: {' '.join(f'#{i}' for i in sorted(report.valid_ids)) or 'none'}"
    )
    sys.stdout.write("\n".join(lines) + "\n")


@app.command("verify")
def verify_command(
    retrieval: Annotated[
        Path | None,
        typer.Option(
            "--retrieval",
            "-r",
            help="What was retrieved (docs/verify.md has the shapes): Bedrock Retrieve or RetrieveAndGenerate, LlamaIndex, "
            "a list of chunks (plain, seed 000 sources, LangChain documents). Not needed when the answer carries its retrieval.",
        ),
    ] = None,
    answer: Annotated[
        Path | None,
        typer.Option(
            "--answer",
            "-a",
            help="The answer, '-' for stdin: JSON of any answer shape (claims, cited answer, results, RetrieveAndGenerate, "
            "LlamaIndex…) whatever the file's suffix, JSON Lines of many answers, or plain text. "
            "Default: the --retrieval file (a RetrieveAndGenerate or LlamaIndex response holds the answer too).",
        ),
    ] = None,
    context: Annotated[
        list[Path] | None,
        typer.Option(
            "--context",
            help="Later turns: the context message sent to the model (text: its genuine anchors count, also indented, "
            "flattened or JSON-escaped), Bedrock Converse messages (user/system text), or an earlier retrieval "
            "(any retrieval shape, an injected one too). Its ticket ids are valid too. Repeatable.",
        ),
    ] = None,
    uri_pattern: UriPatternOption = verifying.DEFAULT_URI_PATTERN,
    quote_threshold: QuoteThresholdOption = verifying.DEFAULT_QUOTE_THRESHOLD,
    grounding_threshold: GroundingThresholdOption = verifying.DEFAULT_GROUNDING_THRESHOLD,
    on_invalid: Annotated[
        Literal["drop", "flag"],
        typer.Option(
            "--on-invalid",
            help="drop: remove phantom ids, citations and results from the filtered answer; flag: keep everything, only report.",
        ),
    ] = "drop",
    on_empty: OnEmptyOption = "pass",
    min_id_digits: MinIdDigitsOption = verifying.DEFAULT_MIN_ID_DIGITS,
    min_score: MinScoreOption = None,
    strict: StrictFlag = False,
    html_file: Annotated[
        Path | None,
        typer.Option(
            "--html",
            help="Also write the answer as a self-contained HTML page with numbered, flagged citations (one answer only).",
        ),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Print the report as one JSON object (JSON Lines answers: one object a line)."),
    ] = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Check an answer against the chunks retrieved for it; print the filtered answer and the findings.

    Findings: phantom ticket ids and sources, answers that should have refused (critical), quote drift,
    weak grounding, wrong tickets, mismatched URLs and subjects (warnings).

    Exit 0 (findings are reported, not fatal), 1 with --strict when something critical was found or when
    a line of a JSON Lines answer file could not be read, 2 for a usage error or input that cannot be read
    (missing file, malformed JSON, unknown shape).

    Example:

        anchorkit verify --retrieval retrieval.json --answer answer.json --strict --html answer.html
    """
    options = verify_settings(
        uri_pattern, quote_threshold, grounding_threshold, on_invalid, on_empty, min_id_digits, min_score
    )
    inputs = read_verify_inputs(retrieval, answer, context or [])
    if html_file is not None and len(inputs.answers) != 1:
        raise UsageError("--html takes a file of one answer")
    extra_valid = verifying.valid_ids(inputs.context_chunks, options.uri_pattern)
    several = len(inputs.answers) > 1 or bool(inputs.errors)
    critical = False
    for origin, parsed_answer in inputs.answers:
        report = verifying.verify_citations(
            parsed_answer,
            inputs.chunks,
            context=inputs.context_texts,
            extra_valid_ids=extra_valid,
            options=options,
            notes=inputs.notes,
        )
        critical = critical or report.critical > 0
        if html_file is not None:
            write_html(html_file, render_report(report))
        if json_output and several:  # JSON Lines: one compact object per answer
            sys.stdout.write(
                json.dumps({"origin": origin, **report.to_json()}, ensure_ascii=False, sort_keys=True) + "\n"
            )
        elif json_output:
            print_json(report.to_json())
        else:
            print_verify_report(report, origin if several else None)
    for error in inputs.errors:
        print_problem("error", error)
    if inputs.errors or (strict and critical):
        raise typer.Exit(1)


@app.command("eval")
def eval_command(
    cases_file: Annotated[
        Path,
        typer.Argument(
            help="JSONL file, one case a line: {id?, query, retrieved | sources, answer, expected_ids?, expected_source_ids?, "
            "context?} (retrieved and answer in any shape verify accepts; seed 000's EvalCase fields are accepted)."
        ),
    ],
    uri_pattern: UriPatternOption = verifying.DEFAULT_URI_PATTERN,
    quote_threshold: QuoteThresholdOption = verifying.DEFAULT_QUOTE_THRESHOLD,
    grounding_threshold: GroundingThresholdOption = verifying.DEFAULT_GROUNDING_THRESHOLD,
    on_empty: OnEmptyOption = "pass",
    min_id_digits: MinIdDigitsOption = verifying.DEFAULT_MIN_ID_DIGITS,
    min_score: MinScoreOption = None,
    strict: StrictFlag = False,
    min_grounding: Annotated[
        float | None,
        typer.Option("--min-grounding", min=0.0, max=1.0, help="Exit 1 if the mean grounding score is below this."),
    ] = None,
    max_phantom_rate: Annotated[
        float | None,
        typer.Option("--max-phantom-rate", min=0.0, max=1.0, help="Exit 1 if the phantom rate is above this."),
    ] = None,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Verify every case of an eval set (JSONL); print grounding, phantom rate, recall (by ticket and by source id), precision.

    Per-case findings are listed too.

    Exit 1 if a case could not be read (the others are still evaluated), with --strict if any case has a
    critical finding, or if --min-grounding / --max-phantom-rate are not met; 2 for a usage error.

    Example:

        anchorkit eval cases.jsonl --min-grounding 0.8 --max-phantom-rate 0 --json
    """
    options = verify_settings(
        uri_pattern, quote_threshold, grounding_threshold, "flag", on_empty, min_id_digits, min_score
    )
    with input_errors():
        cases, errors = load_cases(cases_file)
    summary = evaluate(cases, errors, options)
    failed_gates = (
        bool(summary.errors)
        or (strict and any(r.has_phantom for r in summary.results))
        or (min_grounding is not None and (summary.mean_grounding or 0.0) < min_grounding)
        or (max_phantom_rate is not None and (summary.phantom_rate or 0.0) > max_phantom_rate)
    )
    if json_output:
        print_json({"ok": not failed_gates, **summary.to_json()})
    else:
        print_eval_summary(summary)
    if failed_gates:
        raise typer.Exit(1)


def print_eval_summary(summary: EvalSummary) -> None:
    for error in summary.errors:
        print_problem("error", error)

    def shown(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    lines = []
    for result in summary.results:
        kinds = ", ".join(sorted({f.kind for f in result.report.findings})) or "no findings"
        cited = " ".join(f"#{i}" for i in sorted(result.report.cited_ids)) or "-"
        lines.append(f"{result.case.case_id}: grounding {result.report.grounding_score:.2f}, cited {cited}: {kinds}")
    lines.append(
        f"eval: {len(summary.results)} cases, {len(summary.errors)} unreadable; mean grounding {shown(summary.mean_grounding)}, "
        f"phantom rate {shown(summary.phantom_rate)}, source recall {shown(summary.source_recall)} by ticket, "
        f"{shown(summary.source_id_recall)} by source id, citation precision {shown(summary.citation_precision)}"
    )
    sys.stdout.write("\n".join(lines) + "\n")


@app.command("inject")
def inject_command(
    retrieval: Annotated[
        Path,
        typer.Argument(
            help="The retrieval, '-' for stdin: any shape verify reads (Bedrock Retrieve or RetrieveAndGenerate, LlamaIndex, a list of chunks)."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Write the anchored retrieval here (atomically) instead of stdout; the summary then goes to stdout.",
        ),
    ] = None,
    uri_pattern: UriPatternOption = verifying.DEFAULT_URI_PATTERN,
    label: Annotated[
        str, typer.Option("--label", help="Ticket label in the anchor lines (as transform's --label).")
    ] = DEFAULT_LABEL,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Exit 1 if a chunk got no anchor: its ticket is unknown, or its metadata and URI disagree."
        ),
    ] = False,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json", help="The summary as one JSON object (per chunk: status, ticket, where the ticket came from)."
        ),
    ] = False,
) -> None:
    """Prepend '> チケット #ID: subject' to each retrieved chunk (query-time anchoring); write the same shape back.

    The ticket comes from the chunk's ticket_id metadata, else its source URI, else a genuine anchor in it;
    the subject from the metadata, else the anchor, else the title. A chunk already starting with its
    anchor is left as it is; so is a chunk whose ticket is unknown or whose metadata and URI disagree
    (reported). Without --out the retrieval goes to stdout and the summary to stderr.

    Exit 0 done, 1 with --strict when a chunk got no anchor, 2 for a usage error or unusable input.
    """
    try:
        pattern = verifying.compile_uri_pattern(uri_pattern)
    except (re.error, ValueError) as exc:
        raise UsageError(f"--uri-pattern: {exc}") from None
    with input_errors():
        report = injecting.anchor_chunks(
            load_retrieval_json(retrieval), str(retrieval), uri_pattern=pattern, label=label
        )
    body = json.dumps(report.retrieval, ensure_ascii=False, indent=2) + "\n"
    if out is None:
        sys.stdout.write(body)
    else:
        try:
            write_atomic(out, body.encode("utf-8"))
        except OSError as exc:
            raise UsageError(f"--out {out}: {exc.strerror or exc}") from None
    summary = json.dumps(report.to_json(), ensure_ascii=False) if json_output else inject_summary(report)
    (sys.stdout if out is not None else sys.stderr).write(summary + "\n")
    if strict and (report.count("unknown_ticket") or report.count("conflict")):
        raise typer.Exit(1)


def inject_summary(report: injecting.InjectReport) -> str:
    lines = [f"{o.status} [{o.position}] {o.chunk_id}: {o.message}" for o in report.outcomes if o.message]
    lines += [f"note: {note}" for note in report.notes]
    counts = report.to_json()["counts"]
    lines.append(
        f"inject: {len(report.outcomes)} chunks ({report.shape}): {counts['anchored']} anchored, {counts['already_anchored']} already anchored, "
        f"{counts['unknown_ticket']} unknown ticket, {counts['conflict']} metadata/URI conflicts"
    )
    return "\n".join(lines)


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
    tiktoken_file: Path | None = typer.Option(
        None,
        "--tiktoken-file",
        help=f"cl100k_base.tiktoken vocabulary file (sha256-checked). Default: ${tokenizing.VOCABULARY_FILE_ENV}, then tiktoken's cache (TIKTOKEN_CACHE_DIR).",
    ),
    chunking_specs: list[str] | None = typer.Option(
        None,
        "--chunking",
        help="A chunker to measure, repeatable: NAME or NAME:key=value,... with NAME in "
        f"{', '.join(chunking.CHUNKERS)} (e.g. fixed:max_tokens=512,overlap=10). "
        "Default: fixed, hierarchical, semantic, heading with Bedrock's defaults, plus the LangChain splitters when installed.",
    ),
    chunk_tokens: int = typer.Option(
        DEFAULT_CHUNK_TOKENS,
        "--chunk-tokens",
        min=0,
        help="Snapshot input: transform with this --chunk-tokens (0: structural anchors only; see transform). "
        "Either input: the chunk length the anchors' cost is compared with the lower bound for "
        f"(an output folder: the --chunk-tokens it was made with; 0 compares with {DEFAULT_CHUNK_TOKENS}).",
    ),
    lengths: str = typer.Option(
        ",".join(map(str, auditing.CHUNK_LENGTHS)),
        "--lengths",
        help="The chunk lengths of the choice table, comma-separated (snapshot input: rendered at each one); 'none' for no table.",
    ),
    anchor_subject_chars: int | None = typer.Option(
        None,
        "--anchor-subject-chars",
        min=0,
        help=f"Snapshot input only: transform with this --anchor-subject-chars (default: transform's, {DEFAULT_ANCHOR_SUBJECT_CHARS}).",
    ),
    anchor_basic_info: bool | None = typer.Option(
        None,
        "--anchor-basic-info/--no-anchor-basic-info",
        help="Snapshot input only: transform with or without --anchor-basic-info (default: transform's).",
    ),
    json_output: bool = typer.Option(
        False,
        "--json",
        help=f"Print the report as one JSON object (schema anchorkit-stats, version {auditing.SCHEMA_VERSION}; see docs/stats.md).",
    ),
    html: Path | None = typer.Option(
        None,
        "--html",
        help="Also write the audit page to this file: self-contained HTML (inline SVG charts) with the date, version, options, tokenizer and gate verdict.",
    ),
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
    fail_under_coverage: float | None = typer.Option(
        None,
        "--fail-under-coverage",
        min=0,
        max=100,
        help="Exit 1 if any chunker's coverage of the anchored documents is under P percent.",
    ),
    fail_over_overhead: float | None = typer.Option(
        None, "--fail-over-overhead", min=0, help="Exit 1 if the anchors add more than P percent tokens in total."
    ),
    jobs: int = typer.Option(
        0,
        "--jobs",
        "-j",
        min=0,
        help="Measure documents in this many processes (the report is identical). 0 (default): one per CPU core when there are more than 256 documents.",
    ),
) -> None:
    """Audit anchored documents: token overhead of the anchors, and chunk coverage with and without them.

    Every document is measured as it is and with its anchors removed; every chunker cuts both, and
    coverage is the share of chunks whose text names their own ticket (an anchor or the title line).
    The anchors' cost is shown beside the lower bound (the fewest anchor tokens that put a whole anchor
    in every window of --chunk-tokens), and a table gives coverage and cost at other chunk lengths.
    Exit code 1 if a document could not be read or a --fail-* gate failed (a gate over no documents fails).

    Example:

        anchorkit stats snapshot --chunk-tokens 512 --html stats.html --fail-under-coverage 99
    """
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder (expected a transform output folder or a snapshot)")
    if tokenizer not in tokenizing.TOKENIZER_CHOICES:
        raise UsageError(f"--tokenizer must be one of {', '.join(tokenizing.TOKENIZER_CHOICES)}, not {tokenizer!r}")
    try:
        chunkers = (
            [chunking.parse_chunker_spec(spec) for spec in chunking_specs]
            if chunking_specs
            else chunking.default_chunkers()
        )
        choice = tokenizing.choose_tokenizer(
            tokenizer, tiktoken_file, allow_download=tokenizer == tokenizing.CL100K_BASE
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    table = parse_lengths(lengths)
    source: dict[str, Any] = {"path": str(path)}
    if auditing.is_snapshot(path):
        given = {"anchor_basic_info": anchor_basic_info, "anchor_subject_chars": anchor_subject_chars}
        render = RenderOptions(
            chunk_tokens=chunk_tokens, **{name: value for name, value in given.items() if value is not None}
        )
        # Spacing anchors are counted with the audit's own tokenizer.
        options = transforming.TransformOptions(
            render=render, sidecars=True, tokenizer=choice.tokenizer.name, tiktoken_file=tiktoken_file
        )
        others = [length for length in table if length != chunk_tokens]
        items = auditing.iter_snapshot(path, options, others)
        transform = {
            "chunk_tokens": chunk_tokens,
            "anchor_subject_chars": render.anchor_subject_chars,
            "anchor_basic_info": render.anchor_basic_info,
        }
        source |= {"kind": "snapshot", "transform": transform}
    elif anchor_subject_chars is not None or anchor_basic_info is not None:
        raise UsageError(
            "--anchor-subject-chars and --anchor-basic-info apply to snapshot input only (an output folder is already anchored)"
        )
    else:
        items = auditing.iter_output_folder(path)
        source |= {"kind": "output", "transform": None}
    gates = auditing.Gates(fail_under_coverage, fail_over_overhead)
    measured_lengths = auditing.Lengths(chunk_tokens or DEFAULT_CHUNK_TOKENS, table)
    report = auditing.audit(items, choice, chunkers, source, gates, jobs, measured_lengths)
    report["run"] = {
        "generated_at": datetime.now(ZoneInfo("UTC")).isoformat(timespec="seconds"),
        "anchorkit_version": __version__,
    }
    report["ok"] = not report["errors"] and not report["gates"]["failures"]
    if html is not None:
        write_html(html, render_html(report))
    if json_output:
        print_json(report)
    else:
        print_stats_report(report)
    if not report["ok"]:
        raise typer.Exit(1)


def parse_lengths(text: str) -> tuple[int, ...]:
    """``--lengths``: ``256,300,512`` (ascending, duplicates dropped) or ``none``."""
    if text.strip().lower() == "none":
        return ()
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise UsageError(
            f"--lengths must be positive token counts separated by commas (e.g. 256,300,512,1024) or none, not {text!r}"
        )
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
    console.print(
        "limits: "
        + (", ".join(f"{name.replace('_', ' ')} {count}" for name, count in problems.items()) or "all within limits"),
        highlight=False,
    )
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
        title=f"chunk lengths: fixed windows sharing {lengths['overlap_percent']}%, documents {lengths['documents']}",
        box=box.SIMPLE,
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
    str | None,
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
        str | None, typer.Argument(help="s3://bucket/prefix or a local folder (or ANCHORKIT_DEST / config dest).")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", help=f"Config file (default: ${syncing.CONFIG_ENV}, else ./{syncing.CONFIG_FILE_NAME})."
        ),
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="Redmine base URL (or REDMINE_URL).")] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Snapshot folder pull keeps up to date.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder transform writes and upload publishes.")
    ] = None,
    project: Annotated[list[str] | None, ProjectOption] = None,
    full: Annotated[
        bool | None, switch("full", "Full listing (removes deleted/hidden issues) and fresh lookups.")
    ] = None,
    concurrency: Annotated[int | None, ConcurrencyOption] = None,
    include_private: Annotated[
        bool | None, switch("include-private", "Keep private issues and private notes (pull and transform).")
    ] = None,
    api_key_file: Annotated[
        Path | None,
        typer.Option("--api-key-file", help="File holding the Redmine API key (default: $REDMINE_API_KEY)."),
    ] = None,
    full_every: Annotated[int | None, FullEveryOption] = None,
    overlap: Annotated[float | None, OverlapOption] = None,
    lookups_max_age: Annotated[float | None, LookupsMaxAgeOption] = None,
    text_format: Annotated[
        TextFormat | None, typer.Option("--text-format", help="Redmine text format: textile or common_mark.")
    ] = None,
    timeout: Annotated[float | None, TimeoutOption] = None,
    retries: Annotated[int | None, RetriesOption] = None,
    sidecars: Annotated[bool | None, switch("sidecars", "Write Bedrock .metadata.json sidecars.")] = None,
    sidecar_schema: Annotated[SidecarSchema | None, SidecarSchemaOption] = None,
    layout: Annotated[Layout | None, LayoutOption] = None,
    lang: Annotated[Lang | None, LangOption] = None,
    label: Annotated[str | None, LabelOption] = None,
    anchor_basic_info: Annotated[
        bool | None, switch("anchor-basic-info", "Anchor the basic-info section too (on by default).")
    ] = None,
    chunk_tokens: Annotated[int | None, ChunkTokensOption] = None,
    anchor_subject_chars: Annotated[int | None, AnchorSubjectCharsOption] = None,
    timezone: Annotated[str | None, TimezoneOption] = None,
    max_text_bytes: Annotated[int | None, MaxTextBytesOption] = None,
    delete: Annotated[bool | None, switch("delete", "Delete remote objects with no local counterpart.")] = None,
    max_delete: MaxDeleteOption = None,
    force: Annotated[bool | None, switch("force", "Delete even beyond --max-delete.")] = None,
    dry_run: Annotated[bool | None, switch("dry-run", "Pull and transform, then only print the upload plan.")] = None,
    threads: ThreadsOption = None,
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    sse: SseOption = None,
    sse_kms_key_id: SseKmsKeyIdOption = None,
    retry_mode: RetryModeOption = None,
    max_attempts: MaxAttemptsOption = None,
    start_ingestion: StartIngestionOption = None,
    state: StateOption = None,
    lease_seconds: LeaseSecondsOption = None,
    rescope: Annotated[
        bool,
        typer.Option(
            "--rescope",
            help="With --state: accept a Redmine URL, --project, --include-private or destination other than the "
            "state's (otherwise refused, exit 2); this run lists every issue, and with --delete deletes the documents "
            "of tickets outside the new scope. A command-line flag only.",
        ),
    ] = False,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Pull from Redmine, transform, and upload by content, in one go (flags > ANCHORKIT_*/REDMINE_* > anchorkit.toml).

    Example:

        anchorkit sync s3://kb-docs/tickets --url https://redmine.example.com --snapshot snap --out out --delete
        anchorkit sync s3://kb-docs/tickets --url https://redmine.example.com --state s3://kb-docs/anchorkit-state/
    """
    flags = {name: value for name, value in locals().items() if name in syncing.SETTINGS_BY_NAME}
    settings = syncing.resolve_from_environment(flags, config)
    publish_settings = publish_command_settings(
        settings["delete"],
        settings["max_delete"],
        settings["force"],
        settings["dry_run"],
        settings["threads"],
        settings["retry_mode"],
        settings["max_attempts"],
    )
    transform_settings = transform_options(
        settings["lang"],
        settings["label"],
        settings["include_private"],
        settings["anchor_basic_info"],
        settings["chunk_tokens"],
        settings["anchor_subject_chars"],
        settings["text_format"],
        settings["timezone"],
        settings["sidecars"],
        settings["sidecar_schema"],
        settings["layout"],
        settings["max_text_bytes"],
    )
    arguments = pull_arguments(
        settings["project"],
        settings["full"],
        settings["concurrency"],
        settings["include_private"],
        settings["full_every"],
        settings["overlap"],
        settings["lookups_max_age"],
        settings["text_format"],
        settings["retries"],
        settings["timeout"],
    )
    if settings["state"]:
        run_stateless_sync_command(settings, arguments, transform_settings, publish_settings, rescope, json_output)
        return
    if rescope:
        raise UsageError("--rescope needs --state")
    out_dir: Path = settings["out"]
    check_writable_folder(out_dir, "--out")  # before the pull, not after it
    aws = aws_settings(settings)
    destination = open_destination(out_dir, settings["dest"], publish_settings, aws, settings["start_ingestion"])
    api_key = read_api_key(settings["api_key_file"])
    with sync_progress(not json_output and err_console.is_terminal) as on_progress:
        report = syncing.sync_folders(
            settings["url"],
            api_key,
            settings["snapshot"],
            out_dir,
            destination.target,
            transform_settings,
            arguments,
            publish_settings,
            progress=on_progress,
        )
    if destination.ingestion is not None:
        publishing.ingest_after(
            report.upload, lambda: destination.session.client("bedrock-agent"), *destination.ingestion
        )
    if json_output:
        print_json(report.to_dict())
    else:
        print_pull_report(report.pull, json_output=False)
        print_transform_report(report.transform, out_dir, check=False)
        print_publish_report(report.upload, json_output=False)
    if not report.ok:
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------
# sync --state: the state beside the destination, for runners without a persistent disk (anchorkit.sync.run_sync)


def aws_settings(settings: syncing.ResolvedSettings) -> AwsSettings:
    return AwsSettings(*(settings[name] for name in ("endpoint_url", "region", "profile", "sse", "sse_kms_key_id")))


def parse_state_location(text: str) -> S3Location | Path:
    """--state as an S3 prefix or a local folder that can be written (exit 2 before any work otherwise)."""
    location = parse_location(text, "--state")
    if isinstance(location, Path):
        check_writable_folder(location, "--state")
    return location


def run_stateless_sync_command(
    settings: syncing.ResolvedSettings,
    arguments: pulling.PullSettings,
    transform_settings: transforming.TransformOptions,
    publish_settings: publishing.PublishSettings,
    rescope: bool,
    json_output: bool,
) -> None:
    """Open the state store and the destination, run `syncing.run_sync`, print, exit 0/1/2/3."""
    import tempfile

    destination = parse_location(settings["dest"])
    location = parse_state_location(settings["state"])
    if settings["snapshot"] is not None:  # the work folder: a snapshot, or a new or empty folder
        pulling.check_snapshot_folder(settings["snapshot"])
    states.check_state_apart(location, destination)
    aws = aws_settings(settings)
    target, session = publishing.open_target(destination, aws, publish_settings)
    store = states.open_store(
        location, aws, publish_settings, settings["lease_seconds"], client=getattr(target, "client", None)
    )
    ingestion = parse_ingestion_target(settings["start_ingestion"]) if settings["start_ingestion"] else None
    api_key = read_api_key(settings["api_key_file"])
    with (
        tempfile.TemporaryDirectory(prefix="anchorkit-sync-") as scratch,
        sync_progress(not json_output and err_console.is_terminal) as on_progress,
    ):
        report = syncing.run_sync(
            settings["url"],
            api_key,
            store,
            target,
            transform_settings,
            arguments,
            work_dir=settings["snapshot"] or Path(scratch) / "snapshot",
            delete=publish_settings.delete,
            max_delete=publish_settings.max_delete,
            force=publish_settings.force,
            threads=publish_settings.threads,
            dry_run=publish_settings.dry_run,
            rescope=rescope,
            progress=on_progress,
        )
    ingestion_job = None
    if ingestion is not None and report.ok and not report.dry_run:
        ingestion_job, error = try_start_ingestion(lambda: session.client("bedrock-agent"), *ingestion)
        if error:
            report.failures.append(publishing.Failure("--start-ingestion", error))
    print_stateless_sync_report(report, ingestion_job, json_output)
    if not report.ok:
        raise typer.Exit(1)


@contextlib.contextmanager
def sync_progress(show: bool) -> Iterator[syncing.SyncProgress]:
    """One rich progress bar per stage of `sync --state` (pulling, rendering, uploading) on stderr; only
    on a terminal, so CI logs get the summary alone."""
    progress = Progress(
        TextColumn("{task.description:<9}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err_console,
        disable=not show,
        transient=True,
    )
    tasks: dict[str, Any] = {}

    def on_progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task(stage, total=total)
        progress.update(tasks[stage], completed=done, total=total)

    with progress:
        yield on_progress


def print_stateless_sync_report(
    report: syncing.StatelessSyncReport, ingestion_job: dict[str, str] | None, json_output: bool
) -> None:
    if json_output:
        print_json({**report.to_dict(), "ingestion_job": ingestion_job})
        return
    for pull_report in report.pulls:
        print_pull_report(pull_report, json_output=False)
    if report.dry_run and report.plan is not None:
        print_sync_plan(report)
    else:
        console.print(
            f"{report.destination}: rendered {report.rendered}{' (all: output fingerprint changed)' if report.regenerated_all else ''}, "
            f"uploaded {len(report.uploaded)}, deleted {len(report.deleted)}, failed {len(report.failures)}; "
            f"state {report.state}: {'committed' if report.state_written else 'unchanged'} ({plural(report.tickets, 'ticket')}) "
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


def print_sync_plan(report: syncing.StatelessSyncReport) -> None:
    """`sync --state --dry-run`: what the run would write, nothing of which was."""
    assert report.plan is not None
    planned = report.plan.summary()
    cursor = planned["cursor"]
    console.print(
        f"plan for {report.destination} (dry run, nothing written): rendered {report.rendered}"
        f"{' (all: output fingerprint changed)' if report.regenerated_all else ''}, upload {planned['upload']} "
        f"({planned['upload_bytes']:,} bytes), delete {planned['delete']}"
        + (f", {planned['gone_kept']} of gone issues kept (no --delete)" if planned["gone_kept"] else "")
        + f"; state {report.state}: store {planned['store_issues']} raw issues, drop {planned['drop_issues']}, "
        f"cursor {cursor['from'] or '(none)'} -> {cursor['to'] or '(none)'}, "
        f"{'would be committed' if planned['state_rewritten'] else 'unchanged'}",
        highlight=False,
        markup=False,
    )
    print_planned_keys(planned["planned_keys"], False, "--json lists them all")


# ------------------------------------------------------------------------------------------------
# pull --state: the snapshot's bookkeeping and raw issues kept in the sync state (anchorkit.sync.pull_with_state)


def run_pull_with_state_command(
    url: str,
    snapshot_dir: Path,
    api_key: str,
    arguments: pulling.PullSettings,
    state_url: str,
    aws: AwsSettings,
    publish_settings: publishing.PublishSettings,
    lease_seconds: float | None,
    json_output: bool,
) -> None:
    """Open the state store, run `syncing.pull_with_state`, print, exit 0/1/2/3."""
    location = parse_state_location(state_url)
    states.check_state_apart(location, snapshot_dir, folder_name="snapshot")
    store = states.open_store(location, aws, publish_settings, lease_seconds or states.DEFAULT_LEASE_SECONDS)
    with pull_progress_bar(not json_output) as on_progress:
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


# ------------------------------------------------------------------------------------------------
# state: look at a sync state, and break the lease of a run that died holding it (anchorkit.state)

state_app = typer.Typer(
    help="Inspect the sync state of `sync --state` / `pull --state`, and break a stale lease.", no_args_is_help=True
)
app.add_typer(state_app, name="state")
StateArgument = Annotated[str, typer.Argument(help="The state: s3://bucket/prefix/ or a local folder.")]


def open_state(state_url: str, endpoint_url: str | None, region: str | None, profile: str | None) -> states.StateStore:
    """The store of a `state` command; the endpoint also from ANCHORKIT_ENDPOINT_URL, like the sync job's."""
    aws = AwsSettings(endpoint_url or os.environ.get("ANCHORKIT_ENDPOINT_URL"), region, profile)
    return states.open_store(parse_location(state_url, "--state"), aws, publishing.PublishSettings())


@state_app.command("show")
def state_show_command(
    state: StateArgument,
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
    json_output: JsonFlag = False,
) -> None:
    """Print a state's scope, cursor, ticket counts and lease (holder, expiry, active or stale); writes nothing.

    The lease status: "active" (a run on this host is writing), "held" (unexpired, holder on another host:
    active unless that run was killed), "stale" (expired, or its process is gone: the next run takes an
    expired lease over; `anchorkit state break-lease` ends one before it expires).
    """
    store = open_state(state, endpoint_url, region, profile)
    raw = store.read_manifest()
    manifest = syncing.Manifest() if raw is None else syncing.Manifest.from_json(raw, store.describe())
    lease = store.lease_status()
    now = time.time()
    exists = raw is not None
    shown = {
        "state": store.describe(),
        "exists": exists,
        "scope": manifest.scope.to_json() if manifest.scope else None,
        "cursor": manifest.cursor,
        "counts": manifest.counts(),
        "fingerprint": manifest.fingerprint,
        "lookups_refreshed_at": manifest.pull.get("lookups_refreshed_at"),
        "lease": lease.to_json(now) if lease else None,
    }
    if json_output:
        print_json(shown)
        return
    counts = manifest.counts()
    lines = [
        f"state {store.describe()}" + ("" if exists else " (empty: no run committed yet)"),
        f"scope: {manifest.scope.describe() if manifest.scope else '(not recorded: the next sync --state records it)'}",
        f"cursor: {manifest.cursor or '(none)'}",
        f"tickets: {counts['tickets']} ({counts['published']} published, {counts['unpublished']} not yet published, "
        f"{counts['gone']} gone with documents left; {counts['objects']} objects)",
    ]
    if lease is None:
        lines.append("lease: free")
    else:
        described = lease.to_json(now)
        expiry = f", expires {described['expires_at']}" if described["expires_at"] else ""
        lines.append(
            f"lease: {described['status']}, held by {lease.holder} since {described['taken_at'] or '?'}{expiry}"
        )
    for line in lines:
        console.print(line, highlight=False, markup=False)


@state_app.command("break-lease")
def state_break_lease_command(
    state: StateArgument,
    holder: Annotated[
        str,
        typer.Option("--holder", help="The holder `state show` names; nothing is broken if another holds the lease."),
    ],
    endpoint_url: EndpointOption = None,
    region: RegionOption = None,
    profile: ProfileOption = None,
) -> None:
    """End the S3 lease of a run that died holding it (kill -9, a lost runner) before it expires.

    The lease is rewritten as expired with If-Match on the ETag just read, so a live holder that renewed it
    meanwhile is never overridden (exit 3); another holder, no lease, or a holder running on this host: exit 2.
    A local state needs no breaking: the OS releases the lock of a dead process.
    """
    store = open_state(state, endpoint_url, region, profile)
    if not isinstance(store, states.S3StateStore):
        raise UsageError(f"{state}: a local state is held by an OS lock that dies with its process; nothing to break")
    broken = store.break_lease(holder)
    console.print(
        f"{store.describe()}: broke the lease of {broken.holder} (taken {states.iso_time(broken.taken_at) or '?'}, "
        f"would have expired {states.iso_time(broken.expires_at)}); the next run takes it over",
        highlight=False,
        markup=False,
    )
