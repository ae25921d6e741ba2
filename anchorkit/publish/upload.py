"""Publish documents and sidecars to S3 (or a local directory) by content, safely.

Two steps, so that what will happen can be shown before it happens (`--dry-run`):

1. plan: list the destination and compare every object by content. For S3 the ETag of a single-part
   upload is the MD5 of the bytes; where it is not (multipart `-N` ETags, SSE-KMS), the SHA-256 that
   anchorkit stored in the object's metadata at upload (`x-amz-meta-anchorkit-sha256`) decides.
   Modification times are never looked at: a regenerated folder with the same bytes uploads nothing.
2. apply: upload and delete with a thread pool. A sidecar is settled before its document is written,
   and a document is deleted before its sidecar, so an ingestion starting mid-run never sees a new
   document without its metadata.

Nothing outside the destination prefix is listed, written or deleted, and deletes happen only when
asked for and within a limit (`--max-delete`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from anchorkit.errors import UsageError
from anchorkit.files import PRIVATE_FILE_MODE, check_apart, check_writable_folder
from anchorkit.pages import plural
from anchorkit.publish import aws
from anchorkit.publish.aws import InvalidKey, S3Location, describe_error, validate_key
from anchorkit.publish.keys import CHUNKS, DOCUMENTS, document_key_of, layouts_of, superseded, ticket_key, ticket_of_key

# The objects and the destinations live in objects.py; their names stay importable from here, where
# library callers found them before.
from anchorkit.publish.objects import CHECKSUM_METADATA_KEY as CHECKSUM_METADATA_KEY
from anchorkit.publish.objects import Checksums as Checksums
from anchorkit.publish.objects import Failure as Failure
from anchorkit.publish.objects import LocalDirTarget as LocalDirTarget
from anchorkit.publish.objects import LocalObject as LocalObject
from anchorkit.publish.objects import RemoteObject as RemoteObject
from anchorkit.publish.objects import S3Target as S3Target
from anchorkit.publish.objects import Target as Target
from anchorkit.publish.objects import content_type_for as content_type_for
from anchorkit.publish.objects import objects_from_bytes as objects_from_bytes
from anchorkit.publish.objects import scan_folder as scan_folder
from anchorkit.render.private_marks import private_content_evidence
from anchorkit.settings import default

DEFAULT_MAX_DELETE: str = default("max_delete")
DEFAULT_THREADS: int = default("threads")


class PublishError(UsageError):
    """A problem with the request itself (bad destination, bad option): nothing was changed."""


# --------------------------------------------------------------------------------------------------
# Plan


@dataclass
class Plan:
    uploads: list[LocalObject] = field(default_factory=list)
    skips: list[LocalObject] = field(default_factory=list)
    # Remote objects with no local counterpart; deleted only with `delete=True`.
    stale: list[RemoteObject] = field(default_factory=list)
    # Remote chunks a ticket no longer has, or its objects in the layout it left (publish/keys.py):
    # replaced by the local ones, so deleted with or without `delete`, and counted by the delete guard.
    superseded: list[RemoteObject] = field(default_factory=list)
    # Remote objects of tickets withdrawn from publication (private now, moved out of the projects):
    # deleted with or without `delete`, and not counted by the delete guard.
    withdrawn: list[RemoteObject] = field(default_factory=list)
    delete: bool = False
    remote_count: int = 0
    # Problems found while planning (unreadable local files, remote keys that cannot be handled).
    failures: list[Failure] = field(default_factory=list)

    @property
    def deletes(self) -> list[RemoteObject]:
        return self.withdrawn + self.superseded + (self.stale if self.delete else [])

    @property
    def guarded(self) -> list[RemoteObject]:
        """The deletes the delete guard counts: all but the withdrawn tickets'."""
        return self.superseded + (self.stale if self.delete else [])

    @property
    def upload_bytes(self) -> int:
        return sum(obj.checksums.size for obj in self.uploads)


def needs_stored_checksum(local: LocalObject, remote: RemoteObject) -> bool:
    """Same size but the ETag is not this MD5: multipart/SSE-KMS ETag, or really changed bytes."""
    return local.checksums.size == remote.size and remote.etag != local.checksums.md5


