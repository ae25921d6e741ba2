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
``chunk_tickets`` reads, chunks (and encodes, for a writer) them in worker processes (``--jobs``), in
the same order with the same results as one process.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from anchorkit import parallel
from anchorkit.chunk.core import DEFAULT_CHUNK_TOKENS, ChunkedTicket, ChunkError, chunk_document, document_outline
from anchorkit.chunk.private_notes import without_journal_notes, without_journals
from anchorkit.chunk.writers import spool_batch
from anchorkit.errors import UsageError
from anchorkit.files import check_existing_folder
from anchorkit.render.document import Lookups, Outline, RenderOptions
from anchorkit.render.private_marks import PrivateMarks, read_private_marks
from anchorkit.render.sidecar import SIDECAR_SUFFIX, read_sidecar
from anchorkit.render.spacing import APPROX_MARGIN_PERCENT
from anchorkit.render.transform import (
    PRIVATE,
    RenderedTicket,
    TicketFailure,
    TransformOptions,
    issue_url,
    render_ticket,
    resolve_redmine_url,
    resolve_render_options,
)
from anchorkit.settings import default
from anchorkit.source.snapshot import iter_issue_paths, load_lookups, looks_like_snapshot
from anchorkit.tokens import Tokenizer, choose_tokenizer

_DOCUMENT_NAME = re.compile(r"^(\d+)\.md$", re.ASCII)


@dataclass
class TicketDocument:
    source: str  # the file it was read or rendered from
    ticket_id: int
    document: str | Outline  # a folder's anchored document, or the outline of a snapshot's ticket
    metadata: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


Item = TicketDocument | TicketFailure | str  # str: PRIVATE, a private issue left out on purpose
Progress = Callable[[int, int], None]  # (tickets done, tickets in the source), after each ticket
Ticket = TypeVar("Ticket")
Result = TypeVar("Result")


def iter_source(
    source: Path, options: TransformOptions | None = None, progress: Progress | None = None
) -> Iterator[Item]:
    """The tickets of a snapshot or of a transform output folder, in ticket-id order.

    ``options``: how a snapshot's tickets are rendered (its chunk tokens and sidecar settings are
    set here); ``options.redmine_url``, when given, is the Redmine the chunks link to (else the one
    the snapshot or each document's sidecar recorded). Raises :class:`UsageError` for a source that
    is neither.
    """
    tickets, read = _reader(source, options or TransformOptions())
    return map(read, _counted(tickets, progress))


def _reader(source: Path, options: TransformOptions) -> tuple[list[Any], Callable[[Any], Item]]:
    """The source's tickets (where each is read from), and how one is read."""
    check_existing_folder(source)
    if looks_like_snapshot(source):
        return list(iter_issue_paths(source)), _snapshot_reader(source, options)
    documents = _document_paths(source) if source.is_dir() else []
    if not documents:  # a wrong or empty folder: chunking "no ticket" would remove every chunk written before
        raise UsageError(f"{source}: neither a snapshot nor a folder of documents (no issues/ folder, no <id>.md)")
    # Private content was written by transform --include-private: it is chunked only if asked for here too.
    marks = None if options.render.include_private else read_private_marks(source)
    return documents, functools.partial(_read_document, redmine_url=options.redmine_url, private_marks=marks)


def _counted(tickets: Sequence[Ticket], progress: Progress | None) -> Iterator[Ticket]:
    """The tickets, each reported done when the next is asked for (the last at the end)."""
    for done, ticket in enumerate(tickets):
        if progress is not None and done:
            progress(done, len(tickets))
        yield ticket
    if progress is not None:
        progress(len(tickets), len(tickets))


def _snapshot_reader(snapshot_dir: Path, options: TransformOptions) -> Callable[[Path], Item]:
    """How each issue file of the snapshot is rendered for the chunker (the snapshot's settings read once)."""
    render = dataclasses.replace(options.render, chunk_tokens=0)
    options = dataclasses.replace(options, render=render, sidecars=True, sidecar_schema="simple")
    options = resolve_redmine_url(snapshot_dir, options)
    render_options = resolve_render_options(snapshot_dir, options)
    lookups = load_lookups(snapshot_dir)
    return functools.partial(_rendered, lookups=lookups, render_options=render_options, options=options)


def _rendered(path: Path, lookups: Lookups, render_options: RenderOptions, options: TransformOptions) -> Item:
    result = render_ticket(path, lookups, render_options, options, outline=True)
    if not isinstance(result, RenderedTicket):
        return result
    assert result.sidecar is not None and result.outline is not None  # sidecars=True, outline=True
    metadata: dict[str, Any] = read_sidecar(result.sidecar)
    if result.notes:
        metadata["note_numbers"] = result.notes
    return TicketDocument(str(path), result.ticket_id, result.outline, metadata, result.warnings)


