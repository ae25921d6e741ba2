"""pull: bring a snapshot up to date with a Redmine, incrementally, concurrently, and safely.

One run:
1. list issues (``/issues.json?status_id=*&sort=id``, keyset-paged by id), on incremental runs only those
   with ``updated_on >= cursor - overlap`` (with --watch-moves, of every project, kept to the --project ones: one
   moved out of them is withdrawn at once); a full listing (``--full``, the first run, every K-th run) lists
   everything so deletions and visibility changes can be seen;
2. fetch each listed issue whose ``updated_on`` differs from the stored copy, N at a time, with journals,
   attachments, relations and children, and store it atomically (private issues and private notes left
   out unless asked for);
3. refresh ``lookups.json`` when it is stale (at most once a run; 403 tables degrade to names seen in
   issues); it keeps the users, projects and custom fields the snapshot names (and the projects a --project
   covers) only;
4. after a complete full listing, remove stored issues that Redmine no longer shows;
5. write ``state.json`` last: the cursor moves only once everything it covers is on disk, so a run killed
   at any point is simply resumed by the next one, without refetching what was already stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from anchorkit.errors import EXIT_LOCKED, url_host
from anchorkit.files import file_mode
from anchorkit.settings import TEXT_FORMATS, default
from anchorkit.source import privacy, snapshot
from anchorkit.source.cursor import next_cursor, parse_cursor, shift_time
from anchorkit.source.lookups import (
    NARROWED_STATE,
    NARROWED_TABLES,
    NARROWED_VERSION,
    PROJECTS_MAX_ID,
    LookupFetcher,
    NamedIds,
    Names,
    ProjectScope,
    add_named,
    current_lookups,
    descendants,
    fill_missing,
    named_ids,
    names_in_issue,
    narrowed,
    project_of,
    resolve_projects,
    unknown_key,
)
from anchorkit.source.notes import NoteNumbering, numbered_if_complete
from anchorkit.source.preflight import (
    LOCK_FILE,
    NO_API_KEY,
    PullError,
    check_api_key,
    check_redmine_url,
    check_snapshot_folder,
    prepared_snapshot,
    restricted_custom_fields,
)
from anchorkit.source.redmine import IssuePage, RedirectRefused, RedmineClient, RedmineError, RetryPolicy
from anchorkit.untrusted import ascii_number, public_url

DEFAULT_TEXT_FORMAT = TEXT_FORMATS[0]  # Redmine's own default, recorded in a new snapshot
REFETCHED_AT = "refetched_at"  # state.json: when the last run that fetched every listed issue again started
# state.json: stored issues whose fetch failed (a refetch's included): the next run that lists them fetches them
# again even if their updated_on did not change, so a failure holds back no more than those issues.
REFETCH_PENDING = "refetch_pending"

ProgressCallback = Callable[[int, int], None]  # (issues fetched so far, issues to fetch so far)


class SnapshotLocked(PullError):
    """Another pull holds the snapshot; this run changed nothing."""

    exit_code = EXIT_LOCKED


@dataclass(frozen=True)
class PullFailure:
    issue_id: int
    reason: str


@dataclass
class PullReport:
    listed: int = 0
    fetched: int = 0
    unchanged: int = 0
    removed_ids: list[int] = field(default_factory=list)  # stored issues dropped (deleted, hidden, private)
    withdrawn_ids: list[int] = field(default_factory=list)  # of those, the private or moved ones (privacy.py)
    written_ids: list[int] = field(default_factory=list)  # issue files (re)written: new bytes on disk
    skipped_private: int = 0
    failed: list[PullFailure] = field(default_factory=list)
    requests: int = 0
    requests_by_purpose: dict[str, int] = field(default_factory=dict)  # list, issues, lookups, key check
    retries: int = 0
    seconds: float = 0.0
    full: bool = False
    refetched: bool = False  # every listed issue was fetched again, changed or not (--full, --refetch-every...)
    listing_complete: bool = True
    lookups_refreshed: bool = False
    cursor: str | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.errors

    @property
    def removed(self) -> int:
        return len(self.removed_ids)

    @property
    def failed_ids(self) -> list[int]:
        return sorted(f.issue_id for f in self.failed)

    def to_json(self) -> dict[str, Any]:
        payload = asdict(self)
        payload["removed"] = self.removed
        payload["failed_ids"] = self.failed_ids
        payload["ok"] = self.ok
        return payload


@dataclass
class IssueOutcome:
    """What a worker did with one issue, the names it saw (for degraded lookups) and the users, projects and custom
    fields it names (what lookups.json keeps)."""

    issue_id: int
    status: str  # "written", "unchanged", "private", "gone", "failed"
    names: Names = field(default_factory=dict)
    reason: str = ""
    named: NamedIds = field(default_factory=dict)


def redact(text: str, secret: str) -> str:
    """Belt and braces: whatever a message says, the API key is not in it."""
    return text.replace(secret, "***") if secret else text


_held_locks = threading.local()  # snapshot folders whose lock this thread holds


@contextlib.contextmanager
def snapshot_lock(snapshot_dir: Path) -> Iterator[None]:
    """One pull per snapshot at a time; the OS drops the lock when the process dies (kill -9 included).

    Re-entrant within a thread, so that `pull --state` can hold it from preparing the snapshot to the
    end of the pull it runs.
    """
    held: set[Path] = _held_locks.__dict__.setdefault("folders", set())
    folder = snapshot_dir.resolve()
    if folder in held:
        yield
        return
    with open(snapshot_dir / LOCK_FILE, "w") as handle:
        import fcntl  # POSIX only; imported here so that the CLI loads where it is missing

        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SnapshotLocked(f"{snapshot_dir}: another pull is running on this snapshot") from None
        held.add(folder)
        try:
            yield
        finally:
            held.discard(folder)


class Puller:
    """State of one run; :func:`pull` is the public entry point."""

    def __init__(
        self,
        client: RedmineClient,
        snapshot_dir: Path,
        api_key: str,
        include_private: bool,
        refetch_all: bool,
        progress: ProgressCallback | None,
        known: Mapping[int, snapshot.StoredStamp] | None = None,
        numbering: NoteNumbering | None = None,  # None: journals are stored without note numbers
        restricted: frozenset[int] = frozenset(),  # custom fields whose values are left out
        admin: bool = False,  # the key is an administrator's: it sees every issue
        pending: frozenset[int] = frozenset(),  # stored issues fetched whether changed or not (REFETCH_PENDING)
        *,
        mode: int | None = None,  # of the files written (files.file_mode: owner only with --include-private)
        scope: ProjectScope | None = None,  # a listing of every project: the projects pulled (--project)
        projects_max_id: int = 0,  # the largest project id when the projects table was last read (state.json)
    ) -> None:
        self.client = client
        self.mode = mode
        self.scope = scope
        self.projects_max_id = projects_max_id
        self.outside: list[dict[str, Any]] = []  # listed issues the scope does not cover (yet)
        self.outside_stamps: list[str] = []  # their updated_on (the cursor moves past them)
        self.named: NamedIds = {}  # the users, projects and custom fields the issues fetched name
        self.named_from: set[int] = set()  # those issues
        self.restricted = restricted
        self.admin = admin
        self.pending = pending
        self.numbering = numbering
        self.snapshot_dir = snapshot_dir
        self.api_key = api_key
        self.include_private = include_private
        self.refetch_all = refetch_all
        self.progress = progress
        self.report = PullReport()
        # Issues stored elsewhere (a sync state) count as stored although their files are not here.
        self.known = dict(known or {})
        self.stored_ids = snapshot.stored_issue_ids(snapshot_dir) | set(self.known)
        self.listed_projects: set[int] = set()
        self.listed_updated_on: dict[int, str] = {}
        self.futures: list[Future[IssueOutcome]] = []
        self.submitted: set[int] = set()  # issues this run fetches
        # Parents fetched again for a subtask private now, with its updated_on (a failure holds the cursor there).
        self.rechecks: dict[int, str] = {}
        self.succeeded_ids: set[int] = set()  # issues whose fetch did not fail (stored, private now, or gone)
        self.lock = threading.Lock()
        self.done = 0
        # Called once, before the first issue is written (the run's state says what the issues may hold).
        self.before_first_write: Callable[[], object] | None = None

    # -- listing ---------------------------------------------------------------------------------

    def list_and_dispatch(
        self, executor: ThreadPoolExecutor, scopes: list[str | None], updated_since: str | None
    ) -> None:
        # Every project's first page before any issue is fetched: a --project Redmine does not show is
        # refused (PullError) before anything is stored.
        first_pages = [(scope, self.page(0, scope, updated_since)) for scope in scopes]
        for scope, page in first_pages:
            while page is not None:
                for summary in page.issues:
                    self.dispatch(executor, summary)
                if not page.issues or len(page.issues) >= page.total_count:
                    break
                page = self.page(int(page.issues[-1]["id"]), scope, updated_since)
            if page is None:  # a failed page: the listing is incomplete, and listing the rest is no use
                return

    def page(self, after_id: int, scope: str | None, updated_since: str | None) -> IssuePage | None:
        """A listing page; None (an error in the report) when it failed after its retries."""
        if not self.report.listing_complete:
            return None
        try:
            return self.client.issue_page(after_id, scope, updated_since)
        except RedmineError as error:
            if scope and after_id == 0 and error.status in (403, 404):
                # Redmine answers 404 for a project it does not have, 403 for one the key may not see.
                raise PullError(
                    f"--project {scope}: Redmine at {redact(url_host(self.client.url), self.api_key)} has no such "
                    f"project, or this API key may not see its issues (HTTP {error.status})"
                ) from None
            self.report.listing_complete = False
            where = f"of project {scope!r} " if scope else ""
            self.report.errors.append(redact(f"listing {where}failed: {error}", self.api_key))
            return None

    def dispatch(self, executor: ThreadPoolExecutor, summary: dict[str, Any]) -> None:
        issue_id = int(summary["id"])
        if issue_id in self.listed_updated_on:  # listed twice (a project and its subproject)
            return
        if self.scope is not None and not self.scope.covers(summary):
            self.outside.append(summary)  # settled once the listing is done (settle_outside)
            return
        updated_on = str(summary.get("updated_on") or "")
        self.listed_updated_on[issue_id] = updated_on
        self.report.listed += 1
        if isinstance(summary.get("project"), dict) and isinstance(summary["project"].get("id"), int):
            self.listed_projects.add(summary["project"]["id"])
        if summary.get("is_private") and not self.include_private:
            self.report.skipped_private += 1
            self.forget(issue_id, withdrawn=True)
            self.recheck_parent(executor, summary)
            return
        if issue_id in self.submitted:  # already fetched again as the parent of a private subtask
            return
        if issue_id in self.stored_ids and not self.refetch_all and issue_id not in self.pending:
            stamp = self.stamp_of(issue_id)
            if stamp is not None and stamp.updated_on == updated_on:
                self.report.unchanged += 1
                return
        self.submit(executor, issue_id)

    def submit(self, executor: ThreadPoolExecutor, issue_id: int) -> None:
        self.submitted.add(issue_id)
        future = executor.submit(self.fetch_and_store, issue_id)
        with self.lock:
            self.futures.append(future)
        future.add_done_callback(self.tick)
        if self.progress:
            self.progress(self.done, len(self.futures))

    def recheck_parent(self, executor: ThreadPoolExecutor, summary: dict[str, Any]) -> None:
        """A private issue's stored parent may still show its subject (it was public when the parent was
        stored, and a subtask's change leaves the parent's ``updated_on`` alone): fetch that parent again."""
        parent = summary.get("parent")
        parent_id = parent.get("id") if isinstance(parent, dict) else None
        if not isinstance(parent_id, int) or parent_id not in self.stored_ids or parent_id in self.submitted:
            return
        path = snapshot.issue_path(self.snapshot_dir, parent_id)
        with contextlib.suppress(snapshot.SnapshotError):  # unreadable: fetched again anyway
            if path.exists() and not privacy.shows_subtask(snapshot.read_json(path), int(summary["id"])):
                return
        self.rechecks[parent_id] = str(summary.get("updated_on") or "")
        self.submit(executor, parent_id)

    def settle_outside(self, executor: ThreadPoolExecutor, fetcher: LookupFetcher, wanted: tuple[str, ...]) -> None:
        """The issues a listing of every project showed outside the pulled projects: a stored one of the pulled
        projects moved out of them is withdrawn, as a full listing would (privacy.py); the others are none of the
        snapshot's. Unless one is in a project made since the projects table was last read (a larger id: maybe a
        new subproject of a pulled one); then the table is read first, and the issues it puts in are fetched. A
        table that cannot be read, or no longer holds a --project, fails the listing (nothing removed, no cursor)."""
        if not self.outside or not self.report.listing_complete or self.scope is None:
            return
        if any((project_of(summary) or 0) > self.projects_max_id for summary in self.outside):
            with self.client.stats.purpose("projects"):
                table = fetcher.table("projects")
            self.scope = None if table is None else ProjectScope.of(table, wanted)
            if self.scope is None:
                self.report.listing_complete = False
                cause = "the projects could not be read" if table is None else f"--project {', '.join(wanted)} is gone"
                self.report.errors.append(f"listing failed: {cause}, so issues of new projects cannot be placed")
                return
        for summary in self.outside:
            self.outside_stamps.append(str(summary.get("updated_on") or ""))
            issue_id = int(summary["id"])
            if self.scope.covers(summary):
                self.dispatch(executor, summary)
            elif issue_id in self.stored_ids and (stamp := self.stamp_of(issue_id)) and stamp.project_id in self.scope:
                self.forget(issue_id, withdrawn=True)  # (an issue of another project is left to its own pulls)

    def stored_names(self) -> NamedIds | None:
        """The users, projects and custom fields the issues stored now name: those this run fetched, the others read
        from their files; None when some are stored elsewhere (``known``: a sync state's, with no file here)."""
        on_disk = snapshot.stored_issue_ids(self.snapshot_dir)
        if set(self.known) - set(self.report.removed_ids) - on_disk:
            return None
        named = {table: set(ids) for table, ids in self.named.items()}
        for issue_id in sorted(on_disk - self.named_from):
            with contextlib.suppress(snapshot.SnapshotError):  # (transform fails it: it names nothing)
                add_named(named, named_ids(snapshot.load_issue(snapshot.issue_path(self.snapshot_dir, issue_id))))
        return named

    def stamp_of(self, issue_id: int) -> snapshot.StoredStamp | None:
        """The stored copy's stamp: the file when present, else what the caller said it has stored."""
        return snapshot.stored_stamp(self.snapshot_dir, issue_id) or self.known.get(issue_id)

    def forget(self, issue_id: int, withdrawn: bool = False) -> None:
        """Drop a stored issue (file and all); if it was stored, its id is reported as removed (and withdrawn)."""
        if snapshot.remove_issue(self.snapshot_dir, issue_id) or issue_id in self.known:
            with self.lock:
                self.report.removed_ids.append(issue_id)
                if withdrawn:
                    self.report.withdrawn_ids.append(issue_id)

    def tick(self, _: Future[IssueOutcome]) -> None:
        with self.lock:
            self.done += 1
            done, total = self.done, len(self.futures)
        if self.progress:
            self.progress(done, total)

    # -- fetching (worker threads) ---------------------------------------------------------------

    def fetch_and_store(self, issue_id: int) -> IssueOutcome:
        try:
            with self.client.stats.purpose("issues"):
                document = self.client.issue(issue_id)
        except RedmineError as error:
            if error.status in (403, 404):  # hidden (403: it exists, not for this key) or deleted since listed
                self.forget(issue_id, withdrawn=error.status == 403)
                return IssueOutcome(issue_id, "gone")
            return IssueOutcome(issue_id, "failed", reason=redact(str(error), self.api_key))
        except RedirectRefused:
            raise  # the whole run stops: no other request may follow the redirect either
        except Exception as error:
            return IssueOutcome(issue_id, "failed", reason=redact(f"{type(error).__name__}: {error}", self.api_key))
        where = f"GET /issues/{issue_id}.json"
        try:  # the checks transform makes of a stored issue: what would fail there is not stored
            issue = snapshot.checked_issue(document, where)
        except snapshot.SnapshotError as error:
            return IssueOutcome(issue_id, "failed", reason=redact(str(error), self.api_key))
        if issue["id"] != issue_id:
            return IssueOutcome(issue_id, "failed", reason=f"{where}: unexpected response shape (issue #{issue['id']})")
        if issue.get("is_private") and not self.include_private:
            self.forget(issue_id, withdrawn=True)
            return IssueOutcome(issue_id, "private")
        document = numbered_if_complete(document, self.numbering)  # before private notes go: Redmine counts them
        if not self.include_private:
            document = privacy.without_restricted_fields(privacy.without_private_notes(document), self.restricted)
            try:
                with self.client.stats.purpose("subtasks"):
                    document = privacy.without_private_subtasks(document, self.client.public_issue_ids)
            except RedmineError as error:
                return IssueOutcome(issue_id, "failed", reason=redact(f"checking its subtasks: {error}", self.api_key))
        try:
            written = self.store(document)
        except OSError as error:
            path = snapshot.issue_path(self.snapshot_dir, issue_id)
            return IssueOutcome(issue_id, "failed", reason=f"{path}: cannot write ({error.strerror})")
        issue = document["issue"]
        return IssueOutcome(
            issue_id, "written" if written else "unchanged", names_in_issue(issue), named=named_ids(issue)
        )

    def store(self, document: dict[str, Any]) -> bool:
        with self.lock:
            if self.before_first_write is not None:
                self.before_first_write()
                self.before_first_write = None
        return snapshot.write_issue(self.snapshot_dir, document, self.mode)

    def collect(self) -> tuple[Names, list[str]]:
        """Wait for the workers; returns the names seen and the ``updated_on`` of failed issues."""
        seen: Names = {}
        failed_stamps: list[str] = []
        for future in self.futures:
            outcome = future.result()
            if outcome.status == "failed":
                self.report.failed.append(PullFailure(outcome.issue_id, outcome.reason))
                stamp = self.listed_updated_on.get(outcome.issue_id) or self.rechecks.get(outcome.issue_id)
                failed_stamps.append(stamp or "")
                continue
            self.succeeded_ids.add(outcome.issue_id)
            if outcome.status in ("written", "unchanged"):
                self.report.fetched += 1
                if outcome.status == "written":
                    self.report.written_ids.append(outcome.issue_id)
                fill_missing(seen, outcome.names)
                add_named(self.named, outcome.named)
                self.named_from.add(outcome.issue_id)
            elif outcome.status == "private":
                self.report.fetched += 1
                self.report.skipped_private += 1
        return seen, failed_stamps

    # -- deletions -------------------------------------------------------------------------------

    def remove_unlisted(self, in_scope: Callable[[int], bool], pulled_projects: set[int] | None) -> None:
        """After a complete full listing: stored issues Redmine no longer lists were deleted or hidden, or
        are withdrawn (privacy.is_withdrawn), as a listing of just their ids tells; one still in scope and
        public (changed while the listing ran) is kept for the next run.

        Only an administrator's key sees every issue: to any other, an issue made private (or in a project its
        roles no longer see) vanishes as a deleted one does. So an issue that vanished counts as deleted
        only for an administrator's key; for another, it is withdrawn, the safe side."""
        unlisted = [i for i in sorted(self.stored_ids.difference(self.listed_updated_on)) if in_scope(i)]
        # The key was confirmed when the run started (check_api_key): an anonymous listing, which would
        # see little, cannot get here.
        deleted_if_unseen = self.admin
        try:
            with self.client.stats.purpose("removals"):
                visible = self.client.visible_issues(unlisted)
        except RedmineError as error:  # then none can be told apart: all of them are withdrawn
            visible, deleted_if_unseen = {}, False
            self.report.warnings.append(
                redact(f"could not tell deleted issues from withdrawn ones: {error}", self.api_key)
            )
        for issue_id in unlisted:
            summary = visible.get(issue_id)
            if summary is None:
                self.forget(issue_id, withdrawn=not deleted_if_unseen)
            elif privacy.is_withdrawn(summary, self.include_private, pulled_projects):
                self.forget(issue_id, withdrawn=True)


@dataclass(frozen=True)
class PullSettings:
    """What a run was asked to do.

    ``projects``: identifiers or ids (subprojects included), empty for every visible project.
    ``full=True`` lists every issue and fetches each again: a note made private, edited or deleted, which
    changes no ``updated_on``, is only seen that way. ``full_every=K`` makes every K-th run a full
    listing (0: only ``full=True`` and the first run), which fetches only what changed: one request per
    100 issues, not one per issue. ``refetch_every_s``: a run fetches every issue again, as ``full``
    does, when the last run that did so completely started this long ago (0: never on its own).
    ``overlap_s``: incremental runs list again the issues updated this long before the cursor (commits
    that land out of order, issues updated while a listing was under way).
    ``text_format`` is recorded in a new snapshot's state (default textile), never overwritten.
    ``watch_moves``: with ``projects``, incremental runs list every project's changes and keep the pulled
    projects' issues, so that one moved out of them leaves at once (else: at the next full listing).
    """

    projects: tuple[str, ...] = ()
    full: bool = default("full")
    concurrency: int = default("concurrency")
    include_private: bool = default("include_private")
    full_every: int = default("full_every")
    refetch_every_s: float = default("refetch_every")
    overlap_s: float = default("overlap")
    lookups_max_age_s: float = default("lookups_max_age")
    text_format: str | None = default("text_format")
    watch_moves: bool = default("watch_moves")
    policy: RetryPolicy | None = None  # retries and timeouts of the Redmine requests
    # Not a setting: a full listing that fetches only what changed (a sync state repairing its raw copies).
    list_all: bool = False

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> PullSettings:
        """The settings catalogue's values (pull's or sync's) as one object; ``project`` may hold
        comma-separated lists."""
        return cls(
            projects=tuple(
                part.strip() for value in values["project"] or () for part in value.split(",") if part.strip()
            ),
            full=values["full"],
            concurrency=values["concurrency"],
            include_private=values["include_private"],
            full_every=values["full_every"],
            refetch_every_s=values["refetch_every"],
            overlap_s=values["overlap"],
            lookups_max_age_s=values["lookups_max_age"],
            text_format=values["text_format"],
            watch_moves=values["watch_moves"],
            policy=RetryPolicy(attempts=values["retries"], read_timeout_s=values["timeout"]),
        )

    def check(self) -> None:
        if self.concurrency < 1:
            raise PullError(f"concurrency must be at least 1, not {self.concurrency}")
        if self.full_every < 0:
            raise PullError(f"full_every must be 0 (never automatically) or more, not {self.full_every}")
        if self.refetch_every_s < 0:
            raise PullError(f"refetch_every must be 0 (never automatically) or more, not {self.refetch_every_s}")
        if self.text_format is not None and self.text_format not in TEXT_FORMATS:
            raise PullError(f"text format must be one of {', '.join(TEXT_FORMATS)}, not {self.text_format!r}")


def pull(
    url: str,
    snapshot_dir: Path,
    api_key: str,
    settings: PullSettings = PullSettings(),
    *,
    progress: ProgressCallback | None = None,
    known: Mapping[int, snapshot.StoredStamp] | None = None,
) -> PullReport:
    """Bring ``snapshot_dir`` up to date with the Redmine at ``url`` as ``settings`` ask; see the module docstring.

    ``known``: issues stored outside ``snapshot_dir`` (a sync state) and their stamps; they are fetched
    only when changed, and the ones Redmine no longer shows are listed in ``report.removed_ids``.
    Raises :class:`PullError` for unusable arguments or a locked snapshot; everything that goes wrong
    with Redmine is in the returned report (``report.ok``).
    """
    settings = dataclasses.replace(settings, projects=tuple(dict.fromkeys(settings.projects)))
    settings.check()
    check_redmine_url(url)
    api_key = api_key.strip()
    if not api_key:
        raise PullError(NO_API_KEY)
    if not (api_key.isprintable() and api_key.isascii()):
        # Redmine's keys are hex digits; a header cannot carry one typed in full width (UnicodeEncodeError).
        raise PullError("the Redmine API key contains control or non-ASCII characters (is the key file right?)")

    started = time.monotonic()
    check_snapshot_folder(snapshot_dir)
    client = RedmineClient(url, api_key, settings.policy)
    try:
        # Before anything is written: a wrong key must not leave even an empty snapshot behind.
        host = redact(url_host(url), api_key)
        user = check_api_key(client, host)
        restricted = restricted_custom_fields(client, user, host)
        with prepared_snapshot(snapshot_dir, file_mode(settings.include_private)), snapshot_lock(snapshot_dir):
            snapshot.remove_stale_temp_files(snapshot_dir)
            state = snapshot.load_state(snapshot_dir)
            lookups = snapshot.load_lookups(snapshot_dir)
            numbering = NoteNumbering(client, user)
            admin = user.get("admin") is True
            report = _run(
                client, snapshot_dir, api_key, state, lookups, settings, progress, known, numbering, restricted, admin
            )
    finally:
        client.close()
    report.requests = client.stats.requests
    report.retries = client.stats.retries
    report.requests_by_purpose = dict(sorted(client.stats.by_purpose.items()))
    report.seconds = round(time.monotonic() - started, 3)
    return report


def _run(
    client: RedmineClient,
    snapshot_dir: Path,
    api_key: str,
    state: dict[str, Any],
    lookups: Names,
    settings: PullSettings,
    progress: ProgressCallback | None,
    known: Mapping[int, snapshot.StoredStamp] | None,
    numbering: NoteNumbering | None = None,
    restricted: frozenset[int] = frozenset(),  # custom fields only some roles see: left out unless --include-private
    admin: bool = False,  # the key is an administrator's
) -> PullReport:
    cursor = parse_cursor(state.get("cursor"))
    new_snapshot = cursor is None  # a new snapshot (or a first run resumed): what it holds was fetched just now
    runs_since_full = int(snapshot.number_in(state, "runs_since_full"))
    refreshed_at = time.time()
    # Every stored issue is fetched again when what it must contain changed: --include-private switched
    # either way, a stricter rule than the one it was stored with; and when Redmine may have changed it
    # without a date it lists (a note made private, edited or deleted): with --full, and --refetch-every.
    privacy_changed = "include_private" in state and bool(state["include_private"]) != settings.include_private
    subtasks_unchecked = not new_snapshot and not settings.include_private and not privacy.subtasks_checked(state)
    filtered = frozenset() if settings.include_private else restricted  # the fields whose values are left out
    fields_changed = (
        not new_snapshot and not settings.include_private and privacy.filtered_fields_changed(state, restricted)
    )
    last_refetch = snapshot.number_in(state, REFETCHED_AT)
    refetch_due = not new_snapshot and 0 < settings.refetch_every_s <= refreshed_at - last_refetch
    refetch = settings.full or privacy_changed or subtasks_unchecked or fields_changed or refetch_due
    automatic_full = settings.full_every > 0 and runs_since_full + 1 >= settings.full_every
    is_full = refetch or new_snapshot or automatic_full or settings.list_all
    # With --project and --watch-moves, an incremental run lists every project's changes and keeps those of the
    # projects pulled, by the cached projects table: an issue moved out of them is seen at once. A --project the
    # table does not hold (new to the snapshot) is listed through Redmine's filter, and the table read.
    known_scope = ProjectScope.of(lookups.get("projects", {}), settings.projects) if settings.projects else None
    mode = file_mode(settings.include_private)
    puller = Puller(
        client,
        snapshot_dir,
        api_key,
        settings.include_private,
        refetch,
        progress,
        known,
        numbering,
        filtered,
        admin,
        frozenset(snapshot.ids_in(state, REFETCH_PENDING)),
        mode=mode,
        scope=known_scope if settings.watch_moves and not is_full else None,
        projects_max_id=int(snapshot.number_in(state, PROJECTS_MAX_ID)),
    )
    report = puller.report
    if settings.include_private and state.get("include_private") is not True:
        # Recorded before the first issue that may hold private content is written: a run killed after it
        # leaves a state that makes the next run without --include-private fetch every issue again.
        puller.before_first_write = lambda: snapshot.write_state(snapshot_dir, {**state, "include_private": True}, mode)
    if subtasks_unchecked:
        report.warnings.append(privacy.SUBTASKS_UNCHECKED_WARNING)
    if fields_changed and not privacy_changed:
        report.warnings.append(privacy.RESTRICTED_FIELDS_CHANGED_WARNING)
    report.full, report.refetched = is_full, refetch
    scopes: list[str | None] = [None] if puller.scope is not None else list(settings.projects) or [None]
    updated_since = None if is_full or cursor is None else shift_time(cursor, -settings.overlap_s)
    stale = (
        settings.full
        or not lookups
        or refreshed_at - snapshot.number_in(state, "lookups_refreshed_at") > settings.lookups_max_age_s
        or (bool(settings.projects) and known_scope is None)
    )
    fetcher = LookupFetcher(client)

    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="pull") as executor:
        try:
            with client.stats.purpose("list"):
                puller.list_and_dispatch(executor, scopes, updated_since)
            puller.settle_outside(executor, fetcher, settings.projects)
            # Lookups are read while the workers fetch issues.
            lookup_projects = sorted(snapshot.ids_in(state, "lookup_projects") | puller.listed_projects)
            # A failed listing usually means Redmine is unreachable: do not hammer it for lookups too.
            stale = stale and report.listing_complete
            with client.stats.purpose("lookups"):
                if stale:
                    fetcher.fetch(lookup_projects)
            seen, failed_stamps = puller.collect()
        except BaseException:
            executor.shutdown(wait=True, cancel_futures=True)
            raise

    if stale:
        _report_lookups(report, fetcher)
    cached = lookups
    unknown = {table: {str(i) for i in snapshot.ids_in(state, unknown_key(table))} for table in NARROWED_TABLES}
    lookups, unknown = current_lookups(fetcher, lookups, seen, puller.named, unknown, report.listing_complete)
    if is_full and report.listing_complete:
        _remove_unlisted_in_scope(puller, lookups, settings.projects)
    new_state = dict(state)
    for table, ids in unknown.items():
        new_state = snapshot.listing_ids(new_state, unknown_key(table), {n for i in ids if (n := ascii_number(i))})
    if "projects" in fetcher.tables:  # (read completely: a project listed with a larger id is new since)
        new_state[PROJECTS_MAX_ID] = max(map(int, fetcher.tables["projects"]), default=0)
    rebuilt = puller.stored_names() if refetch or state.get(NARROWED_STATE) != NARROWED_VERSION else None
    if rebuilt is not None:
        new_state[NARROWED_STATE] = NARROWED_VERSION
    snapshot.write_lookups(snapshot_dir, _narrowed(puller, lookups, cached, rebuilt, settings.projects), mode)

    if report.listing_complete:
        listed = [*puller.listed_updated_on.values(), *puller.outside_stamps]
        new_cursor = next_cursor(cursor, listed, failed_stamps)
        if new_cursor is not None:
            new_state["cursor"] = new_cursor
        new_state["runs_since_full"] = 0 if is_full else runs_since_full + 1
    if stale and report.lookups_refreshed:
        new_state["lookups_refreshed_at"] = refreshed_at
        new_state["lookup_projects"] = lookup_projects
    new_state["redmine_url"] = public_url(client.url)
    if report.listing_complete and (refetch or new_snapshot):
        # What changed since is fetched again by a later refetch; what failed now, by the next run (pending).
        new_state[REFETCHED_AT] = refreshed_at
    pending = (puller.pending | set(report.failed_ids)) & puller.stored_ids
    pending -= puller.succeeded_ids | set(report.removed_ids)
    new_state = snapshot.listing_ids(new_state, REFETCH_PENDING, pending)
    # What the stored issues were filtered with. A change that forced every issue to be fetched again is
    # recorded only once that refetch is complete (the listing complete, no issue failed): until then the
    # record says what stored copies may still hold, and the next run fetches every issue again.
    # With --include-private the restricted fields' values are kept, and the record says which fields
    # transform must leave out of documents made without it (render/transform.resolve_render_options).
    complete = report.listing_complete and not report.failed
    for values, forced_refetch in (
        ({"include_private": settings.include_private}, privacy_changed and not settings.include_private),
        (privacy.SUBTASKS_CHECKED, subtasks_unchecked),
        ({privacy.RESTRICTED_FIELDS_KEY: sorted(restricted)}, fields_changed),
    ):
        if complete or not forced_refetch:
            new_state.update(values)
    new_state = snapshot.with_withdrawn(snapshot_dir, state, new_state, report.withdrawn_ids)
    if "text_format" not in state:
        new_state["text_format"] = settings.text_format or DEFAULT_TEXT_FORMAT
    elif settings.text_format is not None and state["text_format"] != settings.text_format:
        report.warnings.append(f"state.json already says text_format {state['text_format']!r}; left unchanged")
    snapshot.write_state(snapshot_dir, new_state, mode)
    report.cursor = new_state.get("cursor")
    return report