def same_content(local: LocalObject, remote: RemoteObject | None, stored_sha256: Mapping[str, str | None]) -> bool:
    """The remote object holds these bytes: same size, and its ETag is their MD5 or its stored SHA-256 theirs."""
    return (
        remote is not None
        and remote.size == local.checksums.size
        and (remote.etag == local.checksums.md5 or stored_sha256.get(local.key) == local.checksums.sha256)
    )


def diff(
    local_objects: Iterable[LocalObject],
    remote_objects: Iterable[RemoteObject],
    stored_sha256: Mapping[str, str | None],
    *,
    delete: bool,
    protected_keys: Iterable[str] = (),
    withdrawn_ids: Collection[int] = (),
) -> Plan:
    """Pure comparison. `stored_sha256` holds the metadata checksum of every ambiguous remote object.

    `protected_keys` (local files that could not be read) are never deleted as stale or superseded, and a
    protected key ending in ``/`` (a folder not read: a symbolic link) protects every key under it the same way;
    the remote documents or chunks (and sidecars) of `withdrawn_ids` always are deleted, protected or not,
    and so are the ones the local chunks of a ticket supersede (:func:`anchorkit.publish.keys.superseded`).
    """
    remote = {obj.key: obj for obj in remote_objects}
    plan = Plan(delete=delete, remote_count=len(remote))
    unread = set(protected_keys)
    unread_folders = tuple(key for key in unread if key.endswith("/"))
    read_keys: set[str] = set()
    for local in local_objects:
        read_keys.add(local.key)
        (plan.skips if same_content(local, remote.get(local.key), stored_sha256) else plan.uploads).append(local)
    unmatched = {key: obj for key, obj in sorted(remote.items()) if key not in read_keys}
    replaced = set(superseded(read_keys | unread, unmatched))
    for key, obj in unmatched.items():
        try:
            validate_key(key)
        except InvalidKey as error:
            if delete:
                plan.failures.append(Failure(key, f"not deleted: {error}"))
            continue
        # A withdrawn ticket's objects go even when its local file could not be read: it must not stay published.
        if ticket_of_key(key) in withdrawn_ids:
            plan.withdrawn.append(obj)
        elif key not in unread and not key.startswith(unread_folders):
            (plan.superseded if key in replaced else plan.stale).append(obj)
    return plan


def stored_sha256_or_none(target: Target, key: str) -> str | None:
    """The stored checksum, or None when it cannot be read: the object is then simply uploaded again."""
    try:
        return target.stored_sha256(key)
    except (OSError, BotoCoreError, ClientError):
        return None


def stored_checksums(
    local_objects: Iterable[LocalObject], remote: Mapping[str, RemoteObject], target: Target, threads: int
) -> dict[str, str | None]:
    """The stored SHA-256 of each remote object whose ETag cannot decide (one HEAD each, in ``threads``)."""
    ambiguous = [
        local.key for local in local_objects if local.key in remote and needs_stored_checksum(local, remote[local.key])
    ]
    if not ambiguous:
        return {}
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return dict(zip(ambiguous, pool.map(lambda key: stored_sha256_or_none(target, key), ambiguous)))


def unchanged_keys(local_objects: list[LocalObject], target: Target, threads: int = DEFAULT_THREADS) -> set[str]:
    """The keys of ``local_objects`` whose bytes ``target`` already holds, by :func:`same_content`: one listing
    of the target, and a HEAD only where the ETag is not an MD5 and the sizes agree."""
    remote = {obj.key: obj for obj in target.list_objects()}
    stored = stored_checksums(local_objects, remote, target, threads)
    return {local.key for local in local_objects if same_content(local, remote.get(local.key), stored)}


