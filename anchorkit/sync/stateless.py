"""The stateless sync (`sync --state`) and `pull --state`: reading, pulling and rendering, then a plan.

The bookkeeping lives in a state store beside the destination (anchorkit.state), each run starts from an
empty work folder, fetches and renders only what changed, lets :func:`anchorkit.sync.plan.plan` decide
what to write and :func:`anchorkit.sync.apply.apply` write it (or, with ``dry_run``, only reports the
plan). The manifest's meaning is in :mod:`anchorkit.sync.manifest`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anchorkit import __version__
from anchorkit.files import file_mode, make_folder, write_atomic
from anchorkit.publish import aws, state
from anchorkit.publish import upload as publish
from anchorkit.publish.objects import check_destination
from anchorkit.render import transform
from anchorkit.render.document import RenderOptions
from anchorkit.render.sidecar import SIDECAR_SUFFIX
from anchorkit.source import pull, snapshot
from anchorkit.sync import plan as planning
from anchorkit.sync.apply import apply, apply_pull, without_unchanged_raw
from anchorkit.sync.chunking import ChunkLayout, TicketObjects, chunk_objects, layout_name
from anchorkit.sync.manifest import Manifest, Scope, ScopeMismatch
from anchorkit.sync.progress import SyncProgress, pulling_stage, stage_counter, stage_progress


@dataclass
class StatelessSyncReport:
    state: str
    destination: str
    pulls: list[pull.PullReport] = field(default_factory=list)
    regenerated_because: str | None = None  # why every document was rendered again (plan.regeneration_reason)
    rendered: int = 0
    transform_failures: list[transform.TicketFailure] = field(default_factory=list)
    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failures: list[publish.Failure] = field(default_factory=list)
    refused: str | None = None
    state_issues_written: int = 0
    state_issues_unchanged: int = 0  # fetched again, and the state held their very bytes: not written
    state_written: bool = False
    tickets: int = 0
    s3_requests: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    scope: str | None = None  # the state's scope, described
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    plan: planning.Plan | None = None
    ingestion_job: dict[str, str] | None = None  # --start-ingestion's job (anchorkit.sync.runs)

    @property
    def regenerated_all(self) -> bool:
        return self.regenerated_because is not None

    @property
    def ok(self) -> bool:
        return (
            all(report.ok for report in self.pulls)
            and not self.transform_failures
            and not self.failures
            and self.refused is None
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "state": self.state,
            "destination": self.destination,
            "pull": [report.to_json() for report in self.pulls],
            "regenerated_all": self.regenerated_all,
            "rendered": self.rendered,
            "transform_failures": [asdict(failure) for failure in self.transform_failures],
            "uploaded": len(self.uploaded),
            "deleted": len(self.deleted),
            # Tickets private now or moved out of the projects: their documents go with or without --delete.
            "withdrawn": sorted(self.plan.withdrawn) if self.plan is not None else [],
            "failures": [{"key": failure.key, "error": failure.error} for failure in self.failures],
            "refused": self.refused,
            "state_issues_written": self.state_issues_written,
            "state_issues_unchanged": self.state_issues_unchanged,
            "state_written": self.state_written,
            "tickets": self.tickets,
            "s3_requests": dict(sorted(self.s3_requests.items())),
            "seconds": round(self.seconds, 3),
            "scope": self.scope,
            "dry_run": self.dry_run,
            "planned": self.plan.summary() if self.plan is not None else None,
            "ingestion_job": self.ingestion_job,
            "warnings": self.warnings,
        }


@dataclass
class StatePullReport:
    """What `pull --state` did: the pull itself, and what went between the snapshot and the state."""

    state: str
    snapshot: str
    pull_report: pull.PullReport | None = None
    restored: int = 0  # raw issues copied from the state into the snapshot before pulling
    state_issues_written: int = 0
    state_issues_deleted: int = 0
    failures: list[publish.Failure] = field(default_factory=list)
    state_written: bool = False
    tickets: int = 0
    s3_requests: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    scope: str | None = None  # the state's scope, described

    @property
    def ok(self) -> bool:
        return self.pull_report is not None and self.pull_report.ok and not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "state": self.state,
            "snapshot": self.snapshot,
            "pull": self.pull_report.to_json() if self.pull_report is not None else None,
            "restored": self.restored,
            "state_issues_written": self.state_issues_written,
            "state_issues_deleted": self.state_issues_deleted,
            "failures": [{"key": failure.key, "error": failure.error} for failure in self.failures],
            "state_written": self.state_written,
            "tickets": self.tickets,
            "s3_requests": dict(sorted(self.s3_requests.items())),
            "seconds": round(self.seconds, 3),
            "scope": self.scope,
        }


def output_fingerprint(
    options: transform.TransformOptions, render: RenderOptions, chunks: ChunkLayout | None = None
) -> str:
    """What changes every document's bytes besides the issues and the lookups: version and options
    (labels, language, layout, sidecars, the text format..., and with ``chunks`` their length and
    overlap). The lookups are compared on their own."""
    described: dict[str, Any] = {"anchorkit": __version__, "options": {**asdict(options), "render": asdict(render)}}
    if chunks is not None:  # only then: the fingerprint of a state of documents stays what it was
        described["chunks"] = chunks.describe()
    canonical = json.dumps(described, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_manifest(store: state.StateStore) -> Manifest:
    """The state's manifest (an empty one for a new state); ManifestError for one this version cannot read."""
    raw = store.read_manifest()
    return Manifest() if raw is None else Manifest.from_json(raw, store.describe())


