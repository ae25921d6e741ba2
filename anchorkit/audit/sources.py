"""What the audit reads: an output folder of documents and sidecars, or a snapshot rendered on the fly (the I/O
edge)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from anchorkit.render.sidecar import (
    SIDECAR_SUFFIX,
)
from anchorkit.render.transform import RenderedTicket, TransformOptions, iter_documents
from anchorkit.source.snapshot import iter_issue_paths

MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # Bedrock Knowledge Base's limit per source file


_TICKET_DOCUMENT = re.compile(r"^(\d+)\.md$")


@dataclass(frozen=True)
class SourceDocument:
    ticket_id: int
    relpath: str  # "12345.md" or "helpdesk/12345.md"
    markdown: str
    sidecar: bytes | None  # the .metadata.json beside it, if any
    # The same ticket rendered for other chunk lengths (snapshot input): (chunk_tokens, markdown).
    renditions: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class UnreadableDocument:
    path: str
    message: str


@dataclass(frozen=True)
class OversizedDocument:
    """A document Bedrock would refuse: it is listed, not analysed."""

    ticket_id: int
    relpath: str
    size_bytes: int


SourceItem = SourceDocument | UnreadableDocument | OversizedDocument


# ---------------------------------------------------------------------------------------------
# Reading the input (the I/O edge)


def document_paths(folder: Path) -> list[tuple[str, Path]]:
    """An output folder's ``<id>.md`` documents (flat or one project folder deep) by relative path, in path order."""
    # Relative paths spelled from the names: Path.relative_to takes longer than the glob itself.
    flat = [(path.name, path) for path in folder.glob("*.md")]
    nested = [(f"{path.parent.name}/{path.name}", path) for path in folder.glob("*/*.md")]
    return sorted(item for item in flat + nested if _TICKET_DOCUMENT.match(item[1].name))


def count_documents(path: Path) -> int:
    """How many items the audit of ``path`` will see, before reading any (a snapshot: its issue files, private
    issues included, so at most that many)."""
    return sum(1 for _ in iter_issue_paths(path)) if is_snapshot(path) else len(document_paths(path))


def iter_output_folder(folder: Path) -> Iterator[SourceItem]:
    """``<id>.md`` documents (flat or one project folder deep) and their sidecars, in path order."""
    for relpath, path in document_paths(folder):
        ticket_id = int(path.name[: -len(".md")])
        try:
            with open(path, "rb") as file:  # its size from the open file: one path lookup, not two
                size = os.fstat(file.fileno()).st_size
                data = file.read() if size <= MAX_DOCUMENT_BYTES else None
            if data is None:
                yield OversizedDocument(ticket_id, relpath, size)
                continue
            markdown = data.decode("utf-8")
            sidecar = _read_if_there(f"{path}{SIDECAR_SUFFIX}")
        except UnicodeDecodeError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: not valid UTF-8 ({exc.reason} at byte {exc.start})")
            continue
        except OSError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: cannot read ({exc.strerror or exc})")
            continue
        yield SourceDocument(ticket_id, relpath, markdown, sidecar)


def _read_if_there(path: str) -> bytes | None:
    """The file's bytes; None when there is no such file (one system call fewer than asking first).
    The path is a string: building a Path for it takes half as long as reading the file."""
    try:
        with open(path, "rb") as file:
            return file.read()
    except (FileNotFoundError, IsADirectoryError):
        return None


def iter_snapshot(
    snapshot_dir: Path, options: TransformOptions, other_lengths: Sequence[int] = ()
) -> Iterator[SourceItem]:
    """Transform a snapshot in memory, as ``transform`` would write it.

    With ``other_lengths``, each ticket is also rendered with those ``--chunk-tokens`` (for the
    chunk-length table); the renders walk the snapshot side by side, one result per ticket each.
    """
    others = [iter_documents(snapshot_dir, with_chunk_tokens(options, length)) for length in other_lengths]
    for result, *variants in zip(iter_documents(snapshot_dir, options), *others):
        if isinstance(result, RenderedTicket):
            size = len(result.markdown.encode("utf-8"))
            if size > MAX_DOCUMENT_BYTES:
                yield OversizedDocument(result.ticket_id, result.relpath, size)
            else:
                renditions = tuple(
                    (length, v.markdown) for length, v in zip(other_lengths, variants) if isinstance(v, RenderedTicket)
                )
                yield SourceDocument(result.ticket_id, result.relpath, result.markdown, result.sidecar, renditions)
        else:
            yield UnreadableDocument(result.source, result.message)


def with_chunk_tokens(options: TransformOptions, chunk_tokens: int) -> TransformOptions:
    return replace(options, render=replace(options.render, chunk_tokens=chunk_tokens))


def is_snapshot(path: Path) -> bool:
    return (path / "issues").is_dir()
