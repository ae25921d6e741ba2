"""Every chunk a retriever could be handed from a document, and the ticket ids verify would accept from it.

The chunkers people use (anchorkit.audit.chunkers: Bedrock-like fixed windows and heading sections on
cl100k tokens, LangChain's recursive and Markdown-header splitters) at their usual sizes and at small
ones (more cut points), a window starting at every token, and a chunk starting at every line and at
every ``>`` or ``#`` (where an anchor or a title line could begin once a chunker cuts right before it).
"""

from __future__ import annotations

from collections.abc import Iterator

from anchorkit.audit.chunkers import (
    FixedSizeChunker,
    HeadingChunker,
    LangchainMarkdownChunker,
    LangchainRecursiveChunker,
    TextLayout,
)
from anchorkit.tokens import TiktokenTokenizer, load_cl100k_base
from anchorkit.verify import Chunk, valid_ids

# (max_tokens, overlap percent): Bedrock's default, and a 50-token window sliding one token at a time.
FIXED_WINDOWS = ((300, 20), (50, 98))
HEADING_SECTIONS = (300, 40)
LANGCHAIN_SIZES = ((1000, 200), (120, 30))


def cl100k() -> TiktokenTokenizer:
    """cl100k_base, as transform and stats count with it (the vocabulary ships with anchorkit)."""
    return load_cl100k_base()


def chunk_views(document: str, tokenizer: TiktokenTokenizer) -> Iterator[tuple[str, str]]:
    """(how it was cut, chunk text) for every chunk of ``document`` (see the module notes)."""
    data = document.encode("utf-8")
    [tokens] = tokenizer.tokenize_many([document])
    layout = TextLayout(document)
    token_chunkers = [FixedSizeChunker(size, overlap) for size, overlap in FIXED_WINDOWS]
    token_chunkers += [HeadingChunker(size) for size in HEADING_SECTIONS]
    for chunker in token_chunkers:
        for level in chunker.split(layout, tokens):
            for start, end in level:
                text = data[tokens.byte_offset(start) : tokens.byte_offset(end)].decode("utf-8", "ignore")
                yield f"{chunker.name} {chunker.max_tokens}", text
    for size, overlap in LANGCHAIN_SIZES:
        for text_chunker in (LangchainRecursiveChunker(size, overlap), LangchainMarkdownChunker(size, overlap)):
            for level in text_chunker.split_text(document):
                for text in level:
                    yield f"{text_chunker.name} {size}/{overlap}", text
    offset = 0
    for line in document.split("\n"):
        yield "from a line start", document[offset:]
        offset += len(line) + 1
    for position, character in enumerate(document):
        if character in ">#":
            yield f"from character {position}", document[position:]


def foreign_ids(document: str, ticket_id: int, tokenizer: TiktokenTokenizer) -> dict[int, str]:
    """Ids other than ``ticket_id`` that some chunk of the document makes valid for verify, as a
    retrieved chunk or as a later turn's context, each with the first chunk that did (how it was cut
    and its start)."""
    found: dict[int, str] = {}
    for how, text in chunk_views(document, tokenizer):
        for other in valid_ids([Chunk("chunk", text)]) - {ticket_id}:
            found.setdefault(other, f"{how}: {text[:120]!r}")
        for other in valid_ids([], context=text) - {ticket_id}:
            found.setdefault(other, f"{how}, as context: {text[:120]!r}")
    return found
