"""The stateless sync (`sync --state`) and `pull --state`.

The bookkeeping lives in a state store beside the destination (anchorkit.state), each run starts from an
empty work folder, fetches, renders and uploads only what changed, and commits the state last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anchorkit import __version__, aws, publish, pull, snapshot, state, transform
from anchorkit.document import RenderOptions
from anchorkit.files import write_atomic
from anchorkit.redmine import RetryPolicy
from anchorkit.sidecar import SIDECAR_SUFFIX


# ---------------------------------------------------------------------------------------------------
# Stateless sync: the state lives beside the destination (anchorkit.state), the disk starts empty.
#
# Per ticket the manifest keeps two versions apart: "stored", the updated_on of the raw issue JSON held
# in the state's issues/<id>.json, and "updated_on", the version whose documents are published (None
# while they are not all written). `pull --state` moves only the first (and the shared cursor), so
# `sync --state` publishes every ticket whose two versions differ from its raw JSON in the state: a
# listing from the moved cursor would never show them again. The lookups likewise: "source_lookups" are
# the raw issues' (absent: the same as "lookups"), "lookups" the ones the published documents used.


@dataclass(frozen=True)
class PullArguments:
    """What `pull` is asked to do inside a stateless sync (see :func:`anchorkit.pull.pull`)."""

    projects: tuple[str, ...] = ()
    full: bool = False
    concurrency: int = pull.DEFAULT_CONCURRENCY
    include_private: bool = False
    full_every: int = pull.DEFAULT_FULL_EVERY
    overlap_s: float = pull.DEFAULT_OVERLAP_S
    lookups_max_age_s: float = pull.DEFAULT_LOOKUPS_MAX_AGE_S
    text_format: str | None = None
    policy: RetryPolicy | None = None


@dataclass
class StatelessSyncReport:
    state: str
    destination: str
    pulls: list[pull.PullReport] = field(default_factory=list)
    regenerated_all: bool = False
    rendered: int = 0
    transform_failures: list[transform.TicketFailure] = field(default_factory=list)
    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failures: list[publish.Failure] = field(default_factory=list)
    refused: str | None = None
    state_issues_written: int = 0
    state_written: bool = False
    tickets: int = 0
    s3_requests: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            all(report.ok for report in self.pulls)
            and not self.transform_failures
            and not self.failures
            and self.refused is None
        )

    def to_dict(self) -> dict[str, Any]:
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
            "failures": [{"key": failure.key, "error": failure.error} for failure in self.failures],
            "refused": self.refused,
            "state_issues_written": self.state_issues_written,
            "state_written": self.state_written,
            "tickets": self.tickets,
            "s3_requests": dict(sorted(self.s3_requests.items())),
            "seconds": round(self.seconds, 3),
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

    @property
    def ok(self) -> bool:
        return self.pull_report is not None and self.pull_report.ok and not self.failures

    def to_dict(self) -> dict[str, Any]:
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
        }


def output_fingerprint(options: transform.TransformOptions, render: RenderOptions) -> str:
    """What changes every document's bytes besides the issues and the lookups: version and options
    (labels, language, layout, sidecars, the text format...). The lookups are compared on their own."""
    described = {"anchorkit": __version__, "options": {**asdict(options), "render": asdict(render)}}
    canonical = json.dumps(described, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored_of(entry: dict[str, Any]) -> str | None:
    """The ``updated_on`` of a ticket's raw JSON in the state. Manifests written before ``stored``
    existed held the raw JSON of exactly the published version."""
    return entry["stored"] if "stored" in entry else entry.get("updated_on")


def source_lookups_of(manifest: dict[str, Any]) -> dict[str, Any]:
    """The lookups the state's raw issues were pulled with (what the next pull starts from)."""
    return manifest.get("source_lookups", manifest.get("lookups", {}))


def stamps_of(tickets: dict[str, Any]) -> dict[int, snapshot.StoredStamp]:
    """The manifest's tickets as pull's stored stamps: the version of their raw JSON in the state
    (tickets whose issue is gone are not stored)."""
    return {
        int(key): snapshot.StoredStamp(stored_of(entry), entry.get("project_id"))
        for key, entry in tickets.items()
        if not entry.get("gone")
    }


