"""Redmine Textile → Markdown: a single-pass converter of our own that mirrors the rules of Redmine's
RedCloth3 fork (lib/redmine/wiki_formatting/textile/redcloth3.rb): the same block splitting, the
same span delimiters and word-boundary rules (e.g. ``*strong*`` needs a space before it, so
``これは*重要*です`` stays literal, as in Redmine), the same link/image/code patterns. Measured
against the alternatives (textile→HTML→markdownify/html2text, pandoc) it is 100-1000x faster and
more faithful; see docs/design.md and tests/benchmarks/bench_textformat.py.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left
from dataclasses import dataclass

from anchorkit.render.markdown_text import (
    ESCAPED_REDMINE_LINK,
    NEWLINE,
    RUBY_SPACE,
    RUBY_WORD,
    TOC_MACRO,
    WIKI_LINK,
    Shelf,
    code_block,
    code_span,
    escape_line_start,
    escape_text,
    inline_macros,
    is_safe_url,
    issue_links,
    link_destination,
    link_title,
    markdown_link,
    next_block_macro,
    paragraph_lines,
    wiki_link_label,
)

# ---------------------------------------------------------------------------------------------
# Textile
# ---------------------------------------------------------------------------------------------

# Attribute syntax of RedCloth3 (A = alignment, C = class/style/lang, S = span).
# (RedCloth's A is "(?:(?:<>|<|>|=|[()]+)+)?", which backtracks exponentially on "((((("; this
# matches the same strings. Lengths are bounded so that no pattern can go quadratic.)
_A = r"[<>=()]*[\-^~]?"
_C = r"(?:\([^\")\n]{1,80}\))?(?:\{[^{\n][^\"}\n]{0,200}\})?(?:\[[a-z\-_]{1,30}\])?"
_S = r"(?:\\\d+)?(?:/\d+)?"


# Redmine only lets lowercase <pre> through (escape_html_tags); <PRE> is shown as text.
_PRE_OPEN = re.compile(r"<pre\b[^<>\n]{0,200}>")
_PRE_TAG = re.compile(r"<pre\b[^<>\n]{0,200}>|</pre>")
_STRAY_PRE_CLOSE = re.compile(r"</pre>")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE_CLASS = re.compile(r"\A\s*<code(?:\s+class=(?:\"([^\"]*)\"|'([^']*)'))?[^>]*>", re.I)
_CODE_END = re.compile(r"</code\s*>\s*\Z", re.I)

_HEADING_OR_BLOCK = re.compile(rf"^(h[1-6]|bq|p|fn[0-9]+)({_A}{_C})\.(?::(\S+))? (.*)$", re.S)
_LIST_ITEM = re.compile(rf"^([#*]+)(?:{_A}{_C}) (.*)$")
# The first line of a block that starts a list or a table (the rest of the block belongs to it).
_STRUCTURE_LINE = re.compile(rf"^(?:[#*]+{_C} |table{_S}{_A}{_C}\. ?$|{_A}{_C}\.? ?\|)", re.M)
_STRUCTURE_CHARS = re.compile(r"^[#*|]|\||^table", re.M)
_BLOCK_SPLIT = re.compile(r"\n\n+(?! )")
_QUOTE_RUN = re.compile(r"^>.*(?:\n>.*)*", re.M)
_RULE_CHARS = frozenset("*-_ ")
_TABLE_ATTRS_LINE = re.compile(rf"^table{_S}{_A}{_C}\. ?$")
_ROW_ATTRS = re.compile(rf"^{_A}{_C}\. (?=\|)")
_CELL = re.compile(rf"\|(_?{_S}{_A}{_C}\. ?)?((?:\[\[[^|\]]*\|[^|\]]*\]\]|[^|])*?)(?=\|)")
_RULE = re.compile(r"^(?: ?\* ?){3,}$|^(?: ?- ?){3,}$|^(?: ?_ ?){3,}$")
_QUOTE_PREFIX = re.compile(r"^([> ]+)(.*)$", re.S)
_NOTEXTILE = re.compile(r"<notextile>(.*?)</notextile>", re.S | re.I)
# Redmine's "==text==" only wraps text in <notextile> AFTER the offtags were cut out, so it does
# not protect anything; it just acts as a word boundary for the span rules.
_DOUBLE_EQUALS = re.compile(r"(?:(?<=^)|(?<=\s))==([^=].*?)==(?=\s|$)", re.M)
_OFFTAG_INLINE = re.compile(r"<(code|kbd)\b[^>]*>(.*?)</\1>", re.S | re.I)
# @code@: an "@" after a non-word character opens, the next "@" before a non-word character on the
# same line closes (RedCloth's CODE_RE, paired in linear time by _pair_code).
_CODE_OPENER = re.compile(rf"(?:^|(?<=[^{RUBY_WORD}]))@(?=[^@\n])", re.M)
_CODE_CLOSER = re.compile(rf"(?=@(?:[^{RUBY_WORD}]|$))", re.M)
_CODE_LANGUAGE = re.compile(r"\|\w+?\|")
_IMAGE = re.compile(
    rf"(?:(?<=^)|(?<=[>{RUBY_SPACE}\ue001]))!([<=>])?{_C}(?:\. "
    rf")?([^{RUBY_SPACE}(!\ue000\ue001]{{1,2000}}?)[{RUBY_SPACE}]?"
    r"(?:\(((?:[^()\n]|\([^)\n]{1,200}\)){1,500}?)\))?!"
    rf"(?::([^{RUBY_SPACE}\ue000\ue001]{{1,2000}}?)([^\w{RUBY_SPACE}/;=?]{{0,10}}?)(?=[{RUBY_SPACE}<]|$))?",
    re.M,
)
_LINK = re.compile(
    rf"\"{_C}([^\"\n]{{1,1000}}?)[{RUBY_SPACE}]?(?:\(([^)\n]{{1,200}}?)\)(?=\"))?\":"
    rf"((?:/|[a-zA-Z]+://|www\.|mailto:)[\w/][^{RUBY_SPACE}\ue000\ue001]{{0,2000}}?)(/)?([^\w=/;()\-]{{0,10}}?)(?=<|[{RUBY_SPACE}]|$)",
    re.M,
)
_AUTO_LINK = re.compile(
    rf"(^|[{RUBY_SPACE}(\[,;\ue001])((?:https?://|s?ftps?://|www\.)[^<{RUBY_SPACE}\ue000\ue001][^{RUBY_SPACE}\ue000\ue001]{{0,2000}}?)(/)?([^\w=/;()\-]{{0,10}}?)(?=<|[{RUBY_SPACE}]|$)",
    re.M,
)
_EMAIL = re.compile(r"(?<![\w.!#$%+/-])([\w.!#$%+/-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)", re.A)
_FOOTNOTE_REF = re.compile(rf"(?<=[{RUBY_WORD}])\[([0-9]+)\]")

_QTAG_DELIMITERS = ["**", "*", "??", "-", "__", "_", "%", "+", "^", "~"]
_QTAGS_JOIN = "|".join(re.escape(d) for d in _QTAG_DELIMITERS)
# Markdown replacement (open, close) per Textile span; None = plain text (no Markdown equivalent).
_QTAG_MARKDOWN: dict[str, tuple[str, str] | None] = {
    "**": ("**", "**"),
    "*": ("**", "**"),
    "??": ("*", "*"),
    "-": ("~~", "~~"),
    "__": ("*", "*"),
    "_": ("*", "*"),
    "%": None,
    "+": None,
    "^": ("<sup>", "</sup>"),
    "~": ("<sub>", "</sub>"),
}
# Spans are paired in linear time (RedCloth's QTAGS regex, "delimiter, lazy content, delimiter",
# is quadratic on a long line full of delimiters): an opener is a delimiter after a line start,
# space, "(" or ">" and before a non-space; its span ends at the nearest closer, a delimiter
# after a non-space and before punctuation, space or the end. "**"/"__" fall back to "*"/"_".
_SPAN_OPENER = re.compile(rf"(?:^|(?<=[>{RUBY_SPACE}(\ue001]))(?!--)({_QTAGS_JOIN})(?=[^{RUBY_SPACE}])", re.M)
_SPAN_CLOSERS = {
    delimiter: re.compile(
        rf"(?<=[^{RUBY_SPACE}])(?=(?!--){re.escape(delimiter)}(?:{_QTAGS_JOIN})?(?:[^\w{RUBY_SPACE}]|<|[{RUBY_SPACE}]|\)|$))",
        re.M,
    )
    for delimiter in _QTAG_DELIMITERS
}
_SPAN_FALLBACK = {"**": ("**", "*"), "__": ("__", "_")}
_MAX_SPAN_NESTING = 8
_SPAN_ATTRS = re.compile(rf"^({_C})(.+)$", re.S)
# Cheap test whether any span can start (a delimiter after a line start, space, "(" or ">").
_SPAN_TRIGGER = re.compile(rf"(?:^|[>{RUBY_SPACE}(\ue001])[*?\-_%+^~]", re.M)


@dataclass
class _OpenList:
    marker: str  # "*", "##", "*#"...: the depth is its length, the list type its last character
    indent: int  # column of this list's bullets
    content_indent: int = 0  # column of the current item's text
    count: int = 0  # items so far (the number of the next ordered item)


class TextileConverter:
    """One Textile text → Markdown blocks, following RedCloth3's order: <pre> and macros cut out,
    quotes, blocks (tables, lists, prefixed blocks, paragraphs), then inline rules."""

    def __init__(self, link_issues: str | None) -> None:
        self.link_issues = link_issues

    # -- document level: <pre> blocks and block macros are cut out before blocks are split ------

    def document(self, text: str) -> list[str]:
        if "<pre" not in text and "{{" not in text:  # the common case: no cutting needed
            return self.text_blocks(text)
        blocks: list[str] = []
        position = 0
        pre = _PRE_OPEN.search(text)
        while position < len(text):
            # The next <pre> is still ahead unless the last block ended past its start: searching
            # again on every pass would rescan the text up to it once per macro before it.
            if pre is not None and pre.start() < position:
                pre = _PRE_OPEN.search(text, position)
            macro = next_block_macro(text, position, pre.start() if pre else len(text))
            if macro is not None:
                opening, close = macro
                blocks += self.text_blocks(text[position : opening.start()])
                blocks += self.block_macro(opening[3], text[opening.end() : close])
                position = close + len("\n}}")
            elif pre is not None:
                blocks += self.text_blocks(text[position : pre.start()])
                content_end, position = _pre_end(text, pre.end())
                blocks.append(self.pre_block(text[pre.end() : content_end]))
            else:
                blocks += self.text_blocks(text[position:])
                break
        return blocks

    def block_macro(self, title: str | None, body: str) -> list[str]:
        """{{collapse(title)...}}: the title as a paragraph, the body converted in place."""
        blocks = self.text_blocks(title) if title else []
        return blocks + self.document(_flush_left(body.strip("\n")))

    @staticmethod
    def pre_block(content: str) -> str:
        """<pre> content → fenced block; <code class="ruby"> inside gives the language."""
        classes: list[str] = []
        code_open = _CODE_CLASS.match(content)
        if code_open:
            classes = (code_open[1] or code_open[2] or "").split()
            content = _CODE_END.sub("", content[code_open.end() :])
        return code_block(content, classes[0] if classes else "")

    # -- blocks --------------------------------------------------------------------------------

    def text_blocks(self, text: str) -> list[str]:
        """Split text (no <pre> inside) into Textile blocks and convert each one."""
        if "<" in text:  # Redmine hides HTML comments and a </pre> that closes nothing
            text = _STRAY_PRE_CLOSE.sub("", _HTML_COMMENT.sub("", text))
        if ">" not in text or _QUOTE_RUN.search(text) is None:
            return self.plain_blocks(text)
        # Runs of ">" lines are quotes wherever they are (RedCloth handles them before blocks).
        blocks: list[str] = []
        position = 0
        for quote in _QUOTE_RUN.finditer(text):
            blocks += self.plain_blocks(text[position : quote.start()])
            blocks.append(self.quote(quote[0].split("\n")))
            position = quote.end()
        return blocks + self.plain_blocks(text[position:])

    def plain_blocks(self, text: str) -> list[str]:
        blocks: list[str] = []
        for chunk in _BLOCK_SPLIT.split(text):
            chunk = chunk.strip("\n")
            if not chunk.strip():
                continue
            # A blank line followed by indented lines does not end the block (RedCloth:
            # "\n{2,}(?! )"): those lines are the block's indented tail.
            head, separator, tail = chunk.partition("\n\n")
            blocks += self.block(head.lstrip(" "), tail.split("\n") if separator else None)
        return blocks

    def block(self, head: str, indented_tail: list[str] | None = None) -> list[str]:
        structure = _STRUCTURE_LINE.search(head) if _STRUCTURE_CHARS.search(head) else None
        if structure is None:
            blocks = self.prefixed_or_paragraph(head)
        else:
            blocks = self.prefixed_or_paragraph(head[: structure.start()]) if structure.start() else []
            lines = head[structure.start() :].split("\n")
            blocks += self.list_block(lines) if head[structure.start()] in "#*" else self.table_block(lines)
        if indented_tail:
            if head[:1] in ("#", "*", ">"):  # not a plain block: the tail is Textile again
                blocks += self.text_blocks(_flush_left("\n".join(indented_tail).strip("\n")))
            else:  # after a plain paragraph, indented lines are preformatted text
                blocks.append(code_block(_flush_paragraph_starts(indented_tail)))
        return blocks

    def prefixed_or_paragraph(self, text: str) -> list[str]:
        if text[:1] in _RULE_CHARS and _RULE.match(text):
            return ["---"]
        if "{{" in text and TOC_MACRO.fullmatch(text.strip()):
            return []  # Redmine replaces a paragraph holding only {{toc}} by the table of contents
        prefixed = _HEADING_OR_BLOCK.match(text) if "." in text[:40] else None
        if prefixed is None or not prefixed[4].strip():
            return self.paragraph(text)
        tag, content = prefixed[1], prefixed[4]
        if tag[0] == "h":
            heading = self.inline(" ".join(part.strip() for part in content.split("\n")))
            heading = re.sub(r"(^|[ \t])(#+)[ \t]*$", r"\1\\\2", heading)  # keep a trailing "#" as text
            return ["#" * int(tag[1]) + " " + heading] if heading.strip() else []
        if tag == "bq":
            body = paragraph_lines(self.inline(content))
            return ["\n".join("> " + line for line in body.split("\n"))] if body else []
        if tag.startswith("fn"):
            return self.paragraph(content, prefix=f"<sup>{tag[2:]}</sup> ")
        return self.paragraph(content)

    def paragraph(self, text: str, prefix: str = "") -> list[str]:
        body = paragraph_lines(self.inline(text))
        return [prefix + body] if body else []

    def quote(self, lines: list[str]) -> str:
        """Redmine's ">" reply quotes: nesting by the number of ">", content is Textile again."""
        runs: list[tuple[int, list[str]]] = []
        for line in lines:
            match = _QUOTE_PREFIX.match(line)
            assert match is not None  # every line starts with ">"
            level = match[1].count(">")
            if runs and runs[-1][0] == level:
                runs[-1][1].append(match[2])
            else:
                runs.append((level, [match[2]]))
        out: list[str] = []
        previous_level = 0
        for level, content in runs:
            if out:
                out.append(">" * min(level, previous_level))  # stops lazy continuation across levels
            markdown = "\n\n".join(self.document("\n".join(content)))
            prefix = "> " * level
            out += [(prefix + line).rstrip() if line else prefix.rstrip() for line in markdown.split("\n")]
            previous_level = level
        return "\n".join(out)

    def list_block(self, lines: list[str]) -> list[str]:
        """Textile lists → Markdown lists; nesting from the marker length, type from its last char."""
        out: list[str] = []
        stack: list[_OpenList] = []  # outermost first
        for line in lines:
            item = _LIST_ITEM.match(line)
            if item is None:  # continuation line (Redmine: a <br /> inside the previous item)
                text = escape_line_start(self.inline(line.strip()))
                if text:
                    out.append(" " * (stack[-1].content_indent if stack else 0) + text)
                continue
            marker = item[1]
            while stack and len(stack[-1].marker) > len(marker):
                stack.pop()
            # Another marker (deeper, or the other list type at the same depth) opens a list
            # nested in the current item, exactly as RedCloth nests it.
            if not stack or stack[-1].marker != marker:
                stack.append(_OpenList(marker, indent=stack[-1].content_indent if stack else 0))
            current = stack[-1]
            current.count += 1
            bullet = f"{current.count}. " if marker[-1] == "#" else "- "
            current.content_indent = current.indent + len(bullet)
            content = "\n".join(
                escape_line_start(part) if n == 0 else " " * current.content_indent + escape_line_start(part)
                for n, part in enumerate(self.inline(item[2]).split("\n"))
                if part.strip() or n == 0
            )
            out.append(" " * current.indent + bullet + content)
        return ["\n".join(out)]

    def table_block(self, lines: list[str]) -> list[str]:
        if _TABLE_ATTRS_LINE.match(lines[0]):
            lines = lines[1:]
            if not lines:
                return []
        # RedCloth joins a line that does not end with "|" to the next one (a <br /> in the cell).
        rows_text: list[str] = []
        pending = ""
        for line in lines:
            pending = f"{pending}\n{line}" if pending else line
            if pending.rstrip().endswith("|"):
                rows_text.append(pending)
                pending = ""
        if pending:
            rows_text.append(pending)
        rows: list[list[str]] = []
        for row in rows_text:
            row = _ROW_ATTRS.sub("", row.strip(), count=1)
            cells = [self.table_cell(cell[2]) for cell in _CELL.finditer(row)]
            # A line joined to a row that had already ended ("|" alone, say) starts without a "|".
            lead = row[: row.find("|")].strip() if "|" in row else ""
            if lead:
                cells.insert(0, self.table_cell(lead))
            rest = row[row.rfind("|") + 1 :].strip() if "|" in row else row
            if rest:  # text after the last "|": Redmine drops it, we never drop text
                cells.append(self.table_cell(rest))
            if cells:
                rows.append(cells)
        if not rows:
            return self.paragraph("\n".join(lines))
        width = max(len(row) for row in rows)
        markdown_rows = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
        delimiter = "|" + "|".join([" --- "] * width) + "|"
        return ["\n".join([markdown_rows[0], delimiter, *markdown_rows[1:]])]

    def table_cell(self, cell: str) -> str:
        text = self.inline(cell.strip())
        return "<br>".join(part.strip() for part in text.split("\n")).replace("|", "\\|")

    # -- inline --------------------------------------------------------------------------------

    def inline(self, text: str) -> str:
        shelve = Shelf()
        if "<" in text:
            text = _NOTEXTILE.sub(lambda m: shelve(escape_text(m[1])), text)
            text = _OFFTAG_INLINE.sub(lambda m: shelve(code_span(html.unescape(m[2]))), text)
        if "==" in text:
            text = _DOUBLE_EQUALS.sub(lambda m: shelve("") + m[1] + shelve(""), text)
        if "{{" in text:
            text = inline_macros(text, shelve)
        if "[[" in text:
            text = WIKI_LINK.sub(lambda m: shelve(escape_text(wiki_link_label(m))), text)
        if "!" in text:
            text = _IMAGE.sub(lambda m: self.image(m, shelve), text)
        if "@" in text:
            text = _pair_code(text, shelve)
        if _SPAN_TRIGGER.search(text):
            text = self.spans(text, shelve)
        if '":' in text:
            text = _LINK.sub(lambda m: self.link(m, shelve), text)
        if "[" in text:
            text = _FOOTNOTE_REF.sub(lambda m: shelve(f"<sup>{m[1]}</sup>"), text)
        if "://" in text or "www." in text:
            text = _AUTO_LINK.sub(lambda m: self.auto_link(m, shelve), text)
        if "@" in text:
            text = _EMAIL.sub(lambda m: shelve(f"<{m[1]}>") if "\\" not in m[1] else m[0], text)
        if self.link_issues and "#" in text:
            text = issue_links(text, self.link_issues, shelve)
        if "!" in text:
            text = ESCAPED_REDMINE_LINK.sub(r"\1", text)
        return shelve.restore(escape_text(text))

    @staticmethod
    def image(match: re.Match[str], shelve: Shelf) -> str:
        source, alt, href = match[2], match[3] or "", match[4]
        if not is_safe_url(source.partition("?")[0]) or (href and not is_safe_url(href)):
            return match[0]
        markdown = f"![{escape_text(alt)}]({link_destination(source)})"
        if href:
            return shelve(f"[{markdown}]({link_destination(href)})") + (match[5] or "")
        return shelve(markdown)

    def spans(self, text: str, shelve: Shelf, nesting: int = 0) -> str:
        closers: dict[str, list[int]] = {}
        out: list[str] = []
        position = 0
        for opener in _SPAN_OPENER.finditer(text):
            start = opener.start()
            if start < position:
                continue
            for delimiter in _SPAN_FALLBACK.get(opener[1], (opener[1],)):
                content_start = start + len(delimiter)
                end = _span_end(text, delimiter, content_start, closers)
                if end is not None:
                    break
            else:
                continue
            content = text[content_start:end]
            attributes = _SPAN_ATTRS.match(content)
            if attributes and attributes[1]:
                content = attributes[2]
            if nesting < _MAX_SPAN_NESTING and _SPAN_TRIGGER.search(content):
                content = self.spans(content, shelve, nesting + 1)
            markdown = _QTAG_MARKDOWN[delimiter]
            out.append(text[position:start])
            out.append(content if markdown is None else shelve(markdown[0]) + content + shelve(markdown[1]))
            position = end + len(delimiter)
        out.append(text[position:])
        return "".join(out)

    @staticmethod
    def link(match: re.Match[str], shelve: Shelf) -> str:
        label, title, slash = match[1], match[2], match[4] or ""
        url, post = _unbalanced_paren_out(match[3], match[5])
        if not is_safe_url(url):
            return match[0]
        if url.startswith("www."):
            url = "http://" + url
        return shelve("[") + label + shelve("](" + link_destination(url + slash) + link_title(title) + ")") + post

    @staticmethod
    def auto_link(match: re.Match[str], shelve: Shelf) -> str:
        leading, slash = match[1], match[3] or ""
        url, post = _unbalanced_paren_out(match[2], match[4])
        url += slash
        if url.startswith("www."):
            return leading + shelve(markdown_link(escape_text(url), "http://" + url)) + post
        return (
            leading
            + shelve(f"<{url}>" if not re.search(r"[<>\s]", url) else markdown_link(escape_text(url), url))
            + post
        )


