"""What the chunker reads: a snapshot, or a folder that ``anchorkit transform`` wrote. One ticket at a time.

- A snapshot: each ticket is rendered as transform renders it, without spacing anchors (they
  would only be stripped again), and its metadata are what its sidecar would hold, ``url`` (from
  the snapshot's ``redmine_url``) and ``note_numbers`` (the journals' note numbers, see
  anchorkit/source/notes.py) included.
- A transform output folder: ``<id>.md`` (and ``<project>/<id>.md``) with the ``.metadata.json``
  sidecar beside it when there is one. The note numbers come from the sidecar's ``note_numbers`` (written
  by ``transform --sidecars``): carried there rather than in the document, they cost the documents
  no token and reach a Bedrock Lambda as file metadata too. Without a sidecar the links go to the
  issue (``redmine_url``), not to notes.

A ticket that cannot be read or chunked is a failure naming its file; the others go on.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from anchorkit.chunk.core import DEFAULT_CHUNK_TOKENS, ChunkedTicket, ChunkError, chunk_document
from anchorkit.errors import UsageError
from anchorkit.render.sidecar import SIDECAR_SUFFIX, read_sidecar
from anchorkit.render.transform import (
    RenderedTicket,
    TicketFailure,
    TransformOptions,
    issue_url,
    render_ticket,
    resolve_redmine_url,
    resolve_render_options,
)
from anchorkit.source.snapshot import iter_issue_paths, load_lookups, looks_like_snapshot
from anchorkit.tokens import Tokenizer

_DOCUMENT_NAME = re.compile(r"^(\d+)\.md$")


@dataclass
class TicketDocument:
    source: str  # the file it was read or rendered from
    ticket_id: int
    markdown: str
    metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


Item = TicketDocument | TicketFailure | str  # str: PRIVATE, a private issue left out on purpose
Progress = Callable[[int, int], None]  # (tickets done, tickets in the source), after each ticket
Ticket = TypeVar("Ticket")


def iter_source(
    source: Path, options: TransformOptions | None = None, progress: Progress | None = None
) -> Iterator[Item]:
    """The tickets of a snapshot or of a transform output folder, in ticket-id order.

    ``options``: how a snapshot's tickets are rendered (its chunk tokens and sidecar settings are
    set here); ``options.redmine_url``, when given, is the Redmine the chunks link to (else the one
    the snapshot or each document's sidecar recorded).
    """
    options = options or TransformOptions()
    if looks_like_snapshot(source):
        return iter_snapshot(source, options, progress)
    if source.is_dir():
        return iter_folder(source, options.redmine_url, progress)
    raise UsageError(f"{source}: neither a snapshot nor a folder of documents")


def _counted(tickets: Sequence[Ticket], progress: Progress | None) -> Iterator[Ticket]:
    """The tickets, each reported done when the next is asked for (the last at the end)."""
    for done, ticket in enumerate(tickets):
        if progress is not None and done:
            progress(done, len(tickets))
        yield ticket
    if progress is not None:
        progress(len(tickets), len(tickets))


def iter_snapshot(snapshot_dir: Path, options: TransformOptions, progress: Progress | None = None) -> Iterator[Item]:
    render = dataclasses.replace(options.render, chunk_tokens=0)
    options = dataclasses.replace(options, render=render, sidecars=True, sidecar_schema="simple")
    options = resolve_redmine_url(snapshot_dir, options)
    render_options = resolve_render_options(snapshot_dir, options)
    lookups = load_lookups(snapshot_dir)
    for path in _counted(list(iter_issue_paths(snapshot_dir)), progress):
        result = render_ticket(path, lookups, render_options, options)
        if isinstance(result, RenderedTicket):
            assert result.sidecar is not None  # sidecars=True
            yield TicketDocument(
                str(path), result.ticket_id, result.markdown, read_sidecar(result.sidecar), result.warnings
            )
        else:
            yield result


def iter_folder(folder: Path, redmine_url: str | None = None, progress: Progress | None = None) -> Iterator[Item]:
    for ticket_id, path in _counted(_document_paths(folder), progress):
        try:
            markdown = path.read_text(encoding="utf-8")
            sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
            metadata = read_sidecar(sidecar.read_bytes()) if sidecar.is_file() else {}
        except UnicodeDecodeError:
            yield TicketFailure(str(path), ticket_id, f"{path}: not UTF-8 text")
            continue
        except ValueError as error:
            yield TicketFailure(str(sidecar), ticket_id, f"{sidecar}: {error}")
            continue
        except OSError as error:
            yield TicketFailure(str(path), ticket_id, f"{error.filename or path}: cannot read ({error.strerror})")
            continue
        url = issue_url(redmine_url, ticket_id) or metadata.get("url")
        yield TicketDocument(
            str(path), ticket_id, markdown, {"ticket_id": ticket_id, **metadata, **({"url": url} if url else {})}
        )


def _document_paths(folder: Path) -> list[tuple[int, Path]]:
    """``<id>.md`` files of the folder and of its project folders (transform's two layouts), by id."""
    found: list[tuple[int, Path]] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                with os.scandir(entry.path) as inner:
                    found.extend(_documents(inner))
            else:
                found.extend(_documents([entry]))
    return sorted(found)


def _documents(entries: Iterable[os.DirEntry[str]]) -> Iterator[tuple[int, Path]]:
    for entry in entries:
        name = _DOCUMENT_NAME.match(entry.name)
        if name and entry.is_file():
            yield int(name[1]), Path(entry.path)


def chunk_items(
    items: Iterable[Item], tokenizer: Tokenizer, chunk_tokens: int = DEFAULT_CHUNK_TOKENS, overlap_tokens: int = 0
) -> Iterator[ChunkedTicket | TicketFailure | str]:
    """Each ticket's chunks (or its failure, or PRIVATE), in the order of ``items``."""
    for item in items:
        if not isinstance(item, TicketDocument):
            yield item
            continue
        try:
            chunked = chunk_document(item.markdown, item.metadata, tokenizer, chunk_tokens, overlap_tokens)
        except ChunkError as error:
            yield TicketFailure(item.source, item.ticket_id, f"{item.source}: {error}")
            continue
        chunked.warnings[:0] = item.warnings
        yield chunked
