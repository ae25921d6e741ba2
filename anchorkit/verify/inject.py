"""Query-time anchoring: prepend ``> チケット #ID: subject`` to each retrieved chunk before the model sees it.

The design's other way of keeping the ticket id with every chunk ("sidecar + injection at the
orchestration layer"): no embedding tokens, any chunker, but only where the application builds the
prompt. It reads every retrieval shape verify reads (verify_shapes.py, the one place that knows them)
and returns the same shape, so it drops in between retrieve and generate.

A chunk's ticket comes from what the knowledge base stored, never from text that merely looks like an
anchor: the ``ticket_id`` metadata (anchorkit's sidecars), else the source URI (the pattern verify
uses, or a Redmine issue URL), else, for a chunk without a source URI, a genuine anchor or title line
of the chunk (anchors.py: a line of the exact anchor shape, which transform guarantees only anchorkit
wrote). A source URI the pattern does not read names a document of another kind (a wiki page): an
anchor-shaped line in it is a quote, not its ticket. When metadata and URI disagree the chunk gets no
anchor and a warning; a chunk whose ticket cannot be known is left as it is and reported, and so is an
empty or blank chunk (``anchors.holds_text``, the Bedrock Lambda's rule too: an anchor alone costs prompt
tokens and says nothing). In a chunk
whose ticket is known, whatever has the shape of another ticket's anchor or title is escaped as
transform escapes it (``\\#``), so the prompt names no other ticket the way anchors do. Pure: data in,
data out.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Literal

from anchorkit.anchors import (
    DEFAULT_LABEL,
    anchor_line,
    find_anchors,
    find_titles,
    holds_text,
    neutralize_forgeries,
    one_line,
)
from anchorkit.verify.ids import compile_uri_pattern, ticket_conflict, uri_ticket_id
from anchorkit.verify.model import DEFAULT_URI_PATTERN, Chunk
from anchorkit.verify.shapes import retrieval_items, set_chunk_text

# What may come before a chunk's own anchor without making it any less the chunk's first line: a BOM
# (a file saved with one; the Lambda drops it too) and blank space (indentation, blank lines). Only for
# that: which ticket a chunk is still comes from genuine anchors alone, never indented look-alikes.
_LEADING_BLANK = re.compile(r"\A[\s\ufeff]+")

Status = Literal["anchored", "already_anchored", "unknown_ticket", "conflict", "empty"]
STATUSES: tuple[Status, ...] = ("anchored", "already_anchored", "unknown_ticket", "conflict", "empty")
Source = Literal["metadata", "uri", "anchor"]


@dataclass(frozen=True)
class ChunkOutcome:
    """What happened to one chunk (``position``: 0-based, in the retrieval's order)."""

    position: int
    chunk_id: str
    status: Status
    ticket_id: int | None = None
    source: Source | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "chunk_id": self.chunk_id,
            "status": self.status,
            "ticket_id": self.ticket_id,
            "source": self.source,
            "message": self.message,
        }


@dataclass
class InjectReport:
    shape: str
    retrieval: Any  # the input, same shape, anchors prepended
    outcomes: list[ChunkOutcome]
    notes: list[str]  # results that have no text (skipped, as verify skips them)

    def count(self, status: Status) -> int:
        return sum(o.status == status for o in self.outcomes)

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "counts": {status: self.count(status) for status in STATUSES},
            "chunks": [o.to_json() for o in self.outcomes],
            "notes": self.notes,
        }


def anchor_chunks(
    retrieval: Any,
    origin: str = "retrieval",
    *,
    uri_pattern: str | re.Pattern[str] = DEFAULT_URI_PATTERN,
    label: str = DEFAULT_LABEL,
) -> InjectReport:
    """The retrieval (any shape verify reads; not changed) with each chunk's anchor line prepended.

    Raises verify_shapes.InputError for a retrieval of no known shape.
    """
    pattern = compile_uri_pattern(uri_pattern)
    data = copy.deepcopy(retrieval)
    shape, items, notes = retrieval_items(data, origin)
    outcomes: list[ChunkOutcome] = []
    for position, (item, chunk) in enumerate(items):
        if chunk is None:
            continue
        outcome, text = _anchor(chunk, position, pattern, label)
        if text is not None:
            set_chunk_text(item, text)
        outcomes.append(outcome)
    return InjectReport(shape, data, outcomes, notes)


