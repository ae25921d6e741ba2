"""The snapshot on disk: ``issues/<id>.json``, ``lookups.json``, ``state.json`` (docs/design.md).

Reading is strict and explains itself: every problem names the file and what is wrong with it,
so a batch can report it and go on with the other tickets.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from anchorkit.errors import UsageError
from anchorkit.files import NotRegularFile, check_existing_folder, read_regular_file, write_if_changed
from anchorkit.untrusted import JSONOverLimit, ascii_number, is_count, parse_json

ISSUES_DIR = "issues"
LOOKUPS_FILE = "lookups.json"
STATE_FILE = "state.json"


class SnapshotError(UsageError):
    """A snapshot file that cannot be used; the message names the file and the problem."""


def check_snapshot(snapshot_dir: Path) -> None:
    """A usage error naming ``snapshot_dir`` as given unless it is a snapshot (it has ``issues/``), which says so
    when it looks like a transform output (documents given where their snapshot was meant)."""
    check_existing_folder(snapshot_dir)  # a mistyped path is no "<path>: not a snapshot"
    if (snapshot_dir / ISSUES_DIR).is_dir():
        return
    documents = next(snapshot_dir.glob("*.md"), None) or next(snapshot_dir.glob("*/*.md"), None)  # flat, by-project
    output = "; it holds .md documents: a transform output, not the snapshot it was made from" if documents else ""
    raise SnapshotError(f"{snapshot_dir}: not a snapshot (no {ISSUES_DIR}/ folder){output}")


def iter_issue_paths(snapshot_dir: Path) -> Iterator[Path]:
    """The issue files of a snapshot, in ticket-id order (numeric names first, then the rest)."""
    check_snapshot(snapshot_dir)
    issues_dir = snapshot_dir / ISSUES_DIR
    for stem in sorted(_issue_file_stems(issues_dir), key=_id_order):
        yield issues_dir / f"{stem}.json"


def _issue_file_stems(issues_dir: Path) -> list[str]:
    """The names of the visible ``.json`` files in ``issues_dir`` without the suffix (hidden ones are
    the temporary files of interrupted writes). Strings, not Path objects: a 100,000-ticket snapshot
    would hold 100,000 Paths."""
    with os.scandir(issues_dir) as entries:
        return [entry.name[:-5] for entry in entries if entry.name.endswith(".json") and not entry.name.startswith(".")]


def read_json(path: Path) -> Any:
    """Parse a JSON file, turning every failure into a SnapshotError that names the file.

    A symbolic link is not followed and a named pipe is not waited on (a FIFO named ``5.json`` hung every
    command that read the snapshot): a snapshot holds the files pull wrote, nothing else."""
    try:
        raw = read_regular_file(path)
    except NotRegularFile as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{path}: invalid UTF-8 at byte {exc.start}") from None
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}: malformed JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except JSONOverLimit as exc:  # e.g. 100,000 "[": the parser gives up before it finds anything malformed
        raise SnapshotError(f"{path}: {exc}") from None


def load_issue(path: Path) -> dict[str, Any]:
    """One issue as Redmine returned it (the object inside ``{"issue": ...}``), shape-checked."""
    issue = read_issue(path)
    check_issue(path, issue)
    return issue


def read_issue(path: Path) -> dict[str, Any]:
    """The object inside ``{"issue": ...}``, not checked further: enough to see whether it is private, which
    is decided first (a private ticket is left out whatever else is wrong with it); :func:`check_issue` next."""
    return _issue_object(read_json(path), str(path))


def check_issue(path: Path, issue: dict[str, Any]) -> None:
    """A :class:`SnapshotError` naming the file and the field unless ``issue`` has the shape Redmine gives
    and is the issue its file is named after."""
    _check_shape(issue, str(path))
    issue_id = issue["id"]
    named = ascii_number(path.stem)
    if named is None:  # (else the issue would be rendered as well as its own file's, under one id)
        raise SnapshotError(f"{path}: not an issue file name: pull names each <id>.json (#{issue_id}: {issue_id}.json)")
    if named != issue_id:
        raise SnapshotError(f"{path}: file name says #{path.stem} but the issue id is #{issue_id}")


def checked_issue(document: Any, source: str) -> dict[str, Any]:
    """The issue of ``{"issue": {...}}`` if it has the shape the renderers rely on, else a SnapshotError that
    names ``source`` (the request pull got it from: pull stores nothing that would fail in transform)."""
    issue = _issue_object(document, source)
    _check_shape(issue, source)
    return issue


def _issue_object(document: Any, source: str) -> dict[str, Any]:
    issue = document.get("issue") if isinstance(document, dict) else None
    if not isinstance(issue, dict):
        raise SnapshotError(f'{source}: expected an object {{"issue": {{...}}}}')
    return issue


def _check_shape(issue: dict[str, Any], source: str) -> None:
    issue_id = issue.get("id")
    if isinstance(issue_id, bool) or not isinstance(issue_id, int) or issue_id <= 0:
        raise SnapshotError(f"{source}: missing or invalid issue id ({issue_id!r})")
    subject = issue.get("subject")
    if not isinstance(subject, str):
        raise SnapshotError(f"{source}: ticket #{issue_id} has no subject string ({type(subject).__name__})")
    where = f"{source}: ticket #{issue_id}"
    for key in _LISTS:
        if key in issue:
            _check_type(where, key, issue[key], list)
    for key, kind in _OPTIONAL.items():
        if issue.get(key) is not None:
            _check_type(where, key, issue[key], kind)
    for index, journal in enumerate(issue.get("journals") or []):
        _check_type(where, f"journals[{index}]", journal, dict)
        for key, kind in _JOURNAL_OPTIONAL.items():
            if journal.get(key) is not None:
                _check_type(f"{where}: journal {journal.get('id', f'[{index}]')}", key, journal[key], kind)


# What Redmine gives for these keys (and for the others, if not null): a renderer meeting another type would
# drop the value without a word or stop with a raw error, so the ticket fails here, naming the field.
_LISTS = ("journals", "custom_fields", "attachments", "relations", "children")
_NAMED = ("project", "tracker", "status", "priority", "author", "assigned_to", "category", "fixed_version", "parent")
_DATES = ("created_on", "updated_on", "closed_on", "start_date", "due_date")  # (a number is compared with a string)
_OPTIONAL: dict[str, type] = {"description": str, **dict.fromkeys(_DATES, str), **dict.fromkeys(_NAMED, dict)}
_JOURNAL_OPTIONAL: dict[str, type] = {"notes": str, "details": list, "user": dict, "created_on": str}
_KINDS: dict[type, str] = {list: "a list", str: "a string", dict: "an object"}


def _check_type(where: str, key: str, value: Any, kind: type) -> None:
    if not isinstance(value, kind):
        raise SnapshotError(f"{where}: {key!r} must be {_KINDS[kind]}, not {type(value).__name__}")


def load_lookups(snapshot_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``lookups.json`` (id → name tables); an absent file means no names are known."""
    path = snapshot_dir / LOOKUPS_FILE
    if not path.exists():
        return {}
    lookups = read_json(path)
    if not isinstance(lookups, dict) or not all(isinstance(t, dict) for t in lookups.values()):
        raise SnapshotError(f"{path}: expected an object of tables (id -> {{name: ...}})")
    return lookups


