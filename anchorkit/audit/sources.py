"""What the audit reads: an output folder of documents and sidecars, or a snapshot rendered on the fly (the I/O
edge)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from anchorkit.files import NotRegularFile, open_regular_file, read_regular_file, shown
from anchorkit.render.sidecar import SIDECAR_SUFFIX
from anchorkit.render.transform import RenderedTicket, TransformOptions, iter_documents
from anchorkit.source.snapshot import iter_issue_paths

MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # Bedrock Knowledge Base's limit per source file


_TICKET_DOCUMENT = re.compile(r"^(\d+)\.md$", re.ASCII)
# transform writes line feeds only (it converts a ticket's CR LF): a document with a carriage return was converted
# after it (a checkout with core.autocrlf, an editor). Its anchor blocks, "\r"-blank lines between them, are not the
# ones anchors.strip_anchors takes out: measured, it would show almost no overhead and coverage without anchors as
# high as with them.
CARRIAGE_RETURNS = (
    "carriage returns (CR LF line breaks), which transform never writes: its anchors cannot be told from its text, "
    "so it is not measured (convert its line breaks back to LF)"
)
# Why nothing under a project or ticket folder is measured: what upload does not publish either.
LINKED_FOLDER = (
    "a symbolic link to a folder (not followed: upload publishes nothing in it, and nothing in it is measured)"
)
NOT_UTF8_FOLDER = (
    "a folder name that is not UTF-8 (a name in another encoding: no S3 key can hold it, so upload publishes "
    "nothing in it, and nothing in it is measured)"
)


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


@dataclass(frozen=True)
class FolderListing:
    """The files a folder's audit reads (an output folder's ``<id>.md`` documents, flat or one project folder
    deep; a chunk folder's chunk files) by relative path, in path order, and its folders that are not read,
    each with the reason (``ops/``, LINKED_FOLDER)."""

    documents: list[tuple[str, Path]]
    unread_folders: list[tuple[str, str]]


def list_output_folder(folder: Path) -> FolderListing:
    """What the audit of an output folder reads. A symbolic link is never followed, as upload never
    publishes what one points to: a project folder that is one is listed (when it holds documents) to be
    reported, as is one whose name is not UTF-8, and a document that is one fails when it is opened; a
    named pipe is no document either."""
    return list_folder(folder, _TICKET_DOCUMENT)


def list_folder(
    folder: Path, name: re.Pattern[str], *, top_level: bool = True, subfolder: re.Pattern[str] | None = None
) -> FolderListing:
    """The files of ``folder`` named as ``name`` matches, at its top (``top_level``) and one folder deep (in the
    folders ``subfolder`` matches the name of, if given), and the folders not read (``unread_folder``)."""
    documents: list[tuple[str, Path]] = []
    unread: list[tuple[str, str]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if subfolder is not None and not subfolder.match(entry.name):
                continue
            if (reason := unread_folder(entry, name)) is not None:
                unread.append((f"{shown(entry.name)}/", reason))
            elif entry.is_dir(follow_symlinks=False):
                with os.scandir(entry.path) as inner:
                    documents += ((f"{entry.name}/{item.name}", Path(item.path)) for item in files_named(inner, name))
            elif top_level and name.match(entry.name):
                documents.append((entry.name, Path(entry.path)))
    return FolderListing(sorted(documents), sorted(unread))


def files_named(entries: Iterable[os.DirEntry[str]], name: re.Pattern[str]) -> Iterator[os.DirEntry[str]]:
    """The entries named as ``name`` matches that are not folders (a symbolic link or a named pipe among them
    fails by name when it is opened)."""
    return (entry for entry in entries if name.match(entry.name) and not entry.is_dir(follow_symlinks=False))


def unread_folder(entry: os.DirEntry[str], name: re.Pattern[str]) -> str | None:
    """Why the audit does not read ``entry``, a folder with files named as ``name`` matches (what the audit
    would have read): a symbolic link, or a name that is not UTF-8; None for any other entry."""
    if entry.is_symlink():
        reason = LINKED_FOLDER
    elif shown(entry.name) != entry.name:  # the name's bytes, escaped: it is not UTF-8
        reason = NOT_UTF8_FOLDER
    else:
        return None
    try:
        if not entry.is_dir():
            return None
        with os.scandir(entry.path) as inner:
            return reason if any(True for _ in files_named(inner, name)) else None
    except OSError:  # a folder it cannot list holds nothing it could read
        return None


def document_paths(folder: Path) -> list[tuple[str, Path]]:
    """An output folder's ``<id>.md`` documents (flat or one project folder deep) by relative path, in path order."""
    return list_output_folder(folder).documents


def count_documents(path: Path) -> int:
    """How many items the audit of ``path`` will see, before reading any (a snapshot: its issue files, private
    issues included, so at most that many)."""
    if is_snapshot(path):
        return sum(1 for _ in iter_issue_paths(path))
    listing = list_output_folder(path)
    return len(listing.documents) + len(listing.unread_folders)


def iter_output_folder(folder: Path) -> Iterator[SourceItem]:
    """``<id>.md`` documents (flat or one project folder deep) and their sidecars, in path order; first, the
    project folders not read, each an error naming it."""
    listing = list_output_folder(folder)
    for relpath, reason in listing.unread_folders:
        yield UnreadableDocument(relpath, f"{relpath}: {reason}")
    first_of: dict[int, str] = {}
    for relpath, path in listing.documents:
        ticket_id = int(path.name[: -len(".md")])
        if ticket_id in first_of:  # transform writes a ticket once: a copy would count as a ticket of its own
            yield UnreadableDocument(
                relpath,
                f"{relpath}: ticket #{ticket_id} again, after {first_of[ticket_id]} (transform writes each ticket "
                "once: two output folders, or both layouts, copied into one?): measured once, but a knowledge base "
                "fed this folder holds the ticket twice",
            )
            continue
        first_of[ticket_id] = relpath
        try:
            with open_regular_file(path) as file:  # its size from the open file: one path lookup, not two
                size = os.fstat(file.fileno()).st_size
                data = file.read() if size <= MAX_DOCUMENT_BYTES else None
        except OSError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: {read_failure(exc)}")
            continue
        if data is None:
            yield OversizedDocument(ticket_id, relpath, size)
            continue
        try:
            markdown = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield UnreadableDocument(relpath, f"{relpath}: {not_utf8(exc)}")
            continue
        if "\r" in markdown:
            yield UnreadableDocument(relpath, f"{relpath}: {CARRIAGE_RETURNS}")
            continue
        try:
            sidecar = read_if_there(f"{path}{SIDECAR_SUFFIX}")
        except OSError as exc:
            yield UnreadableDocument(relpath, f"{relpath}{SIDECAR_SUFFIX}: {read_failure(exc)}")
            continue
        yield SourceDocument(ticket_id, relpath, markdown, sidecar)


def read_failure(error: OSError) -> str:
    """Why a file could not be read, as an error message says it after the file's name."""
    if isinstance(error, NotRegularFile):
        return str(error)  # "a symbolic link (not followed)", "not a regular file"
    return f"cannot read ({error.strerror or error})"


def not_utf8(error: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 ({error.reason} at byte {error.start})"


def read_if_there(path: str) -> bytes | None:
    """The regular file's bytes; None when there is no such file (one system call fewer than asking first).
    The path is a string: building a Path for it takes half as long as reading the file."""
    try:
        return read_regular_file(path)
    except FileNotFoundError:
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
