"""What `sync`, `pull --state` and `state show` do with their settings: open and check every store and
destination before any work (exit 2), run, and start the ingestion asked for.

The CLI parses the options and prints the reports; everything between is here, so that a program gets
the same run as the command line.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorkit.files import check_apart, check_writable_folder, file_mode
from anchorkit.publish import state as states
from anchorkit.publish import upload as publishing
from anchorkit.publish.aws import AwsSettings, S3Location, parse_ingestion_target, parse_location, try_start_ingestion
from anchorkit.source import preflight
from anchorkit.source import pull as pulling
from anchorkit.sync.chunking import check_out_layout, layout_name
from anchorkit.sync.folders import FolderSyncReport, sync_folders
from anchorkit.sync.manifest import Manifest
from anchorkit.sync.options import SyncSettings
from anchorkit.sync.progress import SyncProgress
from anchorkit.sync.scratch import scratch_folder
from anchorkit.sync.stateless import StatelessSyncReport, StatePullReport, pull_with_state, run_sync

Warn = Callable[[str], None]  # a warning the run goes on after (a key file others may read)


def parse_state_location(text: str) -> S3Location | Path:
    """--state as an S3 prefix or a local folder that can be written (exit 2 before any work otherwise)."""
    location = parse_location(text, "--state")
    if isinstance(location, Path):
        check_writable_folder(location, "--state")
    return location


def sync_with_folders(settings: SyncSettings, warn: Warn, progress: SyncProgress | None = None) -> FolderSyncReport:
    """The ordinary `sync`: the output folder, the destination and the key checked first, then
    pull → transform → upload (and the ingestion once everything succeeded)."""
    assert settings.snapshot is not None and settings.out is not None  # REQUIRED without --state
    check_apart(settings.out, settings.snapshot, "--out", "--snapshot folder")  # documents among the issues/
    check_writable_folder(settings.out, "--out")  # before the pull, not after it
    flag = "--chunks" if settings.chunks else "no --chunks"
    check_out_layout(settings.out, layout_name(settings.chunks), f"this sync ({flag})")
    destination = publishing.open_destination(
        settings.out, settings.dest, settings.publish, settings.aws, settings.start_ingestion
    )
    api_key = preflight.read_api_key(settings.api_key_file, os.environ, warn)
    return sync_folders(
        settings.url,
        api_key,
        settings.snapshot,
        settings.out,
        destination,
        settings.transform,
        settings.pull,
        settings.publish,
        chunks=settings.chunks,
        progress=progress,
    )


def sync_with_state(
    settings: SyncSettings, rescope: bool, warn: Warn, progress: SyncProgress | None = None
) -> StatelessSyncReport:
    """`sync --state`: the state store and the destination opened and checked, then :func:`run_sync` in a
    temporary work folder (or --snapshot), then the ingestion when the run fully succeeded."""
    assert settings.state is not None
    destination = parse_location(settings.dest)
    location = parse_state_location(settings.state)
    if settings.snapshot is not None:  # the work folder: a snapshot, or a new or empty folder
        preflight.check_snapshot_folder(settings.snapshot)
    states.check_state_apart(location, destination)
    # A run with --include-private writes files only their owner may read, here as everywhere (files.file_mode).
    mode = file_mode(settings.pull.include_private)
    target, session = publishing.open_target(destination, settings.aws, settings.publish, mode)
    store = states.open_store(
        location, settings.aws, settings.publish, settings.lease_seconds, getattr(target, "client", None), mode
    )
    ingestion = parse_ingestion_target(settings.start_ingestion) if settings.start_ingestion else None
    api_key = preflight.read_api_key(settings.api_key_file, os.environ, warn)
    with scratch_folder() as scratch:
        report = run_sync(
            settings.url,
            api_key,
            store,
            target,
            settings.transform,
            settings.pull,
            settings.publish,
            work_dir=settings.snapshot or scratch / "snapshot",
            rescope=rescope,
            chunks=settings.chunks,
            progress=progress,
        )
    if ingestion is not None and report.ok and not report.dry_run:
        report.ingestion_job, error = try_start_ingestion(lambda: session.client("bedrock-agent"), *ingestion)
        if error:
            report.failures.append(publishing.Failure("--start-ingestion", error))
    return report


def pull_into_state(
    url: str,
    snapshot_dir: Path,
    api_key: str,
    arguments: pulling.PullSettings,
    state_url: str,
    aws: AwsSettings,
    publish_settings: publishing.PublishSettings,
    lease_seconds: float,
    progress: pulling.ProgressCallback | None = None,
) -> StatePullReport:
    """`pull --state`: the state store opened and checked, then :func:`pull_with_state`."""
    location = parse_state_location(state_url)
    states.check_state_apart(location, snapshot_dir, folder_name="snapshot")
    store = states.open_store(location, aws, publish_settings, lease_seconds, mode=file_mode(arguments.include_private))
    return pull_with_state(
        url, api_key, store, snapshot_dir, arguments, threads=publish_settings.threads, progress=progress
    )


def open_state(state_url: str, aws: AwsSettings) -> states.StateStore:
    """The store a `state` command looks at; a :class:`states.StateError` (exit 2) when its location does
    not exist (``states.absence``): a mistyped state is not shown as an empty one."""
    store = states.open_store(parse_location(state_url, "--state"), aws, publishing.PublishSettings())
    absent = states.absence(store)
    if absent is not None:
        raise states.StateError(f"no sync state at {store.describe()}: {absent}")
    return store


@dataclass(frozen=True)
class StateView:
    """What `state show` shows: the manifest's scope, cursor and counts, and the lease (read, never written)."""

    state: str
    exists: bool
    manifest: Manifest
    lease: states.LeaseStatus | None
    now: float

    def to_json(self) -> dict[str, Any]:
        manifest = self.manifest
        return {
            "state": self.state,
            "exists": self.exists,
            "scope": manifest.scope.to_json() if manifest.scope else None,
            "cursor": manifest.cursor,
            "counts": manifest.counts(),
            "fingerprint": manifest.fingerprint,
            "layout": manifest.layout,
            "lookups_refreshed_at": manifest.pull.get("lookups_refreshed_at"),
            "lease": self.lease.to_json(self.now) if self.lease else None,
        }


def view_state(store: states.StateStore) -> StateView:
    raw = store.read_manifest()
    manifest = Manifest() if raw is None else Manifest.from_json(raw, store.describe())
    return StateView(store.describe(), raw is not None, manifest, store.lease_status(), time.time())
