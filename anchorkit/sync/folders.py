"""The ordinary `sync` (no ``--state``): pull into a snapshot folder, transform (or, with ``--chunks``, chunk)
into an output folder, and publish that folder, each stage as its own command does it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorkit.publish import upload as publish
from anchorkit.render import transform
from anchorkit.source import pull
from anchorkit.sync.chunking import ChunkLayout, chunk_snapshot
from anchorkit.sync.progress import SyncProgress, pulling_stage, stage_counter, stage_progress
from anchorkit.sync.stateless import run_pull


@dataclass
class FolderSyncReport:
    pull: pull.PullReport
    transform: transform.TransformReport  # with --chunks, the chunk folder's report (ChunkReport)
    upload: publish.PublishReport
    out: Path

    @property
    def ok(self) -> bool:
        return self.pull.ok and not self.transform.failed and self.upload.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pull": self.pull.to_json(),
            "transform": {"out": str(self.out), **self.transform.to_json()},
            "upload": self.upload.to_json(),
        }


def _nothing() -> None:
    """No upload progress until the plan is known."""


def sync_folders(
    url: str,
    api_key: str,
    snapshot_dir: Path,
    out_dir: Path,
    destination: publish.Destination,
    options: transform.TransformOptions,
    pull_settings: pull.PullSettings = pull.PullSettings(),
    publish_settings: publish.PublishSettings = publish.PublishSettings(),
    *,
    chunks: ChunkLayout | None = None,
    progress: SyncProgress | None = None,
) -> FolderSyncReport:
    """pull → transform (with ``chunks``: chunk) → upload over local folders. Issues that fail to pull keep
    their previous copy and tickets that fail to transform keep their previous documents (or chunks), so
    the upload still runs (and never deletes their objects); ``report.ok`` is False when any stage failed.
    Raises :class:`pull.PullError` or :class:`anchorkit.snapshot.SnapshotError` for unusable input (nothing
    uploaded then)."""
    pulled = run_pull(
        url, api_key, snapshot_dir, pull_settings, full=pull_settings.full, known={}, progress=pulling_stage(progress)
    )
    rendering = stage_progress(progress, "rendering")
    transformed = (
        transform.transform_snapshot(snapshot_dir, out_dir, options, progress=rendering)
        if chunks is None
        else chunk_snapshot(snapshot_dir, out_dir, options, chunks, rendering)
    )
    uploading: Callable[[], None] = _nothing

    def on_plan(plan: publish.Plan) -> None:
        nonlocal uploading
        uploading = stage_counter(progress, "uploading", len(plan.uploads) + len(plan.deletes))

    uploaded = publish.upload(
        out_dir,
        destination,
        publish_settings,
        on_plan=on_plan,
        on_result=lambda _: uploading(),
        withdrawn_ids=set(pulled.withdrawn_ids),
    )
    return FolderSyncReport(pulled, transformed, uploaded, out_dir)
