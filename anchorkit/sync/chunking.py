"""`sync --chunks`: the tickets published as anchorkit's own chunks (anchorkit/chunk) instead of documents.

One chunker behind both syncs, and nothing here cuts or names a chunk: the chunk library renders the
snapshot's tickets, cuts them and writes the chunk folder (``<id>/<id>-NNN.md``, each with its
``.metadata.json`` sidecar). The ordinary sync writes that folder to ``--out`` and publishes it;
`sync --state` has it written into a scratch folder and publishes each ticket's files from there, so
both publish the same bytes.

The layout a destination is in is recorded (by the state's manifest, or seen in ``--out``): a run in
the other layout replaces every ticket's objects, which the delete guard counts (docs/sync.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorkit.chunk.core import ChunkedTicket
from anchorkit.chunk.pipeline import check_chunk_size
from anchorkit.chunk.sources import Progress, chunk_tickets
from anchorkit.chunk.writers import ChunkReport, write_chunk_folder
from anchorkit.errors import UsageError
from anchorkit.files import file_mode
from anchorkit.publish.keys import CHUNKS, DOCUMENTS, ticket_key
from anchorkit.render.transform import TicketFailure, TransformOptions
from anchorkit.settings import default
from anchorkit.sync.scratch import scratch_folder
from anchorkit.tokens import choose_tokenizer


@dataclass(frozen=True)
class ChunkLayout:
    """How long the chunks are (``--chunk-tokens``) and how much of the previous one each repeats."""

    tokens: int = default("chunk_tokens")
    overlap: int = default("chunk_overlap")

    def __post_init__(self) -> None:
        # Checked once for the run, as `anchorkit chunk` checks it: the chunker would otherwise fail every ticket.
        check_chunk_size(self.tokens, self.overlap)

    @classmethod
    def from_settings(cls, values: dict[str, Any], transform: TransformOptions) -> ChunkLayout | None:
        """The run's chunks (None: it publishes documents), from sync's settings, checked also against the
        anchors ``transform`` writes (their label, counted by its tokenizer)."""
        if not values.get("chunks"):
            return None
        layout = cls(values.get("chunk_tokens", default("chunk_tokens")), values.get("chunk_overlap", 0))
        check_chunk_size(layout.tokens, layout.overlap, transform)
        return layout

    def describe(self) -> dict[str, Any]:
        """What makes the chunks' bytes what they are besides the tickets (part of the state's fingerprint)."""
        return {"layout": CHUNKS, "chunk_tokens": self.tokens, "chunk_overlap": self.overlap}


def layout_name(chunks: ChunkLayout | None) -> str:
    return DOCUMENTS if chunks is None else CHUNKS


def _chunks(
    snapshot_dir: Path, options: TransformOptions, layout: ChunkLayout, progress: Progress | None
) -> Iterator[ChunkedTicket | TicketFailure | str]:
    """Every ticket of the snapshot, chunked as `anchorkit chunk` chunks it (tokens counted by --tokenizer), in
    this process (sync's uploads may have threads running: no fork)."""
    choose_tokenizer(options.tokenizer, options.tiktoken_file)  # one that cannot be loaded stops the run here
    return chunk_tickets(snapshot_dir, options, layout.tokens, layout.overlap, jobs=1, progress=progress)


def chunk_snapshot(
    snapshot_dir: Path,
    out_dir: Path,
    options: TransformOptions,
    layout: ChunkLayout,
    progress: Progress | None = None,
) -> ChunkReport:
    """Bring ``out_dir`` up to date with the snapshot's chunks (the ordinary `sync --chunks`); with
    --include-private, files its owner's alone."""
    chunks = _chunks(snapshot_dir, options, layout, progress)
    return write_chunk_folder(chunks, out_dir, options.sidecar_schema, mode=file_mode(options.render.include_private))


@dataclass(frozen=True)
class TicketObjects:
    """One ticket's files as they are published (key -> bytes)."""

    ticket_id: int
    objects: dict[str, bytes]


def chunk_objects(
    snapshot_dir: Path, options: TransformOptions, layout: ChunkLayout, progress: Progress | None = None
) -> Iterator[TicketObjects | TicketFailure | str]:
    """Each ticket's chunk files (or its failure, or PRIVATE), for `sync --state --chunks`: the chunk
    folder is written into a scratch folder (readable by this user alone, removed afterwards) and read
    back ticket by ticket."""
    outcomes: list[ChunkedTicket | TicketFailure | str] = []

    def remembered(results: Iterable[ChunkedTicket | TicketFailure | str]) -> Iterator[ChunkedTicket]:
        for result in results:
            outcomes.append(result)
            if isinstance(result, ChunkedTicket):
                yield result

    with scratch_folder() as scratch:
        folder = scratch / "chunks"
        write_chunk_folder(remembered(_chunks(snapshot_dir, options, layout, progress)), folder, options.sidecar_schema)
        for outcome in outcomes:
            if not isinstance(outcome, ChunkedTicket):
                yield outcome
                continue
            ticket_folder = folder / str(outcome.ticket_id)
            names = sorted(os.listdir(ticket_folder)) if ticket_folder.is_dir() else []
            yield TicketObjects(
                outcome.ticket_id,
                {f"{outcome.ticket_id}/{name}": (ticket_folder / name).read_bytes() for name in names},
            )


def check_out_layout(out_dir: Path, layout: str, writer: str) -> None:
    """A --out folder holding the other layout's files would have both published: refused (exit 2).
    ``writer`` says who writes ``layout`` into it ("this sync (--chunks)", "chunk")."""
    if not out_dir.is_dir():
        return
    for directory, subdirs, files in os.walk(out_dir):
        depth = len(Path(directory).relative_to(out_dir).parts)
        subdirs[:] = sorted(name for name in subdirs if not name.startswith(".")) if depth < 1 else []
        for name in sorted(files):
            found = ticket_key(Path(directory, name).relative_to(out_dir).as_posix())
            if found is not None and found.layout != layout:
                example = Path(directory, name).relative_to(out_dir).as_posix()
                raise UsageError(
                    f"--out {out_dir} holds {found.layout} (e.g. {example}) and {writer} writes {layout}: "
                    "give it another, empty --out folder, or both layouts would be published from it (changing "
                    "the layout of a destination: docs/sync.md)"
                )
