"""Carrying out a plan (:mod:`anchorkit.sync.plan`): the writes, in the documented order.

Documents first, the raw issues next, the manifest last, and the manifest records only what really
happened: so a run killed at any point leaves a state that never claims an upload that did not happen.
Every object a run is about to upload or delete is recorded as pending before the first write
(``Plan.intent``), so that a run killed before its commit leaves no object the state does not know of, nor
one whose checksum in the manifest is no longer sure.
The lease (S3) is taken before the first write and renewed before the commit. A raw issue fetched again is
written only when the state does not hold its very bytes, which is found out once the lease is held, from
the copies themselves (:func:`without_unchanged_raw`).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from anchorkit.publish import state
from anchorkit.publish import upload as publish
from anchorkit.publish.aws import describe_error
from anchorkit.source import snapshot
from anchorkit.sync.manifest import Manifest
from anchorkit.sync.plan import Plan, PullPlan


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
        written=sum(written.values()),
        deleted=sum(deleted),
        failed={issue_id for issue_id, ok in written.items() if not ok},
        failures=failures,
    )


def without_unchanged_raw(
    plan: Plan, store: state.StateStore, snapshot_dir: Path, threads: int
) -> tuple[Plan, str | None]:
    """``plan`` without the raw issue writes whose bytes the state holds already, and a warning when that could
    not be found out (then every one is written, as it would have been). What the state holds is read from the
    copies (:meth:`state.StateStore.unchanged_issues`), never from the manifest: a run killed between its writes
    and its commit, a write that failed after all, a copy deleted by hand all leave copies the manifest does
    not describe. Only the writes :meth:`Plan.raw_to_compare` names are looked at."""
    candidates = plan.raw_to_compare()
    if not candidates:
        return plan, None
    try:
        unchanged = store.unchanged_issues({i: snapshot.issue_path(snapshot_dir, i) for i in candidates}, threads)
    except (BotoCoreError, ClientError, OSError) as error:
        return plan, (
            f"{store.describe()}: could not tell which raw issues it holds already ({describe_error(error)}); "
            f"the {len(candidates)} fetched again are written"
        )
    return plan.without_unchanged_raw(unchanged), None


@dataclass
class Applied:
    """What the writes of a plan did."""

    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failures: list[publish.Failure] = field(default_factory=list)
    raw: RawIssueWrites = field(default_factory=RawIssueWrites)
    committed: Manifest | None = None
    plan: Plan | None = None  # the sync plan carried out: without the raw issues found unchanged
    warnings: list[str] = field(default_factory=list)


def apply(
    plan: Plan,
    store: state.StateStore,
    target: publish.Target,
    snapshot_dir: Path,
    *,
    threads: int,
    on_result: Callable[[publish.OperationResult], None] | None = None,
) -> Applied:
    """Write what ``plan`` says to ``target`` and ``store`` (raw JSON read from ``snapshot_dir``), but the raw
    issues the state already holds byte for byte, found out under the lease: no other run writes a copy then.
    Raises :class:`state.StateConflict` when another run holds or changed the state: nothing written
    then, unless this run outlived its lease."""
    intent = plan.intent()  # the raw issues found unchanged below change nothing in it
    store.begin_writes(None if intent is None else intent.to_json())
    plan, warning = without_unchanged_raw(plan, store, snapshot_dir, threads)
    results = publish.apply_plan(plan.documents(), target, threads=threads, on_result=on_result)
    outcome = {result.operation.key: result.error for result in results}
    upload_keys, delete_keys = set(plan.uploads), set(plan.deletes)
    applied = Applied(
        plan=plan,
        uploaded=sorted(k for k, e in outcome.items() if e is None and k in upload_keys),
        deleted=sorted(k for k, e in outcome.items() if e is None and k in delete_keys),
        failures=[publish.Failure(k, e) for k, e in sorted(outcome.items()) if e is not None],
        warnings=[warning] if warning else [],
    )
    applied.raw = write_raw_issues(store, snapshot_dir, plan.raw_writes, plan.raw_deletes, threads)
    applied.failures += applied.raw.failures
    applied.committed = plan.manifest_after(outcome, applied.raw.failed)
    commit(store, applied.committed)
    return applied


def apply_pull(plan: PullPlan, store: state.StateStore, snapshot_dir: Path, *, threads: int) -> Applied:
    """Store the raw issues a `pull --state` fetched, drop the removed ones, commit the manifest."""
    store.begin_writes()
    applied = Applied(raw=write_raw_issues(store, snapshot_dir, plan.raw_writes, plan.raw_deletes, threads))
    applied.failures = list(applied.raw.failures)
    applied.committed = plan.manifest_after(applied.raw.failed)
    commit(store, applied.committed)
    return applied


def commit(store: state.StateStore, manifest: Manifest) -> None:
    store.begin_writes()  # renews the lease before the commit (a long upload may have used it up)
    store.commit(manifest.to_json())
