"""Chunkers that imitate Amazon Bedrock Knowledge Base chunking, and LangChain's splitters.

Bedrock-like chunkers work on tokens: they take a document's ``TextLayout`` (where its sentences and
headings are) and ``TokenizedText``, and return chunks as token index ranges ``(start, end)``, so
the audit never decodes a chunk. Each returns one list of chunks per level (one level, except
hierarchical: children and parents).

- ``fixed``: windows of ``max_tokens`` tokens, consecutive windows sharing ``overlap`` percent.
  (Bedrock's FIXED_SIZE: maxTokens 300, overlapPercentage 20.)
- ``hierarchical``: parents of ``parent`` tokens, each cut into children of ``child`` tokens;
  ``overlap`` tokens shared between neighbours at both levels. (Bedrock: 1,500 / 300, 60.)
  Bedrock retrieves children and hands the parent to the model, so both levels are reported.
- ``semantic``: Bedrock embeds each sentence (with ``buffer`` neighbours), and starts a chunk where
  the distance between neighbouring sentences is above the ``breakpoint`` percentile; chunks are
  at most ``max_tokens``. Offline there are no embeddings, so this stand-in measures the distance
  lexically: 1 - Jaccard similarity of the sentences' character sets (with ``buffer`` sentences
  on each side; for Japanese, shared kanji are shared words). It splits where topics change in wording,
  not in meaning; the report says so.
- ``heading``: a chunk per Markdown heading section (headings from markdown-it-py's block parser),
  sections longer than ``max_tokens`` cut into fixed windows.

LangChain splitters (when ``langchain-text-splitters`` is installed) work on characters and return
chunk texts:

- ``langchain-recursive``: ``RecursiveCharacterTextSplitter(chunk_size, chunk_overlap)``.
- ``langchain-markdown``: ``MarkdownHeaderTextSplitter`` on ``#``/``##``/``###`` (headings go to
  metadata and leave the text, LangChain's default), then the recursive splitter on each section.

A chunker is named by a SPEC: ``NAME`` or ``NAME:key=value,key=value`` (e.g.
``fixed:max_tokens=512,overlap=10``); ``parse_chunker_spec`` lists the keys of each.

The defaults above are Bedrock's for its 300-token chunks. Measured for another chunk length N (``stats
--chunk-tokens N``: a knowledge base that cuts N tokens), each chunker cuts N instead (:func:`sized`):
fixed, semantic and heading chunks of N tokens, hierarchical children of N (parents of at least 1,500,
overlap at most a fifth of a child), LangChain's 1,000 characters scaled by N / 300; keys a SPEC gives
win.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from itertools import accumulate, compress, count, pairwise, repeat
from operator import add, lt, sub, truediv
from typing import Any, Generic, TypeVar, overload

from markdown_it.rules_block.html_block import HTML_SEQUENCES

from anchorkit.markdown_blocks import COMPLEX_LINE, holds_complex_lines, parse_blocks
from anchorkit.tokens import TokenizedText, byte_offsets
from anchorkit.untrusted import ascii_number

Span = tuple[int, int]  # token indices [start, end)

# Where sentences end, for the semantic stand-in: after Japanese full stops and line breaks, and
# after a Latin full stop followed by a space. The end is captured (split keeps it) rather than
# looked behind for: the scan then stops only at those characters. One set of first characters,
# then which end it is checked behind it: a scan 40% faster than trying two alternatives at each.
_SENTENCE_END = re.compile(r"([。！？\n.!?](?:(?<=[。！？\n])(?=[^。！？\n])|(?<=[.!?]) (?=\S)))")
# A place after a line break where a sentence starts (what _SENTENCE_END splits at): the text is split
# into sentences a block of about _SENTENCE_BLOCK_CHARS characters at a time, each block ending there, so
# that the split's pieces of a whole document (twice its sentences) are never held at once.
_FRESH_SENTENCE = re.compile(r"\n(?=[^。！？\n])")
_SENTENCE_BLOCK_CHARS = 1 << 16
# A line starting with 1-6 "#" and a space, a tab or its end; the first "#" is looked for first and
# the line start checked after it (a "^" is tried at every position).
_ATX_HEADING_LINE = re.compile(r"#(?<![^\n]#)#{0,5}(?:[ \t]|$)", re.M)


def _text_blocks(text: str, size: int, boundary: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """Character ranges [start, end) that cover ``text`` in order, each ending at the end of a match of
    ``boundary`` found ``size`` characters or more after its start (or at the text's end)."""
    start = 0
    while len(text) - start > size and (found := boundary.search(text, start + size)) is not None:
        yield start, found.end()
        start = found.end()
    yield start, len(text)


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` one at a time (``text.split("\\n")`` would hold them all: 10 MB for a 5 MB log)."""
    start = 0
    while (end := text.find("\n", start)) >= 0:
        yield text[start:end]
        start = end + 1
    yield text[start:]


def windows(start: int, end: int, size: int, overlap: int) -> list[Span]:
    """Consecutive ``size``-token windows over [start, end), each sharing ``overlap`` with the previous."""
    if end <= start:
        return []
    if end - start <= size:
        return [(start, end)]  # most sections and short documents: one window
    step = max(size - overlap, 1)
    spans = []
    position = start
    while True:
        spans.append((position, min(position + size, end)))
        if position + size >= end:
            return spans
        position += step


T = TypeVar("T")


class cached_attribute(Generic[T]):  # lower case: a decorator, as the one it stands for
    """``functools.cached_property`` without the lock Python 3.11 takes at each first read (3.12
    dropped it for its cost): layouts and document versions are read by one thread, and the audit
    computes about twenty of these attributes a document (the lock was 0.9% of its instructions)."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self._compute = compute
        self._name = compute.__name__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type) -> cached_attribute[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object, owner: type | None = None) -> T | cached_attribute[T]:
        if instance is None:
            return self
        # Stored where the instance's attributes are: the next read finds it there, not here.
        value = instance.__dict__[self._name] = self._compute(instance)
        return value


class TextLayout:
    """Where a text's sentences and headings start (UTF-8 byte offsets), found once per text.

    The document without its anchors borrows the anchored document's layout (``without``): anchors
    are whole lines between blank lines, so taking them out removes whole sentences and never a
    heading, and everything else only moves.
    """

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_attribute
    def sentences(self) -> list[str]:
        sentences: list[str] = []
        for start, end in _text_blocks(self.text, _SENTENCE_BLOCK_CHARS, _FRESH_SENTENCE):
            parts = _SENTENCE_END.split(self.text[start:end])  # text, end, text, end, ..., text
            sentences += map(str.__add__, parts[0:-1:2], parts[1::2])
            if parts[-1]:
                sentences.append(parts[-1])
        return sentences

    @cached_attribute
    def sentence_bytes(self) -> array[int]:
        # Arrays, not lists, for what a layout keeps a number of per sentence: 8 bytes a number, not 36 (32 a
        # float), which a log of short lines has as many of as it has lines.
        return array(
            "q", accumulate(map(len, map(str.encode, self.sentences[:-1])), initial=0) if self.sentences else ()
        )

    @cached_attribute
    def similarities(self) -> array[float]:
        """Jaccard similarity of each sentence's character set with the next one's."""
        return sentence_similarities(self.sentences)

    @cached_attribute
    def heading_bytes(self) -> array[int]:
        return array("q", byte_offsets(self.text, heading_offsets(self.text)))

    def without(self, text: str, byte_cuts: Sequence[tuple[int, int]]) -> TextLayout:
        """The layout of ``text``, which is this text with the whole-line byte ranges ``byte_cuts`` removed."""
        return _DerivedLayout(text, self, byte_cuts)


class _DerivedLayout(TextLayout):
    def __init__(self, text: str, source: TextLayout, byte_cuts: Sequence[tuple[int, int]]) -> None:
        super().__init__(text)
        self._source = source
        self._cuts = byte_cuts

    @cached_attribute
    def _sentence_runs(self) -> list[tuple[int, int, int]]:
        return _kept_runs(self._source.sentence_bytes, self._cuts)

    @cached_attribute
    def sentences(self) -> list[str]:
        return _kept(self._source.sentences, self._sentence_runs)

    @cached_attribute
    def sentence_bytes(self) -> array[int]:
        return _moved(self._source.sentence_bytes, self._sentence_runs)

    @cached_attribute
    def similarities(self) -> array[float]:
        # Sentences next to each other in the source keep their similarity: only the pairs that a
        # cut brought together are new.
        similarities, sentences = self._source.similarities, self._source.sentences
        kept = array("d")
        previous = None  # the last kept sentence so far (index in the source)
        for first, last, _ in self._sentence_runs:
            if previous is not None:
                before, after = set(sentences[previous]), set(sentences[first])
                shared = len(before & after)
                kept.append(shared / (len(before) + len(after) - shared))  # as neighbour_similarities does
            kept += similarities[first : last - 1]
            previous = last - 1
        return kept

    @cached_attribute
    def heading_bytes(self) -> array[int]:
        headings = self._source.heading_bytes
        return _moved(headings, _kept_runs(headings, self._cuts))


def _kept_runs(offsets: Sequence[int], cuts: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """The ascending offsets outside the ascending cuts, as runs of indices [first, last) (not empty)
    with the bytes cut before them: between two cuts every offset moves by the same amount."""
    runs = []
    first = removed = 0
    for start, end in [*cuts, (len(offsets) and offsets[-1] + 1, 0)]:
        last = bisect_left(offsets, start, first)
        if last > first:
            runs.append((first, last, removed))
        first = bisect_left(offsets, end, last)
        removed += end - start
    return runs


def _kept(items: list[Any], runs: Sequence[tuple[int, int, int]]) -> list[Any]:
    """The items at the indices of the runs of ``_kept_runs`` (whole slices at a time)."""
    kept = []
    for first, last, _ in runs:
        kept += items[first:last]
    return kept


def _moved(offsets: Sequence[int], runs: Sequence[tuple[int, int, int]]) -> array[int]:
    """The offsets in the runs of ``_kept_runs``, moved back by the bytes cut before them."""
    moved = array("q")
    for first, last, removed in runs:
        moved.extend(map(sub, offsets[first:last], repeat(removed)))
    return moved


# Sentences whose character sets are made at a time (``sentence_similarities``).
_SIMILARITY_BLOCK = 1 << 10


def sentence_similarities(sentences: Sequence[str], buffer: int = 0) -> array[float]:
    """Jaccard similarity of each sentence's signature with the next one's: the set of its characters and
    those of ``buffer`` sentences on each side (the semantic stand-in's lexical fingerprint).

    The sets are made ``_SIMILARITY_BLOCK`` sentences at a time and dropped: a set of characters takes
    about a kilobyte, 20 times a short sentence's text, so a whole document's (a pasted log: a sentence a
    line) would take 20 times the document. A sentence that comes again in a block (anchors, status lines:
    a third of a ticket's) shares its first one's set, made once."""
    similarities = array("d")
    for start in range(0, len(sentences) - 1, _SIMILARITY_BLOCK):
        end = min(start + _SIMILARITY_BLOCK + 1, len(sentences))  # one more: its pair with the next block's first
        first = max(start - buffer, 0)  # the first sentence a signature of the block reaches back to
        block = sentences[first : end + buffer]
        distinct = dict.fromkeys(block)
        sets = list(map(dict(zip(distinct, map(set, distinct))).__getitem__, block))
        if buffer:
            sets = [
                set().union(*sets[max(index - buffer, 0) - first : index + buffer + 1 - first])
                for index in range(start, end)
            ]
        similarities.extend(neighbour_similarities(sets))
    return similarities


def neighbour_similarities(signatures: Sequence[set[str]]) -> list[float]:
    """Jaccard similarity of each signature with the next (map() keeps the work in C)."""
    sizes = list(map(len, signatures))
    shared = list(map(len, map(set.intersection, signatures, signatures[1:])))
    either = map(sub, map(add, sizes, sizes[1:]), shared)  # |a | b| = |a| + |b| - |a & b|
    return list(map(truediv, shared, either))


@dataclass(frozen=True)
class FixedSizeChunker:
    max_tokens: int = 300
    overlap: int = 20  # percent

    name = "fixed"
    levels = ("chunks",)

    def split(self, layout: TextLayout, tokens: TokenizedText) -> list[list[Span]]:
        return [windows(0, tokens.token_count, self.max_tokens, self.max_tokens * self.overlap // 100)]


@dataclass(frozen=True)
class HierarchicalChunker:
    parent: int = 1500
    child: int = 300
    overlap: int = 60  # tokens

    name = "hierarchical"
    levels = ("children", "parents")

    def split(self, layout: TextLayout, tokens: TokenizedText) -> list[list[Span]]:
        parents = windows(0, tokens.token_count, self.parent, self.overlap)
        children = [child for start, end in parents for child in windows(start, end, self.child, self.overlap)]
        return [children, parents]


@dataclass(frozen=True)
class SemanticChunker:
    max_tokens: int = 300
    buffer: int = 0
    breakpoint: int = 95  # percentile of neighbour distances

    name = "semantic"
    levels = ("chunks",)
    note = (
        "offline lexical stand-in: sentence distance = 1 - Jaccard similarity of the sentences' character sets, "
        "not embeddings"
    )

    def split(self, layout: TextLayout, tokens: TokenizedText) -> list[list[Span]]:
        starts = layout.sentence_bytes
        if len(starts) < 2:
            return [windows(0, tokens.token_count, self.max_tokens, 0)]
        breaks = sorted(self._breakpoints(layout))
        group_sentences = [0, *breaks, len(starts)]
        group_tokens = [0, *tokens.tokens_at([starts[index] for index in breaks]), tokens.token_count]
        chunks: list[Span] = []
        for group, (chunk_start, group_end) in enumerate(pairwise(group_tokens)):
            first, last = group_sentences[group], group_sentences[group + 1]  # the group's sentences
            while group_end - chunk_start > self.max_tokens:
                # Close the chunk at the last sentence start that keeps it within max_tokens (found
                # by bisection in bytes: no per-sentence work), or cut a sentence that alone is longer.
                limit = chunk_start + self.max_tokens
                sentence = bisect_left(starts, tokens.byte_offset(limit + 1), first + 1, last) - 1
                cut = tokens.token_at(starts[sentence]) if sentence > first else limit
                while sentence > first and cut > limit:  # approximate tokens: positions may round up
                    sentence -= 1
                    cut = tokens.token_at(starts[sentence]) if sentence > first else limit
                if cut <= chunk_start:
                    cut, sentence = limit, first
                chunks.append((chunk_start, cut))
                chunk_start, first = cut, sentence
            if group_end > chunk_start:
                chunks.append((chunk_start, group_end))
        return [chunks]

    def _breakpoints(self, layout: TextLayout) -> set[int]:
        """Indices i where a new chunk starts at sentence i (distance to i-1 above the percentile)."""
        if len(layout.sentences) < 3:
            return set()
        similarities = sentence_similarities(layout.sentences, self.buffer) if self.buffer else layout.similarities
        # distance = 1 - similarity, so "distance above its p-th percentile" is "similarity below
        # its (100-p)-th percentile".
        threshold = percentile(similarities, 100 - self.breakpoint)
        if threshold is None:
            return set()  # one sentence: nothing to split
        return set(compress(count(1), map(lt, similarities, repeat(threshold))))


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile, interpolated linearly between ranks (numpy's default)."""
    if not values:
        return None
    rank = (len(values) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    ordered = sorted(values)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class HeadingChunker:
    max_tokens: int = 300
    overlap: int = 0  # percent, for sections longer than max_tokens

    name = "heading"
    levels = ("chunks",)

    def split(self, layout: TextLayout, tokens: TokenizedText) -> list[list[Span]]:
        starts = [0, *tokens.tokens_at(layout.heading_bytes), tokens.token_count]
        overlap = self.max_tokens * self.overlap // 100
        return [[span for start, end in pairwise(starts) for span in windows(start, end, self.max_tokens, overlap)]]


@lru_cache(maxsize=4)
def has_complex_lines(text: str) -> bool:
    """Whether a line of the text matches ``COMPLEX_LINE`` (cached: the heading chunker and the
    audit's anchors-in-code check both ask of each document)."""
    return holds_complex_lines(text)


def heading_offsets(text: str) -> list[int]:
    """Character offsets of the heading lines of a Markdown text (ATX and setext, any nesting)."""
    if not has_complex_lines(text):
        # No fences, indented code, HTML blocks or setext underlines: every line starting with
        # "#" + space is a heading, and the block parser is not needed (it is the slow part).
        return [m.start() for m in _ATX_HEADING_LINE.finditer(text)]
    return list(block_layout(text).headings)


@dataclass(frozen=True)
class BlockLayout:
    headings: tuple[int, ...]  # character offsets of the heading lines
    code_lines: tuple[tuple[int, int], ...]  # code blocks as 0-based line ranges [first, end)


_FENCE_LINE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_CODE_BLOCK_TYPES = ("fence", "code_block")
# The HTML blocks that only their closing tag ends (CommonMark's first kind), as markdown-it tells them.
_RAW_HTML_START, _RAW_HTML_END, _ = HTML_SEQUENCES[0]
# A quote or list item whose content starts a fence, code, a heading or HTML: a scan cannot place it.
_MARKER = r"(?:>|(?:[-+*]|\d{1,9}[.)])(?=[ \t]|$))"
_CONTAINED_BLOCK = re.compile(
    rf" {{0,3}}(?:{_MARKER}[ \t]*)+[`~#<]| {{0,3}}(?:{_MARKER}[ \t]*)*{_MARKER}(?: {{5}}| *\t)"
)


