"""The settings catalogue: every option of every command, its default, environment variable, config key
and validation, defined here once.

Every option comes from four sources, highest first: the command line, the environment, the config file,
the default below.

- Environment: ``ANCHORKIT_<NAME>`` for every setting (e.g. ``ANCHORKIT_THREADS=32``,
  ``ANCHORKIT_DELETE=true``, ``ANCHORKIT_PROJECT=helpdesk,infra``), plus ``REDMINE_URL`` for the URL.
  The API key is never a setting: it comes from ``REDMINE_API_KEY`` or ``api_key_file``, so it does not
  end up in a config file.
- Config file: ``--config PATH`` (sync), else ``$ANCHORKIT_CONFIG``, else ``./anchorkit.toml`` when it
  exists. Keys are the setting names (``max_delete`` or ``max-delete``), at the top level or inside a table
  named after a stage or command (``[pull]``, ``[transform]``, ``[upload]``, ``[stats]``, ``[verify]`` …:
  the tables only group, a key means the same in any of them); relative paths are relative to the file's
  folder. Unknown keys and wrongly typed values are errors that name the file and the key.

A setting shared by several commands means the same thing in all of them (``--threads`` of upload, pull
and sync); an option that means something else in one command has a setting of its own (inject's
``--out`` is a file, ``inject_out``; transform's is a folder, ``out``). A stage takes its options as one
object built from these values (``PullSettings``, ``TransformOptions``, ``PublishSettings``,
``AwsSettings``, ``VerifyOptions``), and its dataclass defaults are :func:`default` of the settings here.

This module imports nothing of the stages: they import it (for their defaults), and the CLI loads it at
start-up without loading them.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.tokens import TOKENIZER_CHOICES

CONFIG_FILE_NAME = "anchorkit.toml"
CONFIG_ENV = "ANCHORKIT_CONFIG"
ENV_PREFIX = "ANCHORKIT_"
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}

# The choices of the options that take one of a few words (the stages check against these too).
LANGS = ("ja", "en")
LAYOUTS = ("flat", "by-project")
TEXT_FORMATS = ("textile", "common_mark")
SIDECAR_SCHEMAS = ("simple", "typed")
# Spacing anchors: short ("> チケット #12345:") or full (with the subject, as the anchors after headings).
SPACING_ANCHOR_FORMS = ("short", "full")
RETRY_MODES = ("standard", "adaptive")
SSE_ALGORITHMS = ("AES256", "aws:kms")
ON_INVALID = ("drop", "flag")
ON_EMPTY = ("pass", "block")

# The commands (``state show`` is the ``show`` command of the ``state`` group).
PULL, TRANSFORM, UPLOAD, SYNC, STATS = "pull", "transform", "upload", "sync", "stats"
VERIFY, EVAL, INJECT, STATE_SHOW, STATE_BREAK_LEASE = "verify", "eval", "inject", "state show", "state break-lease"
CHUNK = "chunk"
COMMANDS = (PULL, TRANSFORM, CHUNK, UPLOAD, SYNC, STATS, VERIFY, EVAL, INJECT, STATE_SHOW, STATE_BREAK_LEASE)
# Config tables: they group keys for people; a key means the same in every one of them.
CONFIG_TABLES = (PULL, TRANSFORM, CHUNK, UPLOAD, SYNC, STATS, VERIFY, EVAL, INJECT, "state")


class SettingError(UsageError):
    """A setting has a bad value or an unknown name; the message names where it came from."""


@dataclass(frozen=True)
class Setting:
    name: str  # the Python parameter name and the config key
    kind: type  # str, int, float, bool, list (of str) or Path
    default: Any
    commands: tuple[str, ...]
    choices: tuple[str, ...] | None = None
    min: float | None = None
    max: float | None = None
    # Commands whose default differs (stats: None = "what transform would use").
    command_defaults: Mapping[str, Any] = field(default_factory=dict)
    env: str | None = None  # instead of ANCHORKIT_<NAME> (a setting named after its command)
    extra_env: tuple[str, ...] = ()

    @property
    def env_names(self) -> tuple[str, ...]:
        return (self.env or ENV_PREFIX + self.name.upper(), *self.extra_env)

    def default_for(self, command: str) -> Any:
        value = self.command_defaults.get(command, self.default)
        return list(value) if isinstance(value, list) else value  # a fresh list: never shared


def _s(name: str, kind: type, default: Any, *commands: str, **extra: Any) -> Setting:
    return Setting(name, kind, default, commands, **extra)


_REDMINE = (PULL, SYNC)
_DOCUMENTS = (TRANSFORM, SYNC)
_RENDERED = (*_DOCUMENTS, CHUNK)  # chunk renders a snapshot's tickets as transform does
_S3 = (UPLOAD, PULL, SYNC)  # the commands that write to S3 (pull: with --state)
_AWS = (*_S3, STATE_SHOW, STATE_BREAK_LEASE)
_CHECKS = (VERIFY, EVAL)
_NOT_FOR_STATS = {STATS: None}  # stats: a snapshot is transformed with transform's value unless given

SETTINGS: tuple[Setting, ...] = (
    # Redmine (pull)
    _s("url", str, None, *_REDMINE, CHUNK, extra_env=("REDMINE_URL",)),
    _s("snapshot", Path, None, *_REDMINE, TRANSFORM),
    _s("project", list, [], *_REDMINE),
    _s("full", bool, False, *_REDMINE),
    _s("concurrency", int, 4, *_REDMINE, min=1, max=64),
    _s("include_private", bool, False, *_REDMINE, TRANSFORM, CHUNK),
    _s("api_key_file", Path, None, *_REDMINE),
    _s("full_every", int, 10, *_REDMINE, min=0),
    # How stale a stored issue may get: what Redmine does not date (a note made private, edited or deleted,
    # a custom field restricted) reaches the snapshot within this long. One request per issue each time.
    _s("refetch_every", float, 24 * 3600, *_REDMINE, min=0),
    _s("overlap", float, 120, *_REDMINE, min=0),
    # With --project: an incremental listing of every project, kept to the pulled ones here (an issue moved out
    # leaves at once), or, by default, Redmine's of the pulled projects alone: its cost and the cursor then do not
    # depend on what happens in the other projects (docs/reference.md, pull, "How a run works").
    _s("watch_moves", bool, False, *_REDMINE),
    _s("lookups_max_age", float, 24 * 3600, *_REDMINE, min=0),
    _s("text_format", str, None, *_REDMINE, TRANSFORM, CHUNK, choices=TEXT_FORMATS),
    _s("timeout", float, 60.0, *_REDMINE, min=0.1),
    _s("retries", int, 5, *_REDMINE, min=1),
    # Documents (transform)
    _s("out", Path, None, *_DOCUMENTS, UPLOAD),
    _s("sidecars", bool, False, *_RENDERED),
    _s("sidecar_schema", str, "simple", *_RENDERED, choices=SIDECAR_SCHEMAS),
    _s("layout", str, "flat", *_DOCUMENTS, choices=LAYOUTS),
    _s("lang", str, "ja", *_RENDERED, choices=LANGS),
    _s("label", str, None, *_RENDERED, INJECT),
    _s("anchor_basic_info", bool, True, *_DOCUMENTS, STATS, command_defaults=_NOT_FOR_STATS),
    # Amazon Bedrock's default fixed-size chunk; docs/anchoring.md has the figures behind both defaults.
    _s("chunk_tokens", int, 300, *_RENDERED, STATS, min=0),
    # sync --chunks: the tickets published as anchorkit's own chunks of --chunk-tokens (docs/sync.md).
    _s("chunks", bool, False, SYNC),
    # chunk, sync --chunks: tokens a chunk repeats of the one before; none by default (its anchor names the ticket).
    _s("chunk_overlap", int, 0, CHUNK, SYNC, min=0),
    _s("anchor_subject_chars", int, 40, *_DOCUMENTS, STATS, min=0, command_defaults=_NOT_FOR_STATS),
    _s("spacing_anchors", str, "short", *_DOCUMENTS, choices=SPACING_ANCHOR_FORMS),
    _s("timezone", str, "UTC", *_RENDERED),
    _s("max_text_bytes", int, 1_000_000, *_RENDERED, STATS, min=1, command_defaults=_NOT_FOR_STATS),
    _s("link_issues", str, None, *_RENDERED),
    _s("check", bool, False, TRANSFORM, CHUNK),
    # chunk's --out is a folder of chunk files, not documents (a config's out = "out" must not put them there).
    _s("chunk_out", Path, None, CHUNK),
    _s("jsonl", Path, None, CHUNK),
    # Tokens (transform's --chunk-tokens, stats)
    _s("tokenizer", str, TOKENIZER_CHOICES[0], *_RENDERED, STATS, choices=TOKENIZER_CHOICES),
    _s("tiktoken_file", Path, None, *_RENDERED, STATS),
    _s("jobs", int, 0, TRANSFORM, CHUNK, STATS, min=0, max=256),
    # Destination (upload)
    _s("dest", str, None, UPLOAD, SYNC),
    _s("delete", bool, False, UPLOAD, SYNC),
    _s("max_delete", str, "10%", UPLOAD, SYNC),
    _s("force", bool, False, UPLOAD, SYNC),
    _s("dry_run", bool, False, UPLOAD, SYNC),
    _s("list_keys", bool, False, UPLOAD, SYNC),
    _s("threads", int, 16, *_S3, min=1, max=256),
    _s("endpoint_url", str, None, *_AWS),
    _s("region", str, None, *_AWS),
    _s("profile", str, None, *_AWS),
    _s("sse", str, None, *_S3, choices=SSE_ALGORITHMS),
    _s("sse_kms_key_id", str, None, *_S3),
    _s("retry_mode", str, "standard", *_S3, choices=RETRY_MODES),
    _s("max_attempts", int, 5, *_S3, min=1),
    _s("start_ingestion", str, None, UPLOAD, SYNC),
    # State (runs without a persistent disk)
    _s("state", str, None, PULL, SYNC, STATE_SHOW, STATE_BREAK_LEASE),
    # Short, because a live run renews its lease every third of it: a dead run holds the state this long.
    _s("lease_seconds", float, 300, PULL, SYNC, min=1),
    _s("holder", str, None, STATE_BREAK_LEASE),
    # stats
    _s("chunking", list, [], STATS),
    _s("lengths", str, "256,300,512,1024", STATS),
    _s("html", Path, None, STATS, VERIFY, EVAL),
    _s("fail_under_coverage", float, None, STATS, min=0, max=100),
    _s("fail_over_overhead", float, None, STATS, min=0),
    # verify, eval, inject
    _s("retrieval", Path, None, VERIFY, INJECT),
    _s("answer", Path, None, VERIFY),
    _s("context", list, [], VERIFY),
    # Source URI → ticket id: …/12345.md (flat layout), …/<project>/12345.md (by-project) and
    # …/12345/12345-004.md (anchorkit's chunks, chunk_names.py); not another numbered file (…/2026-001.md).
    _s("uri_pattern", str, r"/(\d+)(?:/\1-\d+)?\.md$", *_CHECKS, INJECT),
    _s("quote_threshold", float, 0.8, *_CHECKS, min=0.0, max=1.0),
    _s("grounding_threshold", float, 0.3, *_CHECKS, min=0.0, max=1.0),
    _s("on_invalid", str, "drop", VERIFY, choices=ON_INVALID),
    _s("on_empty", str, "pass", *_CHECKS, choices=ON_EMPTY),
    _s("min_id_digits", int, 3, *_CHECKS, min=1, max=12),
    _s("min_score", float, None, *_CHECKS),
    _s("strict", bool, False, *_CHECKS),
    _s("min_grounding", float, None, EVAL, min=0.0, max=1.0),
    _s("max_phantom_rate", float, None, EVAL, min=0.0, max=1.0),
    _s("inject_out", Path, None, INJECT),
    _s("inject_strict", bool, False, INJECT),
)
SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}
# Settings of type str that name a folder or an s3:// URL, and a list of files: from a config file, a
# relative folder or file is the file's folder's, as any path the file gives.
CONFIG_LOCATIONS = frozenset({"dest", "state"})
CONFIG_FILE_LISTS = frozenset({"context"})


def default(name: str, command: str | None = None) -> Any:
    """The default of a setting (for ``command``, where it differs): what a stage's dataclass uses."""
    setting = SETTINGS_BY_NAME[name]
    return setting.default_for(command) if command else setting.default_for("")


