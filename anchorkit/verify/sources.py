"""The retrieved chunks as verify looks them up: by the ids, URIs and tickets a citation may name, with
the notes each holds, its link to Redmine, and where the retrieval's Redmine is (verify.hosts).

Pure: built from the chunks alone; nothing is built from the answer.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence

from anchorkit.pages import is_web_url
from anchorkit.untrusted import ascii_number
from anchorkit.verify.hosts import leads_elsewhere, redmine_hosts
from anchorkit.verify.ids import (
    chunk_subjects,
    chunk_ticket_ids,
    parse_ticket_id,
    redmine_issue_id,
    ticket_conflict,
    uri_ticket_id,
)
from anchorkit.verify.links import note_source, url_note, without_change_anchor
from anchorkit.verify.model import Chunk, Citation
from anchorkit.verify.similarity import MatchText


class Sources:
    """Retrieved chunks, indexed the ways a citation may name them, with cached derived values."""

    def __init__(self, chunks: Sequence[Chunk], uri_pattern: re.Pattern[str]) -> None:
        self.ordered = list(dict.fromkeys(chunks))  # the same chunk given twice (answer and --retrieval) counts once
        self.uri_pattern = uri_pattern
        self.by_id: dict[str, list[Chunk]] = {}
        self.by_uri: dict[str, list[Chunk]] = {}
        self.by_ticket: dict[int, list[Chunk]] = {}
        self.tickets: dict[str, frozenset[int]] = {}
        self.links: dict[Chunk, str] = {}
        self.foreign_urls: dict[Chunk, int] = {}
        self.conflicts: dict[Chunk, tuple[int, int]] = {}  # chunk -> (its metadata ticket_id, its URI's ticket)
        self.notes: dict[Chunk, frozenset[int] | None] = {}
        self._prepared: dict[int, MatchText] = {}
        for chunk in self.ordered:
            ids = self.located(chunk)
            self.tickets[chunk.id] = self.tickets.get(chunk.id, frozenset()) | ids
            self.by_id.setdefault(chunk.id, []).append(chunk)
            if chunk.uri:
                self.by_uri.setdefault(chunk.uri, []).append(chunk)
            for ticket_id in ids:
                self.by_ticket.setdefault(ticket_id, []).append(chunk)
        # Where the retrieval's Redmine is: the hosts of the Redmine URLs its chunks are linked to or stored at.
        self.redmine_hosts = redmine_hosts(
            url
            for chunk in self.ordered
            if self.tickets[chunk.id]
            for url in (self.links.get(chunk), chunk.uri)
            if url and is_web_url(url) and redmine_issue_id(url) is not None
        )

    def located(self, chunk: Chunk) -> frozenset[int]:
        """The chunk's tickets; its link and its notes. A url naming another ticket than the chunk's
        (by its metadata, its source URI or its anchors) is not used: neither followed nor believed,
        also when it doubles as the chunk's source URI. A chunk whose metadata and source URI name two
        tickets is neither's, and its url is not used either (ids.ticket_conflict)."""
        conflict = ticket_conflict(chunk, self.uri_pattern)
        if conflict is not None:
            self.conflicts[chunk] = conflict
            self.notes[chunk] = chunk.notes
            return frozenset()
        ids = chunk_ticket_ids(chunk, self.uri_pattern)
        url_ticket = uri_ticket_id(chunk.url, self.uri_pattern)
        own = ids
        if chunk.uri == chunk.url:  # the url doubles as the source URI: what else says which ticket it is
            own = chunk_ticket_ids(dataclasses.replace(chunk, uri=None), self.uri_pattern)
        notes = chunk.notes
        if url_ticket is not None and own and url_ticket not in own:
            self.foreign_urls[chunk] = url_ticket
            ids = own
        elif chunk.url:
            if is_web_url(chunk.url):
                self.links[chunk] = chunk.url
            fragment = url_note(chunk.url) if url_ticket is not None else None
            if fragment is not None:
                notes = (notes or frozenset()) | {fragment}
        self.notes[chunk] = notes
        return ids

    def holding(self, chunks: Iterable[Chunk], note: int) -> tuple[list[Chunk], bool]:
        """The chunks that hold the note, and whether that is known: every chunk says which notes it
        holds, or one names a note (then the notes were numbered and anchorkit's chunks that say nothing
        hold none, verify.links); a chunk of the details, holding none numbered or not, does not tell."""
        chunks = list(chunks)
        said = [self.notes.get(c) for c in chunks]
        known = any(said) or None not in said
        return [c for c, notes in zip(chunks, said, strict=True) if note in (notes or ())], known

    def resolve(self, citation: Citation) -> list[Chunk]:
        """A citation's source: the chunk at its position; else a chunk id, a source URI, a ticket (a
        URI or Redmine URL naming it, "12345", "#12345", a journal's anchor, "12345#change-45678", or one of
        its notes, "12345#note-3": the chunks of that ticket), or a bare number as the chunk's 1-based
        position. A Redmine URL on another host than the retrieval's Redmine (``elsewhere``) names no
        retrieved chunk."""
        if citation.position is not None:
            in_range = 0 <= citation.position < len(self.ordered)
            return [self.ordered[citation.position]] if in_range else []
        source_id = citation.source_id
        if source_id in self.by_id:
            return self.by_id[source_id]
        if source_id in self.by_uri:
            return self.by_uri[source_id]
        if self.elsewhere(source_id):
            return []
        noted = note_source(source_id)
        ticket_id = uri_ticket_id(source_id, self.uri_pattern) or parse_ticket_id(without_change_anchor(source_id))
        ticket_id = noted.ticket_id if noted is not None else ticket_id
        if ticket_id is not None and ticket_id in self.by_ticket:
            return self.by_ticket[ticket_id]
        # A bare number naming nothing else is the chunk's 1-based number in the prompt (ASCII digits: "²" is none).
        position = ascii_number(source_id)
        if position is not None and 1 <= position <= len(self.ordered):
            return [self.ordered[position - 1]]
        return []

    def elsewhere(self, url: str) -> bool:
        """Whether ``url`` is a Redmine issue URL on another host than the retrieved chunks' Redmine."""
        return leads_elsewhere(url, self.redmine_hosts)

    def ticket_ids(self, chunks: Iterable[Chunk]) -> set[int]:
        return set().union(*(self.tickets[c.id] for c in chunks))

    def subjects(self, ticket_id: int) -> set[str]:
        return set().union(*(chunk_subjects(c, [ticket_id]) for c in self.by_ticket.get(ticket_id, [])))

    def match_text(self, chunk: Chunk) -> MatchText:
        key = id(chunk)  # the chunks outlive this index, so their ids stay unique
        if key not in self._prepared:
            self._prepared[key] = MatchText.of(chunk.text)
        return self._prepared[key]
