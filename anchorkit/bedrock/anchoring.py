"""What the handler does to a file's chunks: find the ticket, anchor every chunk, or cut the document. Pure.

**The ticket** of a file comes from what the knowledge base stored, never from text that merely looks
like an anchor: the file's metadata (anchorkit's sidecar: ``ticket_id``, ``subject``, ``url``), else the
original file's S3 key (``…/12345.md``, the pattern ``verify`` uses), else the title line the document
starts with (``# チケット #12345: subject``: every anchorkit document does, and transform neutralises
every look-alike in ticket content; an anchor-shaped line inside another document, a wiki page quoting
a ticket, names no ticket of the file). Metadata and key naming different tickets is a conflict: neither
is trusted, and the chunks pass through unanchored, as ``inject`` does.

**Inject mode** (chunks as Bedrock cut them): same chunks out as in, in order. A chunk that holds a
*complete* anchor or title line of its ticket passes byte for byte; every other one gets
``> チケット #ID: subject`` and a blank line in front. A line is complete when the chunk holds its line
break, or when it ends the chunk with the ticket's whole subject (or the subject as transform
shortens it, ``…`` marking the cut): a chunk cut inside an anchor line does not name its ticket. A chunk
that is nothing but the start of the ticket's title line (a title longer than a whole chunk, cut as
anchorkit's chunker cuts it) names its ticket: an anchor in front would only repeat the title.
Whatever in a chunk has the shape of *another* ticket's anchor or title is escaped (``\\#``), as
transform escapes it in documents: no chunk reaches the index naming a ticket it is not. An empty or
blank chunk passes as it is (an anchor alone would be embedded as a chunk of its own).
Every text chunk of a known ticket gets ``ticket_id``, ``subject`` and ``url`` as chunk-level metadata,
which Bedrock lets override the file's.

**Chunk mode** (chunking strategy NONE: the file arrives as one item, the whole document) hands the
document to the ticket-aware chunker (``anchorkit.chunk``: chunks of at most N tokens, exact with
cl100k_base, each beginning with the ticket's anchor, with metadata down to the note), then checks
each chunk like inject mode does, so a chunk without its anchor can never reach the index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from anchorkit.anchors import (
    ANCHOR_PATTERN,
    TITLE_PATTERN,
    Anchor,
    anchor_line,
    anchor_of,
    find_anchors,
    find_titles,
    holds_text,
    neutralize_forgeries,
    one_line,
    title_line,
)
from anchorkit.bedrock.batches import Batch, Item, MetadataValue, plain_value
from anchorkit.bedrock.counts import Counts
from anchorkit.chunk.core import chunk_document, written_subject
from anchorkit.tokens import Tokenizer
from anchorkit.verify.ids import parse_ticket_id, uri_ticket_id
from anchorkit.verify.shapes import CHUNK_ID_METADATA

Source = Literal["metadata", "key", "title"]
Mode = Literal["chunk", "inject"]
MODES = ("auto", "chunk", "inject")


@dataclass(frozen=True)
class Ticket:
    ticket_id: int
    subject: str  # "" when nothing stored or written says it
    url: str | None
    source: Source

    def metadata(self) -> dict[str, MetadataValue]:
        """The chunk-level metadata every chunk of this ticket gets."""
        metadata: dict[str, MetadataValue] = {"ticket_id": self.ticket_id}
        if self.subject:
            metadata["subject"] = self.subject
        if self.url:
            metadata["url"] = self.url
        return metadata


@dataclass(frozen=True)
class Options:
    label: str
    chunk_tokens: int
    uri_pattern: re.Pattern[str]
    redmine_url: str | None  # builds ``url`` when the metadata has none


def stored_ticket(
    metadata: Mapping[str, Any], source_uri: str | None, options: Options
) -> tuple[Ticket | None, str | None]:
    """The ticket the knowledge base stored for a file (None: not known that way), and the conflict,
    if metadata and file name disagree (then no ticket: neither is trusted, nor the text)."""
    stored_id = parse_ticket_id(plain_value(metadata.get("ticket_id")))
    key_id = uri_ticket_id(source_uri, options.uri_pattern)
    if stored_id is not None and key_id is not None and stored_id != key_id:
        return None, f"metadata ticket_id #{stored_id} but the file name says #{key_id}"
    ticket_id = stored_id if stored_id is not None else key_id
    if ticket_id is None:
        return None, None
    subject = plain_value(metadata.get("subject"))
    source: Source = "metadata" if stored_id is not None else "key"
    url = _url(ticket_id, metadata, options)
    return Ticket(ticket_id, one_line(subject) if isinstance(subject, str) else "", url, source), None


def needs_text(ticket: Ticket | None) -> bool:
    """Whether the file's texts must be read first: to find its ticket, or the subject of its anchor."""
    return ticket is None or not ticket.subject


