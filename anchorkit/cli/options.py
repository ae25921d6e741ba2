"""The command-line options, declared once: the flags and help of each option, and the groups several
commands share (Redmine, documents, destination, AWS, state, verify's checks), as sqlite-utils bundles
its output options into one decorator.

A group is added to a command by :func:`with_options`: the command declares one parameter (say
``options: Values``) where the group's options go, and receives their values as one dict, keyed by the
settings' names. Defaults, bounds and environment variables come from the settings catalogue
(:mod:`anchorkit.settings`), never from here; for ``sync`` every option defaults to None ("not given"),
so that the environment and the config file decide, and a boolean flag is a ``--x/--no-x`` switch.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer

from anchorkit import settings
from anchorkit.cli import output
from anchorkit.settings import CHUNK, SETTINGS_BY_NAME, STATS, SYNC, TRANSFORM

# Choices as types, so that --help and shell completion list them (and a typo is refused by name).
Lang = Literal[settings.LANGS]  # type: ignore[valid-type]
Layout = Literal[settings.LAYOUTS]  # type: ignore[valid-type]
SidecarSchema = Literal[settings.SIDECAR_SCHEMAS]  # type: ignore[valid-type]
TextFormat = Literal[settings.TEXT_FORMATS]  # type: ignore[valid-type]
SpacingAnchors = Literal[settings.SPACING_ANCHOR_FORMS]  # type: ignore[valid-type]
RetryMode = Literal[settings.RETRY_MODES]  # type: ignore[valid-type]
SseAlgorithm = Literal[settings.SSE_ALGORITHMS]  # type: ignore[valid-type]
OnInvalid = Literal[settings.ON_INVALID]  # type: ignore[valid-type]
OnEmpty = Literal[settings.ON_EMPTY]  # type: ignore[valid-type]

Values = dict[str, Any]  # a group's option values, keyed by setting name
GROUP: Values = {}  # the default of a group's parameter (with_options replaces the parameter, never reads it)
Function = TypeVar("Function", bound=Callable[..., Any])


# --------------------------------------------------------------------------------------------------
# Per invocation, never from the environment: -v, -q, --json (an error answers it too: cli/app.py)


VerboseFlag = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        callback=output.verbose_callback,
        expose_value=False,
        help="Also say what is retried and why (Redmine and S3 requests).",
    ),
]
QuietFlag = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        callback=output.quiet_callback,
        expose_value=False,
        help="Print nothing but errors (for cron); what was asked for (--json, verify's answer, inject's output) is.",
    ),
]
JsonFlag = Annotated[
    bool,
    typer.Option(
        "--json",
        help='Print one JSON object on stdout instead of the summary (with "ok"; an error: {ok: false, error, '
        "exit_code}).",
    ),
]
PER_INVOCATION = {"json_output", "verbose", "quiet", "version", "help", "config", "rescope"}


# --------------------------------------------------------------------------------------------------
# Options declared once


@dataclass(frozen=True)
class Opt:
    """One option of the catalogue as the command line spells it."""

    name: str  # the setting
    decls: tuple[str, ...]
    kind: Any  # the value's type, None excluded
    help: str
    help_for: Mapping[str, str] = field(default_factory=dict)  # a command that says it otherwise
    metavar: str | None = None
    required: tuple[str, ...] = ()  # commands that cannot run without it (from wherever it comes)

    def parameter(self, command: str) -> inspect.Parameter:
        setting = SETTINGS_BY_NAME[self.name]
        extra: dict[str, Any] = {
            bound: value for bound in ("min", "max") if (value := getattr(setting, bound)) is not None
        }
        if self.metavar:
            extra["metavar"] = self.metavar
        if setting.choices and self.kind is str:  # a word the stage checks (not a Literal): completed all the same
            extra["autocompletion"] = completing(setting.choices)
        decls, kind = self.decls, self.kind
        if command == SYNC:  # None: not given here, so the environment or the config file decide
            if kind is bool and "/" not in decls[0]:
                flag = decls[0].removeprefix("--")
                decls = (f"--{flag}/--no-{flag}", *decls[1:])
            default, kind = None, kind | None
        elif setting.kind is list:
            default, kind = None, kind | None  # click's "none given" for a repeatable option
        elif command in self.required:
            default = ...
        else:
            default = setting.default_for(command)
            kind = kind if default is not None else kind | None
        option = typer.Option(*decls, help=self.help_for.get(command, self.help), **extra)
        return inspect.Parameter(
            self.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
        )


def completing(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Shell completion of an option's words: those that begin with what was typed."""

    def complete(incomplete: str) -> list[str]:
        return [choice for choice in choices if choice.startswith(incomplete)]

    return complete


