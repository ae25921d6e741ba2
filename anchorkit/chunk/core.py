"""A ticket's anchored document → chunks of at most N tokens that each name their ticket. Pure: no I/O.

Every chunk but the first begins with the ticket's full anchor ``> チケット #ID: subject`` and a
blank line; the first begins with the document's title line. A title line longer than a whole chunk
(255 Japanese characters of subject are about 350 tokens) is cut inside as any such line is: the first
chunk begins with as much of it as fits, still a title line of the ticket. Nothing else in a chunk is an anchor:
the chunks are cut from the document's content (``anchors.strip_anchors``), so the anchors inside
the document, which only serve chunkers that cannot be told where to cut, are gone. A ticket rendered
for chunking comes as its outline (``render.document.render_outline``): that content, and where its
section and journal headings are, with no anchors to place, find and take out again.

Where to cut, best first:

- between sections (basic info, description, history) and between journals: short journals are
  packed together, and one that fits in a chunk is not split unless packing gains a lot from it;
- before a heading inside a text, between blocks;
- between lines where the spacing code may cut (render/spacing.py: list items, lines of a
  paragraph or a quote, table rows with the header and delimiter rows repeated, code lines with
  the fence or ``<pre>`` closed and reopened);
- after a sentence end inside a paragraph line (spacing.sentence_cuts);
- only as a last resort, between other lines or inside a line longer than a chunk (before a
  letter or digit, after a space where there is one, so that no half can start a construct that
  reads as an anchor or a title).

Among the places that keep a chunk within N tokens, the one with the best ``fill - penalty`` is
taken (a fuller chunk against a worse boundary), so the chunk count stays near the fewest possible
while most chunks start at a journal or a section. The content is tokenized once and the pieces'
token counts are read off its token offsets; every chunk is then counted whole before it is
accepted (a cut inside a token may cost one more), so no chunk is ever over N tokens. A ticket that
comes out at more than MOST_CHUNKS (1.25) times the fewest chunks possible (at a small N, lines that fit
in a chunk but not in what is left of one end chunks half full) is packed again, fuller: cut inside its
lines where a better boundary is not nearly as good.

Chunk metadata locate the chunk: ``section``, and for a chunk that starts inside a journal the
journal's heading date and author and its Redmine note number (``url`` ends in ``#note-n``), taken
from the document metadata's ``note_numbers`` (the note numbers of the history's journals, in order; see
render/sidecar.py). Without them the url is the issue's own: a link to the wrong note would be worse.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from operator import sub
from typing import Any

from anchorkit.anchors import (
    ANCHOR_PATTERN,
    TITLE_PATTERN,
    anchor_cuts,
    anchor_line,
    anchor_of,
    code_closer,
    find_anchors,
    find_titles,
)
from anchorkit.chunk.cuts import HEADING_LINE, after_heading, code_lines, cut_before, cut_subject
from anchorkit.chunk.pieces import Lines, Piece, Segment, segments
from anchorkit.chunk.positions import TokenPositions
from anchorkit.chunk_names import chunk_id
from anchorkit.note_ranges import format_note_numbers, metadata_int, parse_note_numbers
from anchorkit.render.document import Outline
from anchorkit.render.markdown_text import escape_plain
from anchorkit.render.spacing import cut_plan, sentence_cuts
from anchorkit.tokens import KnownCounts, Tokenizer, without

DEFAULT_CHUNK_TOKENS = 300
# The anchor that heads every chunk may take at most this share of a chunk (a longer subject is cut,
# ``…`` marking the cut, as the anchors inside documents are).
MAX_HEADER_SHARE = 4
# Below this many tokens of content a chunk (after its anchor and overlap) holds too little to be useful.
MIN_CONTENT_TOKENS = 16


# Boundary levels, best first, and what a chunk ending there gives up (in fractions of a chunk): on
# long tickets at 300 tokens, 0.5% of the journals that fit in a chunk are split, for 1.16x the
# fewest chunks possible (with half these penalties: 3.1%, 1.14x; tests/benchmarks/bench_chunk.py).
SEGMENT, HEADING, BLOCK, LINE, SENTENCE, FORCED_LINE, FORCED = range(7)
_PENALTY = {SEGMENT: 0.0, HEADING: 0.1, BLOCK: 0.3, LINE: 0.5, SENTENCE: 0.65}
# A journal or section that would fit in a chunk is looked into only when the chunk would otherwise
# be less full than this.
_REFINE_BELOW = 0.8
# At most this many times the fewest chunks possible (ceil((content - header) / (N - header - overlap))): a
# ticket cut into more (lines that fit in a chunk but not in what is left of one, at a small N; a table of rows
# of half a chunk) is packed again, fuller: its pieces cut to a sixth of a chunk's room (after sentences,
# between lines, inside lines: _FILL_PIECES), the boundaries counting for a fifth of what they do
# (_FILL_PENALTY), a forced cut no longer beaten by any other boundary. Tickets within it are cut as before.
MOST_CHUNKS = 1.25
_FILL_PIECES = 6
_FILL_PENALTY = 0.2
# A first packing that has made this many chunks, half as many more than MOST_CHUNKS times the fewest for the
# content they hold, is given up for the fuller one at once.
_GIVE_UP_AFTER = 8

# A section or journal heading and its anchor, from the line break before it (the document's first line
# is its title): a search for a line break is four times faster than trying "^" at every character.
_DOCUMENT_HEADING = re.compile(r"\n(#{2,3}) [^\n]*\n\n(> [^\n]*)(?=\n\n|\n?\Z)")
_ID_COLON = re.compile(r"#\d{1,12}:")  # what every anchor and title line holds


class ChunkError(ValueError):
    """A document that cannot be chunked (the message names the ticket and says why)."""


# Not frozen: a frozen dataclass sets each field through object.__setattr__, five times the cost of
# making one (2.5 us against 0.5), and a long ticket has dozens of chunks.
@dataclass(slots=True)
class Chunk:
    """One chunk: ``text`` = ``header`` + ``reopened`` + the content from ``start`` to ``end`` + ``closed``.

    Offsets are into the ticket's content, the document without its anchors (``anchors.strip_anchors``),
    which is the same whatever the document's spacing options. ``own_start`` is where the part not
    already in the previous chunk begins (= ``start`` without overlap): the content from ``own_start``
    to ``end`` of all chunks, in order, is the whole content.

    Its metadata are the ticket's (``shared``: the same mapping for every chunk of the ticket) with the
    chunk's own items laid over them (``own``: where it is, which note it links to).
    """

    id: str
    ticket_id: int
    text: str
    shared: Mapping[str, Any]
    own: dict[str, Any]
    header: str  # "" for the first chunk (it begins with the title line), else the anchor and a blank line
    reopened: str  # a code block's opening line, or a table's header and delimiter rows, repeated
    closed: str  # the line closing a code block that the cut left open
    start: int
    own_start: int
    end: int

    @property
    def metadata(self) -> dict[str, Any]:
        return {**self.shared, **self.own}


@dataclass
class ChunkedTicket:
    ticket_id: int
    chunks: list[Chunk]
    warnings: list[str] = field(default_factory=list)


def shortest_header(label: str) -> str:
    """The shortest header a chunk can begin with (ticket #1, no subject): what --chunk-tokens must leave room for."""
    return anchor_line(1, "", label) + "\n\n"


def written_subject(subject: str) -> str:
    """A subject as documents and chunk headers write it: escaped as plain Markdown text."""
    return escape_plain(subject)


def chunk_document(
    document: str | Outline,
    metadata: Mapping[str, Any],
    tokenizer: Tokenizer,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = 0,
) -> ChunkedTicket:
    """The chunks of one ticket's anchored Markdown document (``anchorkit transform``'s, any options),
    or of its outline (``render.document.render_outline``: the same chunks, without anchors to take out).

    ``metadata``: the document's metadata attributes, as its sidecar has them or as Bedrock passes
    the file's metadata: ``ticket_id`` and ``subject`` (else the title line's), ``url`` (the issue's
    Redmine URL), ``note_numbers`` (the history journals' note numbers, ``"1-3,5"`` or a list), anything
    else (project, status, dates...) copied to every chunk. ``tokenizer``: what chunks are measured
    with (``anchorkit.tokens``; cl100k_base for an exact guarantee). ``overlap_tokens``: each chunk
    but the first also repeats up to that many tokens of the end of the previous one (0: none).

    Raises :class:`ChunkError` for a document without a title line, a title of another ticket than
    ``metadata`` says, or a chunk size too small for the ticket's anchor.
    """
    outline = document if isinstance(document, Outline) else document_outline(document)
    return _Chunker(outline, metadata, tokenizer, chunk_tokens, overlap_tokens).run()


def document_outline(document: str) -> Outline:
    """An anchored document's outline: its content (``anchors.strip_anchors``) and its section and journal
    headings, found as a line followed by a blank line and an anchor of the ticket (content headings are
    demoted below those levels and content cannot hold a genuine anchor, so nothing else has that shape)."""
    title = _title(document)
    cuts = anchor_cuts(document)
    cut_starts = [start for start, _ in cuts]
    removed = list(accumulate((end - start for start, end in cuts), initial=0))
    content = without(document, cuts)
    details_heading = content.find("\n\n") + 2  # the basic info's heading is the title's next line
    headings = []
    for match in _DOCUMENT_HEADING.finditer(document):
        anchor = ANCHOR_PATTERN.fullmatch(match[2])
        offset = match.start() + 1
        offset -= removed[bisect_right(cut_starts, offset)]
        if anchor is not None and int(anchor["id"]) == int(title["id"]) and offset != details_heading:
            headings.append((offset, match[1], match[0].split("\n", 2)[1]))
    return Outline(content, headings)


def _title(document: str) -> re.Match[str]:
    title = TITLE_PATTERN.match(document)
    if title is None:
        raise ChunkError("the document does not begin with a title line ('# チケット #ID: subject')")
    return title


class _Chunker:
    def __init__(
        self,
        outline: Outline,
        metadata: Mapping[str, Any],
        tokenizer: Tokenizer,
        chunk_tokens: int,
        overlap_tokens: int,
    ) -> None:
        self.tokenizer = tokenizer
        counts = KnownCounts(tokenizer.count)
        counts[""] = 0
        self.count = counts.__getitem__  # tokens of a short text that recurs (the header, a fence, a table's head)
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens
        self.warnings: list[str] = []
        title = _title(outline.content)
        self.ticket_id = int(title["id"])
        named = metadata_int(metadata.get("ticket_id"))
        if named is not None and named != self.ticket_id:
            raise ChunkError(f"ticket #{named}: the document's title line is ticket #{self.ticket_id}'s")
        what = f"ticket #{self.ticket_id}"
        if chunk_tokens <= 0 or overlap_tokens < 0:
            raise ChunkError(f"{what}: chunk tokens must be positive and overlap tokens not negative")
        # Every header writes the subject as the document's title and anchors do (escaped as plain text),
        # so that a subject with Markdown or HTML in it reads as text in every chunk, not only the first.
        subject = metadata.get("subject")
        subject = written_subject(subject) if isinstance(subject, str) else (title["subject"] or "").replace("\\#", "#")
        self.header, self.header_cost = self._header(subject, title["label"])
        self.limit = chunk_tokens - self.header_cost - overlap_tokens
        if self.limit < MIN_CONTENT_TOKENS:
            raise ChunkError(
                f"{what}: {chunk_tokens} tokens a chunk leave {self.limit} for content after the "
                f"{self.header_cost}-token anchor{' and the overlap' if overlap_tokens else ''}"
                f" (at least {MIN_CONTENT_TOKENS} needed)"
            )
        # A document without a sidecar names its subject in its title line alone: the chunks say it all the same.
        titled = anchor_of(title).subject
        self.metadata: dict[str, Any] = {"ticket_id": self.ticket_id, **({"subject": titled} if titled else {})}
        self.metadata.update((key, value) for key, value in metadata.items() if key != "note_numbers")
        self.metadata["ticket_id"] = self.ticket_id
        self.base_url = str(metadata["url"]).split("#", 1)[0] if metadata.get("url") else None
        self.content = outline.content
        self.segments, self.journals = segments(outline)
        # Without its anchors the content names no ticket but in its title line (forged anchors are
        # escaped): then a chunk of whole lines of it names its ticket by its header alone, and only a
        # chunk cut inside a line needs looking at (_check).
        self.whole_lines_name_nothing = self._names_nothing_but_its_title()
        self.notes = self._note_numbers(metadata.get("note_numbers"))
        self.positions = TokenPositions(self.content, tokenizer, self.count)
        self.pieces = self._packing(fuller=False)

    def _packing(self, fuller: bool) -> list[Piece]:
        """Set how the packer weighs boundaries and the most a piece may cost (``fuller``: see MOST_CHUNKS);
        the pieces to pack from, the segments whole."""
        scale = _FILL_PENALTY if fuller else 1.0
        self.penalty: Mapping[int, float] = {level: penalty * scale for level, penalty in _PENALTY.items()}
        self.forced_penalty = scale
        self.forced_last = not fuller  # any boundary beats a forced cut
        self.refine_below = 1.0 if fuller else _REFINE_BELOW
        self.piece_room: int | None = max(1, self.limit // _FILL_PIECES) if fuller else None  # None: a chunk's room
        return [
            Piece(segment.start, segment.end, self.positions.cost(segment.start, segment.end), SEGMENT, index, True)
            for index, segment in enumerate(self.segments)
        ]

    def _names_nothing_but_its_title(self) -> bool:
        """Whether the content holds no anchor and one title line. Both need ``#<id>:`` in their line: a
        content without one after its first line is only looked at there (most are; no regex scan)."""
        content = self.content
        first_end = content.find("\n") if "\n" in content else len(content)
        if _ID_COLON.search(content, first_end) is None:
            first = content[:first_end]
            return ANCHOR_PATTERN.match(first) is None and TITLE_PATTERN.match(first) is not None
        return not find_anchors(content) and len(find_titles(content)) == 1

    # ------------------------------------------------------------------ header, notes

    def _header(self, subject: str, label: str) -> tuple[str, int]:
        """The anchor line and blank line that begin every chunk but the first, and their cost."""
        most = self.chunk_tokens // MAX_HEADER_SHARE
        header = anchor_line(self.ticket_id, subject, label) + "\n\n"
        if self.count(header) > most:
            low, high = 1, len(subject)  # the longest cut subject whose anchor fits
            while low < high:
                middle = (low + high + 1) // 2
                if self.count(anchor_line(self.ticket_id, cut_subject(subject, middle), label) + "\n\n") <= most:
                    low = middle
                else:
                    high = middle - 1
            header = anchor_line(self.ticket_id, cut_subject(subject, low), label) + "\n\n"
        return header, self.count(header)

    def _note_numbers(self, notes: Any) -> list[int] | None:
        if notes in (None, "", []):
            return None
        numbers = parse_note_numbers(notes)
        if numbers is None or len(numbers) != len(self.journals):
            self.warnings.append(
                f"ticket #{self.ticket_id}: the note numbers ({notes!r}) do not match the "
                f"{len(self.journals)} journals of the document; links go to the issue, not to notes"
            )
            return None
        return numbers

    # ------------------------------------------------------------------ packing

    def run(self) -> ChunkedTicket:
        chunks = self._pack(give_up=True)
        if chunks is None or len(chunks) > MOST_CHUNKS * self._fewest(self.positions.firsts[-1]):
            self.pieces = self._packing(fuller=True)
            try:
                fuller = self._pack()
            except ChunkError:  # (a cut _check refuses: none is known; the first packing then stands)
                fuller = None
            if fuller is not None and (chunks is None or len(fuller) < len(chunks)):
                chunks = fuller
            elif chunks is None:
                self.pieces = self._packing(fuller=False)
                chunks = self._pack()
        assert chunks is not None
        return ChunkedTicket(self.ticket_id, chunks, self.warnings)

    def _fewest(self, tokens: int) -> int:
        """The fewest chunks ``tokens`` of content could be packed into, each but the first with its header (and
        overlap)."""
        return max(1, -(-(tokens - self.header_cost) // (self.chunk_tokens - self.header_cost - self.overlap_tokens)))

    def _pack(self, give_up: bool = False) -> list[Chunk] | None:
        """The chunks, packed as ``_end`` chooses; with ``give_up``, None as soon as the chunks so far are clearly
        more than MOST_CHUNKS times the fewest for the content they hold (the ticket will be packed again)."""
        chunks: list[Chunk] = []
        first = 0  # piece index where the next chunk's own content starts
        previous_start = 0  # piece index where the previous chunk started
        while first < len(self.pieces):
            start = first
            if chunks and self.overlap_tokens:
                start, first = self._overlap(previous_start, first)
            budget = self.chunk_tokens - (self.header_cost if chunks else 0)
            while True:
                end = self._end(start, first, budget)
                if end is None:  # not even the first piece fits: cut it smaller
                    self._shrink(start, first, budget)
                    continue
                chunk = self._chunk(len(chunks), start, first, end)
                excess = self._tokens(chunk) - self.chunk_tokens
                if excess <= 0:
                    break
                budget -= excess  # a cut inside a token costs more than its offsets say: take less
            chunks.append(chunk)
            previous_start, first = start, end
            if (
                give_up
                and len(chunks) >= _GIVE_UP_AFTER
                and (len(chunks) > MOST_CHUNKS * self._fewest(self.positions.at(chunk.end)) + _GIVE_UP_AFTER // 2)
            ):
                return None
        return chunks

    def _tokens(self, chunk: Chunk) -> int:
        """The chunk's exact token count (read off the content's where it can: TokenPositions.count)."""
        if not self.tokenizer.exact:
            return self.tokenizer.count(chunk.text)
        return self.positions.count((chunk.header, chunk.reopened), chunk.start, chunk.end, chunk.closed, self.count)

    def _line_start(self, offset: int) -> bool:
        """Whether ``offset`` is where a line of the content starts (or its end)."""
        return not offset or offset >= self.positions.length or self.content[offset - 1] == "\n"

    def _end(self, start: int, first: int, budget: int) -> int | None:
        """The piece index before which the chunk that begins at piece ``start`` (its own content at
        ``first``) ends; None when not even piece ``first`` fits in ``budget``."""
        pieces = self.pieces
        used = pieces[start].reopen_cost + sum(piece.cost for piece in pieces[start:first])
        # The best place to end so far (None: none yet): any boundary beats a forced one; among those
        # alike, the best score (the later one on a tie).
        best_end: int | None = None
        best_lines = 0  # the chunk ends after that many lines of piece best_end (0: before the piece)
        best_score, best_forced = 0.0, True
        line_penalty = self.penalty[LINE]
        index = first
        while index < len(pieces):
            piece = pieces[index]
            close_cost = pieces[index + 1].close_cost if index + 1 < len(pieces) else 0
            inner = piece.inner
            if inner is not None:  # the furthest of its line boundaries that fits
                lines = bisect_right(inner.tokens, budget - used - inner.close_cost + inner.first)
                if lines:
                    score = (used + inner.tokens[lines - 1] - inner.first + inner.close_cost) / budget - line_penalty
                    if best_end is None or best_forced or score >= best_score:
                        best_end, best_lines, best_score, best_forced = index, lines, score, False
                if lines < len(inner.tokens):
                    break
            if used + piece.cost + close_cost > budget:
                if piece.whole and (best_end is None or best_forced or best_score < self.refine_below):
                    pieces[index : index + 1] = self._refine(piece)
                    continue
                break
            used += piece.cost
            index += 1
            if index == len(pieces):
                return index
            level = pieces[index].level
            score = (used + close_cost) / budget - self.penalty.get(level, self.forced_penalty)
            forced = level >= FORCED_LINE and self.forced_last
            if best_end is None or (best_forced and not forced) or (best_forced == forced and score >= best_score):
                best_end, best_lines, best_score, best_forced = index, 0, score, forced
        if best_end is not None and best_lines:
            self._cut_lines(best_end, best_lines)
            return best_end + 1
        return best_end

    def _cut_lines(self, index: int, lines: int) -> None:
        """Cut piece ``index`` after its first ``lines`` lines (at its ``lines``-th inner boundary)."""
        piece = self.pieces[index]
        inner = piece.inner
        assert inner is not None and 0 < lines <= len(inner.offsets)
        at, token = inner.offsets[lines - 1], inner.tokens[lines - 1]
        head = Piece(
            piece.start,
            at,
            token - inner.first,
            piece.level,
            piece.segment,
            piece.whole,
            piece.reopen,
            piece.close,
            piece.reopen_cost,
            piece.close_cost,
            inner.part(0, lines - 1, inner.first),
        )
        tail = Piece(
            at,
            piece.end,
            piece.cost - head.cost,
            LINE,
            piece.segment,
            False,
            inner.reopen,
            inner.close,
            inner.reopen_cost,
            inner.close_cost,
            inner.part(lines, None, token),
        )
        self.pieces[index : index + 1] = [head, tail]

    def _shrink(self, start: int, first: int, budget: int) -> None:
        """Cut piece ``first`` so that its first part fits in a chunk that begins at piece ``start``."""
        pieces = self.pieces
        if pieces[first].inner is not None:  # (its first line is what must be cut)
            self._cut_lines(first, 1)
        piece = pieces[first]
        used = pieces[start].reopen_cost + sum(p.cost for p in pieces[start:first])
        room = budget - used - (pieces[first + 1].close_cost if first + 1 < len(pieces) else 0)
        parts = (
            self._force(piece.start, piece.end, room, piece.segment, (piece.level, piece.reopen, piece.close))
            if room >= 1
            else []
        )
        if len(parts) < 2:
            raise ChunkError(f"ticket #{self.ticket_id}: cannot fit the text at offset {piece.start} in a chunk")
        pieces[first : first + 1] = parts

    def _overlap(self, previous_start: int, first: int) -> tuple[int, int]:
        """Where the chunk whose own content starts at piece ``first`` begins, to repeat up to
        ``overlap_tokens`` of the end of the previous chunk (which began at piece ``previous_start``);
        and ``first`` again (looking into the previous chunk's last segment moves it)."""
        last = self.pieces[first - 1]
        if last.whole and last.cost > self.overlap_tokens:
            refined = self._refine(last)
            self.pieces[first - 1 : first] = refined
            first += len(refined) - 1
        # The overlap may end between the lines of any piece of the previous chunk but its first line.
        if self.pieces[previous_start].inner is not None:
            self._cut_lines(previous_start, 1)
            first += 1
        start, cost = first, 0
        while start - 1 > previous_start:
            piece = self.pieces[start - 1]
            if piece.inner is not None:  # its last line apart
                self._cut_lines(start - 1, len(piece.inner.offsets))
                start, first = start + 1, first + 1
                continue
            if piece.level >= FORCED_LINE or cost + piece.cost + piece.reopen_cost > self.overlap_tokens:
                break
            start, cost = start - 1, cost + piece.cost
        # A piece too long to repeat whole may still end with sentences that fit (the last of a long paragraph).
        tail = self._sentence_tail(start - 1, self.overlap_tokens - cost) if start > previous_start else None
        if tail is not None:
            self.pieces[start - 1 : start] = tail
            first += 1
        # The offsets say one token less where the previous chunk ends inside a token: counted exactly, the
        # overlap loses pieces from its start until it is within overlap_tokens.
        end = self.pieces[first].start
        if self.tokenizer.exact and start < first and not self.positions.clean(end):
            while start < first and (
                self.positions.count((), self.pieces[start].start, end, "", self.count) > self.overlap_tokens
            ):
                start += 1
        return start, first

    def _sentence_tail(self, index: int, room: int) -> list[Piece] | None:
        """Piece ``index`` as its head and the longest tail of whole sentences that costs at most ``room`` tokens,
        cut where a paragraph may be cut inside a line (spacing.sentence_cuts); None if it has none (or is code
        or a table, which a chunk that starts inside them would reopen, or begins at a forced cut)."""
        piece = self.pieces[index]
        if room <= 0 or piece.reopen or piece.close or piece.inner is not None or piece.level >= FORCED_LINE:
            return None
        lines, starts, plan = self._planned(piece)
        for number in sorted(plan.paragraph_lines):
            for cut in sentence_cuts(plan, lines, number):
                at = starts[number] + cut
                if self.positions.cost(at, piece.end) > room:
                    continue
                # The offsets say one token less where ``at`` is inside a token: counted exactly before it is taken.
                if self.tokenizer.exact and self.positions.count((), at, piece.end, "", self.count) > room:
                    continue
                head_cost = self.positions.cost(piece.start, at)
                head = Piece(piece.start, at, head_cost, piece.level, piece.segment)
                return [head, Piece(at, piece.end, piece.cost - head_cost, SENTENCE, piece.segment)]
        return None

    def _chunk(self, index: int, start: int, first: int, end: int) -> Chunk:
        pieces = self.pieces
        header = self.header if index else ""
        reopened = pieces[start].reopen if index else ""
        closed = pieces[end].close if end < len(pieces) else ""
        begin, own, stop = pieces[start].start, pieces[first].start, pieces[end - 1].end
        text = header + reopened + self.content[begin:stop] + closed
        if not (self.whole_lines_name_nothing and self._line_start(begin) and self._line_start(stop)):
            self._check(text, index)
        return Chunk(
            chunk_id(self.ticket_id, index),
            self.ticket_id,
            text,
            self.metadata,
            self._chunk_metadata(
                index, self.segments[pieces[start].segment : pieces[end - 1].segment + 1], begin, stop
            ),
            header,
            reopened,
            closed,
            begin,
            own,
            stop,
        )

    def _check(self, text: str, index: int) -> None:
        """No chunk may name another ticket, nor hold an anchor besides its header (cuts inside a line
        are placed so that this cannot happen; this makes sure that it did not)."""
        anchors, titles = find_anchors(text), find_titles(text)
        expected = (0, 1) if index == 0 else (1, 0)
        if (len(anchors), len(titles)) != expected or {a.ticket_id for a in anchors + titles} != {self.ticket_id}:
            raise ChunkError(f"ticket #{self.ticket_id}: chunk {index} would hold another anchor or title line")

    def _chunk_metadata(self, index: int, segments: list[Segment], start: int, end: int) -> dict[str, Any]:
        """The chunk's own metadata items (laid over the ticket's); ``segments``: those the chunk holds
        text of, from the one it begins in."""
        segment = segments[0]
        metadata: dict[str, Any] = {}
        url = self.base_url
        metadata["section"] = segment.section
        if segment.journal is not None:
            metadata["journal_date"], metadata["journal_author"] = self.journals[segment.journal]
            if self.notes is not None:
                metadata["note"] = self.notes[segment.journal]
                url = f"{url}#note-{metadata['note']}" if url else None
        if self.notes is not None:
            # Every note the chunk holds text of (short journals are packed together): verify checks cited notes on it.
            held = [self.notes[s.journal] for s in segments if s.journal is not None]
            if held:
                metadata["chunk_notes"] = format_note_numbers(held) if len(held) > 1 else str(held[0])
        if url:
            metadata["url"] = url
        metadata["chunk_index"] = index
        metadata["char_start"] = start
        metadata["char_end"] = end
        return metadata

    # ------------------------------------------------------------------ looking into a segment

    def _piece(
        self,
        start: int,
        end: int,
        level: int,
        segment: int,
        reopen: str = "",
        close: str = "",
        cost: int | None = None,
        inner: Lines | None = None,
    ) -> Piece:
        """``cost``: its tokens, when the caller knows them (else read off the content's)."""
        if cost is None:
            cost = self.positions.cost(start, end)
        return Piece(
            start, end, cost, level, segment, False, reopen, close, self.count(reopen), self.count(close), inner
        )

    def _refine(self, piece: Piece) -> list[Piece]:
        """A whole segment as the pieces between the places where it may be cut: the lines of a run whose
        boundaries are alike stay one piece (cut between them by bisection: Lines), a line longer than a
        chunk is cut inside (_split)."""
        lines, starts, plan = self._planned(piece)
        numbers, bounds = self._boundaries(piece, lines, plan)
        at = self.positions.at
        tokens = [at(starts[number]) for number in numbers] + [at(piece.end)]  # where each piece's tokens start
        ends = [starts[number] for number in numbers[1:]] + [piece.end]
        pieces: list[Piece] = []
        code: dict[int, tuple[str, str]] | None = None
        index = 0
        while index < len(numbers):
            stop = index + 1  # past the lines after it whose boundaries are alike line boundaries
            if stop < len(bounds) and bounds[stop][0] == LINE:
                while stop < len(bounds) and bounds[stop] == bounds[index + 1]:
                    stop += 1
            inner = self._lines(bounds, tokens, index, stop, [starts[number] for number in numbers[index + 1 : stop]])
            if inner is not None:
                level, reopen, close = bounds[index]
                cost = tokens[stop] - tokens[index]
                pieces.append(
                    self._piece(
                        starts[numbers[index]], ends[stop - 1], level, piece.segment, reopen, close, cost, inner
                    )
                )
                index = stop
                continue
            for line in range(index, stop):  # each line apart (one of them is longer than a chunk)
                level, reopen, close = bounds[line]
                cost = tokens[line + 1] - tokens[line]
                new = self._piece(starts[numbers[line]], ends[line], level, piece.segment, reopen, close, cost)
                # A chunk that ends after this piece closes what the next cut leaves open (a code block).
                after = self.count(bounds[line + 1][2]) if line + 1 < len(bounds) else 0
                if new.cost + new.reopen_cost + after <= self._room(new.start):
                    pieces.append(new)
                    continue
                if code is None:
                    code = code_lines(lines, plan.code_blocks)
                next_line = numbers[line + 1] if line + 1 < len(numbers) else len(lines)
                pieces.extend(self._split(new, after, lines, starts, range(numbers[line], next_line), plan, code))
            index = stop
        return pieces

    def _planned(self, piece: Piece) -> tuple[list[str], list[int], Any]:
        """The piece's lines, the content offset where each starts (and its end), and their cut plan."""
        lines = self.content[piece.start : piece.end].split("\n")
        return lines, list(accumulate((len(line) + 1 for line in lines), initial=piece.start)), cut_plan(lines)

    def _boundaries(self, piece: Piece, lines: list[str], plan: Any) -> tuple[list[int], list[tuple[int, str, str]]]:
        """The lines of a segment that a chunk may start at, in order, and each one's level and what a cut
        there reopens and closes (``plan``: the lines' cut plan)."""
        numbers, bounds = [0], [(piece.level, "", "")]
        cuts: dict[Any, tuple[int, str, str] | None] = {}  # a code block's opener, a table's head -> its cuts'
        for number in sorted(plan):
            if number == 0 or not lines[number]:
                continue
            previous = lines[number - 1]
            if (not previous or "#" in previous[:4]) and after_heading(
                lines, number
            ):  # (the test, made when it may be)
                continue
            if number in plan.code_openers:
                opener = plan.code_openers[number]
                bound = cuts.get(opener)
                if bound is None:
                    bound = cuts[opener] = (LINE, opener + "\n", (code_closer(opener) or "") + "\n")
            elif number in plan.table_heads:
                rows = plan.table_heads[number]
                if rows not in cuts:
                    head = "\n".join(rows) + "\n"
                    # (a table whose head is long is not cut: its chunks would be mostly its head)
                    cuts[rows] = (LINE, head, "") if self.count(head) <= self.limit // 3 else None
                bound = cuts[rows]
                if bound is None:
                    continue
            elif lines[number - 1] == "":
                bound = (HEADING if HEADING_LINE.match(lines[number]) else BLOCK, "", "")
            else:
                bound = (LINE, "", "")
            numbers.append(number)
            bounds.append(bound)
        return numbers, bounds

    def _lines(
        self, bounds: list[tuple[int, str, str]], tokens: list[int], index: int, stop: int, offsets: list[int]
    ) -> Lines | None:
        """The line boundaries inside the piece made of the lines ``index:stop`` (``offsets``: where the lines
        after the first start), if there are some and each of those lines fits in a chunk (else None)."""
        if stop - index < 2:
            return None
        _, reopen, close = bounds[index + 1]
        after = self.count(bounds[stop][2]) if stop < len(bounds) else 0
        longest = max(map(sub, tokens[index + 1 : stop + 1], tokens[index:stop]))
        if longest + max(self.count(bounds[index][1]), self.count(reopen)) + max(self.count(close), after) > (
            self.limit if self.piece_room is None else self.piece_room
        ):
            return None
        return Lines(
            offsets, tokens[index + 1 : stop], tokens[index], reopen, close, self.count(reopen), self.count(close)
        )

    def _split(
        self,
        piece: Piece,
        after: int,
        lines: list[str],
        starts: list[int],
        numbers: range,
        plan: Any,
        code: dict[int, tuple[str, str]],
    ) -> list[Piece]:
        """A piece longer than a chunk (``after``: the cost of what closes it), cut after sentence
        ends, then between lines, then inside lines."""
        cuts = [(piece.start, piece.level, piece.reopen, piece.close)]
        for number in numbers:
            if number > numbers.start and lines[number]:
                if number in code and number - 1 in code:  # between two code lines
                    opener, closer = code[number]
                    cuts.append((starts[number], FORCED_LINE, opener + "\n", closer + "\n"))
                elif number not in code and number - 1 not in code and not after_heading(lines, number):
                    # (not after an opening line, before a closing one; nor after a heading: a chunk of the
                    # heading alone would hold no text, and the text would begin the next one without it)
                    cuts.append((starts[number], FORCED_LINE, "", ""))
            if number in plan.paragraph_lines:
                cuts.extend((starts[number] + cut, SENTENCE, "", "") for cut in sentence_cuts(plan, lines, number))
        ends = [(start, self.count(close)) for start, _, _, close in cuts[1:]] + [(piece.end, after)]
        pieces: list[Piece] = []
        for (start, level, reopen, close), (end, end_close) in zip(cuts, ends, strict=True):
            opener, closer = code.get(bisect_right(starts, start) - 1, ("", ""))
            # A cut inside a code line closes the code after the first part and reopens it before the next.
            reopened, closed = (opener + "\n", "\n" + closer + "\n") if opener else ("", "")
            reopen_cost, close_cost = max(self.count(reopen), self.count(reopened)), max(self.count(closed), end_close)
            room = (self.limit if self.piece_room is None else self.piece_room) - reopen_cost - close_cost
            first_room = self._room(start) - reopen_cost - close_cost
            pieces.extend(
                self._force(start, end, room, piece.segment, (level, reopen, close), reopened, closed, first_room)
            )
        return pieces

    def _room(self, start: int) -> int:
        """The most tokens a piece that begins at content offset ``start`` may cost (to fit in a chunk: the content's
        start, the title line, only ever begins the first chunk, which has no header nor overlap; or _fill's)."""
        if start == 0:
            return self.chunk_tokens
        return self.limit if self.piece_room is None else self.piece_room

    def _force(
        self,
        start: int,
        end: int,
        room: int,
        segment: int,
        cut: tuple[int, str, str],
        reopened: str = "",
        closed: str = "",
        first_room: int | None = None,
    ) -> list[Piece]:
        """``content[start:end]`` as pieces of at most ``room`` tokens (as its offsets say; the first at most
        ``first_room`` if given), cut inside lines where it must: the first after the boundary ``cut`` (its level,
        what a cut there reopens and closes), the others after a FORCED one that reopens ``reopened`` and closes
        ``closed``."""
        positions = self.positions
        level, reopen, close = cut
        pieces = []
        first, last = positions.at(start), positions.at(end)  # the token indices there
        fits = room if first_room is None else first_room
        while last - first > fits and end - start > 1:
            limit = min(max(positions.position(first + fits), start + 1), end - 1)
            # (A piece of _packing(fuller=True)'s, far shorter than a chunk, may run on to the end of a character
            # that is longer than it: an emoji's ZWJ sequence is up to 25 tokens.)
            inside = cut_before(self.content, start, limit, min(end, limit + 32) if fits < self.limit // 2 else 0)
            if not start and inside <= (title_end := self.content.find("\n")) < limit:
                # The title line fits in the first chunk: not cut there, but after it and its blank lines (a line
                # start is no letter cut_before would find).
                inside = title_end
                while inside < limit and self.content[inside] == "\n":
                    inside += 1
            inside_token = positions.at(inside)
            pieces.append(self._piece(start, inside, level, segment, reopen, close, inside_token - first))
            start, first, level, reopen, close, fits = inside, inside_token, FORCED, reopened, closed, room
        pieces.append(self._piece(start, end, level, segment, reopen, close, last - first))
        return pieces
