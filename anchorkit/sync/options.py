"""The settings of one `sync` run (pull → transform → upload), resolved once and built into the objects each
stage takes: :class:`SyncSettings`.

The settings themselves (defaults, environment variables, config keys, validation) are in
:mod:`anchorkit.settings`; what is particular to sync is which of them it needs (:data:`REQUIRED`) and
that it reports where each value came from (``ResolvedSettings.sources``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from anchorkit import settings
from anchorkit.publish.aws import AwsSettings
from anchorkit.publish.upload import PublishSettings
from anchorkit.render.transform import TransformOptions
from anchorkit.settings import ResolvedSettings, SettingError
from anchorkit.source.preflight import check_redmine_url
from anchorkit.source.pull import PullSettings
from anchorkit.sync.chunking import ChunkLayout

REQUIRED = ("url", "snapshot", "out", "dest")
# With --state the snapshot is only a work folder (a temporary one by default) and nothing is written to out.
REQUIRED_WITH_STATE = ("url", "dest")


def command_line_name(name: str) -> str:
    """How a setting is given on sync's command line: the destination is its argument, the rest are options."""
    return "the DEST argument" if name == "dest" else settings.option_name(name)


def resolve(
    flags: Mapping[str, Any],
    environ: Mapping[str, str],
    config: Mapping[str, Any],
    config_path: Path | None = None,
) -> ResolvedSettings:
    """sync's settings and where each came from (flag > environment > config file > default); a
    :class:`SettingError` names what is missing."""
    resolved = settings.resolve(settings.SYNC, flags, environ, config, config_path)
    required = REQUIRED_WITH_STATE if resolved["state"] else REQUIRED
    missing = [name for name in required if resolved[name] in (None, "")]
    if missing:
        hints = ", ".join(
            f"{name} ({command_line_name(name)}, {' or '.join(settings.SETTINGS_BY_NAME[name].env_names)}, "
            "or the config file)"
            for name in missing
        )
        raise SettingError(f"missing: {hints}")
    check_redmine_url(resolved["url"])  # before anything uses it (the state's scope records it)
    return resolved


def resolve_from_environment(flags: Mapping[str, Any], config_flag: Path | None) -> ResolvedSettings:
    """:func:`resolve` with this process's environment and the config file found from here."""
    config_path = settings.find_config_file(config_flag, os.environ, Path.cwd())
    config = settings.load_config(config_path) if config_path is not None else {}
    return resolve(flags, os.environ, config, config_path)


@dataclass(frozen=True)
class SyncSettings:
    """One sync run's settings, each stage's as the object that stage takes."""

    url: str
    dest: str
    api_key_file: Path | None
    snapshot: Path | None  # with --state: the work folder (None: a temporary one)
    out: Path | None  # None with --state
    state: str | None
    lease_seconds: float
    start_ingestion: str | None
    pull: PullSettings
    transform: TransformOptions
    publish: PublishSettings
    aws: AwsSettings
    chunks: ChunkLayout | None = None  # --chunks: published as anchorkit's chunks instead of documents

    @classmethod
    def from_settings(cls, resolved: ResolvedSettings) -> SyncSettings:
        values = resolved.values
        plain = {
            field.name: values[field.name] for field in fields(cls) if field.name in values and field.name != "chunks"
        }
        transform = TransformOptions.from_settings(values)
        return cls(
            **plain,
            pull=PullSettings.from_settings(values),
            transform=transform,
            publish=PublishSettings.from_settings(values),
            aws=AwsSettings.from_settings(values),
            chunks=ChunkLayout.from_settings(values, transform),
        )
