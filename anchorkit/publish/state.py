"""The sync state kept beside the destination, so a run on an empty disk is still incremental.

Layout (the same under a local folder and under an S3 prefix):

- ``manifest.json``: the one object a run always reads: the pull bookkeeping (cursor, lookups age...),
  the lookups, the output fingerprint, and per ticket its ``updated_on``, project and the SHA-256 of
  every object uploaded for it. Rewritten only when something in it changed.
- ``issues/<id>.json``: the raw issue JSON of every ticket (as pull stored it, private content only
  with ``--include-private``), read only when the fingerprint changed and everything is regenerated.
  Written only when its bytes change: what a copy holds is told by one listing of ``issues/`` (on S3
  the ETag is the MD5 of the bytes, else the SHA-256 a copy carries in its metadata decides), never by
  the manifest, which a run killed between its writes and its commit leaves behind the copies.
- ``lease.json`` (S3 only): who is writing right now, and until when. A run renews it every third of
  its length while it lives, so the lease of a run that died runs out within ``--lease-seconds``.

Concurrency. A local state is held under an OS file lock for the whole run. On S3 a run reads the
manifest and its ETag, works out what to do, and only when it has something to write it takes the
lease (a PUT with ``If-None-Match: *``; an expired lease is taken over with ``If-Match`` on its ETag),
checks that the manifest is still the one it read, writes, and commits the manifest with ``If-Match``
on that ETag (``If-None-Match: *`` for the first one). So writers never interleave, a run that lost
the race writes nothing, and a run with nothing to do writes nothing at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from anchorkit.errors import LockHeld, UsageError
from anchorkit.files import make_folder, process_running, write_atomic
from anchorkit.publish.aws import (
    MISSING_CODES,
    PRECONDITION_CODES,
    AwsSettings,
    S3Location,
    error_code,
    make_s3_client,
    make_session,
    validate_key,
)
from anchorkit.publish.objects import Checksums, LocalObject, S3Target, checksum_parameters
from anchorkit.publish.upload import PublishSettings, unchanged_keys
from anchorkit.settings import default
from anchorkit.untrusted import ascii_number, parse_json

MANIFEST_NAME = "manifest.json"
ISSUES_FOLDER = "issues"
LEASE_NAME = "lease.json"
LOCK_NAME = ".sync.lock"
DEFAULT_LEASE_SECONDS: float = default("lease_seconds")


class StateError(UsageError):
    """The state cannot be used (unreadable manifest, bad location); nothing was written."""


class StateConflict(LockHeld):
    """Another sync holds or changed the state; this run stopped without writing anything more."""


class LeaseNotBroken(UsageError):
    """`state break-lease` found no lease of the named holder (or a live one): nothing was changed."""


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    """Canonical bytes (sorted keys), so an unchanged manifest is recognised and never rewritten."""
    return (json.dumps(manifest, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


def decode_manifest(data: bytes, where: str) -> dict[str, Any]:
    try:
        manifest = parse_json(data.decode("utf-8"))
    except ValueError as error:  # not UTF-8, malformed, or nested too deeply
        raise StateError(f"{where}: the state manifest is not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("tickets", {}), dict):
        raise StateError(f"{where}: the state manifest is not an object with a 'tickets' table")
    return manifest


def issue_name(issue_id: int) -> str:
    """The name of an issue's raw JSON in the state's ``issues/`` folder."""
    return f"{int(issue_id)}.json"


class StateStore(Protocol):
    """Where the state lives. ``session()`` brackets a run; ``begin_writes()`` comes before any write, and
    commits ``intent`` first when given (the manifest a run records before it changes any object)."""

    def describe(self) -> str: ...

    def session(self) -> contextlib.AbstractContextManager[None]: ...

    def read_manifest(self) -> dict[str, Any] | None: ...

    def begin_writes(self, intent: dict[str, Any] | None = None) -> None: ...

    def get_issue(self, issue_id: int) -> bytes | None: ...

    def put_issue(self, issue_id: int, data: bytes) -> None: ...

    def delete_issue(self, issue_id: int) -> None: ...

    def unchanged_issues(self, copies: Mapping[int, Path], threads: int) -> set[int]: ...

    def commit(self, manifest: dict[str, Any]) -> None: ...

    def lease_status(self) -> LeaseStatus | None: ...


@dataclass(frozen=True)
class LeaseStatus:
    """Who holds a state right now, for `state show`: a live run, or one that died holding it."""

    holder: str
    taken_at: float | None  # when the holder took (or last renewed) it; None: not recorded
    expires_at: float | None  # None: a local lock, held exactly as long as its process lives
    alive: bool | None  # is the holder's process running? None: it runs on another host, cannot tell

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def status(self, now: float) -> str:
        """``active`` (a run is writing: wait), ``stale`` (its run is gone: the next run takes it over, or
        break it), or ``held`` (unexpired, holder on another host: active unless that run was killed)."""
        if self.expired(now) or self.alive is False:
            return "stale"
        return "active" if self.alive else "held"

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "holder": self.holder,
            "status": self.status(now),
            "alive": self.alive,
            "taken_at": iso_time(self.taken_at),
            "expires_at": iso_time(self.expires_at),
            "age_seconds": None if self.taken_at is None else round(now - self.taken_at, 1),
            "expires_in_seconds": None if self.expires_at is None else round(self.expires_at - now, 1),
        }


def iso_time(epoch: float | None) -> str | None:
    return None if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def run_holder() -> str:
    """Names this run in a lease or lock: host, process id, and a random part (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_alive(holder: str) -> bool | None:
    """Whether the process a holder names is running, when it is on this host (None: another host)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    number = ascii_number(pid)
    if host != socket.gethostname() or number is None:
        return None
    return process_running(number)


class LocalStateStore:
    """A state folder on a local (or mounted) disk, serialised by an OS file lock. Its raw issues and manifest are
    files of ``mode`` (files.file_mode: its owner's alone for a state of private content), the folders it creates
    for them of its folder mode."""

    def __init__(self, root: Path, mode: int | None = None) -> None:
        self.root = root
        self.mode = mode
        self._lock_handle: IO[str] | None = None

    def describe(self) -> str:
        return str(self.root)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        import fcntl  # POSIX only; imported here so that the CLI loads where it is missing

        make_folder(self.root, self.mode)
        with open(self.root / LOCK_NAME, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = self._lock_holder()
                raise StateConflict(
                    f"{self.root}: another sync is running on this state{f' ({holder})' if holder else ''}; this run "
                    "stopped"
                ) from None
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"holder": run_holder(), "taken_at": time.time()}))
            handle.flush()
            yield  # the OS releases the lock when the file closes or the process dies (kill -9 included)

    def _lock_holder(self) -> str | None:
        try:
            return str(parse_json((self.root / LOCK_NAME).read_text(encoding="utf-8"))["holder"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def lease_status(self) -> LeaseStatus | None:
        """The run holding the lock, if one does (the OS drops the lock of a dead process: never stale)."""
        import fcntl  # POSIX only, as in session()

        path = self.root / LOCK_NAME
        if not path.exists():
            return None
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    held = parse_json(path.read_text(encoding="utf-8"))
                except ValueError:
                    held = {}
                held = held if isinstance(held, dict) else {}
                holder = str(held.get("holder", "?"))
                return LeaseStatus(holder, held.get("taken_at"), None, alive=True)  # the lock dies with its process
            fcntl.flock(handle, fcntl.LOCK_UN)
        return None

    def read_manifest(self) -> dict[str, Any] | None:
        path = self.root / MANIFEST_NAME
        try:
            return decode_manifest(path.read_bytes(), str(path))
        except FileNotFoundError:
            return None

    def begin_writes(self, intent: dict[str, Any] | None = None) -> None:
        """Commit ``intent``, if any: the lock taken by ``session`` already excludes every other run."""
        if intent is not None:
            self.commit(intent)

    def issue_path(self, issue_id: int) -> Path:
        return self.root / ISSUES_FOLDER / issue_name(issue_id)

    def get_issue(self, issue_id: int) -> bytes | None:
        try:
            return self.issue_path(issue_id).read_bytes()
        except FileNotFoundError:
            return None

    def put_issue(self, issue_id: int, data: bytes) -> None:
        write_atomic(self.issue_path(issue_id), data, self.mode)

    def delete_issue(self, issue_id: int) -> None:
        self.issue_path(issue_id).unlink(missing_ok=True)

    def unchanged_issues(self, copies: Mapping[int, Path], threads: int) -> set[int]:
        """The issues of ``copies`` (id -> the file of the raw JSON to store) whose copy here holds these bytes:
        on a local disk reading a copy costs no more than listing it."""
        return {issue_id for issue_id, path in copies.items() if self.get_issue(issue_id) == path.read_bytes()}

    def commit(self, manifest: dict[str, Any]) -> None:
        write_atomic(self.root / MANIFEST_NAME, encode_manifest(manifest), self.mode)


class ReadOnlyStore:
    """A store as a dry run uses it: it reads the state, and a write raises instead of happening (a bug
    then, never a change). Its session takes nothing: no local folder or lock file is created and no lease
    is taken, so a dry run may read while a run writes (each object it reads is whole; a raw issue of
    another version than the manifest says is fetched again, as always)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.client = getattr(store, "client", None)  # so that its requests are counted as the store's

    def describe(self) -> str:
        return self.store.describe()

    def session(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def read_manifest(self) -> dict[str, Any] | None:
        return self.store.read_manifest()

    def get_issue(self, issue_id: int) -> bytes | None:
        return self.store.get_issue(issue_id)

    def unchanged_issues(self, copies: Mapping[int, Path], threads: int) -> set[int]:
        return self.store.unchanged_issues(copies, threads)

    def lease_status(self) -> LeaseStatus | None:
        return self.store.lease_status()

    def _refuse(self, what: str) -> RuntimeError:
        return RuntimeError(f"{self.describe()}: a dry run writes nothing, yet it was about to {what}")

    def begin_writes(self, intent: dict[str, Any] | None = None) -> None:
        raise self._refuse("take the state for writing")

    def put_issue(self, issue_id: int, data: bytes) -> None:
        raise self._refuse(f"store issue {issue_id}")

    def delete_issue(self, issue_id: int) -> None:
        raise self._refuse(f"drop issue {issue_id}")

    def commit(self, manifest: dict[str, Any]) -> None:
        raise self._refuse("commit the manifest")


@dataclass
class Lease:
    etag: str
    expires_at: float


class S3StateStore:
    """A state prefix in S3; conditional writes (If-Match / If-None-Match) stand in for a lock."""

    def __init__(self, client: Any, location: S3Location, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.client = client
        self.location = location
        self.lease_seconds = lease_seconds
        self.owner = run_holder()
        self.manifest_etag: str | None = None  # None: there was no manifest when the run started
        self.lease: Lease | None = None
        self._lease_lock = threading.Lock()  # the renewing thread and the run take turns with the lease
        self._stop_renewing = threading.Event()
        self._renewer: threading.Thread | None = None

    def describe(self) -> str:
        return str(self.location)

    def key(self, name: str) -> str:
        validate_key(name)
        return self.location.prefix + name

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        try:
            yield
        finally:
            self._end_writes()

    def _get(self, name: str) -> tuple[bytes, str] | None:
        try:
            response = self.client.get_object(Bucket=self.location.bucket, Key=self.key(name))
        except ClientError as error:
            if error_code(error) in MISSING_CODES:
                return None
            raise
        return response["Body"].read(), str(response["ETag"])

    def read_manifest(self) -> dict[str, Any] | None:
        found = self._get(MANIFEST_NAME)
        if found is None:
            self.manifest_etag = None
            return None
        data, self.manifest_etag = found
        return decode_manifest(data, f"{self.location}{MANIFEST_NAME}")

    def _lease_body(self) -> tuple[bytes, float]:
        now = time.time()
        expires_at = now + self.lease_seconds
        body = {"owner": self.owner, "taken_at": now, "expires_at": expires_at, "expires": iso_time(expires_at)}
        return json.dumps(body).encode("utf-8"), expires_at

    def _put_lease(self, **condition: str) -> Lease:
        body, expires_at = self._lease_body()
        response = self.client.put_object(
            Bucket=self.location.bucket,
            Key=self.key(LEASE_NAME),
            Body=body,
            ContentType="application/json",
            **condition,
        )
        return Lease(str(response["ETag"]), expires_at)

    def begin_writes(self, intent: dict[str, Any] | None = None) -> None:
        """Take the lease (and keep renewing it while the run lives), then make sure nobody committed
        since this run read the manifest: by committing ``intent`` with ``If-Match`` on the manifest's ETag
        when there is one (that write is the check), else by a HEAD of the manifest."""
        if self.lease is not None:  # renew our own, unless it expired and another run took it
            with self._lease_lock:
                try:
                    self.lease = self._put_lease(IfMatch=self.lease.etag)
                except ClientError as error:
                    if error_code(error) in PRECONDITION_CODES:
                        self.lease = None
                        raise StateConflict(
                            f"{self.location}: this run's lease expired (it could not be renewed for "
                            f"{self.lease_seconds:g} s) and another sync took it; the state was not committed"
                        ) from None
                    raise
            return
        try:
            self.lease = self._put_lease(IfNoneMatch="*")
        except ClientError as error:
            if error_code(error) not in PRECONDITION_CODES:
                raise
            self.lease = self._take_over_expired_lease()
        self._start_renewing()
        if self._manifest_moved() if intent is None else not self._committed(intent):
            self._end_writes()
            raise StateConflict(
                f"{self.location}: another sync committed the state while this run was working; "
                "this run stopped without writing (the next run picks up from the new state)"
            )

    def _start_renewing(self) -> None:
        self._stop_renewing.clear()
        self._renewer = threading.Thread(target=self._renew_until_stopped, name="lease-renewal", daemon=True)
        self._renewer.start()

    def _renew_until_stopped(self) -> None:
        """Renew the lease every third of its length. A failed renewal is tried again at the next tick
        (the lease outlasts two of them); a lease another run took over is left to it, and the run
        learns it when it renews before its commit."""
        while not self._stop_renewing.wait(self.lease_seconds / 3):
            with self._lease_lock:
                if self.lease is None:
                    return
                try:
                    self.lease = self._put_lease(IfMatch=self.lease.etag)
                except ClientError as error:
                    if error_code(error) in PRECONDITION_CODES:
                        return
                except BotoCoreError:
                    pass  # the endpoint did not answer this time

    def _stop_renewal(self) -> None:
        self._stop_renewing.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None

    def _manifest_moved(self) -> bool:
        """True when the manifest is no longer the one this run read (or appeared since)."""
        try:
            head = self.client.head_object(Bucket=self.location.bucket, Key=self.key(MANIFEST_NAME))
        except ClientError as error:
            if error_code(error) in MISSING_CODES:
                return self.manifest_etag is not None
            raise
        return str(head["ETag"]) != self.manifest_etag

    def _read_lease(self) -> tuple[LeaseStatus, str] | None:
        """The lease as it is now, and its ETag (None: no run holds one)."""
        found = self._get(LEASE_NAME)
        if found is None:
            return None
        data, etag = found
        try:
            held = parse_json(data)
            expires_at, owner = float(held["expires_at"]), str(held.get("owner", "?"))
            taken_at = float(held["taken_at"]) if "taken_at" in held else None
        except (ValueError, KeyError, TypeError):
            expires_at, owner, taken_at = 0.0, "?", None  # an unreadable lease protects nothing
        return LeaseStatus(owner, taken_at, expires_at, holder_alive(owner)), etag

    def lease_status(self) -> LeaseStatus | None:
        found = self._read_lease()
        return None if found is None else found[0]

    def break_lease(self, holder: str) -> LeaseStatus:
        """End the lease of ``holder``, a run known to be dead, before it expires: the lease is rewritten
        as expired with ``If-Match`` on the ETag just read, so a live holder that renewed it meanwhile
        (or another run that took it) is never overridden. Raises :class:`LeaseNotBroken` (exit 2) when
        no lease or another holder's is there, :class:`StateConflict` (exit 3) when it changed."""
        found = self._read_lease()
        if found is None:
            raise LeaseNotBroken(f"{self.location}: no lease is held; nothing to break")
        lease, etag = found
        if lease.holder != holder:
            raise LeaseNotBroken(f"{self.location}: the lease is held by {lease.holder}, not {holder}; nothing broken")
        if lease.alive:
            raise LeaseNotBroken(
                f"{self.location}: the lease holder {holder} is a running process on this host; nothing broken"
            )
        body = {"owner": holder, "expires_at": 0, "expires": iso_time(0), "broken_at": iso_time(time.time())}
        try:
            self.client.put_object(
                Bucket=self.location.bucket,
                Key=self.key(LEASE_NAME),
                Body=json.dumps(body).encode("utf-8"),
                ContentType="application/json",
                IfMatch=etag,
            )
        except ClientError as error:
            if error_code(error) in PRECONDITION_CODES:
                raise StateConflict(
                    f"{self.location}: the lease changed while breaking it (its holder renewed it, or another run "
                    "took it over): that run is alive; nothing broken"
                ) from None
            raise
        return lease

    def _take_over_expired_lease(self) -> Lease:
        found = self._read_lease()
        if found is None:  # released between our attempt and this read: try once more
            return self._put_lease(IfNoneMatch="*")
        lease, etag = found
        if not lease.expired(time.time()):
            raise StateConflict(
                f"{self.location}: another sync ({lease.holder}) is writing (lease until "
                f"{iso_time(lease.expires_at)}); this run stopped without writing. If that run is dead (killed, "
                f"its runner lost), `anchorkit state show {self.location}` says so and `anchorkit state break-lease "
                f"{self.location} --holder {lease.holder}` frees the state now; else its lease runs out by itself"
            )
        try:
            return self._put_lease(IfMatch=etag)
        except ClientError as error:
            if error_code(error) in PRECONDITION_CODES:
                raise StateConflict(
                    f"{self.location}: another sync took the expired lease first; this run stopped"
                ) from None
            raise

    def _end_writes(self) -> None:
        """Stop renewing, and release this run's lease if it holds one."""
        self._stop_renewal()
        if self.lease is None:
            return
        lease, self.lease = self.lease, None
        with contextlib.suppress(ClientError):
            # Only our own lease: if it expired and was taken over, the ETag no longer matches.
            found = self._get(LEASE_NAME)
            if found is not None and found[1] == lease.etag:
                self.client.delete_object(Bucket=self.location.bucket, Key=self.key(LEASE_NAME))

    def get_issue(self, issue_id: int) -> bytes | None:
        found = self._get(f"{ISSUES_FOLDER}/{issue_name(issue_id)}")
        return None if found is None else found[0]

    def put_issue(self, issue_id: int, data: bytes) -> None:
        self.client.put_object(
            Bucket=self.location.bucket,
            Key=self.key(f"{ISSUES_FOLDER}/{issue_name(issue_id)}"),
            Body=data,
            ContentType="application/json",
            **checksum_parameters(Checksums.of(data)),  # what unchanged_issues recognises the copy by
        )

    def delete_issue(self, issue_id: int) -> None:
        self.client.delete_object(Bucket=self.location.bucket, Key=self.key(f"{ISSUES_FOLDER}/{issue_name(issue_id)}"))

    def unchanged_issues(self, copies: Mapping[int, Path], threads: int) -> set[int]:
        """The issues of ``copies`` (id -> the file of the raw JSON to store) whose copy here holds these bytes,
        told as upload tells an unchanged document: one listing of ``issues/`` (1,000 copies a request), and a
        HEAD only for a copy whose ETag is not an MD5 (SSE-KMS) and whose size is the same. Never a GET."""
        issues = S3Target(self.client, S3Location(self.location.bucket, f"{self.location.prefix}{ISSUES_FOLDER}/"))
        local = [LocalObject(issue_name(i), Checksums.of(path.read_bytes()), path) for i, path in copies.items()]
        same = unchanged_keys(local, issues, threads)
        return {issue_id for issue_id in copies if issue_name(issue_id) in same}

    def _committed(self, manifest: dict[str, Any]) -> bool:
        """Write the manifest if it is still the one this run read (or there still is none); False if not."""
        condition = {"IfMatch": self.manifest_etag} if self.manifest_etag else {"IfNoneMatch": "*"}
        try:
            response = self.client.put_object(
                Bucket=self.location.bucket,
                Key=self.key(MANIFEST_NAME),
                Body=encode_manifest(manifest),
                ContentType="application/json",
                **condition,
            )
        except ClientError as error:
            if error_code(error) in PRECONDITION_CODES:
                return False
            raise
        self.manifest_etag = str(response["ETag"])
        return True

    def commit(self, manifest: dict[str, Any]) -> None:
        if not self._committed(manifest):
            raise StateConflict(
                f"{self.location}: the state changed under this run (its lease expired and another sync "
                "committed); this run's manifest was not written"
            )


def open_store(
    location: S3Location | Path,
    aws: AwsSettings,
    settings: PublishSettings,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    client: Any = None,
    mode: int | None = None,
) -> StateStore:
    """The store for a parsed ``--state``: a local folder (writing files of ``mode``, files.file_mode), or an S3
    prefix reached through ``client`` (the documents' client, when they are in S3 too) or else a new client made
    from ``aws``."""
    if isinstance(location, Path):
        return LocalStateStore(location, mode)
    if client is None:
        client = make_s3_client(
            make_session(aws),
            endpoint_url=aws.endpoint_url,
            threads=settings.threads,
            retry_mode=settings.retry_mode,
            max_attempts=settings.max_attempts,
        )
    return S3StateStore(client, location, lease_seconds)


def absence(store: StateStore) -> str | None:
    """Why the store's location holds no state at all, most likely a mistyped one: a local folder that does
    not exist or is a file, an S3 prefix with no object under it (one ListObjectsV2 of at most one key) or
    in a bucket that does not exist. None when the location exists, whether a run has committed there yet
    or not."""
    if isinstance(store, LocalStateStore):
        root = store.root
        return None if root.is_dir() else "a file, not a folder" if root.exists() else "no such folder"
    if isinstance(store, S3StateStore):
        location = store.location
        try:
            listed = store.client.list_objects_v2(Bucket=location.bucket, Prefix=location.prefix, MaxKeys=1)
        except ClientError as error:
            if error_code(error) != "NoSuchBucket":
                raise
            return f"the bucket {location.bucket} does not exist"
        return None if listed.get("Contents") else "no object under this prefix"
    return None


def check_state_apart(state: S3Location | Path, documents: S3Location | Path, folder_name: str = "documents'") -> None:
    """A state inside the documents' prefix would be ingested as documents (and the reverse deleted);
    inside a snapshot folder (``folder_name="snapshot"``) its issues/ would be the snapshot's."""
    if isinstance(state, S3Location) and isinstance(documents, S3Location):
        if state.bucket == documents.bucket and (
            state.prefix.startswith(documents.prefix) or documents.prefix.startswith(state.prefix)
        ):
            raise StateError(
                f"--state {state} overlaps the documents' prefix {documents}: a knowledge base would ingest the "
                "state; use a prefix outside it (e.g. s3://bucket/anchorkit-state/)"
            )
    elif isinstance(state, Path) and isinstance(documents, Path):
        state_path, documents_path = state.resolve(), documents.resolve()
        if state_path.is_relative_to(documents_path) or documents_path.is_relative_to(state_path):
            raise StateError(f"--state {state} overlaps the {folder_name} folder {documents}; use a folder outside it")
