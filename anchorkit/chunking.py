"""Chunkers that imitate Amazon Bedrock Knowledge Base chunking, and LangChain's splitters.

Bedrock-like chunkers work on tokens: they take a document's ``TokenizedText`` and return chunks as
token index ranges ``(start, end)``, so the audit never decodes a chunk. Each returns one list of
chunks per level (one level, except hierarchical: children and parents).

- ``fixed``: windows of ``max_tokens`` tokens, consecutive windows sharing ``overlap`` percent.
  (Bedrock's FIXED_SIZE: maxTokens 300, overlapPercentage 20.)
- ``hierarchical``: parents of ``parent`` tokens, each cut into children of ``child`` tokens;
  ``overlap`` tokens shared between neighbours at both levels. (Bedrock: 1,500 / 300, 60.)
  Bedrock retrieves children and hands the parent to the model, so both levels are reported.
- ``semantic``: Bedrock embeds each sentence (with ``buffer`` neighbours), and starts a chunk where
  the distance between neighbouring sentences is above the ``breakpoint`` percentile; chunks are
  at most ``max_tokens``. Offline there are no embeddings, so this stand-in measures the distance
  lexically: 1 - Jaccard similarity of the sentences' character bigram sets (with ``buffer``
  sentences on each side). It splits where topics change in wording, not in meaning; the report
  says so.
- ``heading``: a chunk per Markdown heading section (headings from markdown-it-py's block parser),
  sections longer than ``max_tokens`` cut into fixed windows.

LangChain splitters (when ``langchain-text-splitters`` is installed) work on characters and return
chunk texts:

- ``langchain-recursive``: ``RecursiveCharacterTextSplitter(chunk_size, chunk_overlap)``.
- ``langchain-markdown``: ``MarkdownHeaderTextSplitter`` on ``#``/``##``/``###`` (headings go to
  metadata and leave the text, LangChain's default), then the recursive splitter on each section.

A chunker is named by a SPEC: ``NAME`` or ``NAME:key=value,key=value`` (e.g.
``fixed:max_tokens=512,overlap=10``); ``parse_chunker_spec`` lists the keys of each.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Union

from anchorkit.markdown_blocks import COMPLEX_LINE, parse_blocks
from anchorkit.tokens import TokenizedText

Span = tuple[int, int]  # token indices [start, end)

# Sentence ends for the semantic stand-in: Japanese and Latin full stops, or line ends.
_SENTENCE = re.compile(r"[^\n。！？!?]*(?:[。！？]+|[.!?]+(?=\s)|\n+|$)")
_ATX_HEADING_LINE = re.compile(r"^#{1,6}(?:[ \t]|$)", re.M)


def windows(start: int, end: int, size: int, overlap: int) -> list[Span]:
    """Consecutive ``size``-token windows over [start, end), each sharing ``overlap`` with the previous."""
    if end <= start:
        return []
    step = max(size - overlap, 1)
    spans = []
    position = start
    while True:
        spans.append((position, min(position + size, end)))
        if position + size >= end:
            return spans
        position += step


def byte_offsets(text: str, char_offsets: list[int]) -> list[int]:
    """UTF-8 byte offsets of ascending character offsets of ``text`` (one pass)."""
    result = []
    previous_char = previous_byte = 0
    for offset in char_offsets:
        previous_byte += len(text[previous_char:offset].encode("utf-8"))
        previous_char = offset
        result.append(previous_byte)
    return result


@dataclass(frozen=True)
class FixedSizeChunker:
    max_tokens: int = 300
    overlap: int = 20  # percent

    name = "fixed"
    levels = ("chunks",)

    def split(self, text: str, tokens: TokenizedText) -> list[list[Span]]:
        return [windows(0, tokens.token_count, self.max_tokens, self.max_tokens * self.overlap // 100)]


@dataclass(frozen=True)
class HierarchicalChunker:
    parent: int = 1500
    child: int = 300
    overlap: int = 60  # tokens

    name = "hierarchical"
    levels = ("children", "parents")

    def split(self, text: str, tokens: TokenizedText) -> list[list[Span]]:
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
    note = "offline lexical stand-in: sentence distance = 1 - Jaccard similarity of character bigrams, not embeddings"

    def split(self, text: str, tokens: TokenizedText) -> list[list[Span]]:
        sentences = [(m.start(), m.group()) for m in _SENTENCE.finditer(text) if m.group().strip()]
        if not sentences:
            return [windows(0, tokens.token_count, self.max_tokens, 0)]
        starts = [tokens.token_at(b) for b in byte_offsets(text, [start for start, _ in sentences])]
        starts[0] = 0
        bounds = [*starts, tokens.token_count]
        breaks = self._breakpoints([sentence for _, sentence in sentences])
        chunks: list[Span] = []
        chunk_start = 0
        for index in range(len(sentences)):
            end = bounds[index + 1]
            if end - chunk_start > self.max_tokens and bounds[index] > chunk_start:
                chunks.append((chunk_start, bounds[index]))  # this sentence would overflow the chunk
                chunk_start = bounds[index]
            if end - chunk_start > self.max_tokens:
                # One sentence longer than the limit: cut it, keep its tail open for what follows.
                pieces = windows(chunk_start, end, self.max_tokens, 0)
                chunks.extend(pieces[:-1])
                chunk_start = pieces[-1][0]
            if index + 1 in breaks or index + 1 == len(sentences):
                chunks.append((chunk_start, end))
                chunk_start = end
        return [[span for span in chunks if span[1] > span[0]]]

    def _breakpoints(self, sentences: list[str]) -> set[int]:
        """Indices i where a new chunk starts at sentence i (distance to i-1 above the percentile)."""
        if len(sentences) < 3:
            return set()
        grams = [set(zip(s, s[1:])) for s in sentences]
        if self.buffer:
            grams = [set().union(*grams[max(i - self.buffer, 0) : i + self.buffer + 1]) for i in range(len(grams))]
        distances = [1 - len(a & b) / (len(a | b) or 1) for a, b in zip(grams, grams[1:])]
        threshold = statistics.quantiles(distances, n=100, method="inclusive")[self.breakpoint - 1]
        return {i + 1 for i, distance in enumerate(distances) if distance > threshold}


@dataclass(frozen=True)
class HeadingChunker:
    max_tokens: int = 300
    overlap: int = 0  # percent, for sections longer than max_tokens

    name = "heading"
    levels = ("chunks",)

    def split(self, text: str, tokens: TokenizedText) -> list[list[Span]]:
        starts = [0, *(tokens.token_at(b) for b in byte_offsets(text, heading_offsets(text))), tokens.token_count]
        overlap = self.max_tokens * self.overlap // 100
        return [[span for start, end in zip(starts, starts[1:]) for span in windows(start, end, self.max_tokens, overlap)]]


def heading_offsets(text: str) -> list[int]:
    """Character offsets of the heading lines of a Markdown text (ATX and setext, any nesting)."""
    if not COMPLEX_LINE.search(text):
        # No fences, indented code, HTML blocks or setext underlines: every line starting with
        # "#" + space is a heading, and the block parser is not needed (it is the slow part).
        return [m.start() for m in _ATX_HEADING_LINE.finditer(text)]
    line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
    return [line_starts[t.map[0]] for t in parse_blocks(text) if t.type == "heading_open" and t.map]


@dataclass(frozen=True)
class LangchainRecursiveChunker:
    size: int = 1000  # characters
    overlap: int = 200

    name = "langchain-recursive"
    levels = ("chunks",)

    def split_text(self, text: str) -> list[list[str]]:
        return [self._splitter().split_text(text)]

    def _splitter(self):  # type: ignore[no-untyped-def]  # optional dependency
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


TokenChunker = Union[FixedSizeChunker, HierarchicalChunker, SemanticChunker, HeadingChunker]
TextChunker = Union[LangchainRecursiveChunker, LangchainMarkdownChunker]
Chunker = Union[TokenChunker, TextChunker]

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


def default_chunkers() -> list[Chunker]:
    """Bedrock's defaults, plus LangChain's splitters when they are installed."""
    names = BEDROCK_LIKE + (LANGCHAIN if langchain_available() else ())
    return [CHUNKERS[name]() for name in names]


def parse_chunker_spec(spec: str) -> Chunker:
    """``fixed`` or ``fixed:max_tokens=300,overlap=20``: a chunker; ValueError says what is wrong."""
    name, _, arguments = spec.partition(":")
    factory = CHUNKERS.get(name.strip())
    if factory is None:
        raise ValueError(f"unknown chunker {name!r} in {spec!r} (expected one of {', '.join(CHUNKERS)})")
    if name in LANGCHAIN and not langchain_available():
        raise ValueError(f"{name} needs langchain-text-splitters (pip install 'anchorkit[chunkers]')")
    allowed = {f.name for f in fields(factory)}  # type: ignore[arg-type]
    values: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in arguments.split(","))):
        key, equals, value = item.partition("=")
        if key not in allowed or not equals:
            raise ValueError(f"{spec!r}: expected key=value with key in {', '.join(sorted(allowed))}, got {item!r}")
        if not value.isdigit() or (int(value) == 0 and key not in ("overlap", "buffer")):
            raise ValueError(f"{spec!r}: {key} must be a {'non-negative' if key in ('overlap', 'buffer') else 'positive'} integer, got {value!r}")
        values[key] = int(value)
    chunker = factory(**values)
    _check(chunker, spec)
    return chunker


def _check(chunker: Chunker, spec: str) -> None:
    if isinstance(chunker, (FixedSizeChunker, HeadingChunker)) and chunker.overlap >= 100:
        raise ValueError(f"{spec!r}: overlap is a percentage below 100")
    if isinstance(chunker, HierarchicalChunker) and not chunker.overlap < chunker.child <= chunker.parent:
        raise ValueError(f"{spec!r}: need overlap < child <= parent")
    if isinstance(chunker, SemanticChunker) and not 1 <= chunker.breakpoint <= 99:
        raise ValueError(f"{spec!r}: breakpoint is a percentile from 1 to 99")
    if isinstance(chunker, (LangchainRecursiveChunker, LangchainMarkdownChunker)) and chunker.overlap >= chunker.size:
        raise ValueError(f"{spec!r}: overlap must be smaller than size")


def spec_of(chunker: Chunker) -> str:
    """The canonical SPEC of a chunker (every parameter spelled out), as reports show it."""
    return f"{chunker.name}:" + ",".join(f"{f.name}={getattr(chunker, f.name)}" for f in fields(chunker))


def chunker_note(chunker: Chunker) -> str | None:
    return getattr(chunker, "note", None)

