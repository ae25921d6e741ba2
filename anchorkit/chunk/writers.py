"""Chunks out: JSON Lines for LangChain, LlamaIndex or any vector store, or a folder for Bedrock.

- JSON Lines: one object per chunk, ``{"id", "ticket_id", "text", "metadata"}``.
- A folder, for a Bedrock data source with chunking strategy NONE: ``<id>/<id>-<n>.md`` (n from
  000) with its ``.md.metadata.json`` sidecar (the chunk's metadata in the simple or typed schema,
  within Bedrock's limits: render/sidecar.py). Names are stable and files are written atomically
  and only when their bytes change, so a second run over unchanged tickets writes nothing; the
  chunk files of a ticket that shrank or left the source are removed (a failed ticket's are kept).

Both take what ``sources.chunk_items`` yields and report tickets, chunks, files and failures. A ticket's
chunks are encoded by ``JsonLines`` or ``ChunkFiles``: by the writer, or already where the ticket was
chunked (``sources.chunk_tickets(encode=...)``), so that with ``--jobs`` the parent process only writes; a
worker leaves its JSON Lines in a file (``spool_batch``) for the parent to copy, rather than send them.

A ticket that fails keeps what the last run wrote for it, in either way out: its folder, or its lines of
the JSON Lines file being replaced (``PreviousLines``); so does a ticket whose folder cannot be written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from json.encoder import encode_basestring  # what json.dumps(..., ensure_ascii=False) writes a str with
from pathlib import Path
from typing import Any, BinaryIO, Generic, Protocol, TypeVar

from anchorkit.anchors import identified_ticket_ids
from anchorkit.chunk.core import Chunk, ChunkedTicket
from anchorkit.chunk_names import CHUNK_FILE
from anchorkit.files import AtomicStream, ComparingStream, sync_file, write_atomic, write_new_folder
from anchorkit.render.sidecar import SIDECAR_SUFFIX, check_schema, encode_sidecars
from anchorkit.render.transform import TicketFailure, TransformReport, written_for
from anchorkit.shared_json import OverlayEncoder
from anchorkit.untrusted import ascii_number

_CHUNK_NAME = re.compile(rf"^{CHUNK_FILE}(?:{re.escape(SIDECAR_SUFFIX)})?$")
_TEMP_NAME = re.compile(rf"^\.{CHUNK_FILE}(?:{re.escape(SIDECAR_SUFFIX)})?\..*\.tmp$")
_TEMP_FOLDER = re.compile(r"^\.(\d+)\.\d+\.tmp$", re.ASCII)  # files.write_new_folder's, of a ticket's folder


@dataclass
class ChunkReport(TransformReport):
    """transform's report (files created, changed, unchanged, removed; failures...) and the chunk count."""

    chunks: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "chunks": self.chunks}


def chunk_record(chunk: Chunk) -> dict[str, Any]:
    """The JSON Lines object of a chunk."""
    return {"id": chunk.id, "ticket_id": chunk.ticket_id, "text": chunk.text, "metadata": chunk.metadata}


Data = TypeVar("Data")


@dataclass
class EncodedTicket(Generic[Data]):
    """A ticket's chunks as ``encoding`` writes them: its JSON Lines, or its folder's files."""

    ticket_id: int
    chunks: int
    data: Data
    encoding: JsonLines | ChunkFiles
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Spooled:
    """A ticket's JSON Lines as a worker process left them: ``length`` bytes at ``offset`` of the file ``path``."""

    path: str
    offset: int
    length: int


def spool_batch(results: list[Any], folder: Path) -> list[Any]:
    """A batch's results with each ticket's JSON Lines written into one new file of ``folder`` and replaced by
    where they are: a worker process then sends its parent a few numbers a ticket, not megabytes to pickle,
    pipe and unpickle (write_jsonl copies them into the output, in order, and removes the file)."""
    lines = [result for result in results if isinstance(result, EncodedTicket)]
    if not lines:
        return results
    descriptor, path = tempfile.mkstemp(suffix=".jsonl", dir=folder)
    with os.fdopen(descriptor, "wb") as file:
        file.writelines(ticket.data for ticket in lines)
    spooled, offset = [], 0
    for result in results:
        if isinstance(result, EncodedTicket):
            result = dataclasses.replace(result, data=Spooled(path, offset, len(result.data)))
            offset += result.data.length
        spooled.append(result)
    return spooled