def build_plan(
    local_objects: list[LocalObject],
    target: Target,
    *,
    delete: bool,
    threads: int = DEFAULT_THREADS,
    local_failures: Iterable[Failure] = (),
    withdrawn_ids: Collection[int] = (),
) -> Plan:
    """List the destination, fetch stored checksums where the ETag cannot decide, and diff."""
    local_failures = list(local_failures)
    remote = list(target.list_objects())
    plan = diff(
        local_objects,
        remote,
        stored_checksums(local_objects, {obj.key: obj for obj in remote}, target, threads),
        delete=delete,
        protected_keys=(failure.key for failure in local_failures),
        withdrawn_ids=withdrawn_ids,
    )
    plan.failures[:0] = local_failures
    return plan


# --------------------------------------------------------------------------------------------------
# Delete guard


@dataclass(frozen=True)
class DeleteLimit:
    count: int | None = None
    percent: float | None = None

    def allowed(self, remote_count: int) -> float:
        if self.count is not None:
            return self.count
        return (self.percent or 0.0) * remote_count / 100

    def __str__(self) -> str:
        return f"{self.count}" if self.count is not None else f"{self.percent:g}%"


def parse_max_delete(text: str) -> DeleteLimit:
    """`25` (objects) or `10%` (of the objects under the prefix before the run)."""
    value = text.strip()
    try:
        if value.endswith("%"):
            percent = float(value[:-1])
            if not 0 <= percent <= 100:
                raise ValueError
            return DeleteLimit(percent=percent)
        count = int(value)
        if count < 0:
            raise ValueError
        return DeleteLimit(count=count)
    except ValueError:
        raise PublishError(f"--max-delete {text!r}: expected a count (e.g. 25) or a percentage (e.g. 10%)") from None


def delete_refusal(plan: Plan, limit: DeleteLimit, force: bool, why: str = "") -> str | None:
    """Why the planned deletes must not happen, or None when they may (withdrawn tickets' are not counted).
    ``why``: what makes so many go, when the caller knows (a change of layout). A refusal changes nothing,
    so it names the withdrawn tickets whose objects stay published until a run is not refused."""
    guarded = plan.guarded
    count = len(guarded)
    if force or count == 0 or count <= limit.allowed(plan.remote_count):
        return None
    # Worded for upload and both syncs alike: a stateless sync has no local folder to point at. The
    # tickets are named because with chunks one ticket is many objects, each counted.
    tickets = {found.ticket_id for obj in guarded if (found := ticket_key(obj.key)) is not None}
    chunks = sum(1 for obj in guarded if (found := ticket_key(obj.key)) is not None and found.layout == CHUNKS)
    what = f"of {plural(len(tickets), 'ticket')}" + (f", {chunks} of them chunks or chunk sidecars" if chunks else "")
    return (
        f"refusing to delete {count} of {plan.remote_count} objects ({what}; every document, chunk and sidecar "
        f"counts as one; limit --max-delete {limit}){why}; if that many should go, raise --max-delete or pass --force"
        + withdrawn_waiting(plan.withdrawn)
    )


def withdrawn_waiting(withdrawn: list[RemoteObject]) -> str:
    """The tail of a refusal naming the withdrawn tickets it leaves published (private content, possibly)."""
    tickets = sorted({ticket for obj in withdrawn if (ticket := ticket_of_key(obj.key)) is not None})
    if not tickets:
        return ""
    named = ", ".join(f"#{ticket}" for ticket in tickets)
    return (
        f"; until then the {plural(len(withdrawn), 'object')} of {named}, withdrawn from publication "
        "(private now, or moved "
        "out of the projects), stay published"
    )


# --------------------------------------------------------------------------------------------------
# Apply


@dataclass(frozen=True)
class Operation:
    action: Literal["upload", "delete"]
    key: str
    local: LocalObject | None = None


@dataclass(frozen=True)
class OperationResult:
    operation: Operation
    bytes: int = 0
    error: str | None = None


def ordered_groups(plan: Plan) -> list[list[Operation]]:
    """Operations grouped per document, in the order that keeps documents and sidecars consistent.

    Within a group: when the document is deleted it goes first (then its sidecar); otherwise the
    sidecar is uploaded or deleted first and the document written after it. Groups run in parallel.
    """
    groups: dict[str, list[Operation]] = {}
    for local in plan.uploads:
        groups.setdefault(document_key_of(local.key), []).append(Operation("upload", local.key, local))
    for remote in plan.deletes:
        groups.setdefault(document_key_of(remote.key), []).append(Operation("delete", remote.key))

    def position(document_key: str, operation: Operation) -> int:
        is_document = operation.key == document_key
        if operation.action == "delete" and is_document:
            return 0
        return 2 if is_document else 1

    return [
        sorted(operations, key=lambda operation: position(document_key, operation))
        for document_key, operations in sorted(groups.items())
    ]