def ticket_from_texts(
    texts: Iterable[str], stored: Ticket | None, metadata: Mapping[str, Any], options: Options
) -> Ticket | None:
    """The stored ticket with the subject its genuine title (or anchor) line gives, or, with no stored
    ticket, the ticket of the title line the file's first chunk starts with (None: it starts with none)."""
    if stored is None:
        title = starting_title(next(filter(holds_text, texts), ""))
        if title is None:
            return None
        return Ticket(title.ticket_id, title.subject, _url(title.ticket_id, metadata, options), "title")
    # Titles first: an anchor's subject may be shortened. The subject as the sidecar has it, not as the
    # Markdown escapes it (``C\#`` is ``C#``).
    found = (
        anchor.subject
        for text in texts
        for anchor in (*find_titles(text), *find_anchors(text))
        if anchor.ticket_id == stored.ticket_id and anchor.subject
    )
    return replace(stored, subject=next(found, stored.subject))


def starting_title(text: str) -> Anchor | None:
    """The title line (``# チケット #12345: subject``) a text starts with, a BOM before it aside."""
    title = TITLE_PATTERN.match(text.lstrip("\ufeff"))
    return anchor_of(title) if title else None


def _url(ticket_id: int, metadata: Mapping[str, Any], options: Options) -> str | None:
    url = plain_value(metadata.get("url"))
    if isinstance(url, str) and url.startswith(("https://", "http://")):
        return url
    base = plain_value(metadata.get("redmine_url")) or options.redmine_url
    return f"{base.rstrip('/')}/issues/{ticket_id}" if isinstance(base, str) and base else None


def holds_complete_anchor(text: str, ticket: Ticket) -> bool:
    """Whether one of the text's lines is a whole anchor or title line of the ticket, or the text is the start
    of the ticket's title line and nothing else: the first chunk of a title line longer than a whole chunk,
    which anchorkit's chunker cuts as any line that long (its first chunk begins with as much of it as fits)."""
    for pattern in (ANCHOR_PATTERN, TITLE_PATTERN):
        for match in pattern.finditer(text):
            if int(match["id"]) == ticket.ticket_id and (
                match.end() < len(text)
                or _whole_subject((match["subject"] or "").strip(), ticket.subject)
                or (pattern is TITLE_PATTERN and not match.start() and _title_start(text, match, ticket))
            ):
                return True
    return False


def _title_start(text: str, title: re.Match[str], ticket: Ticket) -> bool:
    """Whether ``text``, a title line of the ticket cut short, is the start of the title line documents and
    anchorkit's chunks write for it (the subject escaped as plain Markdown text)."""
    return bool(ticket.subject) and title_line(
        ticket.ticket_id, written_subject(ticket.subject), title["label"]
    ).startswith(text)


