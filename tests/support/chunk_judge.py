"""A judge of anchorkit's chunks that reads them as a consumer does (text and metadata), not as the chunker
made them: the five promises of ``anchorkit chunk`` checked for one ticket at a time.

1. ``anchor``: the first chunk begins with the ticket's title line (or as much of it as fits, when the
   line is longer than a chunk), every other with the ticket's complete anchor line (the subject whole, or
   cut with ``…``) and a blank line; no chunk holds another anchor or title line, nor a line of that shape
   naming another ticket. (``exposed``, reported apart: an id some cut *inside* a chunk would lay open.)
2. ``over``: no chunk is over N cl100k_base tokens (counted exactly, whole).
3. ``content``: each chunk is its header, then at most a repeated code-block opening line or table header
   and delimiter rows, then ``content[char_start:char_end]``, then at most a line closing a code block;
   the chunks' ranges start at 0, end at the content's end and follow each other (overlapping the previous
   one's end only with ``--chunk-overlap``): together they give the whole content back, in order.
4. ``count``: at most ``RATIO`` times the packing lower bound ``ceil((content - header) / (N - header))``
   (with an overlap O, ``N - header - O``: the fewest chunks if each repeated all it may).
5. ``links``: every chunk has the issue's ``url``; a chunk that begins in the history links to the note
   number of the journal it begins in (``#note-n``), any other to the issue; ``section`` says where it begins.

The ticket's content is its transform document without anchors (``strip_anchors``), rendered by the
caller; the journals' places come from the document's outline and their numbers from the snapshot.
"""

from __future__ import annotations

import functools
import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from anchorkit.anchors import (
    ANCHOR_PATTERN,
    TABLE_DELIMITER,
    anchor_of,
    code_closer,
    exposed_ticket_ids,
    find_anchors,
    find_titles,
)

RATIO = 1.25
PROMISES = ("anchor", "over", "content", "count", "links")
_SHAPE = re.compile(r"[>#] [^#\\\n]{1,40}? #(\d{1,12}):(?: .*)?")


def named_tickets(text: str) -> list[int]:
    """The tickets named by lines of a text shaped like an anchor or a title (leading blanks aside)."""
    return [int(match[1]) for line in text.split("\n") if (match := _SHAPE.fullmatch(line.strip()))]


@dataclass
class Ticket:
    """What the judge knows of a ticket, from its document and its snapshot issue."""

    ticket_id: int
    content: str  # its document without anchors
    title: str  # its document's first line
    anchor: str  # its full anchor line (the subject whole)
    url: str  # the url
    sections: list[tuple[int, str]]  # (content offset, "description" | "history") of each section after the first
    journals: list[int]  # content offset of each journal (the history's heading goes with the first)
    notes: list[int] | None  # the journals' Redmine note numbers, in order

    @functools.cached_property
    def lines(self) -> set[str]:
        return set(self.content.split("\n"))


@dataclass
class Verdict:
    chunks: int = 0
    tokens: int = 0
    lower_bound: int = 0
    broken: dict[str, list[str]] = field(default_factory=dict)  # promise -> what broke
    exposed: list[str] = field(default_factory=list)
    overlap_over: int = 0  # chunks repeating more than the overlap asked for

    def fail(self, promise: str, why: str) -> None:
        self.broken.setdefault(promise, []).append(why)


def sections_of(headings: Sequence[tuple[int, str, str]]) -> tuple[list[tuple[int, str]], list[int]]:
    """Where a ticket's content's sections begin and which they are (``description``, or ``history``: the last
    ``##`` before the first journal), and where its journals begin, from its outline's headings."""
    journals = [offset for offset, level, _ in headings if level == "###"]
    sections = [(offset, "description") for offset, level, _ in headings if level == "##"]
    if journals:
        history = max(offset for offset, _ in sections if offset < journals[0])
        sections = [(offset, "history" if offset == history else name) for offset, name in sections]
    return sections, journals


