"""Normalised block structure of rendered HTML, for comparing Redmine's rendering with ours.

Both sides (Redmine's HTML for the original Textile/CommonMark, markdown-it-py's HTML for
anchorkit's Markdown) are reduced to a list of :class:`Block`: the kind (h1-h6, p, code, li,
cell, hr), the text with whitespace collapsed (code verbatim), the list nesting depth, the quote
depth, the link targets and the image sources. What is decoration rather than content is left
out on both sides: Redmine's heading anchors (¶), the table of contents, the hidden twin of a
collapse link, in-page links (#fn1), and links whose target depends on Redmine's database
(issues, wiki pages, changesets, users...), which a text converter cannot know.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from html.parser import HTMLParser

from markdown_it import MarkdownIt

HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
BLOCK_TAGS = HEADINGS | {"p", "pre", "li", "td", "th"}
# Inside these a <p> is the same block (markdown-it writes <li><p>..</p></li> for loose lists).
TEXT_CONTAINERS = {"li", "td", "th"}
VOID_TAGS = {"br", "hr", "img", "input", "meta", "link", "wbr"}
# Redmine link classes whose target is resolved against its database: not comparable.
DATABASE_LINK_CLASSES = {
    "issue",
    "changeset",
    "source",
    "version",
    "user",
    "project",
    "document",
    "attachment",
    "wiki-page",
    "message",
    "news",
    "board",
    "wiki-anchor",
    "collapsible",
}


@dataclass(frozen=True)
class Block:
    kind: str
    text: str
    list_depth: int = 0
    quote_depth: int = 0
    links: tuple[str, ...] = ()
    images: tuple[str, ...] = ()


@dataclass
class _Open:
    kind: str
    text: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)


class _BlockCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.stack: list[str] = []  # open element names
        self.current: _Open | None = None
        self.current_depths = (0, 0)
        self.skip_depth = 0  # > 0 while inside an element that is decoration

    # -- helpers ---------------------------------------------------------------------------
    def _depths(self) -> tuple[int, int]:
        return (
            sum(1 for tag in self.stack if tag in ("ul", "ol")),
            sum(1 for tag in self.stack if tag == "blockquote"),
        )

    def _flush(self) -> None:
        if self.current is None:
            return
        raw = "".join(self.current.text)
        if self.current.kind == "code":
            text = "\n".join(line.rstrip() for line in raw.strip("\n").split("\n"))
        else:
            text = " ".join(raw.split())
        if text or self.current.kind in ("hr", "code") or self.current.links or self.current.images:
            self.blocks.append(
                Block(
                    self.current.kind,
                    text,
                    self.current_depths[0],
                    self.current_depths[1],
                    tuple(self.current.links),
                    tuple(self.current.images),
                )
            )
        self.current = None

    def _start_block(self, kind: str) -> None:
        self._flush()
        self.current = _Open(kind)
        self.current_depths = self._depths()

    # -- parser callbacks ------------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        classes = set(attributes.get("class", "").split())
        if self.skip_depth:
            if tag not in VOID_TAGS:
                self.skip_depth += 1
            return
        decoration = (
            (tag == "ul" and "toc" in classes)
            or (tag == "a" and (attributes.get("id", "").endswith("-hide") or "wiki-anchor" in classes))
            or (tag == "a" and "name" in attributes and "href" not in attributes)
        )
        if decoration:
            self.skip_depth = 1
            return
        if tag == "br":
            self._text("\n")
            return
        if tag == "hr":
            self._start_block("hr")
            self._flush()
            return
        if tag == "img":
            self._ensure_block()
            assert self.current is not None
            self.current.images.append(attributes.get("src", ""))
            return
        if tag == "a":
            href = attributes.get("href", "")
            if href and not href.startswith("#") and not classes & DATABASE_LINK_CLASSES:
                self._ensure_block()
                assert self.current is not None
                self.current.links.append(href)
        if tag in VOID_TAGS:
            return
        if tag in ("ul", "ol", "blockquote", "table", "div"):
            self._flush()
        elif tag in BLOCK_TAGS:
            inside_container = self.current is not None and self.current.kind in ("li", "cell")
            if tag == "p" and inside_container:
                pass  # the paragraph of a list item / cell is that item's text
            else:
                self._start_block(self._kind(tag))
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.skip_depth:
            self.skip_depth -= 1
            return
        if tag in VOID_TAGS or tag not in self.stack:
            return
        while self.stack:
            open_tag = self.stack.pop()
            is_block = open_tag in BLOCK_TAGS or open_tag in ("ul", "ol", "blockquote", "table", "div")
            if is_block and (open_tag != "p" or self.current is None or self.current.kind not in ("li", "cell")):
                self._flush()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.skip_depth:
            return
        if self.current is None and not data.strip():
            return
        self._text(data)

    def _text(self, data: str) -> None:
        self._ensure_block()
        assert self.current is not None
        self.current.text.append(data)

    def _ensure_block(self) -> None:
        if self.current is None:  # text outside any block element: an implicit paragraph
            self.current = _Open("p")
            self.current_depths = self._depths()

    @staticmethod
    def _kind(tag: str) -> str:
        if tag == "pre":
            return "code"
        if tag in ("td", "th"):
            return "cell"
        return tag

    def close(self) -> None:
        super().close()
        self._flush()


def html_blocks(rendered_html: str) -> list[Block]:
    collector = _BlockCollector()
    collector.feed(rendered_html)
    collector.close()
    return collector.blocks


_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def markdown_blocks(markdown: str) -> list[Block]:
    """Blocks of Markdown as a CommonMark renderer (markdown-it-py, GFM tables and ~~) shows it."""
    return html_blocks(_MARKDOWN.render(markdown))


@dataclass(frozen=True)
class Comparison:
    expected: list[Block]
    actual: list[Block]
    matched: int

    @property
    def total(self) -> int:
        return max(len(self.expected), len(self.actual))

    def differences(self) -> list[tuple[Block | None, Block | None]]:
        """Pairs (expected, actual) that did not match, in document order."""
        matcher = difflib.SequenceMatcher(a=self.expected, b=self.actual, autojunk=False)
        pairs: list[tuple[Block | None, Block | None]] = []
        for op, a1, a2, b1, b2 in matcher.get_opcodes():
            if op == "equal":
                continue
            left, right = self.expected[a1:a2], self.actual[b1:b2]
            for index in range(max(len(left), len(right))):
                pairs.append((left[index] if index < len(left) else None, right[index] if index < len(right) else None))
        return pairs


def compare_blocks(expected: list[Block], actual: list[Block]) -> Comparison:
    matcher = difflib.SequenceMatcher(a=expected, b=actual, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return Comparison(expected, actual, matched)