def _whole_subject(found: str, subject: str) -> bool:
    """Whether an anchor's subject is the ticket's, whole or cut with ``…``, as read or as documents and
    anchorkit's chunks write it (escaped as plain Markdown text)."""
    return bool(subject) and any(
        found == form or (found.endswith("…") and form.startswith(found[:-1]))
        for form in (subject, written_subject(subject))
    )


def with_anchor(text: str, ticket: Ticket, label: str) -> str:
    # The subject lands in the chunk as part of an anchor line: whatever in it has the shape of
    # another anchor is neutralised first (as inject and transform do).
    subject = neutralize_forgeries(one_line(ticket.subject))
    return f"{anchor_line(ticket.ticket_id, subject, label)}\n\n{text}"


def is_whole_document(batch: Batch, batch_count: int) -> bool:
    """One batch of one text item that begins with a title line: the whole document (strategy NONE)."""
    if batch_count != 1 or len(batch.items) != 1:
        return False
    text = batch.text(batch.items[0])
    return text is not None and starting_title(text) is not None


def inject(batch: Batch, ticket: Ticket | None, options: Options) -> tuple[list[Item], Counts]:
    """The batch's items with every text chunk of the ticket anchored (same number, same order)."""
    counts = Counts(chunks_in=len(batch.items), chunks_out=len(batch.items))
    items = []
    for item in batch.items:
        text = batch.text(item)
        if not holds_text(text):
            counts.not_text += 1
        elif ticket is None:
            counts.unknown_ticket += 1
        else:
            item = batch.updated(item, _anchored(text, ticket, options, counts), ticket.metadata())
        items.append(item)
    return items, counts


def chunk(
    batch: Batch, ticket: Ticket, file_metadata: Mapping[str, Any], tokenizer: Tokenizer, options: Options
) -> tuple[list[Item], Counts, list[str]]:
    """The batch's one item, the whole document, cut by the ticket-aware chunker into chunks of at most
    ``options.chunk_tokens`` tokens of ``tokenizer``; each chunk checked; the chunker's warnings.

    The chunker gets the file's metadata with the ticket's resolved (``note_numbers`` among them gives
    the chunks their ``#note-n`` links). Each chunk's metadata is the item's own, less its chunk id (one
    chunk became several), then the ticket's (``ticket_id``, ``subject``, ``url``: what an auditor reads
    the output batches by), then what the chunker says of this chunk (section, the note's url and
    author, position). The file's other keys (project, status, dates) are not repeated in every chunk:
    Bedrock gives every chunk its file's metadata already, chunk-level keys overriding. ChunkError (a
    ValueError): the chunker cannot cut this document.
    """
    (item,) = batch.items
    document = batch.text(item)
    assert document is not None  # is_whole_document chose this mode
    plain = {key: plain_value(value) for key, value in file_metadata.items()}
    metadata = {**plain, **ticket.metadata()}
    chunked = chunk_document(document.lstrip("\ufeff"), metadata, tokenizer, options.chunk_tokens)
    kept = {key: value for key, value in batch.metadata(item).items() if key != CHUNK_ID_METADATA}
    base = {**kept, **ticket.metadata()}
    counts = Counts(chunks_in=1, chunks_out=len(chunked.chunks))
    items = []
    for c in chunked.chunks:
        own = {key: value for key, value in c.metadata.items() if value is not None and metadata.get(key) != value}
        items.append(batch.made(_anchored(c.text, ticket, options, counts), {**base, **own}))
    return items, counts, chunked.warnings


def _anchored(text: str, ticket: Ticket, options: Options, counts: Counts) -> str:
    # Another ticket's anchor or title in this ticket's chunk can only be a forgery (a file transform
    # did not write, a quote): escaped, so that it names no ticket in the index or in a prompt.
    own = neutralize_forgeries(text, keep=ticket.ticket_id)
    if own != text:
        counts.neutralised += 1
    if holds_complete_anchor(own, ticket):
        counts.already_anchored += 1
        return own
    counts.anchored += 1
    return with_anchor(own, ticket, options.label)
