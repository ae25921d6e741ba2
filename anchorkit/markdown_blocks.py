"""Block structure of Markdown, from markdown-it-py's block parser (never from line regexes).

Only the block level is parsed (inline rules are not needed to know where blocks start and end),
which is what makes it cheap enough to run per ticket.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.token import Token

# Lines that can start a construct whose extent a line scan cannot know: fences, HTML blocks,
# setext underlines / thematic breaks, indented code and headings that are not at column 0.
# A text without any of them has top-level ATX headings exactly at the lines that start with '#'.
COMPLEX_LINE = re.compile(r"^(?: {0,3}(?:`{3,}|~{3,}|<|[=\-][=\- \t]*$)| {4}|\t| {1,3}#)", re.M)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def parse_blocks(text: str) -> list[Token]:
    """Block tokens of ``text`` (inline children are not parsed)."""
    parser = _parser()
    tokens: list[Token] = []
    state = StateBlock(text, parser, {}, tokens)
    parser.block.tokenize(state, state.line, state.lineMax)
    return tokens


@dataclass(frozen=True)
class Block:
    """A top-level block: ``lines[start:end]`` of the source."""

    kind: str  # token type without "_open": heading, paragraph, fence, blockquote, table, ...
    start: int
    end: int
    level: int = 0  # heading level, for headings
    text: str = ""  # the inline text, for headings


def top_level_blocks(tokens: list[Token]) -> list[Block]:
    blocks = []
    for index, token in enumerate(tokens):
        if token.level == 0 and token.map is not None and token.nesting >= 0:
            kind = token.type.removesuffix("_open")
            if kind == "heading":
                blocks.append(Block(kind, token.map[0], token.map[1], int(token.tag[1]), tokens[index + 1].content))
            else:
                blocks.append(Block(kind, token.map[0], token.map[1]))
    return blocks