def _unbalanced_paren_out(url: str, post: str) -> tuple[str, str]:
    """A URL written inside parentheses does not take the closing one: "(see http://x/a)"."""
    if url.endswith(")") and url.count("(") < url.count(")"):
        return url[:-1], ")" + post
    return url, post


def _span_end(text: str, delimiter: str, content_start: int, closers: dict[str, list[int]]) -> int | None:
    """Where the span opened before ``content_start`` closes: the nearest closer after at least
    one character (a one-character content must be a word character, as in RedCloth)."""
    positions = closers.get(delimiter)
    if positions is None:
        positions = closers[delimiter] = [m.start() for m in _SPAN_CLOSERS[delimiter].finditer(text)]
    index = bisect_left(positions, content_start + 1)
    if index < len(positions) and positions[index] == content_start + 1 and not text[content_start].isalnum():
        index += 1
    return positions[index] if index < len(positions) else None


def _pair_code(text: str, shelve: Shelf) -> str:
    """@code@ spans → Markdown code spans (content shown verbatim, entities decoded)."""
    closers = [m.start() for m in _CODE_CLOSER.finditer(text)]
    newlines = [m.start() for m in NEWLINE.finditer(text)]
    out: list[str] = []
    position = 0
    for opener in _CODE_OPENER.finditer(text):
        start = opener.start()
        if start < position:
            continue
        content_start = start + 1
        language = _CODE_LANGUAGE.match(text, content_start)
        if language:
            content_start = language.end()
        index = bisect_left(closers, content_start + 1)
        if index == len(closers):
            break  # no closer after this opener, so none after any later one
        end = closers[index]
        next_newline = bisect_left(newlines, content_start)
        if next_newline < len(newlines) and newlines[next_newline] < end:
            continue  # a code span does not cross a line
        out.append(text[position:start])
        out.append(shelve(code_span(html.unescape(text[content_start:end]))))
        position = end + 1
    out.append(text[position:])
    return "".join(out)