def checked_scope(manifest: Manifest, run: Scope, where: str, rescope: bool = False) -> Scope:
    """The scope this run works in: the state's (plus a destination it did not have yet), or with
    ``rescope`` the run's. Raises :class:`ScopeMismatch` (exit 2) for another scope without ``rescope``."""
    refusal = planning.scope_refusal(manifest.scope, run, where)
    if refusal is not None and not rescope:
        raise ScopeMismatch(refusal)
    if manifest.scope is None or rescope:
        return run
    return manifest.scope.merged(run)


def seed_snapshot(snapshot_dir: Path, manifest: Manifest, mode: int | None = None) -> None:
    """Give a snapshot the state's pull bookkeeping and lookups (issue files are restored separately), as files of
    ``mode`` (files.file_mode: its owner's alone when the state holds private content)."""
    make_folder(snapshot_dir / snapshot.ISSUES_DIR, mode)
    snapshot.write_state(snapshot_dir, manifest.pull, mode)
    snapshot.write_lookups(snapshot_dir, manifest.lookups_of_raw_issues, mode)


def restore_raw_issues(
    store: state.StateStore,
    work_dir: Path,
    stamps: dict[int, snapshot.StoredStamp],
    threads: int,
    mode: int | None = None,
) -> set[int]:
    """Copy the stored issue JSON of these tickets into the work snapshot (files of ``mode``); returns the ids that
    could not be restored (no version recorded, absent, unreadable, or not the version the manifest describes: a
    run that died after storing a newer copy), which must be fetched from Redmine again."""

    def restore(issue_id: int) -> bool:
        if stamps[issue_id].updated_on is None:
            return False  # the state vouches for no copy: not worth a request
        data = store.get_issue(issue_id)
        if data is None:
            return False
        path = snapshot.issue_path(work_dir, issue_id)
        write_atomic(path, data, mode)
        stored = snapshot.stored_stamp(work_dir, issue_id)
        if stored is None or stored.updated_on != stamps[issue_id].updated_on:
            path.unlink()
            return False
        return True

    wanted = sorted(stamps)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        restored = dict(zip(wanted, pool.map(restore, wanted)))
    return {issue_id for issue_id, ok in restored.items() if not ok}


def run_pull(
    url: str,
    api_key: str,
    snapshot_dir: Path,
    arguments: pull.PullSettings,
    *,
    list_all: bool,
    known: dict[int, snapshot.StoredStamp],
    progress: pull.ProgressCallback | None,
) -> pull.PullReport:
    """:func:`anchorkit.source.pull.pull` as ``arguments`` ask, with the issues the state holds as ``known``;
    ``list_all``: a full listing (what the state cannot give back), which fetches only what changed or is
    unknown, where ``arguments.full`` fetches every issue again."""
    settings = dataclasses.replace(arguments, list_all=list_all)
    return pull.pull(url, snapshot_dir, api_key, settings, progress=progress, known=known)