def run_group(target: Target, operations: list[Operation]) -> list[OperationResult]:
    """Run one document's operations in order; after a failure the rest are not attempted."""
    results: list[OperationResult] = []
    for index, operation in enumerate(operations):
        try:
            if operation.action == "upload":
                assert operation.local is not None
                # Re-read and re-hash: the stored checksum must describe the bytes actually sent.
                data = operation.local.read()
                target.put(operation.key, data, Checksums.of(data))
                results.append(OperationResult(operation, bytes=len(data)))
            else:
                target.delete(operation.key)
                results.append(OperationResult(operation))
        except Exception as error:  # one object's failure must not stop the batch: it is reported
            results.append(OperationResult(operation, error=describe_error(error)))
            results.extend(
                OperationResult(later, error=f"not attempted: {operation.action} of {operation.key} failed first")
                for later in operations[index + 1 :]
            )
            break
    return results


def apply_plan(
    plan: Plan,
    target: Target,
    *,
    threads: int = DEFAULT_THREADS,
    on_result: Callable[[OperationResult], None] | None = None,
) -> list[OperationResult]:
    """Upload and delete what the plan says, `threads` documents at a time. A local folder first loses the
    temporary files of a run killed while writing there: every run that writes to a destination comes here."""
    if isinstance(target, LocalDirTarget):
        target.remove_interrupted_writes()
    results: list[OperationResult] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(run_group, target, group) for group in ordered_groups(plan)]
        for future in as_completed(futures):
            for result in future.result():
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results


# --------------------------------------------------------------------------------------------------
# The whole run


@dataclass
class PublishReport:
    destination: str
    plan: Plan
    dry_run: bool
    refused: str | None = None
    results: list[OperationResult] = field(default_factory=list)
    seconds: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    ingestion_job: dict[str, str] | None = None
    ingestion_error: str | None = None
    applied: bool = False  # the plan was carried out: listed, not a dry run, not refused

    @property
    def uploaded(self) -> list[str]:
        return [r.operation.key for r in self.results if r.error is None and r.operation.action == "upload"]

    @property
    def deleted(self) -> list[str]:
        return [r.operation.key for r in self.results if r.error is None and r.operation.action == "delete"]

    @property
    def failures(self) -> list[Failure]:
        failures = self.plan.failures + [Failure(r.operation.key, r.error) for r in self.results if r.error is not None]
        if self.ingestion_error is not None:
            failures.append(Failure("--start-ingestion", self.ingestion_error))
        return failures

    def still_published(self, withdrawn_ids: Collection[int]) -> set[int]:
        """Of these withdrawn tickets, those whose objects may still be at the destination after this run:
        every one unless the plan was carried out, else those with a delete that failed."""
        if not self.applied:
            return set(withdrawn_ids)
        failed = {ticket_of_key(r.operation.key) for r in self.results if r.error is not None}
        return {ticket for ticket in withdrawn_ids if ticket in failed}

    @property
    def bytes_uploaded(self) -> int:
        return sum(r.bytes for r in self.results if r.error is None)

    @property
    def ok(self) -> bool:
        return self.refused is None and not self.failures

    def to_json(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "ok": self.ok,
            "destination": self.destination,
            "dry_run": self.dry_run,
            "planned": {
                "upload": len(plan.uploads),
                "skip": len(plan.skips),
                "delete": len(plan.deletes),
                "superseded": len(plan.superseded),
                "stale_kept": 0 if plan.delete else len(plan.stale),
                "upload_bytes": plan.upload_bytes,
            },
            # Every key, so that a dry run can be reviewed in full (and diffed) before it is run.
            "planned_keys": {
                "upload": [obj.key for obj in plan.uploads],
                "delete": [obj.key for obj in plan.deletes],
            },
            "refused": self.refused,
            "uploaded": len(self.uploaded),
            "skipped": len(plan.skips),
            "deleted": len(self.deleted),
            "failed": len(self.failures),
            "failures": [{"key": f.key, "error": f.error} for f in self.failures],
            "bytes": self.bytes_uploaded,
            "seconds": round(self.seconds, 3),
            "requests": dict(sorted(self.requests.items())),
            "ingestion_job": self.ingestion_job,
        }