def settings_of(command: str) -> tuple[Setting, ...]:
    return tuple(setting for setting in SETTINGS if command in setting.commands)


# --------------------------------------------------------------------------------------------------
# Reading the sources


@dataclass(frozen=True)
class ResolvedSettings:
    """One command's settings and where each value came from."""

    values: dict[str, Any]
    sources: dict[str, str]  # name → "flag", "env ANCHORKIT_X", "config PATH", "default"

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def find_config_file(flag: Path | None, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """--config, else $ANCHORKIT_CONFIG, else ./anchorkit.toml if present (a missing explicit file is an error)."""
    explicit = flag or (Path(environ[CONFIG_ENV]) if environ.get(CONFIG_ENV) else None)
    if explicit is not None:
        if not explicit.is_file():
            raise SettingError(f"config file {explicit} does not exist")
        return explicit
    here = cwd / CONFIG_FILE_NAME
    return here if here.is_file() else None


def load_config(path: Path) -> dict[str, Any]:
    """The file's settings as one flat dict (tables merged), names normalised to underscores."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise SettingError(f"{path}: cannot read the config file: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise SettingError(f"{path}: cannot read the config file: nested too deeply") from None
    flat: dict[str, Any] = {}
    for key, value in document.items():
        entries = list(value.items()) if key in CONFIG_TABLES and isinstance(value, dict) else [(key, value)]
        for name, item in entries:
            normalised = name.replace("-", "_")
            if normalised not in SETTINGS_BY_NAME:
                raise SettingError(f"{path}: unknown setting {name!r}")
            if normalised in flat:
                raise SettingError(f"{path}: setting {name!r} is given twice")
            flat[normalised] = item
    return flat


def from_text(setting: Setting, text: str, origin: str) -> Any:
    """An environment variable's text as the setting's type."""
    try:
        if setting.kind is bool:
            word = text.strip().lower()
            if word in TRUE_WORDS | FALSE_WORDS:
                return word in TRUE_WORDS
            raise ValueError
        if setting.kind is list:
            return [part.strip() for part in text.split(",") if part.strip()]
        if setting.kind is Path:
            return Path(text)
        return setting.kind(text)
    except ValueError:
        raise SettingError(f"{origin}={text!r}: expected {describe_kind(setting)}") from None


def is_local_path(text: str) -> bool:
    """Whether a location (``dest``, ``state``) names a folder: not an ``s3://`` URL, nor text that
    starts like one (left as written, for the destination's check to refuse as a malformed URL)."""
    return "://" not in text and text[:3].lower() != "s3:" and text[:4].lower() != "s3//"


def from_config(setting: Setting, value: Any, origin: str, config_dir: Path) -> Any:
    """A TOML value checked against the setting's type; relative paths are taken from the file's folder,
    those of a location that is a folder (``dest``, ``state``) and of a list of files (``context``) too."""
    kind = setting.kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is Path and isinstance(value, str):
        return config_dir / value
    if setting.name in CONFIG_LOCATIONS and isinstance(value, str) and value and is_local_path(value):
        return str(config_dir / value)
    if kind is list and isinstance(value, list) and all(isinstance(item, str) for item in value):
        if setting.name in CONFIG_FILE_LISTS:
            return [item if item == "-" else str(config_dir / item) for item in value]
        return value
    if kind is str and isinstance(value, int) and not isinstance(value, bool) and setting.name == "max_delete":
        return str(value)  # max_delete = 25 reads naturally as a count
    if kind in (str, int, float, bool) and type(value) is kind:
        return value
    raise SettingError(f"{origin}: {setting.name} = {value!r}: expected {describe_kind(setting)}")


def describe_kind(setting: Setting) -> str:
    return {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        list: 'a list of strings, e.g. ["helpdesk", "infra"] (comma-separated in the environment)',
        Path: "a path",
        str: "a string",
    }[setting.kind]


def option_name(name: str) -> str:
    """How a setting is named in messages: its command-line option."""
    flag = name.removeprefix("inject_")
    return f"--{flag.replace('_', '-')}"


def check_value(setting: Setting, value: Any, origin: str) -> None:
    """The choices and bounds the command line enforces, for a value from the environment or a file."""
    if value is None:
        return
    if setting.choices is not None and value not in setting.choices:
        raise SettingError(f"{origin}: {setting.name} must be one of {', '.join(setting.choices)}, not {value!r}")
    if setting.min is not None and value < setting.min:
        raise SettingError(f"{origin}: {setting.name} must be at least {setting.min:g}, not {value!r}")
    if setting.max is not None and value > setting.max:
        raise SettingError(f"{origin}: {setting.name} must be at most {setting.max:g}, not {value!r}")


def resolve(
    command: str,
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    config: Mapping[str, Any],
    config_path: Path | None = None,
) -> ResolvedSettings:
    """Every setting of ``command`` and where it came from: flag > environment > config file > default.

    ``flags`` holds the command-line values, None (or an empty list) for "not given".
    """
    known = settings_of(command)
    unknown = set(flags) - {setting.name for setting in known}
    if unknown:
        raise SettingError(f"unknown settings: {', '.join(sorted(unknown))}")
    config_dir = config_path.parent if config_path is not None else Path.cwd()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in known:
        flag = flags.get(setting.name)
        env_name = next((name for name in setting.env_names if environ.get(name)), None)
        if flag is not None and flag != []:
            values[setting.name], sources[setting.name] = flag, "flag"
        elif env_name is not None:
            values[setting.name] = from_text(setting, environ[env_name], env_name)
            sources[setting.name] = f"env {env_name}"
            check_value(setting, values[setting.name], env_name)
        elif setting.name in config:
            origin = f"config {config_path}"
            values[setting.name] = from_config(setting, config[setting.name], origin, config_dir)
            sources[setting.name] = origin
            check_value(setting, values[setting.name], origin)
        else:
            values[setting.name], sources[setting.name] = setting.default_for(command), "default"
    return ResolvedSettings(values, sources)


def resolve_here(command: str, flags: Mapping[str, Any], config_flag: Path | None = None) -> ResolvedSettings:
    """:func:`resolve` with this process's environment and the config file found from here."""
    config_path = find_config_file(config_flag, os.environ, Path.cwd())
    config = load_config(config_path) if config_path is not None else {}
    return resolve(command, flags, os.environ, config, config_path)


def config_values(command: str) -> dict[str, Any]:
    """The values anchorkit.toml ($ANCHORKIT_CONFIG, else ./anchorkit.toml) gives ``command``'s settings."""
    path = find_config_file(None, os.environ, Path.cwd())
    if path is None:
        return {}
    names = {setting.name for setting in settings_of(command)}
    return {
        name: from_config(SETTINGS_BY_NAME[name], value, f"config {path}", path.parent)
        for name, value in load_config(path).items()
        if name in names
    }
