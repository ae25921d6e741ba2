"""Settings for `sync` (pull → transform → upload): one set of options from four sources.

Highest first: command-line flags, environment variables, the config file, built-in defaults.

- Environment: `ANCHORKIT_<NAME>` for every setting (e.g. `ANCHORKIT_THREADS=32`,
  `ANCHORKIT_DELETE=true`, `ANCHORKIT_PROJECT=helpdesk,infra`), plus `REDMINE_URL` for the URL.
  The API key is never a setting: it comes from `REDMINE_API_KEY` or `api_key_file`, so it does not
  end up in a config file.
- Config file: `--config PATH`, else `$ANCHORKIT_CONFIG`, else `./anchorkit.toml` when it exists.
  Keys are the option names (`max_delete` or `max-delete`), at the top level or inside `[pull]`,
  `[transform]`, `[upload]` tables; relative paths are relative to the file's folder. Unknown keys
  and wrongly typed values are errors that name the file and the key.

"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.publish import aws, state
from anchorkit.publish import upload as publish
from anchorkit.render import document, transform
from anchorkit.source import pull
from anchorkit.source.redmine import RetryPolicy

CONFIG_FILE_NAME = "anchorkit.toml"
CONFIG_ENV = "ANCHORKIT_CONFIG"
ENV_PREFIX = "ANCHORKIT_"
STAGE_TABLES = ("pull", "transform", "upload")
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


class SyncConfigError(UsageError):
    """A setting has a bad value or an unknown name; the message names where it came from."""


@dataclass(frozen=True)
class Setting:
    name: str
    kind: type  # str, int, float, bool, list (of str) or Path
    default: Any = None
    extra_env: tuple[str, ...] = ()

    @property
    def env_names(self) -> tuple[str, ...]:
        return (ENV_PREFIX + self.name.upper(), *self.extra_env)


SETTINGS: tuple[Setting, ...] = (
    # pull
    Setting("url", str, None, ("REDMINE_URL",)),
    Setting("snapshot", Path),
    Setting("project", list, []),
    Setting("full", bool, False),
    Setting("concurrency", int, pull.DEFAULT_CONCURRENCY),
    Setting("include_private", bool, False),
    Setting("api_key_file", Path),
    Setting("full_every", int, pull.DEFAULT_FULL_EVERY),
    Setting("overlap", float, float(pull.DEFAULT_OVERLAP_S)),
    Setting("lookups_max_age", float, float(pull.DEFAULT_LOOKUPS_MAX_AGE_S)),
    Setting("text_format", str),
    Setting("timeout", float, RetryPolicy.read_timeout_s),
    Setting("retries", int, RetryPolicy.attempts),
    # transform
    Setting("out", Path),
    Setting("sidecars", bool, False),
    Setting("sidecar_schema", str, "simple"),
    Setting("layout", str, "flat"),
    Setting("lang", str, "ja"),
    Setting("label", str),
    Setting("anchor_basic_info", bool, True),
    Setting("chunk_tokens", int, document.DEFAULT_CHUNK_TOKENS),
    Setting("anchor_subject_chars", int, document.DEFAULT_ANCHOR_SUBJECT_CHARS),
    Setting("timezone", str, "UTC"),
    Setting("max_text_bytes", int, transform.DEFAULT_MAX_TEXT_BYTES),
    # upload
    Setting("dest", str),
    Setting("delete", bool, False),
    Setting("max_delete", str, publish.DEFAULT_MAX_DELETE),
    Setting("force", bool, False),
    Setting("dry_run", bool, False),
    Setting("threads", int, publish.DEFAULT_THREADS),
    Setting("endpoint_url", str),
    Setting("region", str),
    Setting("profile", str),
    Setting("sse", str),
    Setting("sse_kms_key_id", str),
    Setting("retry_mode", str, aws.DEFAULT_RETRY_MODE),
    Setting("max_attempts", int, aws.DEFAULT_MAX_ATTEMPTS),
    Setting("start_ingestion", str),
    # stateless runs (the state beside the destination)
    Setting("state", str),
    Setting("lease_seconds", float, state.DEFAULT_LEASE_SECONDS),
)
SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}
REQUIRED = ("url", "snapshot", "out", "dest")
# With --state the snapshot is only a work folder (a temporary one by default) and nothing is written to out.
REQUIRED_WITH_STATE = ("url", "dest")


@dataclass(frozen=True)
class ResolvedSettings:
    values: dict[str, Any]
    sources: dict[str, str]  # name → "flag", "env ANCHORKIT_X", "config PATH", "default"

    def __getitem__(self, name: str) -> Any:
        return self.values[name]


def find_config_file(flag: Path | None, environ: Mapping[str, str], cwd: Path) -> Path | None:
    """--config, else $ANCHORKIT_CONFIG, else ./anchorkit.toml if present (a missing explicit file is an error)."""
    explicit = flag or (Path(environ[CONFIG_ENV]) if environ.get(CONFIG_ENV) else None)
    if explicit is not None:
        if not explicit.is_file():
            raise SyncConfigError(f"config file {explicit} does not exist")
        return explicit
    default = cwd / CONFIG_FILE_NAME
    return default if default.is_file() else None


def load_config(path: Path) -> dict[str, Any]:
    """The file's settings as one flat dict (stage tables merged), names normalised to underscores."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise SyncConfigError(f"{path}: cannot read the config file: {error}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise SyncConfigError(f"{path}: cannot read the config file: nested too deeply") from None
    flat: dict[str, Any] = {}
    for key, value in document.items():
        entries = list(value.items()) if key in STAGE_TABLES and isinstance(value, dict) else [(key, value)]
        for name, item in entries:
            normalised = name.replace("-", "_")
            if normalised not in SETTINGS_BY_NAME:
                raise SyncConfigError(f"{path}: unknown setting {name!r}")
            if normalised in flat:
                raise SyncConfigError(f"{path}: setting {name!r} is given twice")
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
        raise SyncConfigError(f"{origin}={text!r}: expected {describe_kind(setting)}") from None