@dataclass(frozen=True)
class PublishSettings:
    """How a run publishes: the delete guard, ``dry_run`` (the one place a run reads it), the S3 client."""

    delete: bool = default("delete")
    max_delete: DeleteLimit = field(default_factory=lambda: parse_max_delete(DEFAULT_MAX_DELETE))
    force: bool = default("force")
    dry_run: bool = default("dry_run")
    threads: int = DEFAULT_THREADS
    retry_mode: aws.RetryMode = aws.DEFAULT_RETRY_MODE
    max_attempts: int = aws.DEFAULT_MAX_ATTEMPTS

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> PublishSettings:
        """The settings catalogue's values (upload's, sync's or pull's: a setting the command does not have
        takes its default); PublishError for a bad --max-delete or --retry-mode."""

        def value(name: str) -> Any:
            return values[name] if name in values else default(name)

        return cls(
            delete=value("delete"),
            max_delete=parse_max_delete(value("max_delete")),
            force=value("force"),
            dry_run=value("dry_run"),
            threads=value("threads"),
            retry_mode=aws.parse_retry_mode(value("retry_mode")),
            max_attempts=value("max_attempts"),
        )


def publish(
    local_objects: list[LocalObject],
    target: Target,
    *,
    settings: PublishSettings = PublishSettings(),
    local_failures: Iterable[Failure] = (),
    on_plan: Callable[[Plan], None] | None = None,
    on_result: Callable[[OperationResult], None] | None = None,
    withdrawn_ids: Collection[int] = (),
) -> PublishReport:
    """Plan, check the delete guard, then (unless dry-run or refused) apply. Never raises per object.
    The documents of ``withdrawn_ids`` (tickets pull found private now) are deleted even without
    ``settings.delete``."""
    started = time.monotonic()
    client = target.client if isinstance(target, S3Target) else None
    with aws.counting_requests(client) as requests:
        try:
            plan = build_plan(
                local_objects,
                target,
                delete=settings.delete,
                threads=settings.threads,
                local_failures=local_failures,
                withdrawn_ids=withdrawn_ids,
            )
            listed = True
        except (OSError, BotoCoreError, ClientError) as error:
            setup = aws.as_setup_error(error)
            if setup is not None:  # no bucket, no credentials, no server: nothing can be done at all
                raise setup from None
            # Without the listing nothing can be compared: report it and change nothing.
            failure = Failure(target.describe(), f"cannot list the destination: {describe_error(error)}")
            plan, listed = Plan(failures=[failure]), False
        report = PublishReport(target.describe(), plan, settings.dry_run)
        report.refused = delete_refusal(plan, settings.max_delete, settings.force, _layout_change(plan))
        if on_plan is not None:
            on_plan(plan)
        if listed and not settings.dry_run and report.refused is None:
            report.results = apply_plan(plan, target, threads=settings.threads, on_result=on_result)
            report.applied = True
    report.requests = dict(requests)
    report.seconds = time.monotonic() - started
    return report


def _layout_change(plan: Plan) -> str:
    """What a refusal adds when the deletes replace the other layout's objects (see delete_refusal)."""
    local = layouts_of(obj.key for obj in [*plan.uploads, *plan.skips])
    replaced = layouts_of(obj.key for obj in plan.superseded)
    if len(local) != 1 or not replaced - local:
        return ""
    (publishing,) = local
    other = DOCUMENTS if publishing == CHUNKS else CHUNKS
    return f"; this upload publishes {publishing} where the destination has {other}, which they replace"


