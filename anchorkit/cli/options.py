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
from anchorkit.settings import SETTINGS_BY_NAME, SYNC

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
# Per invocation, never from the environment: -v, -q, --json

JSON_OUTPUT = "anchorkit.json_output"  # ctx.meta key: the command was asked for --json


def remember_json_output(ctx: typer.Context, value: bool) -> bool:
    """--json's callback: the error handler, which sees only the group's context, prints JSON too."""
    ctx.meta[JSON_OUTPUT] = value  # meta is shared by the group's and the command's contexts
    return value


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
        help="Print nothing but errors (for cron); --json output is still printed.",
    ),
]
JsonFlag = Annotated[
    bool,
    typer.Option(
        "--json",
        callback=remember_json_output,
        help='Print one JSON object on stdout instead of the summary (with "ok"; '
        "on an error {ok: false, error, exit_code}).",
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


REDMINE = (
    Opt(
        "url",
        ("--url",),
        str,
        "Redmine base URL, e.g. https://redmine.example.com.",
        {SYNC: "Redmine base URL (or REDMINE_URL)."},
        required=(settings.PULL,),
    ),
    Opt(
        "project",
        ("--project",),
        list[str],
        "Only this project (identifier or id; subprojects included). Repeatable, or comma-separated.",
    ),
    Opt(
        "full",
        ("--full",),
        bool,
        "List every issue (removes deleted/hidden ones) and refresh the lookups.",
        {SYNC: "Full listing (removes deleted/hidden issues) and fresh lookups."},
    ),
    Opt("concurrency", ("--concurrency",), int, "Issues fetched at the same time."),
    Opt(
        "include_private",
        ("--include-private",),
        bool,
        "Keep private issues and private notes (left out by default).",
        {SYNC: "Keep private issues and private notes (pull and transform)."},
    ),
    Opt(
        "api_key_file",
        ("--api-key-file",),
        Path,
        "File holding the API key (default: $REDMINE_API_KEY).",
        {SYNC: "File holding the Redmine API key (default: $REDMINE_API_KEY)."},
    ),
    Opt("full_every", ("--full-every",), int, "Make every K-th run a full listing (0: only with --full)."),
    Opt("overlap", ("--overlap",), float, "Seconds before the cursor that incremental runs list again."),
    Opt("lookups_max_age", ("--lookups-max-age",), float, "Seconds before cached lookups.json is refreshed."),
    Opt(
        "text_format",
        ("--text-format",),
        TextFormat,
        "Text format of the Redmine (textile or common_mark), recorded in a new snapshot's state.json "
        "(default textile); an existing value is never overwritten.",
        {SYNC: "Redmine text format: textile or common_mark."},
    ),
    Opt("timeout", ("--timeout",), float, "Read timeout per Redmine request, seconds."),
    Opt("retries", ("--retries",), int, "Attempts per Redmine request, first included."),
)
DOCUMENTS = (
    Opt(
        "sidecars",
        ("--sidecars",),
        bool,
        "Also write Bedrock Knowledge Base <id>.md.metadata.json sidecars.",
        {SYNC: "Write Bedrock .metadata.json sidecars."},
    ),
    Opt(
        "sidecar_schema",
        ("--sidecar-schema",),
        SidecarSchema,
        "Sidecar attribute shape: simple (plain values) or typed "
        "(Bedrock's {value: {type, ...}, includeForEmbedding}).",
    ),
    Opt("layout", ("--layout",), Layout, "flat: OUT/<id>.md; by-project: OUT/<project identifier>/<id>.md."),
    Opt(
        "lang",
        ("--lang",),
        Lang,
        "Document labels: ja (チケット, 基本情報, 説明, 対応履歴) or en (Ticket, Details, Description, History).",
    ),
    Opt("label", ("--label",), str, "Ticket label in titles and anchors, overriding --lang's (e.g. Issue)."),
    Opt(
        "anchor_basic_info",
        ("--anchor-basic-info/--no-anchor-basic-info",),
        bool,
        "Anchor the basic-info section too (heading-based splitters cut it away from the title).",
        {SYNC: "Anchor the basic-info section too (on by default)."},
    ),
    Opt(
        "chunk_tokens",
        ("--chunk-tokens",),
        int,
        "Place anchors so that any window of this many tokens (your knowledge base's chunk length) holds a "
        "complete anchor or the title line; long blocks are split between items, rows, lines or sentences. "
        "300: Bedrock's default fixed-size chunk. 0: only the anchors after headings.",
    ),
    Opt(
        "anchor_subject_chars",
        ("--anchor-subject-chars",),
        int,
        "Cut the subject in anchor lines to this many characters (ending in …); the title keeps it whole. "
        "Long subjects make every anchor expensive. 0: the whole subject.",
    ),
    Opt(
        "spacing_anchors",
        ("--spacing-anchors",),
        SpacingAnchors,
        "The anchors placed for --chunk-tokens: short (> チケット #12345:, about 10 tokens) or full (with the "
        "subject, like the anchors after headings). The anchors after headings always carry the subject.",
    ),
    Opt(
        "timezone",
        ("--timezone",),
        str,
        "Time zone for the dates shown in documents (IANA name, e.g. Asia/Tokyo). Sidecar timestamps are always UTC.",
    ),
    Opt(
        "max_text_bytes",
        ("--max-text-bytes",),
        int,
        "A description or note larger than this (UTF-8 bytes) fails its ticket instead of producing a huge document.",
    ),
)
PUBLISHING = (
    Opt("delete", ("--delete",), bool, "Delete remote objects under the prefix that have no local counterpart."),
    Opt(
        "max_delete",
        ("--max-delete",),
        str,
        "Refuse to delete more than this many objects: a count (25) or a percentage of the objects "
        "under the prefix (10%).",
    ),
    Opt("force", ("--force",), bool, "Delete even beyond --max-delete."),
    Opt(
        "dry_run",
        ("--dry-run",),
        bool,
        "Print the plan and change nothing: counts, every key to delete, the first "
        f"{output.SHOWN_UPLOAD_KEYS} to upload (--json: every key).",
        {SYNC: "Pull and transform, then only print the upload plan."},
    ),
)
S3_CLIENT = (
    Opt("threads", ("--threads",), int, "Parallel requests."),
    Opt(
        "retry_mode",
        ("--retry-mode",),
        RetryMode,
        "botocore retry mode for throttling, 5xx and dropped connections: standard or adaptive "
        "(adaptive also slows the client down when S3 throttles).",
    ),
    Opt("max_attempts", ("--max-attempts",), int, "Attempts per request, first included."),
)
AWS = (
    Opt("endpoint_url", ("--endpoint-url",), str, "S3 endpoint for S3-compatible stores (e.g. SeaweedFS, MinIO)."),
    Opt("region", ("--region",), str, "AWS region (else the credential chain's)."),
    Opt("profile", ("--profile",), str, "AWS profile from ~/.aws/config."),
)
ENCRYPTION = (
    Opt(
        "sse",
        ("--sse",),
        SseAlgorithm,
        "Server-side encryption of every object written (documents, sidecars, the sync state), as the aws cli's.",
    ),
    Opt(
        "sse_kms_key_id",
        ("--sse-kms-key-id",),
        str,
        "With --sse aws:kms: the KMS key (id, ARN or alias) instead of the AWS managed key.",
    ),
)
INGESTION = (
    Opt(
        "start_ingestion",
        ("--start-ingestion",),
        str,
        "After a fully successful upload, start a Bedrock Knowledge Base ingestion job for this data source.",
        metavar="KB_ID:DATA_SOURCE_ID",
    ),
)
STATE = (
    Opt(
        "state",
        ("--state",),
        str,
        "Keep the cursor and the raw issues in the sync state at s3://bucket/prefix/ or a local folder "
        "(the one `sync --state` uses): the --snapshot folder is first made a copy of it, then pulled, and what "
        "changed is stored back; the next `sync --state` publishes it. Exit code 3 when another run holds the "
        "state.",
        {
            SYNC: "Keep the sync state (cursor, checksums, raw issues) at s3://bucket/prefix/ or a local folder, "
            "outside the documents' prefix, so a run on an empty disk stays incremental; exit code 3 when another "
            "run holds the state (see README, scheduled sync)."
        },
    ),
    Opt(
        "lease_seconds",
        ("--lease-seconds",),
        float,
        "With an S3 --state: how long a run's write lease lasts unless renewed (a live run renews it every "
        "third of that): how long a run that died keeps others out.",
    ),
)
TOKENIZER = (
    Opt(
        "tokenizer",
        ("--tokenizer",),
        str,  # checked by the stage, whose message names the choices
        "How --chunk-tokens counts: cl100k_base (default): exactly, with the vocabulary shipped with anchorkit "
        "(the same documents on every machine); approx: the estimate with a safety margin.",
        {
            settings.STATS: "cl100k_base (default): exact, with the vocabulary shipped with anchorkit; "
            "approx: the cheap estimate."
        },
    ),
    Opt(
        "tiktoken_file",
        ("--tiktoken-file",),
        Path,
        "Read cl100k_base from this .tiktoken file (plain or gzipped) instead of the copy shipped with anchorkit; "
        "it must be the same vocabulary (sha256-checked, exit 2 otherwise). Default: $ANCHORKIT_TIKTOKEN_FILE.",
    ),
)
JOBS = (
    Opt(
        "jobs",
        ("--jobs", "-j"),
        int,
        "Render and write tickets in this many processes (the output is identical). "
        "0 (default): one per CPU core when there are more than 256 tickets.",
        {
            settings.STATS: "Measure documents in this many processes (the report is identical). "
            "0 (default): one per CPU core when there are more than 256 documents."
        },
    ),
)
CHECKS = (
    Opt(
        "uri_pattern",
        ("--uri-pattern",),
        str,
        "Regular expression with one group that takes the ticket id out of a chunk's source URI "
        "(flat …/12345.md and by-project …/<project>/12345.md both match the default).",
    ),
    Opt(
        "quote_threshold",
        ("--quote-threshold",),
        float,
        "quote_drift below this similarity (0-1) between a quoted span and its best-matching part of the cited chunk.",
    ),
    Opt(
        "grounding_threshold",
        ("--grounding-threshold",),
        float,
        "weak_grounding below this share (0-1) of a claim's tokens (CJK character bigrams, other words) found in "
        "its cited chunks.",
    ),
    Opt(
        "on_empty",
        ("--on-empty",),
        OnEmpty,
        "When chunks were retrieved but none carries a ticket id (an unknown URI layout): pass (keep ids, report "
        "'unchecked') or block (treat every id as phantom). Nothing retrieved at all always makes every id phantom.",
    ),
    Opt(
        "min_id_digits",
        ("--min-id-digits",),
        int,
        "A bare #n (no label such as チケット/Ticket/Redmine before it, not in a Redmine URL) counts as a ticket id "
        "only with at least this many digits, or when n was retrieved: '手順 #2' is a step, not ticket #2.",
    ),
    Opt(
        "min_score",
        ("--min-score",),
        float,
        "When every retrieved chunk has a score below this (Bedrock's score), treat it as nothing retrieved: "
        "the answer should refuse (critical not_refused if it names tickets or cites sources).",
    ),
    Opt(
        "strict",
        ("--strict",),
        bool,
        "Exit 1 if anything critical was found (phantom ticket ids or sources, an answer that should have refused).",
    ),
)