@lru_cache(maxsize=4)
def block_layout(text: str) -> BlockLayout:
    """Where a text's headings and code blocks are (cached: the heading chunker and the audit's
    anchors-in-code check both ask), from markdown-it's block parser, or from a line scan when that
    gives the same answer: see ``_scanned_layout``."""
    scanned = _scanned_layout(text)
    if scanned is not None:
        return scanned
    tokens = parse_blocks(text)
    line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
    return BlockLayout(
        tuple(line_starts[t.map[0]] for t in tokens if t.type == "heading_open" and t.map),
        tuple((t.map[0], t.map[1]) for t in tokens if t.type in _CODE_BLOCK_TYPES and t.map),
    )


def _scanned_layout(text: str) -> BlockLayout | None:
    """Headings and code blocks by a line scan, when every line a scan cannot place (``COMPLEX_LINE``)
    outside code is a fence opened at column 0 (pasted logs and configurations, the common case).

    Such a fence is always a top-level block: it interrupts a paragraph, and a list item or quote
    cannot hold a line that is not indented or quoted unless it continues a paragraph lazily, which a
    fence cannot. So its code runs to the first closing fence (same character, at least as long, at
    most 3 spaces in, nothing after) or to the end, and outside fences an ATX line is a heading.
    A ``<pre>``, ``<script>``, ``<style>`` or ``<textarea>`` at column 0 (a log pasted as Textile taught)
    starts an HTML block the same way: it runs to the first line holding its closing tag (its own line
    included) or to the end, and holds no heading and no code. A huge log is then no parse (the parser
    keeps half a kilobyte a block: 35 MB for a 5 MB log between spacing anchors, and 10 s).
    None (parse instead) for anything else: indented code, other HTML, setext underlines, indented fences,
    a backtick fence whose info string has a backtick, a quote or list item that starts a fence, code,
    a heading or HTML.
    """
    headings: list[int] = []
    code: list[tuple[int, int]] = []
    fence: tuple[str, int, int] | None = None  # character, length, first line
    in_raw_html = False
    offset = 0
    for number, line in enumerate(_lines(text)):
        if fence is not None:
            closer = _FENCE_LINE.fullmatch(line)
            if closer and closer[2][0] == fence[0] and len(closer[2]) >= fence[1] and not closer[3].strip():
                code.append((fence[2], number + 1))
                fence = None
        elif in_raw_html:
            in_raw_html = not _RAW_HTML_END.search(line)
        elif _CONTAINED_BLOCK.match(line):
            return None
        elif _RAW_HTML_START.match(line):
            in_raw_html = not _RAW_HTML_END.search(line)
        elif COMPLEX_LINE.match(line):
            opener = _FENCE_LINE.fullmatch(line)
            if opener is None or opener[1] or (opener[2][0] == "`" and "`" in opener[3]):
                return None
            fence = (opener[2][0], len(opener[2]), number)
        elif _ATX_HEADING_LINE.match(line):
            headings.append(offset)
        offset += len(line) + 1
    if fence is not None:  # runs to the last line (a final line break does not start another)
        code.append((fence[2], text.count("\n") + (not text.endswith("\n"))))
    return BlockLayout(tuple(headings), tuple(code))