def unpublished_ids(tickets: dict[str, Any]) -> set[int]:
    """Tickets whose published documents are not those of their stored raw JSON: pulled by
    `pull --state` since, or not completely uploaded."""
    return {
        int(key)
        for key, entry in tickets.items()
        if not entry.get("gone") and (entry.get("updated_on") is None or stored_of(entry) != entry["updated_on"])
    }


def unknown_stamps(stamps: dict[int, snapshot.StoredStamp], ids: set[int]) -> dict[int, snapshot.StoredStamp]:
    """``stamps`` with the version of ``ids`` unknown: pull then fetches them when listed, and reports
    them removed when a complete full listing no longer shows them."""
    return {i: snapshot.StoredStamp(None, s.project_id) if i in ids else s for i, s in stamps.items()}


def seed_snapshot(snapshot_dir: Path, manifest: dict[str, Any]) -> None:
    """Give a snapshot the state's pull bookkeeping and lookups (issue files are restored separately)."""
    (snapshot_dir / snapshot.ISSUES_DIR).mkdir(parents=True, exist_ok=True)
    snapshot.write_state(snapshot_dir, manifest.get("pull", {}))
    snapshot.write_lookups(snapshot_dir, source_lookups_of(manifest))


def restore_raw_issues(
    store: state.StateStore, work_dir: Path, stamps: dict[int, snapshot.StoredStamp], threads: int
) -> set[int]:
    """Copy the stored issue JSON of these tickets into the work snapshot; returns the ids that could not
    be restored (no version recorded, absent, unreadable, or not the version the manifest describes: a
    run that died after storing a newer copy), which must be fetched from Redmine again."""

    def restore(issue_id: int) -> bool:
        if stamps[issue_id].updated_on is None:
            return False  # the state vouches for no copy: not worth a request
        data = store.get_issue(issue_id)
        if data is None:
            return False
        path = snapshot.issue_path(work_dir, issue_id)
        write_atomic(path, data)
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
    arguments: PullArguments,
    *,
    full: bool,
    known: dict[int, snapshot.StoredStamp],
    progress: pull.ProgressCallback | None,
) -> pull.PullReport:
    """:func:`anchorkit.pull.pull` as ``arguments`` ask, with the issues the state holds as ``known``."""
    return pull.pull(
        url, snapshot_dir, api_key, projects=list(arguments.projects), full=full,
        concurrency=arguments.concurrency, include_private=arguments.include_private,
        full_every=arguments.full_every, overlap_s=arguments.overlap_s,
        lookups_max_age_s=arguments.lookups_max_age_s, text_format=arguments.text_format,
        policy=arguments.policy, progress=progress, known=known,
    )


@contextlib.contextmanager
def measured_session(
    report: StatelessSyncReport | StatePullReport, store: state.StateStore, *others: Any
) -> Iterator[None]:
    """The store's session, with the S3 requests of every client involved (a target and the store may
    share one) and the time taken recorded in ``report``, also when the run stops with an exception."""
    started = time.monotonic()
    clients = (getattr(holder, "client", None) for holder in (store, *others))
    with aws.counting_requests(*clients) as requests:
        try:
            with store.session():
                yield
        finally:
            report.s3_requests.update(requests)
            report.seconds = time.monotonic() - started


def hold_back_cursor(pull_state: dict[str, Any], held_back: list[str]) -> dict[str, Any]:
    """Pull bookkeeping whose cursor does not pass these stamps (tickets this run did not finish)."""
    next_pull = dict(pull_state)
    if held_back and next_pull.get("cursor"):
        # pull's rule for issues that failed: the cursor never passes one.
        next_pull["cursor"] = pull.next_cursor(next_pull["cursor"], [], held_back)
    return next_pull


@dataclass
class TicketPlan:
    """One rendered ticket: the objects it should have now, and what it had according to the state."""

    ticket_id: int
    updated_on: str | None
    project_id: int | None
    objects: dict[str, bytes]
    before: dict[str, str]  # key -> sha256 recorded in the state

    def changed_keys(self) -> list[str]:
        return [key for key, data in self.objects.items() if self.before.get(key) != sha256_of(data)]

    def dropped_keys(self) -> list[str]:
        return [key for key in self.before if key not in self.objects]


