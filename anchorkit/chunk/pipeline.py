"""``anchorkit chunk`` in one call: a snapshot or a transform output folder → chunks, as JSON Lines (a
file or a stream) or as a folder of chunk files with their Bedrock sidecars.

The options are checked before anything is read or written (a bad one is a usage error naming it);
a ticket that cannot be read or chunked is a failure in the report, and the others are still done.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from anchorkit.chunk.core import MIN_CONTENT_TOKENS, shortest_header
from anchorkit.chunk.sources import chunk_tickets, counted_limits
from anchorkit.chunk.writers import (
    ChunkFiles,
    ChunkReport,
    JsonLines,
    write_chunk_folder,
    write_jsonl,
    write_jsonl_file,
)
from anchorkit.errors import UsageError
from anchorkit.files import check_apart, check_writable_file, check_writable_folder, file_mode
from anchorkit.render.sidecar import check_schema
from anchorkit.render.transform import TransformOptions
from anchorkit.settings import default
from anchorkit.tokens import choose_tokenizer
from anchorkit.untrusted import public_url

# The shortest chunk asked for: room for an anchor (cut to a few characters of the subject if need be)
# and some content. Shorter, every ticket would fail alone; this says so once.
MIN_CHUNK_TOKENS = 2 * MIN_CONTENT_TOKENS


def check_chunk_size(chunk_tokens: int, overlap_tokens: int, transform: TransformOptions | None = None) -> None:
    """UsageError for a chunk length or overlap no ticket could be chunked with (``chunk`` and ``sync --chunks``):
    too short, an overlap over half of it, or, given ``transform``, one that the shortest anchor of its label
    (ticket #1, no subject; counted with its tokenizer) and the overlap leave less content room than the chunker
    needs. A ticket with a longer id or subject may still fail alone at a length that passes: its error says why."""
    if chunk_tokens < MIN_CHUNK_TOKENS:
        raise UsageError(f"--chunk-tokens must be at least {MIN_CHUNK_TOKENS} to chunk, not {chunk_tokens}")
    if not 0 <= overlap_tokens <= chunk_tokens // 2:
        raise UsageError(
            f"--chunk-overlap must be between 0 and half of --chunk-tokens ({chunk_tokens // 2}), not {overlap_tokens}"
        )
    if transform is None:
        return
    header = shortest_header(transform.render.label("ticket"))
    tokenizer = choose_tokenizer(transform.tokenizer, transform.tiktoken_file)
    header_tokens = tokenizer.count(header)

    def room(length: int) -> int:
        limit, overlap = counted_limits(tokenizer.exact, length, overlap_tokens)
        return limit - header_tokens - overlap

    if room(chunk_tokens) < MIN_CONTENT_TOKENS:
        least = next(length for length in itertools.count(chunk_tokens) if room(length) >= MIN_CONTENT_TOKENS)
        overlap = f" with --chunk-overlap {overlap_tokens}" if overlap_tokens else ""
        raise UsageError(
            f"--chunk-tokens {chunk_tokens}{overlap} leaves {max(room(chunk_tokens), 0)} tokens for content after "
            f"the shortest anchor ({header.strip()!r}, {header_tokens} tokens); the chunker needs "
            f"{MIN_CONTENT_TOKENS}: give --chunk-tokens {least} or more{', or less overlap' if overlap else ''}"
        )


@dataclass(frozen=True)
class ChunkOptions:
    """What ``anchorkit chunk`` is told: how long the chunks are, and how a snapshot's tickets are rendered
    (``transform``: labels, time zone, privacy, text format; its ``sidecars`` and ``sidecar_schema`` are the
    chunk folder's, its ``tokenizer`` what the chunks are counted with, its ``redmine_url`` where they link to)."""

    transform: TransformOptions = field(default_factory=TransformOptions)
    chunk_tokens: int = default("chunk_tokens")
    overlap_tokens: int = default("chunk_overlap")

    def __post_init__(self) -> None:
        check_chunk_size(self.chunk_tokens, self.overlap_tokens, self.transform)

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> ChunkOptions:
        """The options from the settings catalogue's values (chunk's; a setting not given takes its default),
        checked: a bad value is a usage error naming the option."""
        transform = TransformOptions.from_settings(values)
        url = values.get("url")
        if url:
            if not re.match(r"https?://[^\s/]+", url):
                raise UsageError(f"--url must be an http(s) URL, not {url!r}")
            transform = dataclasses.replace(transform, redmine_url=public_url(url))
        return cls(
            transform,
            values.get("chunk_tokens", default("chunk_tokens")),
            values.get("chunk_overlap", default("chunk_overlap")),
        )


def chunk_source(
    source: Path,
    *,
    jsonl: Path | BinaryIO | None = None,
    out: Path | None = None,
    options: ChunkOptions | None = None,
    check: bool = False,
    jobs: int = default("jobs"),
    progress: Callable[[int, int], None] | None = None,
) -> ChunkReport:
    """Chunk every ticket of ``source`` (a snapshot, or a folder ``anchorkit transform`` wrote) into
    exactly one of: ``jsonl``, a JSON Lines file (replaced atomically, only if its bytes change) or an
    open binary stream (stdout); ``out``, a folder of ``<id>/<id>-<n>.md`` chunk files (with sidecars if
    ``options.transform.sidecars``), brought up to date: unchanged files are not rewritten, the chunk files
    of a ticket that shrank or left the source are removed.

    ``check``: write nothing, report what would change (not for a stream). ``jobs`` > 1 renders,
    chunks and encodes batches of tickets in that many processes (0: one per CPU core when the source has more than
    one batch); the output does not depend on it. ``progress(done, total)`` is called after each ticket.
    Raises :class:`UsageError` for a bad combination, an output that is ``source``, lies inside it or holds it
    (it would overwrite the source's files, or be read back as one; before anything is written), a source that
    is neither a snapshot nor a folder of documents, or a tokenizer that cannot be loaded.
    """
    options = options or ChunkOptions()
    if (jsonl is None) == (out is None):
        raise UsageError("give exactly one of --jsonl FILE ('-': stdout) and --out DIR")
    for name, output in (("--out", out), ("--jsonl", jsonl)):
        if isinstance(output, Path):
            check_apart(output, source, name, "source folder")
    if check and jsonl is not None and not isinstance(jsonl, Path):
        raise UsageError("--check compares with a file or a folder: give --jsonl FILE or --out DIR, not stdout")
    settings = options.transform
    if out is not None and settings.sidecars:
        check_schema(settings.sidecar_schema)
    if isinstance(jsonl, Path) and jsonl.is_dir():
        raise UsageError(f"--jsonl {jsonl} is a folder: give a file name (chunk files in a folder: --out DIR)")
    if not check and out is not None:
        check_writable_folder(out, "--out")
    elif not check and isinstance(jsonl, Path):
        check_writable_file(jsonl, "--jsonl")
    choose_tokenizer(settings.tokenizer, settings.tiktoken_file)  # one that cannot be loaded stops the run here
    mode = file_mode(settings.render.include_private)  # (owner only: the chunks may hold private content)
    if out is not None:
        encoding = ChunkFiles(settings.sidecar_schema, settings.sidecars)
        chunks = chunk_tickets(source, settings, options.chunk_tokens, options.overlap_tokens, jobs, progress, encoding)
        report = write_chunk_folder(
            chunks, out, settings.sidecar_schema, check=check, sidecars=settings.sidecars, mode=mode
        )
    else:
        assert jsonl is not None
        # Worker processes leave their lines in a temporary folder (what was ahead of the writer used to wait
        # in memory): the parent copies them in order, and the folder goes whatever happens, after the
        # workers (closing the results ends them).
        with tempfile.TemporaryDirectory(prefix="anchorkit-chunk-", ignore_cleanup_errors=True) as spool:
            results = chunk_tickets(
                source, settings, options.chunk_tokens, options.overlap_tokens, jobs, progress, JsonLines(), Path(spool)
            )
            with contextlib.closing(results) as chunks:
                report = _write_lines(chunks, jsonl, check, mode)
    report.tokenizer = settings.tokenizer
    return report


def _write_lines(chunks: Iterator[Any], jsonl: Path | BinaryIO, check: bool, mode: int | None) -> ChunkReport:
    if isinstance(jsonl, Path):
        return write_jsonl_file(chunks, jsonl, check=check, mode=mode)
    return write_jsonl(chunks, jsonl)