def judge(ticket: Ticket, records: Sequence[dict[str, Any]], tokenizer: Any, limit: int, overlap: int = 0) -> Verdict:
    """The promises ``records`` (a ticket's chunks as JSON Lines objects: text, metadata) keep or break."""
    verdict = Verdict(chunks=len(records))
    content, tid = ticket.content, ticket.ticket_id
    if not records:
        verdict.fail("content", "no chunk")
        return verdict
    previous_end = 0
    header_tokens = 0
    for index, record in enumerate(records):
        text, metadata = record["text"], record["metadata"]
        where = f"chunk {index}"
        tokens = tokenizer.count(text)
        verdict.tokens += tokens
        if tokens > limit:
            verdict.fail("over", f"{where}: {tokens} tokens > {limit}")
        # 1. its anchor, and no other
        first_line, _, rest = text.partition("\n")
        if index == 0:
            whole_title = tokenizer.count(ticket.title + "\n\n") <= limit
            ok = first_line == ticket.title if whole_title else ticket.title.startswith(first_line) and first_line
            body = text
            if not ok:
                verdict.fail("anchor", f"{where}: does not begin with the title line: {first_line[:80]!r}")
            if find_anchors(text) or [t.ticket_id for t in find_titles(text)] != [tid]:
                verdict.fail("anchor", f"{where}: anchors {find_anchors(text)} titles {find_titles(text)}")
        else:
            match = ANCHOR_PATTERN.fullmatch(first_line)
            full = ticket.anchor
            # (the subject whole, or cut with "…": compared as a reader sees them, Markdown escapes aside)
            whole = anchor_of(ANCHOR_PATTERN.fullmatch(full)).subject  # type: ignore[arg-type]
            seen = anchor_of(match).subject if match else ""
            ok = (
                match is not None
                and int(match["id"]) == tid
                and (first_line == full or (seen.endswith("…") and whole.startswith(seen[:-1].rstrip())))
            )
            if not ok or not rest.startswith("\n"):
                verdict.fail("anchor", f"{where}: does not begin with its anchor: {first_line[:80]!r}")
            body = rest[1:] if rest.startswith("\n") else rest
            header_tokens = header_tokens or tokenizer.count(first_line + "\n\n")
            if [a.ticket_id for a in find_anchors(text)] != [tid] or find_titles(text):
                verdict.fail("anchor", f"{where}: anchors {find_anchors(text)} titles {find_titles(text)}")
        named = named_tickets(text)
        if set(named) - {tid} or len(named) != 1:
            verdict.fail("anchor", f"{where}: lines naming tickets {named}")
        if exposed_ticket_ids(text) - {tid}:
            verdict.exposed.append(f"{where}: {sorted(exposed_ticket_ids(text) - {tid})}")
        # 3. its content range
        start, end = metadata.get("char_start"), metadata.get("char_end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(content)):
            verdict.fail("content", f"{where}: char_start/char_end {start}/{end} of {len(content)}")
            continue
        if not _holds(body, content, start, end, ticket.lines):
            verdict.fail("content", f"{where}: text is not its header + content[{start}:{end}] (+ repeated structure)")
        if index == 0 and start != 0:
            verdict.fail("content", f"{where}: starts at {start}, not 0")
        if index and (start > previous_end or (not overlap and start != previous_end) or end <= previous_end):
            verdict.fail("content", f"{where}: [{start}, {end}) after [.., {previous_end}): content lost or repeated")
        if index and overlap and start < previous_end and tokenizer.count(content[start:previous_end]) > overlap + 1:
            verdict.overlap_over += 1
        previous_end = end
        # 5. links
        _judge_links(ticket, index, metadata, verdict)
    if previous_end != len(content):
        verdict.fail("content", f"the chunks end at {previous_end}, the content at {len(content)}")
    content_tokens = tokenizer.count(content)
    room = limit - header_tokens - overlap  # (with an overlap: as if each chunk repeated all it may)
    verdict.lower_bound = max(1, math.ceil((content_tokens - header_tokens) / room)) if header_tokens else 1
    if verdict.chunks > RATIO * verdict.lower_bound:
        verdict.fail("count", f"{verdict.chunks} chunks, lower bound {verdict.lower_bound}")
    return verdict


def _holds(body: str, content: str, start: int, end: int, lines: set[str]) -> bool:
    """Whether ``body`` is ``content[start:end]``, with at most a repeated code opener or table head before it
    (lines of the content, ``lines``) and a code-closing line after it."""
    part = content[start:end]
    at = body.find(part)
    while at != -1:
        before, after = body[:at], body[at + len(part) :]
        if _reopens(before, lines) and _closes(after):
            return True
        at = body.find(part, at + 1)
    return False


def _reopens(before: str, earlier: set[str]) -> bool:
    if not before:
        return True
    if not before.endswith("\n"):
        return False
    lines = before[:-1].split("\n")
    if len(lines) == 1:
        return code_closer(lines[0]) is not None and lines[0] in earlier
    if len(lines) == 2:
        return "|" in lines[0] and bool(TABLE_DELIMITER.match(lines[1])) and all(line in earlier for line in lines)
    return False


def _closes(after: str) -> bool:
    """Whether ``after`` is nothing, or one line (after a line break, when the cut was inside a line) that closes
    a code block: a fence or ``</pre>``."""
    if not after:
        return True
    closer = after.removeprefix("\n")
    if not closer.endswith("\n") or "\n" in closer[:-1]:
        return False
    closer = closer.strip()
    return closer in ("</pre>", "</code></pre>") or (len(closer) >= 3 and set(closer) <= set("`~"))


def _judge_links(ticket: Ticket, index: int, metadata: dict[str, Any], verdict: Verdict) -> None:
    where = f"chunk {index}"
    url, start = metadata.get("url"), metadata["char_start"]
    section_index = bisect_right([offset for offset, _ in ticket.sections], start) - 1
    section = "details" if section_index < 0 else ticket.sections[section_index][1]
    if metadata.get("section") != section:
        verdict.fail("links", f"{where}: section {metadata.get('section')!r}, begins in {section}")
    expected = ticket.url
    if section == "history" and ticket.notes is not None:
        journal = max(bisect_right(ticket.journals, start) - 1, 0)
        expected = f"{ticket.url}#note-{ticket.notes[journal]}"
    if url != expected:
        verdict.fail("links", f"{where}: url {url!r}, expected {expected!r}")