def looks_like_snapshot(folder: Path) -> bool:
    """A folder pull made (it has issues/, state.json or lookups.json), as opposed to any other folder."""
    return (folder / ISSUES_DIR).is_dir() or (folder / STATE_FILE).is_file() or (folder / LOOKUPS_FILE).is_file()


def load_state(snapshot_dir: Path) -> dict[str, Any]:
    """``state.json`` (cursor, settings such as text_format); an absent file means a new snapshot."""
    path = snapshot_dir / STATE_FILE
    if not path.exists():
        return {}
    state = read_json(path)
    if not isinstance(state, dict):
        raise SnapshotError(f"{path}: expected a JSON object")
    return state


# ---------------------------------------------------------------------------------------------------
# Writing (owned by pull): every write is atomic, so a crash leaves each file either old or new. A run with
# --include-private writes with files.PRIVATE_FILE_MODE (the ``mode`` below): owner only.


class StoredStamp(NamedTuple):
    """What pull needs to know about a stored issue: is it current, and which project is it in."""

    updated_on: str | None
    project_id: int | None


def issue_path(snapshot_dir: Path, issue_id: int) -> Path:
    return snapshot_dir / ISSUES_DIR / f"{issue_id}.json"


def encode_json(payload: Any, indent: int | None = 2) -> bytes:
    """The snapshot's byte form: UTF-8 (no escapes), key order as given (Redmine's, for issues)."""
    return (json.dumps(payload, ensure_ascii=False, indent=indent) + "\n").encode("utf-8")


def write_issue(snapshot_dir: Path, document: dict[str, Any], mode: int | None = None) -> bool:
    """Store ``{"issue": {...}}`` as ``issues/<id>.json`` with ``mode`` (files.write_atomic); True when the file's
    bytes were (re)written.

    Compact, like Redmine's own response: with ``indent`` json falls back to its pure-Python encoder,
    which made storing cost as much CPU as fetching (``jq . issues/1.json`` reads it indented).
    """
    path = issue_path(snapshot_dir, int(document["issue"]["id"]))
    return write_if_changed(path, encode_json(document, indent=None), mode)