def run_sync(
    url: str,
    api_key: str,
    store: state.StateStore,
    target: publish.Target,
    options: transform.TransformOptions,
    pull_arguments: PullArguments = PullArguments(),
    *,
    work_dir: Path,
    delete: bool = True,
    max_delete: publish.DeleteLimit | None = None,
    force: bool = False,
    threads: int = publish.DEFAULT_THREADS,
    progress: pull.ProgressCallback | None = None,
) -> StatelessSyncReport:
    """pull → transform → upload with the state in ``store``, starting from an empty ``work_dir``.

    Only what changed is fetched, rendered and uploaded (everything is re-rendered from the stored issue
    JSON when the output fingerprint or the lookups changed), plus what a `pull --state` stored but
    nothing published yet; documents of issues that are gone are deleted (with ``delete``, within
    ``max_delete`` unless ``force``). Documents are written first and the state is committed last, so
    the state never claims an upload that did not happen. Raises :class:`state.StateConflict` when
    another run holds or changed the state (nothing written then, unless this run outlived its lease),
    :class:`state.StateError` / :class:`pull.PullError` for unusable input.
    """
    report = StatelessSyncReport(store.describe(), target.describe())
    with measured_session(report, store, target):
        _run_stateless(report, url, api_key, store, target, options, pull_arguments, work_dir,
                       delete, max_delete or publish.parse_max_delete(publish.DEFAULT_MAX_DELETE), force,
                       threads, progress)
    return report


def _run_stateless(
    report: StatelessSyncReport,
    url: str,
    api_key: str,
    store: state.StateStore,
    target: publish.Target,
    options: transform.TransformOptions,
    arguments: PullArguments,
    work_dir: Path,
    delete: bool,
    max_delete: publish.DeleteLimit,
    force: bool,
    threads: int,
    progress: pull.ProgressCallback | None,
) -> None:
    manifest = store.read_manifest() or {}
    before: dict[str, Any] = manifest.get("tickets", {})
    # The work snapshot starts as the state describes it: pull bookkeeping and lookups, no issue files.
    seed_snapshot(work_dir, manifest)
    stamps = stamps_of(before)
    unpublished = unpublished_ids(before)
    fetched: set[int] = set()  # issues pull wrote into the work snapshot: their raw JSON is new
    removed: set[int] = set()

    def pull_once(full: bool, known: dict[int, snapshot.StoredStamp]) -> None:
        pulled = run_pull(url, api_key, work_dir, arguments, full=full, known=known, progress=progress)
        report.pulls.append(pulled)
        fetched.update(pulled.written_ids)
        removed.update(pulled.removed_ids)

    pull_once(arguments.full, stamps)
    render = transform.resolve_render_options(work_dir, options)
    fingerprint = output_fingerprint(options, render)
    # Render what pull fetched, what the state holds but never published, and everything when the
    # fingerprint or the names (a renamed status, user or version) changed. Raw JSON the state cannot
    # give back is fetched by a full listing; as that may refresh the names, the choice is made again
    # until nothing more is missing (each round asks for ids no round asked for: it ends).
    attempted: set[int] = set()  # ids a full listing was asked to fetch
    while True:
        lookups = snapshot.load_lookups(work_dir)
        report.regenerated_all = bool(before) and (
            fingerprint != manifest.get("fingerprint") or lookups != manifest.get("lookups", {})
        )
        present = snapshot.stored_issue_ids(work_dir)
        wanted = {
            i: s for i, s in stamps.items()
            if i not in present and i not in removed and i not in attempted
            and (report.regenerated_all or i in unpublished)
        }
        unrestorable = restore_raw_issues(store, work_dir, wanted, threads)
        if not unrestorable:
            break
        attempted |= unrestorable
        pull_once(True, unknown_stamps(stamps, attempted))
    missing = attempted - snapshot.stored_issue_ids(work_dir) - removed  # neither in the state nor fetched

    plans = _render_changed(report, work_dir, lookups, render, options, before)
    held_back: list[str] = []  # updated_on of tickets not fully published: the cursor must not pass them
    for failure in report.transform_failures:
        if failure.ticket_id is not None:
            stamp = snapshot.stored_stamp(work_dir, failure.ticket_id)
            held_back += [stamp.updated_on] if stamp and stamp.updated_on else []
    gone = {int(key) for key, entry in before.items() if entry.get("gone")} | (removed & {int(k) for k in before})
    rendered_ids = {p.ticket_id for p in plans}
    gone -= rendered_ids  # an issue that came back is published again

    uploads = publish.objects_from_bytes({key: plan.objects[key] for plan in plans for key in plan.changed_keys()})
    deletes = [key for plan in plans for key in plan.dropped_keys()]
    if delete:
        deletes += [key for issue_id in sorted(gone) for key in before[str(issue_id)].get("objects", {})]
    publish_plan = publish.Plan(
        uploads=uploads,
        stale=[publish.RemoteObject(key, 0, "") for key in deletes],
        delete=True,
        remote_count=sum(len(entry.get("objects", {})) for entry in before.values()),
    )
    report.refused = publish.delete_refusal(publish_plan, max_delete, force)
    if report.refused is not None:
        return  # nothing written: a human looks first

    raw_writes = sorted(i for i in fetched if i in rendered_ids)
    # The raw copy of an issue that went away (deleted, hidden, now private) goes with it, --delete or not.
    raw_deletes = sorted((removed & set(stamps)) - rendered_ids)
    failed_renders = {f.ticket_id for f in report.transform_failures if f.ticket_id is not None}
    pull_state = snapshot.load_state(work_dir)

    def next_manifest(outcome: dict[str, str | None], raw_failed: set[int]) -> dict[str, Any]:
        stamps_held = list(held_back)
        raw_stored = set(raw_writes) - raw_failed
        tickets = _next_tickets(before, plans, gone, outcome, raw_stored, raw_failed, stamps_held, failed_renders, missing)
        # No "source_lookups": the raw issues' lookups are now the published ones.
        return {"format": MANIFEST_FORMAT, "fingerprint": fingerprint, "pull": hold_back_cursor(pull_state, stamps_held),
                "lookups": lookups, "tickets": tickets}

    expected = next_manifest({key: None for key in deletes}, set())  # if every write succeeds
    if not (uploads or deletes or raw_writes or raw_deletes) and same_state(manifest, expected):
        report.tickets = len(before)
        return  # nothing to write, not even the state
    store.begin_writes()  # may raise StateConflict: then nothing has been written
    results = publish.apply_plan(publish_plan, target, threads=threads)
    outcome = {result.operation.key: result.error for result in results}
    upload_keys, delete_keys = {u.key for u in uploads}, set(deletes)
    report.uploaded = sorted(k for k, e in outcome.items() if e is None and k in upload_keys)
    report.deleted = sorted(k for k, e in outcome.items() if e is None and k in delete_keys)
    report.failures = [publish.Failure(k, e) for k, e in sorted(outcome.items()) if e is not None]
    raw = write_raw_issues(store, work_dir, raw_writes, raw_deletes, threads)
    report.failures += raw.failures
    report.state_issues_written = raw.written
    committed = next_manifest(outcome, raw.failed)
    store.begin_writes()  # renews the lease before the commit (a long upload may have used it up)
    store.commit(committed)
    report.state_written = True
    report.tickets = len(committed["tickets"])


