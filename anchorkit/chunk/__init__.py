"""Ticket-aware chunks (`anchorkit chunk`): every chunk names its ticket and links to the note it comes from.

core: the pure chunker (one document and its metadata → chunks); sources: snapshots and transform
output folders, one ticket at a time; writers: JSON Lines and a Bedrock folder of chunk files with
sidecars. Only the core is imported here: it needs no file, network or Redmine client (a Lambda
function calls it with a document it was given).
"""

from __future__ import annotations

from anchorkit.chunk.core import (
    DEFAULT_CHUNK_TOKENS,
    Chunk,
    ChunkedTicket,
    ChunkError,
    chunk_document,
)
from anchorkit.chunk.pieces import SECTIONS
from anchorkit.chunk_names import chunk_id

__all__ = ["DEFAULT_CHUNK_TOKENS", "SECTIONS", "Chunk", "ChunkError", "ChunkedTicket", "chunk_document", "chunk_id"]