# Line breaks to Python's str.splitlines (and to JavaScript before ES2019) that JSON leaves raw in a string:
# escaped, so that a reader splitting the file into lines finds one record a line.
_UNICODE_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


@dataclass(frozen=True)
class JsonLines:
    """A ticket's chunks → their JSON Lines: ``json.dumps(chunk_record(chunk), ensure_ascii=False)`` a line,
    with U+2028, U+2029 and U+0085 escaped (``_UNICODE_LINE_BREAKS``)."""

    def __call__(self, ticket: ChunkedTicket) -> EncodedTicket[bytes]:
        lines = []
        shared: object = None
        for chunk in ticket.chunks:
            if chunk.shared is not shared:  # (a ticket's chunks share one mapping: encoded once)
                shared, metadata = chunk.shared, OverlayEncoder(chunk.shared)
            lines.append(
                f'{{"id": {encode_basestring(chunk.id)}, "ticket_id": {chunk.ticket_id:d}, '
                f'"text": {encode_basestring(chunk.text)}, "metadata": {metadata.encode(chunk.own)}}}\n'
            )
        text = "".join(lines)
        if "\u2028" in text or "\u2029" in text or "\x85" in text:
            text = text.translate(_UNICODE_LINE_BREAKS)
        return EncodedTicket(ticket.ticket_id, len(ticket.chunks), text.encode(), self, ticket.warnings)


@dataclass(frozen=True)
class ChunkFiles:
    """A ticket's chunks → the name (in the ticket's folder) and bytes of each chunk file, each after its
    ``schema`` sidecar if ``sidecars`` (a reader of the folder then never finds a chunk without its metadata)."""

    schema: str = "simple"
    sidecars: bool = True

    def __call__(self, ticket: ChunkedTicket) -> EncodedTicket[list[tuple[str, bytes]]]:
        files = chunks = [(f"{chunk.id}.md", chunk.text.encode("utf-8")) for chunk in ticket.chunks]
        warnings = list(ticket.warnings)
        if self.sidecars:
            files = []
            sidecars = encode_sidecars(
                ((chunk.shared, chunk.own) for chunk in ticket.chunks), self.schema, f"#{ticket.ticket_id}"
            )
            for (name, text), (sidecar, sidecar_warnings) in zip(chunks, sidecars, strict=True):
                warnings.extend(f"{ticket.ticket_id}/{name}: {warning}" for warning in sidecar_warnings)
                files += [(name + SIDECAR_SUFFIX, sidecar), (name, text)]
        return EncodedTicket(ticket.ticket_id, len(ticket.chunks), files, self, warnings)


Results = Iterable[ChunkedTicket | EncodedTicket[Any] | TicketFailure | str]


class ByteSink(Protocol):
    """Where JSON Lines go: an open binary file or stream, or what compares them with a file's
    (files.ComparingStream)."""

    def write(self, data: bytes, /) -> object: ...


class PreviousLines:
    """The lines of each ticket in the JSON Lines file that a run replaces, read when a ticket fails
    (most runs never read it). The file may be gigabytes: what is kept is where each ticket's lines are
    (ranges of the file, one for lines that follow each other), and a failed ticket's are read back from
    the file as it was when first read (held open: a file renamed over it meanwhile changes nothing)."""

    # Where anchorkit's own lines say their ticket; a line written otherwise belongs to no ticket here.
    _TICKET = re.compile(rb'\{"id": "(?:[^"\\]|\\.)*", "ticket_id": (\d+),')

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: BinaryIO | None = None
        self.ranges: dict[int, list[list[int]]] | None = None

    def of(self, ticket_id: int) -> list[bytes]:
        if self.ranges is None:
            self.ranges = self._index()
        lines: list[bytes] = []
        for start, end in self.ranges.get(ticket_id, []):
            assert self.file is not None  # (the ranges were found in it)
            self.file.seek(start)
            lines += [line + b"\n" for line in self.file.read(end - start).removesuffix(b"\n").split(b"\n")]
        return lines

    def _index(self) -> dict[int, list[list[int]]]:
        """Each ticket's ranges of lines, [start, end) byte offsets; the file stays open to read them."""
        ranges: dict[int, list[list[int]]] = {}
        with contextlib.suppress(FileNotFoundError):
            self.file = self.path.open("rb")
        if self.file is None:
            return ranges
        offset = 0  # where the line read begins
        last: list[int] | None = None  # the range the line before it is in (None: no ticket's)
        for line in self.file:
            end = offset + len(line)
            if match := self._TICKET.match(line):
                ticket = ranges.setdefault(int(match[1]), [])
                if ticket and ticket[-1] is last:
                    ticket[-1][1] = end
                else:
                    ticket.append([offset, end])
                last = ticket[-1]
            else:
                last = None
            offset = end
        return ranges

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