def remove_issue(snapshot_dir: Path, issue_id: int) -> bool:
    try:
        issue_path(snapshot_dir, issue_id).unlink()
    except FileNotFoundError:
        return False
    return True


# In state.json: ids of issues withdrawn from publication (private now, moved out of the projects) whose
# published objects no run has removed yet. pull adds those it drops; sync removes them once unpublished.
WITHDRAWN_KEY = "withdrawn_unpublished"


def withdrawn_in(state: dict[str, Any]) -> set[int]:
    """The ids state.json lists under ``WITHDRAWN_KEY``."""
    return ids_in(state, WITHDRAWN_KEY)


def ids_in(state: dict[str, Any], key: str) -> set[int]:
    """The ids state.json lists under ``key`` (anything else there is ignored: it is a file, maybe edited)."""
    listed = state.get(key)
    if not isinstance(listed, list):
        return set()
    return {item for item in listed if is_count(item)}


def number_in(state: dict[str, Any], key: str) -> float:
    """The number state.json holds under ``key``, 0 when absent or damaged (as for a new snapshot: the
    safe side, a full run or a lookups refresh sooner, never a traceback)."""
    value = state.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def listing_withdrawn(state: dict[str, Any], withdrawn: set[int]) -> dict[str, Any]:
    """``state`` listing ``withdrawn`` under ``WITHDRAWN_KEY`` (the key left out when there are none)."""
    return listing_ids(state, WITHDRAWN_KEY, withdrawn)


def listing_ids(state: dict[str, Any], key: str, ids: Collection[int]) -> dict[str, Any]:
    """``state`` listing ``ids`` under ``key`` (the key left out when there are none)."""
    rest = {name: value for name, value in state.items() if name != key}
    return {**rest, key: sorted(ids)} if ids else rest


def with_withdrawn(
    snapshot_dir: Path, old_state: dict[str, Any], new_state: dict[str, Any], found: list[int]
) -> dict[str, Any]:
    """The state a pull writes, listing the issues still to unpublish: those it withdrew (``found``: gone from
    the snapshot now, their published objects known from here on alone) and those ``old_state`` listed, less
    any stored again (public once more, published as usual)."""
    waiting = withdrawn_in(old_state) | set(found)  # (most pulls: none, and no listing of the issues)
    return listing_withdrawn(new_state, waiting - stored_issue_ids(snapshot_dir) if waiting else set())


def stored_issue_ids(snapshot_dir: Path) -> set[int]:
    """Ids of the issue files present (a cheap directory listing; no file is read)."""
    issues_dir = snapshot_dir / ISSUES_DIR
    if not issues_dir.is_dir():
        return set()
    return {number for stem in _issue_file_stems(issues_dir) if (number := ascii_number(stem)) is not None}


def stored_stamp(snapshot_dir: Path, issue_id: int) -> StoredStamp | None:
    """The stored copy's ``updated_on`` and project id; None when absent or unreadable (so it is refetched)."""
    try:
        issue = load_issue(issue_path(snapshot_dir, issue_id))
    except SnapshotError:
        return None
    project = issue.get("project")
    project_id = project.get("id") if isinstance(project, dict) else None
    updated_on = issue.get("updated_on")
    return StoredStamp(
        updated_on if isinstance(updated_on, str) else None, project_id if isinstance(project_id, int) else None
    )


def remove_stale_temp_files(snapshot_dir: Path) -> int:
    """Delete temporary files a killed writer left behind (``write_atomic`` names them ``.<name>.*.tmp``)."""
    removed = 0
    for folder in (snapshot_dir, snapshot_dir / ISSUES_DIR):
        if folder.is_dir():
            for leftover in folder.glob(".*.tmp"):
                leftover.unlink(missing_ok=True)
                removed += 1
    return removed


def write_lookups(snapshot_dir: Path, lookups: dict[str, dict[str, dict[str, Any]]], mode: int | None = None) -> bool:
    """Store ``lookups.json`` with tables and ids sorted, so an unchanged lookup leaves the file untouched."""
    ordered = {
        table: dict(sorted(rows.items(), key=lambda row: _id_order(row[0]))) for table, rows in sorted(lookups.items())
    }
    return write_if_changed(snapshot_dir / LOOKUPS_FILE, encode_json(ordered), mode)


def write_state(snapshot_dir: Path, state: dict[str, Any], mode: int | None = None) -> bool:
    return write_if_changed(snapshot_dir / STATE_FILE, encode_json(dict(sorted(state.items()))), mode)


def _id_order(key: str) -> tuple[bool, int, str]:
    """Numeric ids in numeric order first, then any other names in text order."""
    number = ascii_number(key)
    return (number is None, number or 0, key)