@contextlib.contextmanager
def measured_session(
    report: StatelessSyncReport | StatePullReport, store: state.StateStore, target: publish.Target | None = None
) -> Iterator[None]:
    """The store's session, with the S3 requests of every client involved (the target and the store may
    share one) and the time taken recorded in ``report``, also when the run stops with an exception. The
    ``target`` is checked first: a destination that cannot be used stops the run before the state is
    touched (the session of a local state makes its folder and lock file)."""
    started = time.monotonic()
    clients = (getattr(holder, "client", None) for holder in (store, target))
    with aws.counting_requests(*clients) as requests:
        try:
            if target is not None:
                check_destination(target)
            with store.session():
                yield
        finally:
            report.s3_requests.update(requests)
            report.seconds = time.monotonic() - started


def run_sync(
    url: str,
    api_key: str,
    store: state.StateStore,
    target: publish.Target,
    options: transform.TransformOptions,
    pull_arguments: pull.PullSettings = pull.PullSettings(),
    publishing: publish.PublishSettings = publish.PublishSettings(),
    *,
    work_dir: Path,
    rescope: bool = False,
    chunks: ChunkLayout | None = None,
    progress: SyncProgress | None = None,
) -> StatelessSyncReport:
    """pull → transform → upload with the state in ``store``, starting from an empty ``work_dir``; with
    ``chunks``, the tickets are published as anchorkit's chunks instead of documents.

    Only what changed is fetched, rendered and uploaded (everything is re-rendered from the stored issue
    JSON when the output fingerprint or the lookups changed), plus what a `pull --state` stored but
    nothing published yet; documents of issues that are gone are deleted (with ``publishing.delete``, within
    its ``max_delete`` unless ``force``). Documents are written first and the state is committed last, so
    the state never claims an upload that did not happen. With ``publishing.dry_run`` the plan is reported
    (``report.plan``) and nothing is written, not even a local state's lock file. A state made for another
    scope (Redmine, projects, privacy, destination: ``target.address()``) is refused with
    :class:`ScopeMismatch` unless ``rescope``: then the run lists everything and what falls outside the
    new scope is gone (its documents deleted with ``delete``). Raises :class:`aws.S3SetupError` for a
    destination that cannot be used (a missing bucket...) before anything else,
    :class:`state.StateConflict` when another run holds or changed the state (nothing written then, unless
    this run outlived its lease), :class:`state.StateError` / :class:`anchorkit.source.preflight.PullError` for
    unusable input.
    A state of the other layout (documents, chunks) is a change of every ticket's objects: the old ones
    are deleted (counted by the delete guard) as the new ones are published.
    """
    dry_run, threads = publishing.dry_run, publishing.threads
    if dry_run:  # the one place a dry run is decided: a store it cannot write to (no lock file, no lease)
        store = state.ReadOnlyStore(store)
    report = StatelessSyncReport(store.describe(), target.describe(), dry_run=dry_run)
    policy = planning.DeletePolicy(publishing.delete, publishing.max_delete, publishing.force)
    with measured_session(report, store, target):
        manifest = read_manifest(store)
        run_scope = Scope.of(url, pull_arguments.projects, pull_arguments.include_private, target.address())
        scope = checked_scope(manifest, run_scope, store.describe(), rescope)
        report.scope = scope.describe()
        # Another scope (or a state from before scopes) is listed whole, once: what fell out of it is gone.
        rescoping = bool(manifest.tickets) and (manifest.scope is None or (rescope and scope != manifest.scope))
        plan = _plan_sync(
            report,
            manifest,
            scope,
            rescoping,
            url,
            api_key,
            store,
            options,
            pull_arguments,
            work_dir,
            policy,
            threads,
            chunks,
            progress,
        )
        if dry_run:  # what the run would find, as it would (a real run finds it out under its lease)
            plan, warning = without_unchanged_raw(plan, store, work_dir, threads)
            report.warnings += [warning] if warning else []
        report.plan = plan
        report.refused = plan.refused
        report.tickets = len(manifest.tickets)  # what the state holds until a commit changes it
        if dry_run or plan.refused is not None:
            return report  # nothing written: a human looks first
        if plan.idle:
            return report  # nothing to write, not even the state
        uploading = stage_counter(progress, "uploading", len(plan.uploads) + len(plan.deletes))
        applied = apply(plan, store, target, work_dir, threads=threads, on_result=lambda _: uploading())
        carried_out = applied.plan or plan  # without the raw issues found unchanged
        report.plan, report.warnings = carried_out, applied.warnings
        report.uploaded, report.deleted, report.failures = applied.uploaded, applied.deleted, applied.failures
        report.state_issues_written = applied.raw.written
        report.state_issues_unchanged = len(carried_out.raw_unchanged)
        report.state_written = True
        report.tickets = len(applied.committed.tickets) if applied.committed else 0
    return report