def _pre_end(text: str, start: int) -> tuple[int, int]:
    """(end of content, end of the closing tag) of a <pre> opened before ``start``; nested <pre>
    tags are counted like RedCloth's rip_offtags, an unclosed <pre> runs to the end."""
    depth = 1
    for tag in _PRE_TAG.finditer(text, start):
        depth += -1 if tag[0] == "</pre>" else 1
        if depth == 0:
            return tag.start(), tag.end()
    return len(text), len(text)


def _flush_left(text: str) -> str:
    """Remove the indentation common to all non-blank lines (RedCloth's flush_left)."""
    indents = [len(line) - len(line.lstrip(" ")) for line in text.split("\n") if line.strip()]
    common = min(indents, default=0)
    if common == 0:
        return text
    return "\n".join(line[common:] if line.strip() else "" for line in text.split("\n"))


def _flush_paragraph_starts(lines: list[str]) -> str:
    """Indented text after a paragraph, as RedCloth shows it: only lines after a blank line lose
    their common indentation (the others were already joined to their line by a <br />)."""
    starts = {i for i, line in enumerate(lines) if line.strip() and (i == 0 or not lines[i - 1].strip())}
    common = min(len(lines[i]) - len(lines[i].lstrip(" ")) for i in starts) if starts else 0
    return "\n".join(line[common:] if i in starts else line for i, line in enumerate(lines)).strip("\n")


_BLANK_LINE_SPACES = re.compile(r"^ +$", re.M)
_MANY_NEWLINES = re.compile(r"\n{3,}")


def normalize_textile(text: str) -> str:
    """RedCloth's clean_white_space: tabs → 4 spaces, blank lines emptied, at most one blank line."""
    if "\t" in text:
        text = text.replace("\t", "    ")
    if " \n" in text or text.endswith(" "):
        text = _BLANK_LINE_SPACES.sub("", text)
    if "\n\n\n" in text:
        text = _MANY_NEWLINES.sub("\n\n", text)
    return _flush_left(text) if text.startswith(" ") or "\n " in text else text
