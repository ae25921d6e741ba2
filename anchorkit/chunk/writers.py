"""Chunks out: JSON Lines for LangChain, LlamaIndex or any vector store, or a folder for Bedrock.

- JSON Lines: one object per chunk, ``{"id", "ticket_id", "text", "metadata"}``.
- A folder, for a Bedrock data source with chunking strategy NONE: ``<id>/<id>-<n>.md`` (n from
  000) with its ``.md.metadata.json`` sidecar (the chunk's metadata in the simple or typed schema,
  within Bedrock's limits: render/sidecar.py). Names are stable and files are written atomically
  and only when their bytes change, so a second run over unchanged tickets writes nothing; the
  chunk files of a ticket that shrank or left the source are removed (a failed ticket's are kept).

Both take what ``sources.chunk_items`` yields and report tickets, chunks, files and failures.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from anchorkit.anchors import identified_ticket_ids
from anchorkit.chunk.core import Chunk, ChunkedTicket
from anchorkit.files import AtomicStream, sync_file
from anchorkit.render.sidecar import SIDECAR_SUFFIX, check_schema, encode_sidecar
from anchorkit.render.transform import TicketFailure, TransformReport, written_for

_CHUNK_NAME = re.compile(rf"^(\d+)-\d{{3,}}\.md(?:{re.escape(SIDECAR_SUFFIX)})?$")
_TEMP_NAME = re.compile(rf"^\.\d+-\d{{3,}}\.md(?:{re.escape(SIDECAR_SUFFIX)})?\..*\.tmp$")


@dataclass
class ChunkReport(TransformReport):
    """transform's report (files created, changed, unchanged, removed; failures...) and the chunk count."""

    chunks: int = 0

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "chunks": self.chunks}


def chunk_record(chunk: Chunk) -> dict[str, Any]:
    """The JSON Lines object of a chunk."""
    return {"id": chunk.id, "ticket_id": chunk.ticket_id, "text": chunk.text, "metadata": chunk.metadata}


def _tickets(results: Iterable[ChunkedTicket | TicketFailure | str], report: ChunkReport) -> Iterator[ChunkedTicket]:
    """The chunked tickets, with failures and private issues counted in ``report``."""
    for result in results:
        if not report.count(result):
            continue
        assert isinstance(result, ChunkedTicket)
        report.warnings.extend(result.warnings)
        report.chunks += len(result.chunks)
        yield result


def write_jsonl(results: Iterable[ChunkedTicket | TicketFailure | str], out: BinaryIO) -> ChunkReport:
    """One JSON object a line per chunk, to an open binary stream (stdout, a file)."""
    started = time.perf_counter()
    report = ChunkReport()
    for ticket in _tickets(results, report):
        out.write(
            "".join(json.dumps(chunk_record(chunk), ensure_ascii=False) + "\n" for chunk in ticket.chunks).encode()
        )
    report.seconds = time.perf_counter() - started
    return report


def write_jsonl_file(
    results: Iterable[ChunkedTicket | TicketFailure | str], path: Path, check: bool = False
) -> ChunkReport:
    """``write_jsonl`` into ``path``, which is replaced atomically, and only if its bytes change (with
    ``check``, only say whether it would: the lines are held in memory and compared)."""
    if check:
        lines = io.BytesIO()
        report = write_jsonl(results, lines)
        report.add(path.name, sync_file(path, lines.getvalue(), check=True))
        return report
    with AtomicStream(path) as stream:
        report = write_jsonl(results, stream.file)
        report.add(path.name, stream.commit())
    return report


def chunk_relpath(chunk: Chunk) -> str:
    """``12345/12345-007.md``: stable for the same chunk of an unchanged ticket."""
    return f"{chunk.ticket_id}/{chunk.id}.md"


def write_chunk_folder(
    results: Iterable[ChunkedTicket | TicketFailure | str],
    out_dir: Path,
    schema: str = "simple",
    check: bool = False,
    sidecars: bool = True,
) -> ChunkReport:
    """Bring ``out_dir`` up to date with the chunks (with ``check``, only say what would change);
    ``sidecars``: each chunk file with its ``.metadata.json`` (in ``schema``), else the chunk files alone."""
    check_schema(schema)
    started = time.perf_counter()
    report = ChunkReport()
    seen: set[int] = set()
    for ticket in _tickets(results, report):
        seen.add(ticket.ticket_id)
        expected = set()
        for chunk in ticket.chunks:
            relpath = chunk_relpath(chunk)
            files = [(relpath, chunk.text.encode("utf-8"))]
            if sidecars:
                sidecar, warnings = encode_sidecar(chunk.metadata, schema, f"#{chunk.ticket_id}")
                report.warnings.extend(f"{relpath}: {warning}" for warning in warnings)
                files.insert(0, (relpath + SIDECAR_SUFFIX, sidecar))  # a reader never sees a chunk without it
            for name, data in files:
                report.add(name, sync_file(out_dir / name, data, check=check))
                expected.add(name)
        _remove_stale(out_dir, str(ticket.ticket_id), expected, report, check)
    kept = seen | {failure.ticket_id for failure in report.failed if failure.ticket_id is not None}
    if out_dir.is_dir():
        for entry in sorted(os.listdir(out_dir)):
            if entry.isdigit() and int(entry) not in kept and (out_dir / entry).is_dir():
                _remove_stale(out_dir, entry, set(), report, check)
    report.seconds = time.perf_counter() - started
    return report


def _remove_stale(out_dir: Path, folder: str, expected: set[str], report: ChunkReport, check: bool) -> None:
    """Remove the chunk files of ticket ``folder`` that this run did not write, and the folder once empty.

    A file is ours by its name and its content (a chunk begins with its ticket's title or anchor, a
    sidecar holds its ticket's id), or it is the temporary file of an interrupted write of one;
    anything else is left alone.
    """
    directory = out_dir / folder
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return
    for name in names:
        relpath = f"{folder}/{name}"
        if relpath in expected:
            continue
        match = _CHUNK_NAME.match(name)
        ours = bool(_TEMP_NAME.match(name)) or (
            match is not None and match[1] == folder and written_for(directory / name, int(folder), _names_chunk_ticket)
        )
        if ours:
            report.removed.append(relpath)
            if not check:
                (directory / name).unlink()
    if not check and not expected:
        with contextlib.suppress(OSError):  # not empty: someone else's files are there too
            directory.rmdir()


def _names_chunk_ticket(line: str, ticket_id: int) -> bool:
    """A chunk's first line is its ticket's title (the first chunk) or anchor (the others)."""
    return identified_ticket_ids(line) == {ticket_id}