def _tickets(
    results: Results,
    report: ChunkReport,
    encoding: JsonLines | ChunkFiles,
    previous: PreviousLines | None = None,
) -> Iterator[EncodedTicket[Any]]:
    """The tickets' chunks in ``encoding`` (encoded here unless they already are), with failures and
    private issues counted in ``report``; a failed ticket's ``previous`` lines in its place."""
    for result in results:
        if not report.count(result):
            failed = result.ticket_id if isinstance(result, TicketFailure) else None
            if previous and failed is not None and (kept := previous.of(failed)):
                report.warnings.append(f"#{failed}: failed: its {len(kept)} lines of the last run kept")
                report.chunks += len(kept)
                yield EncodedTicket(failed, len(kept), b"".join(kept), encoding)
            continue
        encoded = encoding(result) if isinstance(result, ChunkedTicket) else result
        assert isinstance(encoded, EncodedTicket) and encoded.encoding == encoding, f"not {encoding}: {result!r:.80}"
        report.warnings.extend(encoded.warnings)
        report.chunks += encoded.chunks
        yield encoded


def write_jsonl(results: Results, out: ByteSink, previous: PreviousLines | None = None) -> ChunkReport:
    """One JSON object a line per chunk, to an open binary stream (stdout, a file); a failed ticket's
    ``previous`` lines (those of the file being replaced) in its place."""
    started = time.perf_counter()
    report = ChunkReport()
    spool: tuple[str, int] | None = None  # the spool file being read (spool_batch), and its descriptor
    try:
        for ticket in _tickets(results, report, JsonLines(), previous):
            data = ticket.data
            if isinstance(data, Spooled):
                if spool is None or spool[0] != data.path:
                    _done_with(spool)
                    spool = data.path, os.open(data.path, os.O_RDONLY)
                data = _read_spooled(spool[1], data)
            out.write(data)
    finally:
        _done_with(spool)
    report.seconds = time.perf_counter() - started
    return report


def _read_spooled(descriptor: int, spooled: Spooled) -> bytes:
    data = os.pread(descriptor, spooled.length, spooled.offset)
    if len(data) != spooled.length:
        raise OSError(f"{spooled.path}: {len(data)} bytes at {spooled.offset}, not {spooled.length}: cut short")
    return data


def _done_with(spool: tuple[str, int] | None) -> None:
    if spool is not None:
        os.close(spool[1])
        os.unlink(spool[0])


def write_jsonl_file(results: Results, path: Path, check: bool = False, mode: int | None = None) -> ChunkReport:
    """``write_jsonl`` into ``path``, which is replaced atomically, and only if its bytes change (with
    ``check``, only say whether it would: the lines are compared with the file's as they come,
    files.ComparingStream), as a file of ``mode`` (files.AtomicStream). A ticket that fails keeps its lines
    of ``path``."""
    previous = PreviousLines(path)
    if check:
        with contextlib.closing(previous), ComparingStream(path) as comparing:
            report = write_jsonl(results, comparing, previous)
            report.add(path.name, comparing.status())
        return report
    with AtomicStream(path, mode) as stream:
        with contextlib.closing(previous):  # closed before the file it reads is replaced (refused on Windows)
            report = write_jsonl(results, stream.file, previous)
        report.add(path.name, stream.commit())
    return report


def chunk_relpath(chunk: Chunk) -> str:
    """``12345/12345-007.md``: stable for the same chunk of an unchanged ticket."""
    return f"{chunk.ticket_id}/{chunk.id}.md"


