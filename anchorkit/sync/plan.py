"""Deciding what a `sync --state` or `pull --state` run writes: pure functions, no I/O.

``plan(manifest, listing, local, policy)`` takes what the state said (the manifest), what Redmine said
(the listing: fetched, removed, the new cursor and lookups) and what was rendered (local), and returns a
:class:`Plan`: the documents to upload and delete, the raw issues to store and drop, a refusal of the
delete guard, and the manifest to commit for any outcome of the writes. :mod:`anchorkit.sync.apply`
carries it out; `--dry-run` prints it instead.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import Any

from anchorkit.publish import upload as publish
from anchorkit.publish.keys import DOCUMENTS
from anchorkit.source import snapshot
from anchorkit.source.cursor import next_cursor
from anchorkit.source.lookups import descendants, resolve_projects
from anchorkit.sync.manifest import PENDING, Manifest, Scope, TicketEntry

# Raw issue copies one ListObjectsV2 request lists: what telling unchanged copies apart costs, against a PUT each.
LISTING_PAGE = 1000


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------------
# Before rendering: what the run must see


def regeneration_reason(manifest: Manifest, fingerprint: str, lookups: dict[str, Any]) -> str | None:
    """Why every document is rendered again, None when it is not: what changes their bytes besides the issues
    (version and options: the fingerprint) or the names they show (the lookups, named by table) differ from
    what was published. The fingerprint is a hash of both version and options: which of them changed is not
    known, so the reason names both."""
    if not manifest.tickets:  # a first run renders everything as new tickets, not again
        return None
    reasons = ["the anchorkit version or the output options changed"] if fingerprint != manifest.fingerprint else []
    renamed = sorted(
        table for table in {*lookups, *manifest.lookups} if lookups.get(table) != manifest.lookups.get(table)
    )
    if renamed:
        reasons.append(f"names changed in the lookups ({', '.join(renamed)})")
    return "; ".join(reasons) or None


def to_restore(
    manifest: Manifest, present: set[int], removed: set[int], attempted: set[int], regenerate: bool
) -> dict[int, snapshot.StoredStamp]:
    """The stored raw issues a run needs besides what pull fetched: the ones stored but not published
    yet, or all of them when regenerating (never one Redmine removed or a full listing was already
    asked to fetch)."""
    unpublished = manifest.unpublished_ids()
    return {
        issue_id: stamp
        for issue_id, stamp in manifest.stamps().items()
        if issue_id not in present
        and issue_id not in removed
        and issue_id not in attempted
        and (regenerate or issue_id in unpublished)
    }


def unknown_stamps(stamps: dict[int, snapshot.StoredStamp], ids: set[int]) -> dict[int, snapshot.StoredStamp]:
    """``stamps`` with the version of ``ids`` unknown: pull then fetches them when listed, and reports
    them removed when a complete full listing no longer shows them."""
    return {i: snapshot.StoredStamp(None, s.project_id) if i in ids else s for i, s in stamps.items()}


def outside_scope(manifest: Manifest, projects: tuple[str, ...], project_table: dict[str, Any]) -> set[int]:
    """Tickets of the state in no project of ``projects`` (nor their subprojects), by the projects lookup:
    what a narrowed scope must no longer publish. Nothing when every project is in scope, or when a
    project is unknown to the lookup (nothing is removed on a guess)."""
    if not projects:
        return set()
    roots = resolve_projects(project_table, list(projects))
    if roots is None:
        return set()
    in_scope = descendants(project_table, roots)
    return {
        issue_id
        for issue_id, entry in manifest.tickets.items()
        if not entry.gone and entry.project_id is not None and entry.project_id not in in_scope
    }


def scope_refusal(state: Scope | None, run: Scope, where: str) -> str | None:
    """Why a run with the scope ``run`` must not use a state made for ``state`` (None: it may)."""
    if state is None:
        return None
    differences = state.differences(run)
    if not differences:
        return None
    return (
        f"{where} holds {state.describe()}; this run asks for {'; '.join(differences)}. Run with the state's scope, "
        "or pass --rescope to change it (a full listing; with --delete the documents outside the new scope are "
        "deleted), or use another --state"
    )


# ---------------------------------------------------------------------------------------------------
# sync --state


@dataclass(frozen=True)
class Rendered:
    """One rendered ticket: the objects it has now (key -> bytes)."""

    ticket_id: int
    updated_on: str | None
    project_id: int | None
    objects: dict[str, bytes]


@dataclass(frozen=True)
class Listing:
    """What the pull of this run left: new raw JSON, issues gone, the bookkeeping to commit."""

    fetched: frozenset[int] = frozenset()  # issues pull wrote into the work snapshot (new raw JSON)
    removed: frozenset[int] = frozenset()  # issues Redmine no longer shows (or outside a narrowed scope)
    withdrawn: frozenset[int] = frozenset()  # of those, the ones private now or moved out of the projects
    missing: frozenset[int] = frozenset()  # neither in the state nor given by Redmine: redone later
    pull_state: dict[str, Any] = field(default_factory=dict)  # pull's state.json after the run
    lookups: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""
    layout: str = DOCUMENTS  # what this run publishes the tickets as (manifest.py)


@dataclass(frozen=True)
class Local:
    """What rendering gave: documents, and the tickets that failed (id -> their updated_on)."""

    rendered: tuple[Rendered, ...] = ()
    failed: dict[int, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class DeletePolicy:
    delete: bool = True
    max_delete: publish.DeleteLimit = field(
        default_factory=lambda: publish.parse_max_delete(publish.DEFAULT_MAX_DELETE)
    )
    force: bool = False


@dataclass(frozen=True)
class Plan:
    """What one `sync --state` run writes, in this order: documents, raw issues, the manifest."""

    before: Manifest
    scope: Scope
    listing: Listing
    local: Local
    uploads: dict[str, bytes]  # key -> bytes of documents whose SHA-256 differs from the state's
    deletes: list[str]  # document keys dropped by a rendering, or of gone issues (withdrawn ones always)
    gone: frozenset[int]  # issues whose documents are (or stay) to be deleted
    withdrawn: frozenset[int]  # gone issues that are private now or moved out: deleted with or without --delete
    raw_writes: list[int]  # fetched issues whose raw JSON goes into the state
    raw_deletes: list[int]  # raw copies of issues that went away, dropped with or without --delete
    refused: str | None  # the delete guard's refusal: nothing is written then
    raw_unchanged: frozenset[int] = frozenset()  # fetched issues whose very bytes the state holds: not written

    @property
    def writes_documents(self) -> bool:
        return bool(self.uploads or self.deletes or self.raw_writes or self.raw_deletes)

    @property
    def idle(self) -> bool:
        """Nothing to write, not even the state."""
        return not self.writes_documents and self.before.same_as(self.expected())

    def summary(self) -> dict[str, Any]:
        """What `--dry-run` prints: counts, every key, the cursor before and after."""
        return {
            "upload": len(self.uploads),
            "upload_bytes": sum(len(data) for data in self.uploads.values()),
            "delete": len(self.deletes),
            "gone_kept": len({k for i in self.gone for k in self.before.tickets[i].objects} - set(self.deletes)),
            "store_issues": len(self.raw_writes),
            "unchanged_issues": len(self.raw_unchanged),
            "drop_issues": len(self.raw_deletes),
            "cursor": {"from": self.before.cursor, "to": self.expected().cursor},
            "state_rewritten": not self.idle,
            "planned_keys": {"upload": sorted(self.uploads), "delete": sorted(self.deletes)},
        }

    def raw_to_compare(self) -> list[int]:
        """The raw writes whose copy in the state may hold the same bytes: its version is the fetched one (a
        refetch, a parent fetched again for its subtasks). Another version differs in ``updated_on``, so it is
        written unseen. Empty when there are no more of them than the requests of one listing of the state's
        copies: writing them costs no more than finding out."""
        stored = {i: entry.stored for i, entry in self.before.tickets.items() if entry.stored is not None}
        writes = set(self.raw_writes)
        maybe = sorted(
            r.ticket_id
            for r in self.local.rendered
            if r.ticket_id in writes and stored.get(r.ticket_id) == r.updated_on
        )
        listing_requests = math.ceil(len(stored) / LISTING_PAGE)
        return maybe if len(maybe) > listing_requests else []

    def without_unchanged_raw(self, unchanged: set[int]) -> Plan:
        """This plan, where the raw issues whose bytes the state was found to hold are not written again."""
        kept = frozenset(unchanged) & set(self.raw_writes)
        return replace(
            self, raw_writes=[i for i in self.raw_writes if i not in kept], raw_unchanged=self.raw_unchanged | kept
        )

    def expected(self) -> Manifest:
        """The manifest to commit when every write succeeds."""
        return self.manifest_after(dict.fromkeys(self.deletes), set())

    def documents(self) -> publish.Plan:
        """The document writes as a publish plan (its deletes are keys the state knows, not listed ones;
        those of withdrawn tickets are outside the delete guard, like upload's)."""
        withdrawn = {key for issue_id in self.withdrawn for key in self.before.tickets[issue_id].objects}
        return publish.Plan(
            uploads=publish.objects_from_bytes(self.uploads),
            stale=[publish.RemoteObject(key, 0, "") for key in self.deletes if key not in withdrawn],
            withdrawn=[publish.RemoteObject(key, 0, "") for key in self.deletes if key in withdrawn],
            delete=True,
            remote_count=self.before.published_count(),
        )

    def intent(self) -> Manifest | None:
        """The manifest to commit before the first write when this run uploads or deletes objects; None when it
        changes none (or the state records every one of them as pending already). Every key it is about to
        write or delete is recorded as PENDING (never a real checksum), and a rendered ticket with such a key as
        not published. A run killed before its commit then leaves no object the state describes wrongly: a new
        one it does not know of, or one overwritten (or deleted) while the manifest still holds the checksum of
        what was there before, which the next run would take for published when the ticket's bytes went back
        to them without a new ``updated_on`` (a note edited back, or made private again). The next run renders
        those tickets again (from the state's raw JSON when not fetched), writes what they have whatever the
        dead run left there, and deletes what they no longer have (every object of a ticket made private)."""
        changing = set(self.uploads) | set(self.deletes)
        tickets = dict(self.before.tickets)
        for rendered in self.local.rendered:
            entry = tickets.get(rendered.ticket_id) or TicketEntry(project_id=rendered.project_id)
            keys = [key for key in {**rendered.objects, **entry.objects} if key in changing]
            if keys:
                tickets[rendered.ticket_id] = replace(entry, updated_on=None, objects=pending(entry.objects, keys))
        for issue_id in self.gone:
            entry = tickets[issue_id]
            keys = [key for key in entry.objects if key in changing]
            tickets[issue_id] = replace(entry, objects=pending(entry.objects, keys))
        return None if tickets == self.before.tickets else replace(self.before, tickets=tickets)

    def manifest_after(self, outcome: dict[str, str | None], raw_failed: set[int]) -> Manifest:
        """The manifest after this run, recording only what really happened.

        ``outcome``: key -> error (None: done) of the document writes attempted; ``raw_failed``: issues
        whose raw JSON could not be stored. A ticket whose objects were not all written has no
        ``updated_on`` (so the next run publishes it again) and each object whose write or delete failed
        PENDING (it may have happened: a timeout after the server acted); its stamp holds the cursor back.
        ``stored`` names the raw JSON version the state now holds: the one written now, or found there byte
        for byte (``raw_unchanged``).
        """
        before = self.before.tickets
        tickets = dict(before)
        held_back = [stamp for stamp in self.local.failed.values() if stamp]
        for issue_id in self.local.failed:
            if issue_id in tickets:
                tickets[issue_id] = replace(tickets[issue_id], updated_on=None)
        for issue_id in self.listing.missing:
            # Its raw JSON is not in the state and Redmine did not give it: redone by a later run.
            tickets[issue_id] = replace(tickets[issue_id], stored=None, updated_on=None)
        raw_stored = (set(self.raw_writes) - raw_failed) | self.raw_unchanged
        for rendered in self.local.rendered:
            previous = before.get(rendered.ticket_id, TicketEntry())
            objects: dict[str, str] = {}
            complete = rendered.ticket_id not in raw_failed
            for key, data in rendered.objects.items():
                if outcome.get(key) is None:  # uploaded now, or already identical
                    objects[key] = sha256_of(data)
                else:  # a write that failed may still have happened (a timeout after the server stored it)
                    complete = False
                    objects[key] = PENDING
            for key in dropped_keys(rendered, previous):
                if outcome.get(key) is not None:  # a delete that failed, too
                    complete = False
                    objects[key] = PENDING
            if not complete and rendered.updated_on:
                held_back.append(rendered.updated_on)
            tickets[rendered.ticket_id] = TicketEntry(
                updated_on=rendered.updated_on if complete else None,
                project_id=rendered.project_id,
                objects=objects,
                # A rendered copy restored from the state is the stored one; a fetched one if storing it worked.
                stored=rendered.updated_on if rendered.ticket_id in raw_stored else previous.stored,
            )
        for issue_id in self.gone:
            # Objects whose delete was not attempted (no --delete) are still there; one whose delete failed may be.
            remaining = {
                k: PENDING if k in outcome else sha
                for k, sha in before[issue_id].objects.items()
                if outcome.get(k, "not deleted") is not None
            }
            if remaining:
                tickets[issue_id] = TicketEntry(objects=remaining, gone=True, withdrawn=issue_id in self.withdrawn)
            else:
                tickets.pop(issue_id, None)
        # No source_lookups: the raw issues' lookups are now the published ones.
        return Manifest(
            pull=hold_back_cursor(self.listing.pull_state, held_back),
            lookups=self.listing.lookups,
            source_lookups=None,
            fingerprint=self.listing.fingerprint,
            tickets=tickets,
            scope=self.scope,
            layout=self.listing.layout,
        )


def pending(objects: dict[str, str], keys: list[str]) -> dict[str, str]:
    """``objects`` with ``keys`` recorded as PENDING: what they hold is not known."""
    return {**objects, **dict.fromkeys(keys, PENDING)}


def dropped_keys(rendered: Rendered, previous: TicketEntry) -> list[str]:
    """Objects a ticket had that its new rendering no longer has (e.g. another --layout)."""
    return [key for key in previous.objects if key not in rendered.objects]


def hold_back_cursor(pull_state: dict[str, Any], held_back: list[str]) -> dict[str, Any]:
    """Pull bookkeeping whose cursor does not pass these stamps (tickets this run did not finish)."""
    next_pull = dict(pull_state)
    if held_back and next_pull.get("cursor"):
        # pull's rule for issues that failed: the cursor never passes one.
        next_pull["cursor"] = next_cursor(next_pull["cursor"], [], held_back)
    return next_pull


def plan(manifest: Manifest, listing: Listing, local: Local, policy: DeletePolicy, scope: Scope) -> Plan:
    """What a `sync --state` run writes (see the module docstring and README, "One run")."""
    rendered_ids = {r.ticket_id for r in local.rendered}
    known = set(manifest.tickets)
    # An issue that came back is published again; one removed now or earlier has its documents deleted.
    gone = ({i for i, e in manifest.tickets.items() if e.gone} | (set(listing.removed) & known)) - rendered_ids
    # A ticket that is private now (or moved out of the projects) is not a stale document: it goes at once.
    withdrawn = {i for i in gone if manifest.tickets[i].withdrawn or i in listing.withdrawn}
    uploads: dict[str, bytes] = {}
    deletes: list[str] = []
    for rendered in local.rendered:
        previous = manifest.tickets.get(rendered.ticket_id, TicketEntry())
        uploads.update({k: data for k, data in rendered.objects.items() if previous.objects.get(k) != sha256_of(data)})
        deletes += dropped_keys(rendered, previous)
    deleted = sorted(gone if policy.delete else withdrawn)
    deletes += [key for issue_id in deleted for key in manifest.tickets[issue_id].objects]
    stored = {issue_id for issue_id, entry in manifest.tickets.items() if not entry.gone}
    drafted = Plan(
        before=manifest,
        scope=scope,
        listing=listing,
        local=local,
        uploads=uploads,
        deletes=deletes,
        gone=frozenset(gone),
        withdrawn=frozenset(withdrawn),
        raw_writes=sorted(i for i in listing.fetched if i in rendered_ids),
        # The raw copy of an issue that went away (deleted, hidden, now private) goes with it, --delete or not.
        raw_deletes=sorted((set(listing.removed) & stored) - rendered_ids),
        refused=None,
    )
    switch = ""
    if manifest.layout != listing.layout and manifest.published_count():
        switch = (
            f"; this run publishes {listing.layout} where the state has {manifest.layout}, "
            "so every published object of the other layout is replaced"
        )
    refusal = publish.delete_refusal(drafted.documents(), policy.max_delete, policy.force, switch)
    return replace(drafted, refused=refusal)


# ---------------------------------------------------------------------------------------------------
# pull --state


@dataclass(frozen=True)
class PullPlan:
    """What one `pull --state` run writes: raw issues, then the manifest (nothing is published)."""

    before: Manifest
    scope: Scope
    fetched: dict[int, snapshot.StoredStamp]  # issues pull wrote, with their stamps
    raw_deletes: list[int]  # issues pull removed that the state holds
    pull_state: dict[str, Any]
    lookups: dict[str, Any]
    withdrawn: frozenset[int] = frozenset()  # of the removed ones, those private now or moved out

    @property
    def raw_writes(self) -> list[int]:
        return sorted(self.fetched)

    @property
    def idle(self) -> bool:
        return not (self.fetched or self.raw_deletes) and self.before.same_as(self.manifest_after(set()))

    def manifest_after(self, raw_failed: set[int]) -> Manifest:
        """The manifest with the new cursor, ``source_lookups`` and per ticket ``stored``; what is published
        (``updated_on``, ``lookups``, the fingerprint) is left as it is, for `sync --state` to publish."""
        tickets = dict(self.before.tickets)
        held_back: list[str] = []  # issues whose raw JSON was not stored: the next run lists them again
        for issue_id, stamp in self.fetched.items():
            if issue_id in raw_failed:
                held_back += [stamp.updated_on] if stamp.updated_on else []
                continue
            previous = tickets.get(issue_id)
            # A new ticket has nothing published yet; a known one keeps what it has published.
            published = (
                previous
                if previous is not None and not previous.gone
                else TicketEntry(objects=previous.objects if previous is not None else {})
            )
            tickets[issue_id] = replace(published, gone=False, project_id=stamp.project_id, stored=stamp.updated_on)
        for issue_id in self.raw_deletes:
            objects = self.before.tickets[issue_id].objects
            if objects:  # sync --state deletes them (with --delete, or withdrawn)
                tickets[issue_id] = TicketEntry(objects=objects, gone=True, withdrawn=issue_id in self.withdrawn)
            else:
                tickets.pop(issue_id)
        return replace(
            self.before,
            pull=hold_back_cursor(self.pull_state, held_back),
            tickets=tickets,
            scope=self.scope,
            source_lookups=self.lookups if self.lookups != self.before.lookups else None,
        )


def plan_pull(
    manifest: Manifest,
    scope: Scope,
    fetched: dict[int, snapshot.StoredStamp],
    removed: set[int],
    pull_state: dict[str, Any],
    lookups: dict[str, Any],
    withdrawn: set[int] | frozenset[int] = frozenset(),
) -> PullPlan:
    removed_here = sorted(removed & set(manifest.stamps()))
    return PullPlan(
        manifest, scope, fetched, removed_here, pull_state, lookups, frozenset(withdrawn) & set(removed_here)
    )