def from_config(setting: Setting, value: Any, origin: str, config_dir: Path) -> Any:
    """A TOML value checked against the setting's type; relative paths are taken from the file's folder."""
    kind = setting.kind
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is Path and isinstance(value, str):
        return config_dir / value
    if kind is list and isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    if kind is str and isinstance(value, int) and not isinstance(value, bool) and setting.name == "max_delete":
        return str(value)  # max_delete = 25 reads naturally as a count
    if kind in (str, int, float, bool) and type(value) is kind:
        return value
    raise SyncConfigError(f"{origin}: {setting.name} = {value!r}: expected {describe_kind(setting)}")


def describe_kind(setting: Setting) -> str:
    return {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        list: "a list of strings (comma-separated in the environment)",
        Path: "a path",
        str: "a string",
    }[setting.kind]


def command_line_name(name: str) -> str:
    """How a setting is given on sync's command line: the destination is its argument, the rest are options."""
    return "the DEST argument" if name == "dest" else f"--{name.replace('_', '-')}"


def resolve(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    config: Mapping[str, Any],
    config_path: Path | None = None,
) -> ResolvedSettings:
    """Every setting's value and where it came from: flag > environment > config file > default.

    `flags` holds the command-line values, None (or an empty list) for "not given".
    """
    unknown = set(flags) - set(SETTINGS_BY_NAME)
    if unknown:
        raise SyncConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
    config_dir = config_path.parent if config_path is not None else Path.cwd()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        flag = flags.get(setting.name)
        env_name = next((name for name in setting.env_names if environ.get(name)), None)
        if flag is not None and flag != []:
            values[setting.name], sources[setting.name] = flag, "flag"
        elif env_name is not None:
            origin = f"env {env_name}"
            values[setting.name] = from_text(setting, environ[env_name], env_name)
            sources[setting.name] = origin
        elif setting.name in config:
            origin = f"config {config_path}"
            values[setting.name] = from_config(setting, config[setting.name], origin, config_dir)
            sources[setting.name] = origin
        else:
            values[setting.name], sources[setting.name] = setting.default, "default"
    required = REQUIRED_WITH_STATE if values["state"] else REQUIRED
    missing = [name for name in required if values[name] in (None, "")]
    if missing:
        hints = ", ".join(
            f"{name} ({command_line_name(name)}, {' or '.join(SETTINGS_BY_NAME[name].env_names)}, or the config file)"
            for name in missing
        )
        raise SyncConfigError(f"missing: {hints}")
    return ResolvedSettings(values, sources)


def resolve_from_environment(flags: Mapping[str, Any], config_flag: Path | None) -> ResolvedSettings:
    """`resolve` with this process's environment and the config file found from here."""
    config_path = find_config_file(config_flag, os.environ, Path.cwd())
    config = load_config(config_path) if config_path is not None else {}
    return resolve(flags, os.environ, config, config_path)