def write_chunk_folder(
    results: Results,
    out_dir: Path,
    schema: str = "simple",
    check: bool = False,
    sidecars: bool = True,
    mode: int | None = None,
) -> ChunkReport:
    """Bring ``out_dir`` up to date with the chunks (with ``check``, only say what would change);
    ``sidecars``: each chunk file with its ``.metadata.json`` (in ``schema``), else the chunk files alone;
    the files written get ``mode``, the folders made for them its folder mode (files.make_folder).

    A ticket's new folder is written whole, then renamed into place (files.write_new_folder); in a
    folder that exists, each file is compared with what it holds and rewritten only if it differs.
    """
    check_schema(schema)
    started = time.perf_counter()
    report = ChunkReport()
    seen: set[int] = set()
    for ticket in _tickets(results, report, ChunkFiles(schema, sidecars)):
        seen.add(ticket.ticket_id)
        directory = out_dir / str(ticket.ticket_id)
        try:
            if directory.is_symlink():  # written through, the chunks would land (and stale ones go) elsewhere
                raise OSError(0, "a symbolic link: chunks are not written through it (remove it)", str(directory))
            _sync_ticket(directory, ticket.data, report, check, mode)
        except OSError as error:  # this ticket's folder (a full disk, a read-only folder): it fails alone
            where = error.filename or directory
            message = f"{where}: cannot write ({error.strerror or error})"
            report.failed.append(TicketFailure(str(directory), ticket.ticket_id, message))
    kept = seen | {failure.ticket_id for failure in report.failed if failure.ticket_id is not None}
    if out_dir.is_dir():
        for entry in sorted(os.listdir(out_dir)):
            folder = out_dir / entry
            ticket_id = ascii_number(entry)
            if ticket_id is not None and ticket_id not in kept and folder.is_dir() and not folder.is_symlink():
                _remove_stale(folder, ticket_id, set(os.listdir(folder)), report, check, whole=True)
            elif not check and (interrupted := _TEMP_FOLDER.match(entry)):
                _remove_interrupted(folder, interrupted[1])
    report.seconds = time.perf_counter() - started
    return report


def _sync_ticket(
    directory: Path, files: list[tuple[str, bytes]], report: ChunkReport, check: bool, mode: int | None
) -> None:
    """Bring one ticket's folder up to date with its files (of ``mode``)."""
    folder = directory.name
    try:
        existing = set(os.listdir(directory))
    except FileNotFoundError:
        if check or write_new_folder(directory, files, mode):
            report.created.extend(f"{folder}/{name}" for name, _ in files)
            return
        existing = set(os.listdir(directory))  # made meanwhile by someone else: file by file, then
    for name, data in files:
        if name in existing:
            status = sync_file(directory / name, data, check=check, mode=mode)
        else:  # (no need to read what is not there)
            status = "created"
            if not check:
                write_atomic(directory / name, data, mode)
        report.add(f"{folder}/{name}", status)
    _remove_stale(directory, int(folder), existing - {name for name, _ in files}, report, check)


def _remove_stale(
    directory: Path, ticket_id: int, names: set[str], report: ChunkReport, check: bool, whole: bool = False
) -> None:
    """Remove those of ``names`` in ticket ``ticket_id``'s folder ``directory`` that are its chunk files
    (and, ``whole``: the ticket is gone, the folder once empty).

    A file is ours by its name and its content (a chunk begins with its ticket's title or anchor, a
    sidecar holds its ticket's id), or it is the temporary file of an interrupted write of one;
    anything else is left alone.
    """
    folder = directory.name
    for name in sorted(names):
        match = _CHUNK_NAME.match(name)
        ours = bool(_TEMP_NAME.match(name)) or (
            match is not None
            and int(match["id"]) == ticket_id
            and written_for(directory / name, ticket_id, _names_chunk_ticket)
        )
        if ours:
            report.removed.append(f"{folder}/{name}")
            if not check:
                (directory / name).unlink()
    if not check and whole:
        with contextlib.suppress(OSError):  # not empty: someone else's files are there too
            directory.rmdir()


def _remove_interrupted(directory: Path, ticket_id: str) -> None:
    """The temporary folder of a ticket that a killed run was writing: removed if it holds that ticket's
    chunk files only (whole or cut short: it never was the ticket's folder, nobody read it)."""
    names = os.listdir(directory)
    if all((match := _CHUNK_NAME.match(name)) and match["id"] == ticket_id for name in names):
        shutil.rmtree(directory, ignore_errors=True)


def _names_chunk_ticket(line: str, ticket_id: int) -> bool:
    """A chunk's first line is its ticket's title (the first chunk) or anchor (the others)."""
    return identified_ticket_ids(line) == {ticket_id}