def _report_lookups(report: PullReport, fetcher: LookupFetcher) -> None:
    """What a refresh of the lookups got: refreshed unless a table failed; warnings for those it did not read."""
    report.lookups_refreshed = not fetcher.failed
    if fetcher.forbidden:
        report.warnings.append(
            f"lookups: {', '.join(sorted(fetcher.forbidden))} not readable with this API key (HTTP 403/404); "
            "using the names found in the issues instead"
        )
    if fetcher.failed:
        report.warnings.append(f"lookups: could not read {', '.join(sorted(fetcher.failed))}; kept the previous names")


def _narrowed(
    puller: Puller, lookups: Names, cached: Names, rebuilt: NamedIds | None, projects: tuple[str, ...]
) -> Names:
    """The users, projects and custom fields lookups.json keeps: those the stored issues name (``rebuilt``: all of
    them, known by a run that fetched them again or read their files), else those it held and those this run's
    issues name; with --project also the projects it covers, those without an issue too (a later run resolves its
    --project by them). Without --project no other project: one whose issues are all private (or that has none) is
    no name of this snapshot's."""
    if rebuilt is None:
        keep = {table: set(cached.get(table, {})) | puller.named.get(table, set()) for table in NARROWED_TABLES}
    else:
        keep = {table: rebuilt.get(table, set()) for table in NARROWED_TABLES}
    if projects:
        scope = ProjectScope.of(lookups.get("projects", {}), projects)
        keep["projects"] |= {str(project_id) for project_id in (scope.ids if scope else set()) | puller.listed_projects}
    return narrowed(lookups, keep)


def _remove_unlisted_in_scope(puller: Puller, lookups: Names, projects: tuple[str, ...]) -> None:
    """With --project, only issues of the pulled projects (and their subprojects) may be removed."""
    if not projects:
        puller.remove_unlisted(lambda issue_id: True, None)
        return
    project_table = lookups.get("projects", {})
    roots = resolve_projects(project_table, list(projects))
    if roots is None:
        puller.report.warnings.append("a --project is unknown to the projects lookup; nothing was removed")
        return
    scope_ids = descendants(project_table, roots) | puller.listed_projects

    def in_scope(issue_id: int) -> bool:
        stamp = puller.stamp_of(issue_id)
        return stamp is not None and stamp.project_id in scope_ids

    puller.remove_unlisted(in_scope, scope_ids)
