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

import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping
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


def output_fingerprint(options: transform.TransformOptions, render: RenderOptions) -> str:
    """What changes every document's bytes besides the issues and the lookups: version and options
    (labels, language, layout, sidecars, the text format...). The lookups are compared on their own."""
    described = {"anchorkit": __version__, "options": {**asdict(options), "render": asdict(render)}}
    canonical = json.dumps(described, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stamps_of(tickets: dict[str, Any]) -> dict[int, snapshot.StoredStamp]:
    """The manifest's tickets as pull's stored stamps (tickets whose issue is gone are not stored)."""
    return {
        int(key): snapshot.StoredStamp(entry.get("updated_on"), entry.get("project_id"))
        for key, entry in tickets.items()
        if not entry.get("gone")
    }


def restore_raw_issues(
    store: state.StateStore, work_dir: Path, stamps: dict[int, snapshot.StoredStamp], threads: int
) -> set[int]:
    """Copy the stored issue JSON of these tickets into the work snapshot; returns the ids that could not
    be restored (absent, unreadable, or not the version the manifest describes: a run that died after
    storing a newer copy), which must be fetched from Redmine again."""

    def restore(issue_id: int) -> bool:
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
    JSON when the output fingerprint changed); documents of issues that are gone are deleted (with
    ``delete``, within ``max_delete`` unless ``force``). Documents are written first and the state is
    committed last, so the state never claims an upload that did not happen. Raises
    :class:`state.StateConflict` when another run holds or changed the state (nothing written then,
    unless this run outlived its lease),
    :class:`state.StateError` / :class:`pull.PullError` for unusable input.
    """
    started = time.monotonic()
    report = StatelessSyncReport(store.describe(), target.describe())
    counter = publish.RequestCounter()
    clients = {id(c): c for c in (getattr(target, "client", None), getattr(store, "client", None)) if c is not None}
    for client in clients.values():
        counter.attach(client)
    try:
        with store.session():
            _run_stateless(report, url, api_key, store, target, options, pull_arguments, work_dir,
                           delete, max_delete or publish.parse_max_delete(publish.DEFAULT_MAX_DELETE), force,
                           threads, progress)
    finally:
        for client in clients.values():
            counter.detach(client)
        report.s3_requests = dict(counter.counts)
        report.seconds = time.monotonic() - started
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
    (work_dir / snapshot.ISSUES_DIR).mkdir(parents=True, exist_ok=True)
    snapshot.write_state(work_dir, manifest.get("pull", {}))
    snapshot.write_lookups(work_dir, manifest.get("lookups", {}))
    stamps = stamps_of(before)

    def pull_once(full: bool, known: dict[int, snapshot.StoredStamp]) -> pull.PullReport:
        pulled = pull.pull(
            url, work_dir, api_key, projects=list(arguments.projects), full=full,
            concurrency=arguments.concurrency, include_private=arguments.include_private,
            full_every=arguments.full_every, overlap_s=arguments.overlap_s,
            lookups_max_age_s=arguments.lookups_max_age_s, text_format=arguments.text_format,
            policy=arguments.policy, progress=progress, known=known,
        )
        report.pulls.append(pulled)
        return pulled

    removed = set(pull_once(arguments.full, stamps).removed_ids)
    fetched = snapshot.stored_issue_ids(work_dir)
    lookups = snapshot.load_lookups(work_dir)
    render = transform.resolve_render_options(work_dir, options)
    fingerprint = output_fingerprint(options, render)
    # New names (a renamed status, user or version) may change any document, like new options do.
    report.regenerated_all = bool(before) and (
        fingerprint != manifest.get("fingerprint") or lookups != manifest.get("lookups", {})
    )
    if report.regenerated_all:
        kept = {i: s for i, s in stamps.items() if i not in removed and i not in fetched}
        unrestorable = restore_raw_issues(store, work_dir, kept, threads)
        if unrestorable:  # a full listing fetches them again (and anything else that changed)
            known = {i: s for i, s in stamps.items() if i not in unrestorable}
            removed |= set(pull_once(True, known).removed_ids)
            restored = set(kept) - unrestorable
            fetched = snapshot.stored_issue_ids(work_dir) - restored
            lookups = snapshot.load_lookups(work_dir)

    plans = _render_changed(report, work_dir, lookups, render, options, before)
    held_back: list[str] = []  # updated_on of tickets not fully published: the cursor must not pass them
    for failure in report.transform_failures:
        if failure.ticket_id is not None:
            stamp = snapshot.stored_stamp(work_dir, failure.ticket_id)
            held_back += [stamp.updated_on] if stamp and stamp.updated_on else []
    gone = {int(key) for key, entry in before.items() if entry.get("gone")} | (removed & {int(k) for k in before})
    rendered_ids = {p.ticket_id for p in plans}
    gone -= rendered_ids  # an issue that came back is published again

    uploads = [
        publish.LocalObject(key, publish.Checksums.of(plan.objects[key]), plan.objects[key])
        for plan in plans for key in plan.changed_keys()
    ]
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
    raw_deletes = sorted(gone) if delete else []
    failed_renders = {f.ticket_id for f in report.transform_failures if f.ticket_id is not None}
    pull_state = snapshot.load_state(work_dir)

    def next_manifest(outcome: dict[str, str | None], raw_failed: set[int]) -> dict[str, Any]:
        stamps_held = list(held_back)
        tickets = _next_tickets(before, plans, gone, outcome, raw_failed, stamps_held, failed_renders)
        next_pull = dict(pull_state)
        if stamps_held and next_pull.get("cursor"):
            next_pull["cursor"] = min([next_pull["cursor"], *stamps_held])
        return {"format": MANIFEST_FORMAT, "fingerprint": fingerprint, "pull": next_pull, "lookups": lookups,
                "tickets": tickets}

    expected = next_manifest({key: None for key in deletes}, set())  # if every write succeeds
    if not (uploads or deletes or raw_writes or raw_deletes) and same_state(manifest, expected):
        report.tickets = len(before)
        return  # nothing to write, not even the state
    store.begin_writes()  # may raise StateConflict: then nothing has been written
    results = publish.apply_plan(publish_plan, target, threads=threads)
    outcome = {result.operation.key: result.error for result in results}
    report.uploaded = sorted(k for k, e in outcome.items() if e is None and k in {u.key for u in uploads})
    report.deleted = sorted(k for k, e in outcome.items() if e is None and k in set(deletes))
    report.failures = [publish.Failure(k, e) for k, e in sorted(outcome.items()) if e is not None]
    raw_failed = _write_raw_issues(report, store, work_dir, raw_writes, raw_deletes, threads)
    committed = next_manifest(outcome, raw_failed)
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
            objects[result.relpath + publish.SIDECAR_SUFFIX] = result.sidecar
        stamp = snapshot.stored_stamp(work_dir, result.ticket_id)
        plans.append(
            TicketPlan(
                result.ticket_id, stamp.updated_on if stamp else None, stamp.project_id if stamp else None,
                objects, dict(before.get(str(result.ticket_id), {}).get("objects", {})),
            )
        )
    return plans


def _write_raw_issues(
    report: StatelessSyncReport,
    store: state.StateStore,
    work_dir: Path,
    writes: list[int],
    deletes: list[int],
    threads: int,
) -> set[int]:
    """Store the raw issue JSON of fetched tickets (and drop gone ones); returns the ids that failed."""

    def write(issue_id: int) -> bool:
        try:
            store.put_issue(issue_id, snapshot.issue_path(work_dir, issue_id).read_bytes())
        except Exception as error:  # reported; the ticket is then retried by the next run
            report.failures.append(publish.Failure(f"state issues/{issue_id}.json", publish.describe_error(error)))
            return False
        return True

    def remove(issue_id: int) -> None:
        try:
            store.delete_issue(issue_id)
        except Exception as error:  # an orphan copy is harmless: it is never read for a gone ticket
            report.failures.append(publish.Failure(f"state issues/{issue_id}.json", publish.describe_error(error)))

    with ThreadPoolExecutor(max_workers=threads) as pool:
        written = dict(zip(writes, pool.map(write, writes)))
        list(pool.map(remove, deletes))
    report.state_issues_written = sum(written.values())
    return {issue_id for issue_id, ok in written.items() if not ok}


def _next_tickets(
    before: dict[str, Any],
    plans: list[TicketPlan],
    gone: set[int],
    outcome: dict[str, str | None],
    raw_failed: set[int],
    held_back: list[str],
    failed_renders: set[int],
) -> dict[str, Any]:
    """The manifest's tickets after this run, recording only what really happened.

    A ticket whose objects were not all written keeps the checksums of what is really there and no
    ``updated_on`` (so the next run fetches and publishes it again); its stamp holds the cursor back.
    """
    tickets = {key: dict(entry) for key, entry in before.items()}
    for issue_id in failed_renders:
        if str(issue_id) in tickets:
            tickets[str(issue_id)]["updated_on"] = None
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
        tickets[str(plan.ticket_id)] = {
            "updated_on": plan.updated_on if complete else None,
            "project_id": plan.project_id,
            "objects": objects,
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