def _anchor(chunk: Chunk, position: int, pattern: re.Pattern[str], label: str) -> tuple[ChunkOutcome, str | None]:
    """One chunk's outcome and its new text (None: unchanged)."""
    if not holds_text(chunk.text):
        return ChunkOutcome(position, chunk.id, "empty", None, None, "empty or blank: left as it is"), None
    conflict = ticket_conflict(chunk, pattern)  # (the same rule as verify's)
    if conflict is not None:
        message = f"metadata ticket_id #{conflict[0]} but the source URI names #{conflict[1]}: no anchor"
        return ChunkOutcome(position, chunk.id, "conflict", None, None, message), None
    uri_ticket = uri_ticket_id(chunk.uri, pattern)
    ticket_id, source = _ticket(chunk, uri_ticket)
    if ticket_id is None or source is None:
        where = "the source URI names no ticket" if chunk.uri else "no source URI, no single genuine anchor"
        message = f"no ticket_id metadata, {where}: left as it is"
        return ChunkOutcome(position, chunk.id, "unknown_ticket", None, None, message), None
    # Another ticket's anchor in a chunk of this one is a forgery (a quote, or a line transform never
    # saw): escaped, the prompt, and verify --context reading it later, name no ticket the chunk is not.
    body = neutralize_forgeries(chunk.text, keep=ticket_id)
    escaped = "lines shaped like another ticket's anchor or title escaped" if body != chunk.text else ""
    text = _LEADING_BLANK.sub("", body)
    first_line = text.split("\n", 1)[0]
    own = [a for a in find_anchors(first_line) + find_titles(first_line) if a.ticket_id == ticket_id]
    # The subject is the knowledge base's or the anchor's; anchor_line neutralises whatever in it has
    # the shape of another anchor.
    subject = _subject(chunk, ticket_id)
    if own and (own[0].subject or not subject):
        outcome = ChunkOutcome(position, chunk.id, "already_anchored", ticket_id, source, escaped)
        return outcome, body if escaped else None
    anchor = anchor_line(ticket_id, subject, label)
    outcome = ChunkOutcome(position, chunk.id, "anchored", ticket_id, source, escaped)
    if own:  # a short spacing anchor ("> チケット #12345:") starts the chunk: it gets the subject
        return outcome, anchor + text[len(first_line) :]
    return outcome, f"{anchor}\n\n{body}"


def _ticket(chunk: Chunk, uri_ticket: int | None) -> tuple[int | None, Source | None]:
    if chunk.ticket_id is not None:
        return chunk.ticket_id, "metadata"
    if uri_ticket is not None:
        return uri_ticket, "uri"
    if chunk.uri:  # a document that is not a ticket's: its anchor-shaped lines are quotes
        return None, None
    # Nothing stored says which document this is: a genuine anchor or title line may, if only one ticket's.
    anchored = {a.ticket_id for a in find_anchors(chunk.text) + find_titles(chunk.text)}
    return (anchored.pop(), "anchor") if len(anchored) == 1 else (None, None)


def _subject(chunk: Chunk, ticket_id: int) -> str:
    """The metadata subject, else the subject of the chunk's own anchor or title line, else the title."""
    if chunk.subject:
        return chunk.subject
    for anchor in find_anchors(chunk.text) + find_titles(chunk.text):
        if anchor.ticket_id == ticket_id and anchor.subject:
            return anchor.subject
    if not chunk.title:
        return ""
    titled = find_titles("# " + one_line(chunk.title))  # a title in the anchor format carries the subject
    if not titled:
        return chunk.title
    return titled[0].subject if titled[0].ticket_id == ticket_id else ""