@dataclass(frozen=True)
class LangchainRecursiveChunker:
    size: int = 1000  # characters
    overlap: int = 200

    name = "langchain-recursive"
    levels = ("chunks",)

    def split_text(self, text: str) -> list[list[str]]:
        return [self._splitter().split_text(text)]

    def _splitter(self) -> Any:  # an optional dependency's class
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        return RecursiveCharacterTextSplitter(chunk_size=self.size, chunk_overlap=self.overlap)


@dataclass(frozen=True)
class LangchainMarkdownChunker:
    size: int = 1000  # characters, for the recursive split of each section
    overlap: int = 200

    name = "langchain-markdown"
    levels = ("chunks",)

    def split_text(self, text: str) -> list[list[str]]:
        from langchain_text_splitters import MarkdownHeaderTextSplitter

        sections = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3")]).split_text(text)
        recursive = LangchainRecursiveChunker(self.size, self.overlap)._splitter()
        return [[chunk for section in sections for chunk in recursive.split_text(section.page_content)]]


TokenChunker = FixedSizeChunker | HierarchicalChunker | SemanticChunker | HeadingChunker
TextChunker = LangchainRecursiveChunker | LangchainMarkdownChunker
Chunker = TokenChunker | TextChunker

CHUNKERS: dict[str, Callable[..., Chunker]] = {
    "fixed": FixedSizeChunker,
    "hierarchical": HierarchicalChunker,
    "semantic": SemanticChunker,
    "heading": HeadingChunker,
    "langchain-recursive": LangchainRecursiveChunker,
    "langchain-markdown": LangchainMarkdownChunker,
}
BEDROCK_LIKE = ("fixed", "hierarchical", "semantic", "heading")
LANGCHAIN = ("langchain-recursive", "langchain-markdown")