def with_options(command: str, **groups: tuple[Opt, ...]) -> Callable[[Function], Function]:
    """Put each group's options where the command declares the parameter of that name, and hand the command
    their values as one dict under that name."""

    def decorate(function: Function) -> Function:
        signature = inspect.signature(function, eval_str=True)
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name in groups:
                parameters += [opt.parameter(command) for opt in groups[parameter.name]]
            else:
                parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(function)
        def run(**values: Any) -> Any:
            for name, opts in groups.items():
                values[name] = {opt.name: values.pop(opt.name) for opt in opts}
            return function(**values)

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": signature.return_annotation}
        return run  # type: ignore[return-value]

    return decorate


def some_of(group: tuple[Opt, ...], *names: str) -> tuple[Opt, ...]:
    """The options of ``group`` named ``names``, in the group's order: for a command that takes only those."""
    unknown = set(names) - {opt.name for opt in group}
    if unknown:
        raise KeyError(f"not in the group: {', '.join(sorted(unknown))}")
    return tuple(opt for opt in group if opt.name in names)


RENDERING_COMMANDS = (TRANSFORM, CHUNK)  # they render a snapshot's tickets, and say so alike

REDMINE = (
    Opt(
        "url",
        ("--url",),
        str,
        "Redmine base URL, e.g. https://redmine.example.com.",
        {CHUNK: "Redmine base URL of the chunks' links (default: what the snapshot or the sidecars recorded)."},
        metavar="URL",
        required=(settings.PULL,),
    ),
    Opt(
        "project",
        ("--project",),
        list[str],
        "Only this project (identifier or id; subprojects included). Repeatable, or comma-separated.",
        metavar="PROJECT",
    ),
    Opt(
        "full",
        ("--full",),
        bool,
        "List every issue (removes deleted or hidden ones), fetch each again (one request per issue: notes made "
        "private, edited or deleted change no date Redmine lists) and refresh the lookups.",
    ),
    Opt("concurrency", ("--concurrency",), int, "Issues fetched at the same time."),
    Opt(
        "include_private",
        ("--include-private",),
        bool,
        "Keep private issues and private notes (left out by default).",
        dict.fromkeys(RENDERING_COMMANDS, "Include private issues and private notes (left out by default)."),
    ),
    Opt(
        "api_key_file",
        ("--api-key-file",),
        Path,
        "File holding the API key (default: $REDMINE_API_KEY).",
        metavar="FILE",
    ),
    Opt("full_every", ("--full-every",), int, "Make every N-th run a full listing (0: only with --full)."),
    Opt(
        "refetch_every",
        ("--refetch-every",),
        float,
        "Fetch every issue again when the last time is this long ago, as --full does (0: only with --full).",
        metavar="SECONDS",
    ),
    Opt(
        "watch_moves",
        ("--watch-moves/--no-watch-moves",),
        bool,
        "With --project, incremental runs list every project's changes and keep the pulled ones', so an issue "
        "moved to another project leaves at once (else at the next full listing); costs a request per 100 changes "
        "in the other projects.",
    ),
    Opt(
        "overlap",
        ("--overlap",),
        float,
        "Incremental runs list again what changed this long before the cursor.",
        metavar="SECONDS",
    ),
    Opt(
        "lookups_max_age",
        ("--lookups-max-age",),
        float,
        "Refresh the cached lookups.json when it is older than this.",
        metavar="SECONDS",
    ),
    Opt(
        "text_format",
        ("--text-format",),
        TextFormat,
        "The Redmine's text format, recorded in a new snapshot (an existing one is kept; default textile).",
        dict.fromkeys(
            RENDERING_COMMANDS, "Text format of every text (default: the snapshot's state.json, else textile)."
        ),
    ),
    Opt("timeout", ("--timeout",), float, "Read timeout per Redmine request.", metavar="SECONDS"),
    Opt("retries", ("--retries",), int, "Attempts per Redmine request, the first included."),
)
# What the chunker needs of --chunk-tokens (chunk.pipeline.check_chunk_size, which refuses less; the numbers are
# its MIN_CHUNK_TOKENS and chunk.core's MIN_CONTENT_TOKENS, not imported: --help must not load the chunker).
_CHUNK_LIMITS = (
    "at least 32, and room for the shortest anchor, > チケット #1: or --label's, --chunk-overlap and 16 tokens "
    "of content"
)
DOCUMENTS = (
    Opt(
        "sidecars",
        ("--sidecars",),
        bool,
        "Also write Bedrock Knowledge Base <id>.md.metadata.json sidecars.",
        {CHUNK: "With --out: a Bedrock Knowledge Base .metadata.json sidecar beside each chunk file."},
    ),
    Opt(
        "sidecar_schema",
        ("--sidecar-schema",),
        SidecarSchema,
        "Sidecar attributes as plain values (simple) or Bedrock's typed form (typed).",
    ),
    Opt("layout", ("--layout",), Layout, "flat: OUT/<id>.md; by-project: OUT/<project identifier>/<id>.md."),
    Opt(
        "lang", ("--lang",), Lang, "Document labels: ja (チケット, 基本情報, 説明, 対応履歴) or en (Ticket, Details …)."
    ),
    Opt("label", ("--label",), str, "Ticket label in titles and anchors, up to 40 characters (default: --lang's)."),
    Opt(
        "anchor_basic_info",
        ("--anchor-basic-info/--no-anchor-basic-info",),
        bool,
        "Anchor the basic-info section too (heading splitters cut it away from the title).",
    ),
    CHUNK_TOKENS_OPTION := Opt(
        "chunk_tokens",
        ("--chunk-tokens",),
        int,
        "Your knowledge base's chunk length: any window of N tokens holds an anchor or the title "
        "(0: anchors after headings only).",
        {
            CHUNK: f"The longest chunk, in tokens ({_CHUNK_LIMITS}); each holds its ticket's anchor or title line.",
            SYNC: "Your knowledge base's chunk length: any window of N tokens holds an anchor or the title "
            f"(0: anchors after headings only); with --chunks, the longest chunk ({_CHUNK_LIMITS}).",
        },
    ),
    Opt(
        "anchor_subject_chars",
        ("--anchor-subject-chars",),
        int,
        "Cut the subject in anchor lines to N characters (0: never; the title keeps it).",
    ),
    Opt(
        "spacing_anchors",
        ("--spacing-anchors",),
        SpacingAnchors,
        "Anchors placed for --chunk-tokens: short (> チケット #ID:) or full (with the subject).",
    ),
    Opt(
        "timezone",
        ("--timezone",),
        str,
        "IANA time zone of the dates shown in documents, e.g. Asia/Tokyo (sidecars are UTC).",
        metavar="TZ",
    ),
    Opt(
        "max_text_bytes",
        ("--max-text-bytes",),
        int,
        "A description or note over this many UTF-8 bytes fails its ticket.",
        {STATS: "Snapshot input: transform with this --max-text-bytes (default: transform's)."},
        metavar="BYTES",
    ),
    Opt(
        "link_issues",
        ("--link-issues",),
        str,
        "Your Redmine's base URL: turn #123 in ticket text into links to URL/issues/123.",
        metavar="URL",
    ),
)
# sync --chunks (with --chunk-tokens above): anchorkit's own chunks instead of documents.
CHUNK_OVERLAP_OPTION = Opt(
    "chunk_overlap",
    ("--chunk-overlap",),
    int,
    "With --chunks: each chunk but a ticket's first also repeats up to N tokens of the end of the one before:"
    " whole lines, items, rows or blocks, or a paragraph's last sentences (0: none; at most half of --chunk-tokens).",
    {
        CHUNK: "Each chunk but a ticket's first also repeats up to N tokens of the end of the one before: whole"
        " lines, items, rows or blocks, or a paragraph's last sentences (0: none; at most half of --chunk-tokens)."
    },
)
CHUNKS = (
    Opt(
        "chunks",
        ("--chunks",),
        bool,
        "Publish anchorkit's chunks (<id>/<id>-NNN.md, each with its sidecar; --chunk-tokens long) instead "
        "of documents.",
    ),
    CHUNK_OVERLAP_OPTION,
)
PUBLISHING = (
    Opt(
        "delete",
        ("--delete",),
        bool,
        "Delete objects under the prefix that have no local counterpart.",
        # With --state no listing finds what has no local counterpart: the state's record of what it published
        # for each ticket decides (docs/sync.md, "One run").
        {
            SYNC: "Delete objects under the prefix that have no local counterpart; with --state, the objects the "
            "state published for tickets gone from Redmine, or with --rescope from the scope (the prefix is not "
            "listed)."
        },
    ),
    Opt(
        "max_delete",
        ("--max-delete",),
        str,
        "Refuse to delete more than N objects, or P% of those under the prefix.",
        metavar="N|P%",
    ),
    Opt("force", ("--force",), bool, "Delete even beyond --max-delete."),
    Opt(
        "dry_run",
        ("--dry-run",),
        bool,
        f"Print the plan and change nothing (every delete, the first {output.SHOWN_UPLOAD_KEYS} uploads).",
        {SYNC: "Pull and transform, then only print the upload plan (with --state, nothing is written: no lock)."},
    ),
    Opt("list_keys", ("--list-keys",), bool, "With --dry-run: print every key to upload, not only the first."),
)
S3_CLIENT = (
    Opt("threads", ("--threads",), int, "Parallel requests."),
    Opt(
        "retry_mode",
        ("--retry-mode",),
        RetryMode,
        "botocore's retries of throttling, 5xx and dropped connections (adaptive also slows down).",
    ),
    Opt("max_attempts", ("--max-attempts",), int, "Attempts per request, the first included."),
)
AWS = (
    Opt(
        "endpoint_url",
        ("--endpoint-url",),
        str,
        "S3 endpoint of an S3-compatible store (MinIO, SeaweedFS).",
        metavar="URL",
    ),
    Opt("region", ("--region",), str, "AWS region (default: the credential chain's).", metavar="REGION"),
    Opt("profile", ("--profile",), str, "AWS profile from ~/.aws/config.", metavar="PROFILE"),
)
ENCRYPTION = (
    Opt(
        "sse",
        ("--sse",),
        SseAlgorithm,
        "Server-side encryption of every object written (documents, sidecars, the sync state).",
    ),
    Opt(
        "sse_kms_key_id",
        ("--sse-kms-key-id",),
        str,
        "With --sse aws:kms: your KMS key (id, ARN or alias) instead of the AWS managed one.",
        metavar="KEY",
    ),
)
INGESTION = (
    Opt(
        "start_ingestion",
        ("--start-ingestion",),
        str,
        "After a fully successful upload, start a Bedrock Knowledge Base ingestion job.",
        metavar="KB_ID:DATA_SOURCE_ID",
    ),
)
STATE = (
    Opt(
        "state",
        ("--state",),
        str,
        "Keep the cursor and raw issues in the sync state (s3://bucket/prefix/ or a folder) that "
        "`sync --state` publishes from (docs/sync.md).",
        {
            SYNC: "Keep the sync state (cursor, checksums, raw issues) at s3://bucket/prefix/ or a folder, so "
            "that a run on an empty disk stays incremental (docs/sync.md)."
        },
        metavar="LOCATION",
    ),
    Opt(
        "lease_seconds",
        ("--lease-seconds",),
        float,
        "With an S3 --state: how long a dead run's lease keeps others out (a live run renews it).",
        metavar="SECONDS",
    ),
)
TOKENIZER = (
    Opt(
        "tokenizer",
        ("--tokenizer",),
        str,  # checked by the stage, whose message names the choices
        "How --chunk-tokens counts: cl100k_base (default) exactly, with the vocabulary shipped with anchorkit; "
        "approx: the estimate with a safety margin.",
        {
            settings.STATS: "How tokens are counted: cl100k_base (default) exactly, with the vocabulary shipped "
            "with anchorkit; approx: the cheap estimate."
        },
    ),
    Opt(
        "tiktoken_file",
        ("--tiktoken-file",),
        Path,
        "Read cl100k_base from this .tiktoken file (plain or gzipped) instead of the shipped copy (sha256-checked).",
        metavar="FILE",
    ),
)
JOBS = (
    Opt(
        "jobs",
        ("--jobs", "-j"),
        int,
        "Processes that render tickets (same output); 0: one per core beyond 256 tickets.",
        {
            settings.CHUNK: "Processes that read and chunk tickets (same output); 0: one per core beyond 256 tickets.",
            settings.STATS: "Processes that measure documents (same report); 0: one per core beyond 256 documents.",
        },
    ),
)
CHECK = (
    Opt(
        "check",
        ("--check",),
        bool,
        "Write nothing: list what would change; exit 1 if anything would, 0 if OUT is up to date.",
        {
            CHUNK: "Write nothing: list what would change; exit 1 if anything would, 0 if --out or --jsonl "
            "is up to date."
        },
    ),
)
# anchorkit's own chunks: their length (transform's --chunk-tokens, meaning the same) and overlap.
CHUNKING = (*some_of(DOCUMENTS, "chunk_tokens"), CHUNK_OVERLAP_OPTION)
CHECKS = (
    Opt(
        "uri_pattern",
        ("--uri-pattern",),
        str,
        "Regular expression whose one group is the ticket id in a chunk's source URI.",
        metavar="REGEX",
    ),
    Opt(
        "quote_threshold",
        ("--quote-threshold",),
        float,
        "quote_drift when a quote is less similar than this to the best part of its chunk.",
        metavar="SCORE",
    ),
    Opt(
        "grounding_threshold",
        ("--grounding-threshold",),
        float,
        "weak_grounding when less than this share of a claim's words is in its cited chunks.",
        metavar="SHARE",
    ),
    Opt(
        "on_empty",
        ("--on-empty",),
        OnEmpty,
        "Chunks retrieved, but none names a ticket: pass (report 'unchecked') or block (every id phantom).",
    ),
    Opt(
        "min_id_digits",
        ("--min-id-digits",),
        int,
        "A bare #n (no ticket label, not in a Redmine URL) is a ticket id only with this many digits.",
    ),
    Opt(
        "min_score",
        ("--min-score",),
        float,
        "Every chunk scored below this: as if nothing was retrieved (the answer should refuse).",
        metavar="SCORE",
    ),
    Opt(
        "strict",
        ("--strict",),
        bool,
        "Exit 1 if anything critical was found (phantom ids or sources, an answer that should have refused).",
    ),
)