def _plan_sync(
    report: StatelessSyncReport,
    manifest: Manifest,
    scope: Scope,
    rescoping: bool,
    url: str,
    api_key: str,
    store: state.StateStore,
    options: transform.TransformOptions,
    arguments: pull.PullSettings,
    work_dir: Path,
    policy: planning.DeletePolicy,
    threads: int,
    chunks: ChunkLayout | None,
    progress: SyncProgress | None,
) -> planning.Plan:
    """Everything a run reads (Redmine, the state's raw issues) and renders, then the plan."""
    if rescoping and manifest.scope is not None and manifest.scope.destination not in (None, scope.destination):
        manifest = manifest.without_published()  # nothing of it is at the new destination
    stamps = manifest.stamps()
    refetch = (
        rescoping
        and manifest.scope is not None
        and (manifest.scope.redmine != scope.redmine or manifest.scope.include_private != scope.include_private)
    )
    # The work snapshot starts as the state describes it: pull bookkeeping and lookups, no issue files.
    seed_snapshot(work_dir, manifest)
    fetched: set[int] = set()  # issues pull wrote into the work snapshot: their raw JSON is new
    removed: set[int] = set()
    withdrawn: set[int] = set()
    on_pull = pulling_stage(progress)

    def pull_once(list_all: bool, known: dict[int, snapshot.StoredStamp], settings: pull.PullSettings) -> None:
        pulled = run_pull(url, api_key, work_dir, settings, list_all=list_all, known=known, progress=on_pull)
        report.pulls.append(pulled)
        fetched.update(pulled.written_ids)
        removed.update(pulled.removed_ids)
        withdrawn.update(pulled.withdrawn_ids)

    pull_once(rescoping, planning.unknown_stamps(stamps, set(stamps)) if refetch else stamps, arguments)
    if rescoping:
        removed |= planning.outside_scope(manifest, scope.projects, snapshot.load_lookups(work_dir).get("projects", {}))
    # The sidecars' url as transform (and the ordinary sync) gives it: from the work snapshot's state.json.
    # Before the fingerprint: the url is in every sidecar's bytes.
    options = transform.resolve_redmine_url(work_dir, options)
    render = transform.resolve_render_options(work_dir, options)
    fingerprint = output_fingerprint(options, render, chunks)
    # Render what pull fetched, what the state holds but never published, and everything when the
    # fingerprint or the names (a renamed status, user or version) changed. Raw JSON the state cannot
    # give back is fetched by a full listing; as that may refresh the names, the choice is made again
    # until nothing more is missing (each round asks for ids no round asked for: it ends).
    attempted: set[int] = set()  # ids a full listing was asked to fetch
    while True:
        lookups = snapshot.load_lookups(work_dir)
        report.regenerated_because = planning.regeneration_reason(manifest, fingerprint, lookups)
        wanted = planning.to_restore(
            manifest, snapshot.stored_issue_ids(work_dir), removed, attempted, report.regenerated_all
        )
        unrestorable = restore_raw_issues(store, work_dir, wanted, threads)
        if not unrestorable:
            break
        attempted |= unrestorable
        # (Not a --full again: the first pull fetched every issue it listed then.)
        pull_once(True, planning.unknown_stamps(stamps, attempted), dataclasses.replace(arguments, full=False))
    local = _render(report, work_dir, lookups, render, options, chunks, progress)
    listing = planning.Listing(
        fetched=frozenset(fetched),
        removed=frozenset(removed),
        withdrawn=frozenset(withdrawn),
        missing=frozenset(
            attempted - snapshot.stored_issue_ids(work_dir) - removed
        ),  # neither in the state nor fetched
        pull_state=snapshot.load_state(work_dir),
        lookups=lookups,
        fingerprint=fingerprint,
        layout=layout_name(chunks),
    )
    return planning.plan(manifest, listing, local, policy, scope)