MANIFEST_FORMAT = 1


def same_state(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Equal but for the count of runs since the last full listing: rewriting the state for that alone
    would cost a PUT on every run (so automatic full listings count only runs that wrote something)."""

    def without_run_count(manifest: dict[str, Any]) -> dict[str, Any]:
        pull_state = {k: v for k, v in manifest.get("pull", {}).items() if k != "runs_since_full"}
        return {**manifest, "pull": pull_state}

    return without_run_count(old) == without_run_count(new)


def _render_changed(
    report: StatelessSyncReport,
    work_dir: Path,
    lookups: dict[str, Any],
    render: RenderOptions,
    options: transform.TransformOptions,
    before: dict[str, Any],
) -> list[TicketPlan]:
    """Render every issue in the work snapshot (the changed ones, or all when regenerating)."""
    plans: list[TicketPlan] = []
    for path in snapshot.iter_issue_paths(work_dir):
        result = transform.render_ticket(path, lookups, render, options)
        if result is None:
            continue  # a private issue, left out on purpose
        if isinstance(result, transform.TicketFailure):
            report.transform_failures.append(result)
            continue
        report.rendered += 1
        objects = {result.relpath: result.markdown.encode("utf-8")}
        if result.sidecar is not None:
            objects[result.relpath + SIDECAR_SUFFIX] = result.sidecar
        stamp = snapshot.stored_stamp(work_dir, result.ticket_id)
        plans.append(
            TicketPlan(
                result.ticket_id, stamp.updated_on if stamp else None, stamp.project_id if stamp else None,
                objects, dict(before.get(str(result.ticket_id), {}).get("objects", {})),
            )
        )
    return plans


@dataclass
class RawIssueWrites:
    """What storing raw issue JSON in the state did."""

    written: int = 0
    deleted: int = 0
    failed: set[int] = field(default_factory=set)  # ids whose JSON was not stored
    failures: list[publish.Failure] = field(default_factory=list)


def write_raw_issues(
    store: state.StateStore, snapshot_dir: Path, writes: list[int], deletes: list[int], threads: int
) -> RawIssueWrites:
    """Store the raw issue JSON of these snapshot issues in the state, and drop the copies of gone ones."""
    failures: list[publish.Failure] = []

    def attempt(action: Any, issue_id: int) -> bool:
        try:
            action(issue_id)
        except Exception as error:  # reported; the ticket is then retried by the next run
            failures.append(publish.Failure(f"state issues/{issue_id}.json", publish.describe_error(error)))
            return False
        return True

    def write(issue_id: int) -> bool:
        return attempt(lambda i: store.put_issue(i, snapshot.issue_path(snapshot_dir, i).read_bytes()), issue_id)

    def remove(issue_id: int) -> bool:
        # A copy left behind is never read for a gone ticket; the failure is still reported.
        return attempt(store.delete_issue, issue_id)

    with ThreadPoolExecutor(max_workers=threads) as pool:
        written = dict(zip(writes, pool.map(write, writes)))
        deleted = list(pool.map(remove, deletes))
    return RawIssueWrites(
        written=sum(written.values()), deleted=sum(deleted),
        failed={issue_id for issue_id, ok in written.items() if not ok}, failures=failures,
    )


def _next_tickets(
    before: dict[str, Any],
    plans: list[TicketPlan],
    gone: set[int],
    outcome: dict[str, str | None],
    raw_stored: set[int],
    raw_failed: set[int],
    held_back: list[str],
    failed_renders: set[int],
    missing: set[int],
) -> dict[str, Any]:
    """The manifest's tickets after this run, recording only what really happened.

    A ticket whose objects were not all written keeps the checksums of what is really there and no
    ``updated_on`` (so the next run publishes it again); its stamp holds the cursor back. ``stored``
    names the raw JSON version the state now holds for it.
    """
    tickets = {key: dict(entry) for key, entry in before.items()}
    for issue_id in failed_renders:
        if str(issue_id) in tickets:
            entry = tickets[str(issue_id)]
            tickets[str(issue_id)] = {**entry, "stored": stored_of(entry), "updated_on": None}
    for issue_id in missing:
        # Its raw JSON is not in the state and Redmine did not give it: redone by a later run.
        tickets[str(issue_id)] = {**tickets[str(issue_id)], "stored": None, "updated_on": None}
    for plan in plans:
        objects: dict[str, str] = {}
        complete = plan.ticket_id not in raw_failed
        for key, data in plan.objects.items():
            if outcome.get(key, None) is None:  # uploaded now, or already identical
                objects[key] = sha256_of(data)
            else:
                complete = False
                if key in plan.before:
                    objects[key] = plan.before[key]
        for key in plan.dropped_keys():
            if outcome.get(key) is not None:
                complete = False
                objects[key] = plan.before[key]
        if not complete and plan.updated_on:
            held_back.append(plan.updated_on)
        previous = before.get(str(plan.ticket_id), {})
        tickets[str(plan.ticket_id)] = {
            "updated_on": plan.updated_on if complete else None,
            "project_id": plan.project_id,
            "objects": objects,
            # A rendered copy restored from the state is the stored one; a fetched one if storing it worked.
            "stored": plan.updated_on if plan.ticket_id in raw_stored else stored_of(previous),
        }
    for issue_id in gone:
        # Objects whose delete failed or was not attempted (no --delete) are still there.
        remaining = {
            key: sha for key, sha in before[str(issue_id)].get("objects", {}).items()
            if outcome.get(key, "not deleted") is not None
        }
        if remaining:
            tickets[str(issue_id)] = {"gone": True, "objects": remaining}
        else:
            tickets.pop(str(issue_id), None)
    return dict(sorted(tickets.items(), key=lambda item: int(item[0])))


# ---------------------------------------------------------------------------------------------------
# pull --state: a local snapshot kept in step with the state; publishing is left to sync --state.


def pull_with_state(
    url: str,
    api_key: str,
    store: state.StateStore,
    snapshot_dir: Path,
    arguments: PullArguments = PullArguments(),
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
    publishes what this run stored. With nothing changed nothing is written. Raises
    :class:`state.StateConflict` when another run holds or changed the state, :class:`state.StateError`
    or :class:`pull.PullError` for unusable input.
    """
    report = StatePullReport(store.describe(), str(snapshot_dir))
    with measured_session(report, store):
        snapshot_dir.mkdir(parents=True, exist_ok=True)
        with pull.snapshot_lock(snapshot_dir):  # no plain pull may touch the snapshot while it is prepared
            _pull_with_state(report, url, api_key, store, snapshot_dir, arguments, threads, progress)
    return report


def _pull_with_state(
    report: StatePullReport,
    url: str,
    api_key: str,
    store: state.StateStore,
    snapshot_dir: Path,
    arguments: PullArguments,
    threads: int,
    progress: pull.ProgressCallback | None,
) -> None:
    manifest = store.read_manifest() or {}
    before: dict[str, Any] = manifest.get("tickets", {})
    stamps = stamps_of(before)
    seed_snapshot(snapshot_dir, manifest)
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
    unrestorable = restore_raw_issues(store, snapshot_dir, outdated, threads)
    report.restored = len(outdated) - len(unrestorable)
    # What the state cannot give back: an incremental listing may not show it, a full one does.
    pulled = run_pull(
        url, api_key, snapshot_dir, arguments, full=arguments.full or bool(unrestorable),
        known=unknown_stamps(stamps, unrestorable), progress=progress,
    )
    report.pull_report = pulled
    raw_deletes = sorted(set(pulled.removed_ids) & set(stamps))
    fetched = {
        issue_id: stamp
        for issue_id in sorted(set(pulled.written_ids) - set(pulled.removed_ids))
        if (stamp := snapshot.stored_stamp(snapshot_dir, issue_id)) is not None
    }
    lookups = snapshot.load_lookups(snapshot_dir)
    pull_state = snapshot.load_state(snapshot_dir)

    def next_manifest(raw_failed: set[int]) -> dict[str, Any]:
        tickets = {key: dict(entry) for key, entry in before.items()}
        held_back: list[str] = []  # issues whose raw JSON was not stored: the next run lists them again
        for issue_id, stamp in fetched.items():
            if issue_id in raw_failed:
                held_back += [stamp.updated_on] if stamp.updated_on else []
                continue
            previous = {k: v for k, v in tickets.get(str(issue_id), {}).items() if k != "gone"}
            # A new ticket has nothing published yet; a known one keeps what it has published.
            tickets[str(issue_id)] = {
                "updated_on": None, "objects": {}, **previous, "project_id": stamp.project_id, "stored": stamp.updated_on,
            }
        for issue_id in raw_deletes:
            published = before[str(issue_id)].get("objects", {})
            if published:  # sync --state deletes them (with --delete)
                tickets[str(issue_id)] = {"gone": True, "objects": published}
            else:
                tickets.pop(str(issue_id))
        committed = {key: value for key, value in manifest.items() if key != "source_lookups"}
        committed.update(
            format=MANIFEST_FORMAT, pull=hold_back_cursor(pull_state, held_back),
            tickets=dict(sorted(tickets.items(), key=lambda item: int(item[0]))),
        )
        if lookups != manifest.get("lookups"):
            committed["source_lookups"] = lookups
        return committed

    if not (fetched or raw_deletes) and same_state(manifest, next_manifest(set())):
        report.tickets = len(before)
        return  # nothing to write, not even the state
    store.begin_writes()  # may raise StateConflict: then nothing has been written
    raw = write_raw_issues(store, snapshot_dir, sorted(fetched), raw_deletes, threads)
    report.failures = raw.failures
    report.state_issues_written, report.state_issues_deleted = raw.written, raw.deleted
    committed = next_manifest(raw.failed)
    store.begin_writes()  # renews the lease before the commit
    store.commit(committed)
    report.state_written = True
    report.tickets = len(committed["tickets"])