def check_one_layout(source: Path, keys: Iterable[str]) -> None:
    """A folder holding both documents and chunks would have every ticket in it indexed twice: refused
    (exit 2) before anything is listed or written, as `transform --out` and `chunk --out` refuse to write one."""
    examples: dict[str, str] = {}
    for key in sorted(keys):
        found = ticket_key(key)
        if found is not None:
            examples.setdefault(found.layout, key)
    if len(examples) > 1:
        raise PublishError(
            f"{source} holds both documents (e.g. {examples[DOCUMENTS]}) and chunks (e.g. {examples[CHUNKS]}): "
            "publish one layout per destination, a transform output folder or a chunk folder (changing the "
            "layout of a destination: docs/sync.md)"
        )


def open_target(
    destination: S3Location | Path,
    settings: aws.AwsSettings,
    publish_settings: PublishSettings,
    mode: int | None = None,
) -> tuple[Target, Any]:
    """The Target for a parsed destination (a local folder writing files of ``mode``, files.file_mode), and the
    boto3 session (also used for Bedrock)."""
    session = aws.make_session(settings)
    if isinstance(destination, Path):
        check_writable_folder(destination, "destination")
        return LocalDirTarget(destination, mode), session
    client = aws.make_s3_client(
        session,
        endpoint_url=settings.endpoint_url,
        threads=publish_settings.threads,
        retry_mode=publish_settings.retry_mode,
        max_attempts=publish_settings.max_attempts,
    )
    return S3Target(client, destination), session


@dataclass(frozen=True)
class Destination:
    """Where `upload` and `sync` publish, opened (and checked) before any work is done."""

    target: Target
    session: Any  # the boto3 session, also used for Bedrock
    ingestion: tuple[str, str] | None  # (knowledge base id, data source id) of --start-ingestion


def open_destination(
    source: Path, dest: str, settings: PublishSettings, aws_settings: aws.AwsSettings, start_ingestion: str | None
) -> Destination:
    """The destination of ``source`` and its --start-ingestion, checked before any work (exit 2)."""
    destination = aws.parse_location(dest)
    ingestion = aws.parse_ingestion_target(start_ingestion) if start_ingestion else None
    if isinstance(destination, Path):
        check_apart(destination, source, "destination", "source folder")  # it would publish or delete itself
    target, session = open_target(destination, aws_settings, settings)
    return Destination(target, session, ingestion)


def upload(
    source: Path,
    destination: Destination,
    settings: PublishSettings,
    *,
    on_plan: Callable[[Plan], None] | None = None,
    on_result: Callable[[OperationResult], None] | None = None,
    withdrawn_ids: Collection[int] = (),
) -> PublishReport:
    """`anchorkit upload` (and the last stage of the ordinary sync): scan ``source``, publish it by content,
    then start the ingestion asked for once everything succeeded. The documents of ``withdrawn_ids``
    (tickets the sync's pull found private now) are deleted even without ``settings.delete``."""
    local_objects, local_failures = scan_folder(source)
    check_one_layout(source, (local.key for local in local_objects))
    target = destination.target
    if isinstance(target, LocalDirTarget) and private_content_evidence(source) is not None:
        target = LocalDirTarget(target.root, PRIVATE_FILE_MODE)
    report = publish(
        local_objects,
        target,
        settings=settings,
        local_failures=local_failures,
        on_plan=on_plan,
        on_result=on_result,
        withdrawn_ids=withdrawn_ids,
    )
    if destination.ingestion is not None:
        session = destination.session
        ingest_after(report, lambda: session.client("bedrock-agent"), *destination.ingestion)
    return report


def ingest_after(
    report: PublishReport, bedrock_agent_client: Callable[[], Any], knowledge_base_id: str, data_source_id: str
) -> None:
    """Start the ingestion once the upload fully succeeded; a failure to start is reported, not raised.

    It starts even when nothing changed: a previous run may have uploaded and then died before
    starting it, and an ingestion with nothing new is cheap (the Knowledge Base sync is incremental).
    """
    if report.dry_run or not report.ok:
        return
    report.ingestion_job, report.ingestion_error = aws.try_start_ingestion(
        bedrock_agent_client, knowledge_base_id, data_source_id
    )