def is_text_chunker(chunker: Chunker) -> bool:
    """LangChain splitters work on characters and return texts; the others return token spans."""
    return isinstance(chunker, (LangchainRecursiveChunker, LangchainMarkdownChunker))


def langchain_available() -> bool:
    try:
        import langchain_text_splitters  # noqa: F401
    except ImportError:
        return False
    return True


BEDROCK_CHUNK_TOKENS = 300  # the length the defaults above are for
LANGCHAIN_CHARACTERS = 1000  # LangChain's chunk_size that stands for it (and its overlap a fifth of that)


def sized(chunker: Chunker, chunk_tokens: int) -> Chunker:
    """``chunker`` cutting chunks of ``chunk_tokens`` tokens, its other settings in the same proportion."""
    if isinstance(chunker, (FixedSizeChunker, SemanticChunker, HeadingChunker)):
        return replace(chunker, max_tokens=chunk_tokens)
    if isinstance(chunker, HierarchicalChunker):
        overlap = min(chunker.overlap, chunk_tokens // 5)
        return replace(chunker, child=chunk_tokens, parent=max(chunker.parent, chunk_tokens), overlap=overlap)
    size = max(1, round(LANGCHAIN_CHARACTERS * chunk_tokens / BEDROCK_CHUNK_TOKENS))
    return replace(chunker, size=size, overlap=size // 5)


def default_chunkers(chunk_tokens: int = BEDROCK_CHUNK_TOKENS) -> list[Chunker]:
    """Bedrock's defaults, plus LangChain's splitters when they are installed, for chunks of ``chunk_tokens``."""
    names = BEDROCK_LIKE + (LANGCHAIN if langchain_available() else ())
    return [sized(CHUNKERS[name](), chunk_tokens) for name in names]


def parse_chunker_spec(spec: str, chunk_tokens: int = BEDROCK_CHUNK_TOKENS) -> Chunker:
    """``fixed`` or ``fixed:max_tokens=300,overlap=20``: a chunker for chunks of ``chunk_tokens`` tokens unless
    the SPEC sets its length; ValueError says what is wrong."""
    name, _, arguments = spec.partition(":")
    name = name.strip()
    factory = CHUNKERS.get(name)
    if factory is None:
        raise ValueError(f"unknown chunker {name!r} in {spec!r} (expected one of {', '.join(CHUNKERS)})")
    if name in LANGCHAIN and not langchain_available():
        raise ValueError(f"{name} needs langchain-text-splitters (pip install langchain-text-splitters)")
    allowed = {f.name for f in fields(factory)}  # type: ignore[arg-type]
    values: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in arguments.split(","))):
        key, equals, value = item.partition("=")
        if key not in allowed or not equals:
            raise ValueError(f"{spec!r}: expected key=value with key in {', '.join(sorted(allowed))}, got {item!r}")
        if key in values:  # which one counts is no SPEC's to leave unsaid
            raise ValueError(f"{spec!r}: {key} is given twice")
        number = ascii_number(value)
        if number is None or (number == 0 and key not in ("overlap", "buffer")):
            raise ValueError(
                f"{spec!r}: {key} must be a {'non-negative' if key in ('overlap', 'buffer') else 'positive'} integer, "
                f"got {value!r}"
            )
        values[key] = number
    base = sized(factory(), chunk_tokens)
    chunker = factory(**{f.name: getattr(base, f.name) for f in fields(base)} | values)
    _check(chunker, spec)
    return chunker


