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

`run_sync` is the stateless variant (`sync --state`): the bookkeeping lives in a state store beside the
destination (anchorkit.state), each run starts from an empty work folder, fetches, renders and uploads
only what changed, and commits the state last.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (a dependency there)
    import tomli as tomllib

from anchorkit import __version__, publish, pull, snapshot, state, transform
from anchorkit.document import RenderOptions
from anchorkit.files import write_atomic
from anchorkit.redmine import RetryPolicy
from anchorkit.sidecar import SIDECAR_SUFFIX

CONFIG_FILE_NAME = "anchorkit.toml"
CONFIG_ENV = "ANCHORKIT_CONFIG"
ENV_PREFIX = "ANCHORKIT_"
STAGE_TABLES = ("pull", "transform", "upload")
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


class SyncConfigError(Exception):
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
    Setting("anchor_basic_info", bool, False),
    Setting("max_gap_tokens", int),
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
    Setting("retry_mode", str, publish.DEFAULT_RETRY_MODE),
    Setting("max_attempts", int, publish.DEFAULT_MAX_ATTEMPTS),
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
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if key in STAGE_TABLES and isinstance(value, dict):
            entries = value.items()
        else:
            entries = [(key, value)]
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
            f"{name} (--{name.replace('_', '-')}, {' or '.join(SETTINGS_BY_NAME[name].env_names)}, or the config file)"
            for name in missing
        )
        raise SyncConfigError(f"missing: {hints}")
    return ResolvedSettings(values, sources)


def resolve_from_environment(flags: Mapping[str, Any], config_flag: Path | None) -> ResolvedSettings:
    """`resolve` with this process's environment and the config file found from here."""
    config_path = find_config_file(config_flag, os.environ, Path.cwd())
    config = load_config(config_path) if config_path is not None else {}
    return resolve(flags, os.environ, config, config_path)


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
    counter = publish.RequestCounter()
    clients = {id(c): c for c in (getattr(holder, "client", None) for holder in (store, *others)) if c is not None}
    for client in clients.values():
        counter.attach(client)
    try:
        with store.session():
            yield
    finally:
        for client in clients.values():
            counter.detach(client)
        report.s3_requests.update(counter.counts)
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
