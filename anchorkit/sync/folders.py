"""The ordinary `sync` (no ``--state``): pull into a snapshot folder, transform (or, with ``--chunks``, chunk)
into an output folder, and publish that folder, each stage as its own command does it.

Tickets withdrawn from publication (private now, moved out of the projects) are the one thing a stage
learns that the next stage's folder cannot show: pull drops such an issue from the snapshot, so its
documents just go missing from the output folder, like a deleted ticket's, which stay published until
``--delete``. The withdrawn ones must go whatever ``--delete`` says, so pull lists them in the snapshot's
``state.json`` (``snapshot.WITHDRAWN_KEY``, also when it runs alone) until a sync has removed their objects:
a refused, dry or failed upload leaves them to the next run, as the manifest of `sync --state` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorkit.publish import upload as publish
from anchorkit.publish.objects import check_destination
from anchorkit.render import transform
from anchorkit.source import pull, snapshot
from anchorkit.sync.chunking import ChunkLayout, chunk_snapshot
from anchorkit.sync.progress import SyncProgress, pulling_stage, stage_counter, stage_progress
from anchorkit.sync.stateless import run_pull


@dataclass
class FolderSyncReport:
    pull: pull.PullReport
    transform: transform.TransformReport  # with --chunks, the chunk folder's report (ChunkReport)
    upload: publish.PublishReport
    out: Path
    withdrawn: list[int] = field(default_factory=list)  # tickets this run unpublishes (or, refused, would)

    @property
    def ok(self) -> bool:
        return self.pull.ok and not self.transform.failed and self.upload.ok

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "pull": self.pull.to_json(),
            "transform": {"out": str(self.out), **self.transform.to_json()},
            "upload": self.upload.to_json(),
            "withdrawn": self.withdrawn,
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
    The objects of withdrawn tickets are deleted with or without ``delete``, by this run or, when its upload
    does not get to it, a later one. Raises :class:`anchorkit.publish.aws.S3SetupError` for a destination
    that cannot be used, before anything else; :class:`anchorkit.source.preflight.PullError` or
    :class:`anchorkit.snapshot.SnapshotError` for unusable input (nothing uploaded then)."""
    check_destination(destination.target)
    pulled = run_pull(
        url, api_key, snapshot_dir, pull_settings, list_all=False, known={}, progress=pulling_stage(progress)
    )
    withdrawn = snapshot.withdrawn_in(snapshot.load_state(snapshot_dir))  # this pull's and those left waiting
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
        withdrawn_ids=withdrawn,
    )
    keep_withdrawn(snapshot_dir, uploaded.still_published(withdrawn))
    return FolderSyncReport(pulled, transformed, uploaded, out_dir, sorted(withdrawn))


def keep_withdrawn(snapshot_dir: Path, withdrawn: set[int]) -> None:
    """Record ``withdrawn`` as the tickets whose objects are still to be removed (state.json untouched when
    that is what it says already)."""
    with pull.snapshot_lock(snapshot_dir):  # state.json is pull's: no pull may rewrite it meanwhile
        state = snapshot.load_state(snapshot_dir)
        if snapshot.withdrawn_in(state) != withdrawn:
            snapshot.write_state(snapshot_dir, snapshot.listing_withdrawn(state, withdrawn))