def _check(chunker: Chunker, spec: str) -> None:
    """ValueError if the chunker's settings, the SPEC's keys with the others sized for the chunk length, do not
    fit together; the message gives them all (a default the SPEC did not give may be the one in the way)."""
    settings = f"{spec!r} ({spec_of(chunker)})"
    if isinstance(chunker, (FixedSizeChunker, HeadingChunker)) and chunker.overlap >= 100:
        raise ValueError(f"{settings}: overlap is a percentage below 100")
    if isinstance(chunker, HierarchicalChunker) and not chunker.overlap < chunker.child <= chunker.parent:
        raise ValueError(f"{settings}: need overlap < child <= parent")
    if isinstance(chunker, SemanticChunker) and not 1 <= chunker.breakpoint <= 99:
        raise ValueError(f"{settings}: breakpoint is a percentile from 1 to 99")
    if isinstance(chunker, (LangchainRecursiveChunker, LangchainMarkdownChunker)) and chunker.overlap >= chunker.size:
        raise ValueError(f"{settings}: overlap must be smaller than size")


def spec_of(chunker: Chunker) -> str:
    """The canonical SPEC of a chunker (every parameter spelled out), as reports show it."""
    return f"{chunker.name}:" + ",".join(f"{f.name}={getattr(chunker, f.name)}" for f in fields(chunker))


def chunker_note(chunker: Chunker) -> str | None:
    return getattr(chunker, "note", None)
