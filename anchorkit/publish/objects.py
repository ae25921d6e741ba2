"""What is published and where: the objects on the local side (a folder scanned, or bytes rendered in
memory) and the destinations they go to (an S3 prefix, a local folder), with one interface.

:mod:`anchorkit.publish.upload` plans and applies over these; `sync --state` writes through a destination
without listing it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from anchorkit.files import interrupted_write, read_regular_file, shown, write_atomic
from anchorkit.publish import aws
from anchorkit.publish.aws import MISSING_CODES, InvalidKey, S3Location, error_code, validate_key
from anchorkit.render.sidecar import SIDECAR_SUFFIX

# Stored as the user metadata header `x-amz-meta-anchorkit-sha256`.
CHECKSUM_METADATA_KEY = "anchorkit-sha256"

CONTENT_TYPES = {
    SIDECAR_SUFFIX: "application/json",
    ".md": "text/markdown; charset=utf-8",
}
FALLBACK_CONTENT_TYPE = "application/octet-stream"


# --------------------------------------------------------------------------------------------------
# Content types


def content_type_for(key: str) -> str:
    for suffix, content_type in CONTENT_TYPES.items():
        if key.endswith(suffix):
            return content_type
    return FALLBACK_CONTENT_TYPE


# --------------------------------------------------------------------------------------------------
# Local side


@dataclass(frozen=True)
class Checksums:
    size: int
    md5: str  # hex
    sha256: str  # hex

    @classmethod
    def of(cls, data: bytes) -> Checksums:
        return cls(len(data), hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class LocalObject:
    """One object to publish: its key relative to the destination and where its bytes come from."""

    key: str
    checksums: Checksums
    source: Path | bytes

    def read(self) -> bytes:
        return self.source if isinstance(self.source, bytes) else read_regular_file(self.source)


@dataclass(frozen=True)
class Failure:
    key: str
    error: str


def scan_folder(folder: Path) -> tuple[list[LocalObject], list[Failure]]:
    """Every visible file under `folder` as a LocalObject (key = relative path with `/`).

    Hidden files and folders (leading `.`) are skipped: they are editor droppings and the temporary
    files of interrupted atomic writes, never documents. Unreadable files, invalid names (one that is not
    UTF-8 too: no S3 key can hold it) and symbolic links (never followed: one to /etc/passwd would publish
    it) are returned as failures, and their keys are protected from deletion by the plan. A symbolic link to
    a folder fails under its key with a trailing ``/`` (``ops/``), which protects every key under it: its
    files were not read, so they must not look deleted.
    """
    objects: list[LocalObject] = []
    failures: list[Failure] = []
    for directory, subdirs, files in os.walk(folder):
        visible = sorted(name for name in subdirs if not name.startswith("."))
        # os.walk lists a symbolic link to a folder among the folders and does not enter it.
        subdirs[:] = [name for name in visible if not (Path(directory) / name).is_symlink()]
        for name in sorted(set(visible) - set(subdirs)):
            path = Path(directory) / name
            key = f"{shown(path.relative_to(folder).as_posix())}/"
            reason = "a symbolic link to a folder (not followed: nothing in it is published, nor deleted as stale)"
            failures.append(Failure(key, f"{shown(path)}: {reason}"))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(directory) / name
            key = path.relative_to(folder).as_posix()
            try:
                validate_key(key)
                data = read_regular_file(path)
            except (InvalidKey, OSError) as error:
                failures.append(Failure(shown(key), f"{shown(path)}: {error}"))
                continue
            objects.append(LocalObject(key, Checksums.of(data), path))
    return objects, failures


def objects_from_bytes(items: Mapping[str, bytes]) -> list[LocalObject]:
    """LocalObjects for content held in memory (e.g. rendered by `sync` without an output folder)."""
    objects = []
    for key, data in sorted(items.items()):
        validate_key(key)
        objects.append(LocalObject(key, Checksums.of(data), data))
    return objects


# --------------------------------------------------------------------------------------------------
# Destinations


@dataclass(frozen=True)
class RemoteObject:
    key: str  # relative to the destination prefix
    size: int
    etag: str  # without quotes; for a local directory the MD5 of the file


def checksum_parameters(checksums: Checksums) -> dict[str, Any]:
    """The PutObject parameters that let an unchanged object be recognised without reading it: Content-MD5,
    which the server checks the bytes it received against (and which a plain ETag then is), and the SHA-256
    in the metadata, for when the ETag is not an MD5 (multipart, SSE-KMS)."""
    return {
        "ContentMD5": base64.b64encode(bytes.fromhex(checksums.md5)).decode("ascii"),
        "Metadata": {CHECKSUM_METADATA_KEY: checksums.sha256},
    }


class Target(Protocol):
    """A destination: S3 prefix or local directory. Keys are relative to the prefix/directory."""

    def describe(self) -> str: ...

    def address(self) -> str:
        """Where the objects are, named the same from any working folder (what a sync state records)."""
        ...

    def list_objects(self) -> Iterator[RemoteObject]: ...

    def stored_sha256(self, key: str) -> str | None: ...

    def put(self, key: str, data: bytes, checksums: Checksums) -> None: ...

    def delete(self, key: str) -> None: ...


class S3Target:
    """An S3 prefix. Every key is joined to the prefix here, so no operation can leave it."""

    def __init__(self, client: Any, location: S3Location) -> None:
        self.client = client
        self.location = location

    def describe(self) -> str:
        return str(self.location)

    def address(self) -> str:
        return str(self.location)

    def full_key(self, key: str) -> str:
        validate_key(key)
        return self.location.prefix + key

    def list_objects(self) -> Iterator[RemoteObject]:
        prefix = self.location.prefix
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.location.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                full_key: str = item["Key"]
                if not full_key.startswith(prefix) or full_key == prefix:
                    continue  # a folder marker for the prefix itself, or a server ignoring Prefix
                yield RemoteObject(full_key[len(prefix) :], item["Size"], item["ETag"].strip('"').lower())

    def stored_sha256(self, key: str) -> str | None:
        try:
            head = self.client.head_object(Bucket=self.location.bucket, Key=self.full_key(key))
        except ClientError as error:
            if error_code(error) in MISSING_CODES:
                return None
            raise
        value: str | None = head.get("Metadata", {}).get(CHECKSUM_METADATA_KEY)
        return value

    def put(self, key: str, data: bytes, checksums: Checksums) -> None:
        self.client.put_object(
            Bucket=self.location.bucket,
            Key=self.full_key(key),
            Body=data,
            ContentType=content_type_for(key),
            **checksum_parameters(checksums),
        )

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.location.bucket, Key=self.full_key(key))


class LocalDirTarget:
    """A local directory with the same semantics as an S3 prefix; writes are atomic (temp + rename), of files of
    ``mode`` (files.file_mode: their owner's alone for private content) in folders made for them."""

    def __init__(self, root: Path, mode: int | None = None) -> None:
        self.root = root
        self.mode = mode

    def describe(self) -> str:
        return str(self.root)

    def address(self) -> str:
        # Absolute, symbolic links resolved: `docs` run from two folders is two places, and
        # `docs` and `/srv/docs` from /srv one.
        return str(self.root.resolve())

    def path_of(self, key: str) -> Path:
        validate_key(key)
        path = self.root / key
        # A symlinked folder inside the destination must not lead writes or deletes outside it.
        if not path.parent.resolve().is_relative_to(self.root.resolve()):
            raise InvalidKey(f"key {key!r} leads outside {self.root} through a symbolic link")
        return path

    def remove_interrupted_writes(self) -> list[Path]:
        """Remove the temporary files of writes a killed run left (``files.interrupted_write``: anchorkit's
        own names, never any other hidden file); listing skips hidden files, so nothing else ever would."""
        removed = []
        for directory, subdirs, files in os.walk(self.root):
            subdirs[:] = [name for name in subdirs if not name.startswith(".")]
            for name in files:
                path = Path(directory) / name
                if interrupted_write(path):
                    with contextlib.suppress(OSError):  # tidying: a file that will not go is no failure
                        path.unlink()
                        removed.append(path)
        return removed

    def list_objects(self) -> Iterator[RemoteObject]:
        if not self.root.exists():
            return
        objects, _unreadable = scan_folder(self.root)
        for obj in objects:
            yield RemoteObject(obj.key, obj.checksums.size, obj.checksums.md5)

    def stored_sha256(self, key: str) -> str | None:
        try:
            return hashlib.sha256(self.path_of(key).read_bytes()).hexdigest()
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes, checksums: Checksums) -> None:
        write_atomic(self.path_of(key), data, self.mode)

    def delete(self, key: str) -> None:
        path = self.path_of(key)
        path.unlink(missing_ok=True)
        # Remove folders emptied by the delete (by-project layout), never the root itself.
        parent = path.parent
        while parent != self.root and parent.is_relative_to(self.root):
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent


def check_destination(target: Target) -> None:
    """Before any work: an S3 destination that cannot be used (a missing bucket, credentials the server does
    not accept, no permission to list it) is an :class:`aws.S3SetupError` (exit 2). One ListObjectsV2 of at
    most one key, for the runs that do not start by listing the destination as `upload` does: a sync pulls
    and renders first, and `sync --state` never lists it (SeaweedFS even creates a missing bucket on the first
    PUT). A local folder is checked when it is opened (``open_target``)."""
    if not isinstance(target, S3Target):
        return
    try:
        target.client.list_objects_v2(Bucket=target.location.bucket, Prefix=target.location.prefix, MaxKeys=1)
    except (BotoCoreError, ClientError) as error:
        setup = aws.as_setup_error(error)
        if setup is not None:
            raise setup from None
        raise