def _render(
    report: StatelessSyncReport,
    work_dir: Path,
    lookups: dict[str, Any],
    render: RenderOptions,
    options: transform.TransformOptions,
    chunks: ChunkLayout | None,
    progress: SyncProgress | None,
) -> planning.Local:
    """Render every issue in the work snapshot (the changed ones, or all when regenerating), as documents
    or, with ``chunks``, as chunks."""
    rendered: list[planning.Rendered] = []
    failed: dict[int, str | None] = {}
    if chunks is None:
        outcomes = _documents(work_dir, lookups, render, options, progress)
    else:
        outcomes = chunk_objects(work_dir, options, chunks, stage_progress(progress, "rendering"))
    for result in outcomes:
        if isinstance(result, str):
            continue  # transform.PRIVATE: a private issue, left out on purpose
        if not isinstance(result, TicketObjects):
            report.transform_failures.append(result)
            if result.ticket_id is not None:
                stamp = snapshot.stored_stamp(work_dir, result.ticket_id)
                failed[result.ticket_id] = stamp.updated_on if stamp else None
            continue
        report.rendered += 1
        stamp = snapshot.stored_stamp(work_dir, result.ticket_id)
        rendered.append(
            planning.Rendered(
                result.ticket_id,
                stamp.updated_on if stamp else None,
                stamp.project_id if stamp else None,
                result.objects,
            )
        )
    return planning.Local(tuple(rendered), failed)


def _documents(
    work_dir: Path,
    lookups: dict[str, Any],
    render: RenderOptions,
    options: transform.TransformOptions,
    progress: SyncProgress | None,
) -> Iterator[TicketObjects | transform.TicketFailure | str]:
    """Each issue's document and sidecar, rendered as transform renders them."""
    paths = list(snapshot.iter_issue_paths(work_dir))
    advance = stage_counter(progress, "rendering", len(paths))
    count_tokens = transform.spacing_counter(options)  # --tokenizer, as transform counts
    for path in paths:
        result = transform.render_ticket(path, lookups, render, options, count_tokens)
        advance()
        if not isinstance(result, transform.RenderedTicket):
            yield result
            continue
        objects = {result.relpath: result.markdown.encode("utf-8")}
        if result.sidecar is not None:
            objects[result.relpath + SIDECAR_SUFFIX] = result.sidecar
        yield TicketObjects(result.ticket_id, objects)


# ---------------------------------------------------------------------------------------------------
# pull --state: a local snapshot kept in step with the state; publishing is left to sync --state.