def _read_document(document: tuple[int, Path], redmine_url: str | None, private_marks: PrivateMarks | None) -> Item:
    """One document of a transform folder with its sidecar's metadata; when ``private_marks`` is given (no
    --include-private) and the document holds private content (its sidecar or the folder's marks say so),
    the document without the journals that hold private notes if the marks say which, else PRIVATE."""
    ticket_id, path = document
    try:
        markdown = path.read_text(encoding="utf-8")
        sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
        metadata = read_sidecar(sidecar.read_bytes()) if sidecar.is_file() else {}
    except UnicodeDecodeError:
        return TicketFailure(str(path), ticket_id, f"{path}: not UTF-8 text")
    except ValueError as error:
        return TicketFailure(str(sidecar), ticket_id, f"{sidecar}: {error}")
    except OSError as error:
        return TicketFailure(str(path), ticket_id, f"{error.filename or path}: cannot read ({error.strerror})")
    content: str | Outline = markdown
    if private_marks is not None and (ticket_id in private_marks or metadata.get("private") is True):
        private = private_marks.of(ticket_id)
        if private is None or private.journals is None:  # (a private issue, or a document marked by its sidecar alone)
            return PRIVATE
        try:
            outline = document_outline(markdown)
        except ChunkError as error:
            return TicketFailure(str(path), ticket_id, f"{path}: {error}")
        if sum(level == "###" for _, level, _ in outline.headings) != private.journal_count:
            return PRIVATE  # not the document the marks were written for: which journals are private is unknown
        content = without_journals(outline, private.journals)
        metadata = without_journal_notes(metadata, private.journals)
    url = issue_url(redmine_url, ticket_id) or metadata.get("url")
    return TicketDocument(
        str(path), ticket_id, content, {"ticket_id": ticket_id, **metadata, **({"url": url} if url else {})}
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


def counted_limits(exact: bool, chunk_tokens: int, overlap_tokens: int) -> tuple[int, int]:
    """The chunk length and overlap the chunker counts to: as given for an exact tokenizer; for an estimate
    (``approx``) with its error left as room, as transform's anchors leave it (spacing.APPROX_MARGIN_PERCENT)."""
    if exact:
        return chunk_tokens, overlap_tokens
    return chunk_tokens * 100 // APPROX_MARGIN_PERCENT, overlap_tokens * 100 // APPROX_MARGIN_PERCENT


def chunk_items(
    items: Iterable[Item], tokenizer: Tokenizer, chunk_tokens: int = DEFAULT_CHUNK_TOKENS, overlap_tokens: int = 0
) -> Iterator[ChunkedTicket | TicketFailure | str]:
    """Each ticket's chunks (or its failure, or PRIVATE), in the order of ``items`` (``counted_limits``)."""
    chunk_tokens, overlap_tokens = counted_limits(tokenizer.exact, chunk_tokens, overlap_tokens)
    for item in items:
        if not isinstance(item, TicketDocument):
            yield item
            continue
        try:
            chunked = chunk_document(item.document, item.metadata, tokenizer, chunk_tokens, overlap_tokens)
        except ChunkError as error:
            yield TicketFailure(item.source, item.ticket_id, f"{item.source}: {error}")
            continue
        chunked.warnings[:0] = item.warnings
        yield chunked


def chunk_tickets(
    source: Path,
    options: TransformOptions,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = 0,
    jobs: int = default("jobs"),
    progress: Progress | None = None,
    encode: Callable[[ChunkedTicket], Any] | None = None,
    spool: Path | None = None,
) -> Generator[Any, None, None]:
    """``chunk_items(iter_source(source, options))`` with the tickets read and chunked in ``jobs`` processes
    (0: one per core beyond a batch of tickets; parallel.py), counted with ``options.tokenizer``, each
    ``ChunkedTicket`` replaced by ``encode(ticket)`` where it was chunked if ``encode`` is given (a writer's
    encoding: writers.py). The results come in ticket-id order and do not depend on ``jobs``. ``spool``: a
    folder where worker processes write each batch's encoded bytes (JSON Lines), sending the parent where
    they are (``writers.Spooled``) instead of the bytes themselves.

    Raises :class:`UsageError` for a source that is neither a snapshot nor a folder of documents.
    """
    tickets, read = _reader(source, options)
    settings = (read, options.tokenizer, options.tiktoken_file, chunk_tokens, overlap_tokens, encode, spool)
    results = parallel.map_batches(_chunk_batch, tickets, jobs, setup=_Batches, args=settings)
    return _reported(results, len(tickets), progress)


def _reported(results: Iterable[Result], total: int, progress: Progress | None) -> Generator[Result, None, None]:
    for done, result in enumerate(results, start=1):
        if progress is not None:
            progress(done, total)
        yield result


@dataclass(frozen=True)
class _Batches:
    """What a process needs to chunk batches of tickets (set up once in each: parallel.map_batches)."""

    read: Callable[[Any], Item]
    tokenizer: str
    tiktoken_file: Path | None
    chunk_tokens: int
    overlap_tokens: int
    encode: Callable[[ChunkedTicket], Any] | None
    spool: Path | None


def _chunk_batch(settings: _Batches, tickets: list[Any]) -> list[Any]:
    tokenizer = choose_tokenizer(settings.tokenizer, settings.tiktoken_file)  # (loaded once a process)
    results = chunk_items(map(settings.read, tickets), tokenizer, settings.chunk_tokens, settings.overlap_tokens)
    encode = settings.encode
    if encode is None:
        return list(results)
    encoded = [encode(result) if isinstance(result, ChunkedTicket) else result for result in results]
    if settings.spool is not None and parallel.in_worker():
        return spool_batch(encoded, settings.spool)
    return encoded
