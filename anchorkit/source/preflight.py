"""What a pull checks, and prepares, before it writes anything: the Redmine URL, the API key (read from its file
or the environment), that Redmine accepts it, the custom field definitions an administrator's key must read, the
snapshot folder. Every problem is a :class:`PullError` (a usage error, exit 2): nothing was changed."""

from __future__ import annotations

import contextlib
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.files import check_writable_folder, make_folder
from anchorkit.source import privacy, snapshot
from anchorkit.source.redmine import RedmineClient, RedmineError
from anchorkit.untrusted import split_url

API_KEY_ENV = "REDMINE_API_KEY"
LOCK_FILE = ".pull.lock"


class PullError(UsageError):
    """The run could not start (bad arguments, wrong API key, unusable snapshot); nothing was changed."""


def read_api_key(api_key_file: Path | None, environ: Mapping[str, str], warn: Callable[[str], None]) -> str:
    """The key from ``api_key_file``, else ``$REDMINE_API_KEY``; a usage error (exit 2) when there is none.
    A key file other users may read is a leaked key on a shared runner: ``warn`` says so (the run goes on)."""
    if api_key_file is not None:
        if api_key_file.is_dir():  # said first: a folder's usual mode would get "chmod 600" advice
            raise UsageError(f"--api-key-file {api_key_file} is a folder, not a file holding the API key")
        with contextlib.suppress(OSError):  # reading it reports the problem
            mode = api_key_file.stat().st_mode
            if mode & (stat.S_IRGRP | stat.S_IROTH):
                shown = f"mode {stat.S_IMODE(mode):04o}"
                warn(f"{api_key_file} is readable by other users ({shown}); chmod 600 {api_key_file}")
        try:
            key = api_key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"{api_key_file}: cannot read the API key file ({type(error).__name__})") from None
        if not key:
            raise UsageError(f"{api_key_file}: the API key file is empty")
        return key
    key = environ.get(API_KEY_ENV, "").strip()
    if not key:
        raise UsageError(NO_API_KEY)
    return key


NO_API_KEY = f"no Redmine API key: set {API_KEY_ENV} or pass --api-key-file"


def check_redmine_url(url: str) -> None:
    """:class:`PullError` unless ``url`` is a Redmine base URL requests can use. The URL is not echoed: it
    may carry ``user:password@``, and a query may carry a key (``?key=...``)."""
    try:
        parts = split_url(url)
    except ValueError as error:  # (its message names the port or the bracket, not the rest of the URL)
        raise PullError(
            f"the Redmine URL is malformed ({error}); it must look like https://redmine.example.com"
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PullError("the Redmine URL must look like https://redmine.example.com")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise PullError(
            "the Redmine URL must not have a query or a fragment (?… or #…): give the base URL alone, and the "
            f"API key in {API_KEY_ENV} or --api-key-file"
        )


def check_api_key(client: RedmineClient, host: str) -> dict[str, Any]:
    """The key's user; :class:`PullError` unless Redmine knows the key. One request (``/users/current.json``),
    on every run: Redmine answers an unknown or revoked key as anonymous instead of refusing it, and an
    anonymous run would quietly fetch only the public issues (and a full one remove all the others)."""
    with client.stats.purpose("key check"):
        try:
            user = client.current_user()
        except RedmineError as error:
            if error.status == 403:
                raise PullError(
                    f"Redmine at {host} refused /users/current.json (HTTP 403): is its REST API enabled "
                    "(Administration > Settings > API)?"
                ) from None
            if error.status is not None:  # it answered, with no usable reply
                raise PullError(f"Redmine at {host} did not answer the key check: {error}") from None
            raise PullError(f"cannot reach Redmine at {host}: {error}") from None
    if user is None:
        raise PullError(
            f"Redmine at {host} does not accept the API key (an unknown or revoked key is answered as "
            "anonymous): check REDMINE_API_KEY or the --api-key-file"
        )
    return user


def restricted_custom_fields(client: RedmineClient, user: dict[str, Any], host: str) -> frozenset[int]:
    """The custom fields not visible to everyone: pull leaves their values out, or with --include-private
    keeps them and records which they are (for documents made without it). Only an administrator's key
    sees them in the issues (for any other key Redmine leaves out what its roles may not see), and only an
    administrator may read their definitions (``/custom_fields.json``, one request a run).
    :class:`PullError` when they cannot be read: storing values nobody can tell apart is not the way to fail."""
    if user.get("admin") is not True:
        return frozenset()
    with client.stats.purpose("custom fields"):
        try:
            return privacy.restricted_field_ids(client.get_json("/custom_fields.json").get("custom_fields"))
        except (RedmineError, ValueError) as error:
            raise PullError(
                f"cannot read the custom field definitions from Redmine at {host} ({error}); without them the "
                "values of fields only some roles may see cannot be told apart, so nothing was pulled"
            ) from None


def check_snapshot_folder(snapshot_dir: Path) -> None:
    """A usage error unless ``snapshot_dir`` is a snapshot, an empty folder, or a folder to create: a pull
    into any other folder (a project's ``tests/``, a home directory) would mix issues into its files."""
    check_writable_folder(snapshot_dir, "--snapshot")
    if not snapshot_dir.is_dir() or snapshot.looks_like_snapshot(snapshot_dir):
        return
    if any(entry for entry in snapshot_dir.iterdir() if entry.name != LOCK_FILE):
        raise PullError(
            f"--snapshot {snapshot_dir} is a folder with other files, not a snapshot (no {snapshot.ISSUES_DIR}/, "
            f"{snapshot.STATE_FILE}); give a new or empty folder"
        )


@contextlib.contextmanager
def prepared_snapshot(snapshot_dir: Path, mode: int | None = None) -> Iterator[None]:
    """Create the snapshot folder if needed (for files of ``mode``: files.make_folder); when this run created it
    and fails before storing anything, remove it again: a failed first pull leaves no half-made snapshot. (Once
    issues are stored the folder is kept: the next run resumes from them instead of fetching them again.)"""
    created = not snapshot_dir.exists()
    make_folder(snapshot_dir, mode)
    try:
        yield
    except BaseException:
        if (
            created
            and not snapshot.stored_issue_ids(snapshot_dir)
            and not (snapshot_dir / snapshot.STATE_FILE).exists()
        ):
            shutil.rmtree(snapshot_dir, ignore_errors=True)
        raise