def pull_with_state(
    url: str,
    api_key: str,
    store: state.StateStore,
    snapshot_dir: Path,
    arguments: pull.PullSettings = pull.PullSettings(),
    *,
    threads: int = publish.DEFAULT_THREADS,
    progress: pull.ProgressCallback | None = None,
) -> StatePullReport:
    """`pull` into ``snapshot_dir`` with the bookkeeping and the raw issues kept in ``store``.

    The snapshot is first made a copy of the state's raw issues (local files of the stored version are
    kept, the others restored from the state, files the state does not hold removed), then pulled as
    usual; the raw JSON pull wrote is stored in the state, the copies of issues it removed dropped, and
    the manifest committed with the new cursor, ``source_lookups`` and per ticket ``stored``. What is
    published (``updated_on``, ``lookups``, the fingerprint) is left as it is: the next `sync --state`
    publishes what this run stored. With nothing changed nothing is written. A state made for other
    projects, privacy or Redmine is refused with :class:`ScopeMismatch`. Raises
    :class:`state.StateConflict` when another run holds or changed the state, :class:`state.StateError`
    or :class:`anchorkit.source.preflight.PullError` for unusable input.
    """
    report = StatePullReport(store.describe(), str(snapshot_dir))
    with measured_session(report, store):
        manifest = read_manifest(store)
        scope = checked_scope(manifest, Scope.of(url, arguments.projects, arguments.include_private), store.describe())
        report.scope = scope.describe()
        created = not snapshot_dir.exists()
        make_folder(snapshot_dir, file_mode(arguments.include_private))
        try:
            with pull.snapshot_lock(snapshot_dir):  # no plain pull may touch the snapshot while it is prepared
                plan = _plan_pull(
                    report, manifest, scope, url, api_key, store, snapshot_dir, arguments, threads, progress
                )
                if plan.idle:
                    report.tickets = len(manifest.tickets)
                    return report  # nothing to write, not even the state
                applied = apply_pull(plan, store, snapshot_dir, threads=threads)
        except BaseException:
            # A folder this run made holds only what the state can give again (a wrong key, a dead server):
            # leave nothing half-made behind.
            if created:
                shutil.rmtree(snapshot_dir, ignore_errors=True)
            raise
        report.failures = applied.failures
        report.state_issues_written, report.state_issues_deleted = applied.raw.written, applied.raw.deleted
        report.state_written = True
        report.tickets = len(applied.committed.tickets) if applied.committed else 0
    return report


def _plan_pull(
    report: StatePullReport,
    manifest: Manifest,
    scope: Scope,
    url: str,
    api_key: str,
    store: state.StateStore,
    snapshot_dir: Path,
    arguments: pull.PullSettings,
    threads: int,
    progress: pull.ProgressCallback | None,
) -> planning.PullPlan:
    stamps = manifest.stamps()
    mode = file_mode(arguments.include_private)  # (the snapshot is the user's folder, not a scratch one)
    seed_snapshot(snapshot_dir, manifest, mode)
    # Files the state does not hold could come from another Redmine, project or privacy setting, and
    # pull would take them for stored: they would never reach the state.
    for issue_id in snapshot.stored_issue_ids(snapshot_dir) - set(stamps):
        snapshot.remove_issue(snapshot_dir, issue_id)
    outdated: dict[int, snapshot.StoredStamp] = {}
    for issue_id, stamp in stamps.items():
        local = snapshot.stored_stamp(snapshot_dir, issue_id)
        if local is None or local.updated_on != stamp.updated_on:
            snapshot.remove_issue(snapshot_dir, issue_id)
            outdated[issue_id] = stamp
    unrestorable = restore_raw_issues(store, snapshot_dir, outdated, threads, mode)
    report.restored = len(outdated) - len(unrestorable)
    # What the state cannot give back: an incremental listing may not show it, a full one does. A state
    # from before scopes is listed whole once, and what lies outside this run's projects is dropped.
    legacy = manifest.scope is None and bool(manifest.tickets)
    pulled = run_pull(
        url,
        api_key,
        snapshot_dir,
        arguments,
        list_all=bool(unrestorable) or legacy,
        known=planning.unknown_stamps(stamps, unrestorable),
        progress=progress,
    )
    report.pull_report = pulled
    removed = set(pulled.removed_ids)
    if legacy:
        outside = planning.outside_scope(
            manifest, scope.projects, snapshot.load_lookups(snapshot_dir).get("projects", {})
        )
        for issue_id in outside:
            snapshot.remove_issue(snapshot_dir, issue_id)
        removed |= outside
    fetched = {
        issue_id: written
        for issue_id in sorted(set(pulled.written_ids) - removed)
        if (written := snapshot.stored_stamp(snapshot_dir, issue_id)) is not None
    }
    return planning.plan_pull(
        manifest,
        scope,
        fetched,
        removed,
        snapshot.load_state(snapshot_dir),
        snapshot.load_lookups(snapshot_dir),
        set(pulled.withdrawn_ids),
    )
