"""Redmine text (Textile or CommonMark) → faithful Markdown.

Textile is converted by a single-pass converter of our own that mirrors the rules of Redmine's
RedCloth3 fork (lib/redmine/wiki_formatting/textile/redcloth3.rb): the same block splitting, the
same span delimiters and word-boundary rules (e.g. ``*strong*`` needs a space before it, so
``これは*重要*です`` stays literal, as in Redmine), the same link/image/code patterns. Measured
against the alternatives (textile→HTML→markdownify/html2text, pandoc) it is 100-1000x faster and
more faithful; see the README's design notes and tests/benchmarks/bench_textformat.py.

CommonMark is already Markdown: only Redmine's own additions are converted (macros, ``[[wiki]]``
links, optional issue links) and an unterminated fence is closed.

Output keeps the ORIGINAL heading levels (``h2.`` → ``## ``); demoting them below the document's
own levels is the document renderer's job (``anchorkit.document``). The converter never drops
text: what it does not understand is passed through, escaped so that it reads as text.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass

TEXT_FORMATS = ("textile", "common_mark")

# Private-use characters delimit shelved (already converted) fragments; input copies are replaced.
_SHELF_OPEN = "\ue000"
_SHELF_CLOSE = "\ue001"
_SHELF_TOKEN = re.compile("\ue000(\\d+)\ue001")
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ue000\ue001]")

# Ruby's \s and \w are ASCII-only in Redmine's regexes; Python's are Unicode. Spell them out.
_WS = " \t\n\r\f\v"
_ASCII_WORD = "A-Za-z0-9_"

# ---------------------------------------------------------------------------------------------
# Markdown output helpers
# ---------------------------------------------------------------------------------------------

_ENTITY = re.compile(r"&(#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# Characters that would start Markdown inline syntax; escaped with a backslash so they stay text.
_MD_SPECIAL = re.compile(
    r"\\(?=[!-/:-@\[-`{-~]|$)"  # a backslash that would escape the next character
    r"|[`*\[\]]"
    r"|(?<![^\W_])_|_(?![^\W_])"  # underscores except inside a word (snake_case stays readable)
    r"|<(?=[A-Za-z/!?])"  # would start an HTML tag or an autolink
    r"|&(?=#?[A-Za-z0-9]+;)"  # would be decoded as an entity
    r"|~(?=~)|(?<=~)~",  # ~~ is strikethrough
    re.M,
)
# A line that CommonMark would read as the start of a block (heading, quote, list, rule, fence,
# setext underline, table delimiter row) although it is paragraph text.
_BLOCK_START = re.compile(
    r"#{1,6}(?=[ \t]|$)"
    r"|>"
    r"|[-+*](?=[ \t]|$)"
    r"|[0-9]{1,9}(?=[.)](?:[ \t]|$))"
    r"|=+[ \t]*$"
    r"|-[- \t]*$"
    r"|_[_ \t]*$"
    r"|```|~~~"
    r"|\|?[ \t]*:?-+:?[ \t]*\|"
)


def _decode_entity(match: re.Match[str]) -> str:
    decoded = html.unescape(match[0])
    return _CONTROL_CHARS.sub("\ufffd", decoded)  # no control or shelf characters from "&#0;"


_MD_TRIGGER = re.compile(r"[\\`*\[\]_<&~]")


def _escape_text(text: str) -> str:
    """Escape plain text so that Markdown renders it literally (entities decoded first)."""
    if _MD_TRIGGER.search(text) is None:  # fast path: most text has nothing to escape
        return text
    if "&" in text:
        text = _ENTITY.sub(_decode_entity, text)
    return _MD_SPECIAL.sub(r"\\\g<0>", text)


_BLOCK_START_CHARS = frozenset("#>-+*=_`~|:0123456789")


def _escape_line_start(line: str) -> str:
    """Strip indentation (it would make a code block) and escape a line that would start a block."""
    line = line.lstrip(" ")
    if line[:1] not in _BLOCK_START_CHARS or not line:
        return line
    match = _BLOCK_START.match(line)
    if match is None:
        return line
    if line[0].isdigit():  # "1. text" → "1\. text"
        end = match.end()
        return line[:end] + "\\" + line[end:]
    return "\\" + line


def _paragraph_lines(text: str) -> str:
    return "\n".join(_escape_line_start(line) for line in text.split("\n") if line.strip())


def code_span(code: str) -> str:
    """An inline code span that shows ``code`` verbatim, whatever backticks it contains."""
    code = code.replace("\n", " ")
    runs = {len(run) for run in re.findall(r"`+", code)}
    ticks = 1
    while ticks in runs:
        ticks += 1
    fence = "`" * ticks
    if code.startswith(("`", " ")) or code.endswith(("`", " ")):
        code = f" {code} "
    return f"{fence}{code}{fence}" if code else ""


def code_block(code: str, language: str = "") -> str:
    """A fenced code block showing ``code`` verbatim; the fence is longer than any backtick run
    inside, so the block always closes exactly where it should."""
    longest = max((len(run) for run in re.findall(r"`{3,}", code)), default=2)
    fence = "`" * (longest + 1)
    language = re.sub(r"[^\w+#.-]", "", language)
    body = code.strip("\n")
    return f"{fence}{language}\n{body}\n{fence}" if body else f"{fence}{language}\n{fence}"


def _link_destination(url: str) -> str:
    if re.search(r"[\s<>]", url) or url.count("(") != url.count(")"):
        return "<" + re.sub(r"([<>\\])", r"\\\1", url) + ">"
    return re.sub(r"([\\])", r"\\\1", url)


def _link(label_md: str, url: str, title: str | None = None) -> str:
    return f"[{label_md}]({_link_destination(url)}{_title(title)})"


_SAFE_SCHEME = re.compile(r"(?:https?|s?ftps?|mailto):", re.I)
_ANY_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _is_safe_url(url: str) -> bool:
    """Redmine's uri_with_safe_scheme?: relative URLs and http(s)/ftp(s)/sftp/mailto only."""
    return not _ANY_SCHEME.match(url) or bool(_SAFE_SCHEME.match(url))


# ---------------------------------------------------------------------------------------------
# Redmine additions shared by both formats: macros, wiki links, issue links
# ---------------------------------------------------------------------------------------------

# Redmine's MACROS_RE: {{name(args)}} or {{name(args)\nblock text\n}}; "!{{" escapes. The block
# form is found by _next_block_macro (a linear search, where a lazy ".*?" would be quadratic).
_INLINE_MACRO = re.compile(r"(!)?\{\{(\w+)(?:\(([^\n\r]{0,500}?)\))?\}\}")
_BLOCK_MACRO_OPENING = re.compile(r"(!)?\{\{(\w+)(?:\(([^\n\r]{0,500}?)\))?\n")
_TOC_MACRO = re.compile(r"\{\{[<>]?toc\}\}", re.I)
_TOC_LINE = re.compile(r"^[ \t]*\{\{[<>]?toc\}\}[ \t]*$", re.I | re.M)
# Macros whose output depends on data we do not have (wiki pages, other projects): kept as text.
_BUILTIN_MACROS = {"collapse", "issue", "thumbnail", "hello_world", "macro_list", "child_pages", "include"}
_WIKI_LINK = re.compile(r"(!)?\[\[([^\[\]\n|]{1,500})(?:\|([^\[\]\n]{1,500}))?\]\]")


def _wiki_link_label(match: re.Match[str]) -> str:
    """[[Page]], [[project:Page#anchor]], [[Page|text]] → the text Redmine shows."""
    if match[1]:  # escaped: shown literally without the "!"
        return match[0][1:]
    if match[3]:
        return match[3].strip()
    page = match[2].strip()
    if ":" in page:  # other project's wiki: "sandbox:Some page", "sandbox:" shows "sandbox"
        project, _, page = page.partition(":")
        page = page or project
    return page.partition("#")[0] or page


def _next_block_macro(text: str, start: int, before: int) -> tuple[re.Match[str], int] | None:
    """The first block macro ({{collapse(title)...}}) whose opening line lies in text[start:before],
    with the position of its closing "}}" line; unknown and escaped macros stay text."""
    if text.find("{{", start, before) == -1:  # only the searched range: callers step through the text
        return None
    for opening in _BLOCK_MACRO_OPENING.finditer(text, start, before):
        if opening[1] or opening[2].lower() not in _BUILTIN_MACROS:
            continue
        close = text.find("\n}}", opening.end())
        # No closing here means none for any later opening either: stop (keeps this linear).
        return (opening, close) if close != -1 else None
    return None


def _inline_macros(text: str, shelve: Callable[[str], str]) -> str:
    """Bodyless macros: issue/thumbnail converted, other builtins and unknown macros kept as text
    ("!{{macro}}" loses its "!", as in Redmine; unknown macros are not macros for Redmine)."""

    def replace(match: re.Match[str]) -> str:
        name = match[2].lower()
        if name not in _BUILTIN_MACROS:
            return match[0]
        if match[1]:
            return match[0][1:]
        markdown = _inline_macro(name, match[3])
        return shelve(markdown) if markdown is not None else match[0]

    return _INLINE_MACRO.sub(replace, text)


def _inline_macro(name: str, args: str | None) -> str | None:
    """Markdown for a bodyless macro, or None to keep its text."""
    arguments = [a.strip() for a in (args or "").split(",") if a.strip()]
    if name == "issue" and arguments and arguments[0].isdigit():
        return "#" + arguments[0]
    if name == "thumbnail" and arguments:
        return "![](" + _link_destination(arguments[0]) + ")"
    return None


# "!" before a Redmine link (!#123, !r758, !commit:abc, !document#1, !@user) stops the link and
# is not shown.
_ESCAPED_REDMINE_LINK = re.compile(
    r"(^|[\s(,\-\[>])!(?=(?:[a-z0-9\-_]+:)?(?:##?[0-9]|r[0-9]|@\w|(?:attachment|document|version"
    r"|forum|news|message|project|commit|source|export|user)[:#]))",
    re.M,
)
# Redmine's parse_redmine_links: "#123" after start, whitespace or ( , - [ >; "!" escapes it.
_ISSUE_REF = re.compile(r"(^|[\s(,\-\[>])(!)?#([0-9]+)(?=[^\w/]|$)", re.M)


def _issue_links(text: str, base_url: str, shelve: Callable[[str], str]) -> str:
    base = base_url.rstrip("/")

    def replace(match: re.Match[str]) -> str:
        if match[2]:
            return match[1] + "#" + match[3]
        return match[1] + shelve(f"[#{match[3]}]({base}/issues/{match[3]})")

    return _ISSUE_REF.sub(replace, text)


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
_CODE_OPENER = re.compile(rf"(?:^|(?<=[^{_ASCII_WORD}]))@(?=[^@\n])", re.M)
_CODE_CLOSER = re.compile(rf"(?=@(?:[^{_ASCII_WORD}]|$))", re.M)
_CODE_LANGUAGE = re.compile(r"\|\w+?\|")
_IMAGE = re.compile(
    rf"(?:(?<=^)|(?<=[>{_WS}\ue001]))!([<=>])?{_C}(?:\. )?([^{_WS}(!\ue000\ue001]{{1,2000}}?)[{_WS}]?"
    r"(?:\(((?:[^()\n]|\([^)\n]{1,200}\)){1,500}?)\))?!"
    rf"(?::([^{_WS}\ue000\ue001]{{1,2000}}?)([^\w{_WS}/;=?]{{0,10}}?)(?=[{_WS}<]|$))?",
    re.M,
)
_LINK = re.compile(
    rf"\"{_C}([^\"\n]{{1,1000}}?)[{_WS}]?(?:\(([^)\n]{{1,200}}?)\)(?=\"))?\":"
    rf"((?:/|[a-zA-Z]+://|www\.|mailto:)[\w/][^{_WS}\ue000\ue001]{{0,2000}}?)(/)?([^\w=/;()\-]{{0,10}}?)(?=<|[{_WS}]|$)",
    re.M,
)
_AUTO_LINK = re.compile(
    rf"(^|[{_WS}(\[,;\ue001])((?:https?://|s?ftps?://|www\.)[^<{_WS}\ue000\ue001][^{_WS}\ue000\ue001]{{0,2000}}?)(/)?([^\w=/;()\-]{{0,10}}?)(?=<|[{_WS}]|$)",
    re.M,
)
_EMAIL = re.compile(r"(?<![\w.!#$%+/-])([\w.!#$%+/-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)", re.A)
_FOOTNOTE_REF = re.compile(rf"(?<=[{_ASCII_WORD}])\[([0-9]+)\]")

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
_SPAN_OPENER = re.compile(rf"(?:^|(?<=[>{_WS}(\ue001]))(?!--)({_QTAGS_JOIN})(?=[^{_WS}])", re.M)
_SPAN_CLOSERS = {
    delimiter: re.compile(
        rf"(?<=[^{_WS}])(?=(?!--){re.escape(delimiter)}(?:{_QTAGS_JOIN})?(?:[^\w{_WS}]|<|[{_WS}]|\)|$))", re.M
    )
    for delimiter in _QTAG_DELIMITERS
}
_SPAN_FALLBACK = {"**": ("**", "*"), "__": ("__", "_")}
_MAX_SPAN_NESTING = 8
_SPAN_ATTRS = re.compile(rf"^({_C})(.+)$", re.S)
# Cheap test whether any span can start (a delimiter after a line start, space, "(" or ">").
_SPAN_TRIGGER = re.compile(rf"(?:^|[>{_WS}(\ue001])[*?\-_%+^~]", re.M)


@dataclass
class _OpenList:
    marker: str  # "*", "##", "*#"...: the depth is its length, the list type its last character
    indent: int  # column of this list's bullets
    content_indent: int = 0  # column of the current item's text
    count: int = 0  # items so far (the number of the next ordered item)


class _Shelf:
    """Converted fragments kept out of later passes (RedCloth's ``shelve``): a token replaces them
    in the working text and ``restore`` puts them back after the plain text has been escaped."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, markdown: str) -> str:
        self.items.append(markdown)
        return f"{_SHELF_OPEN}{len(self.items) - 1}{_SHELF_CLOSE}"

    def restore(self, text: str) -> str:
        # Fragments may hold tokens of earlier fragments: at most len(items) levels deep.
        for _ in range(len(self.items) + 1):
            if _SHELF_OPEN not in text:
                break
            text = _SHELF_TOKEN.sub(lambda m: self.items[int(m[1])], text)
        return text


class _TextileConverter:
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
            macro = _next_block_macro(text, position, pre.start() if pre else len(text))
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
        if "{{" in text and _TOC_MACRO.fullmatch(text.strip()):
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
            body = _paragraph_lines(self.inline(content))
            return ["\n".join("> " + line for line in body.split("\n"))] if body else []
        if tag.startswith("fn"):
            return self.paragraph(content, prefix=f"<sup>{tag[2:]}</sup> ")
        return self.paragraph(content)

    def paragraph(self, text: str, prefix: str = "") -> list[str]:
        body = _paragraph_lines(self.inline(text))
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
                text = _escape_line_start(self.inline(line.strip()))
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
                _escape_line_start(part) if n == 0 else " " * current.content_indent + _escape_line_start(part)
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
        shelve = _Shelf()
        if "<" in text:
            text = _NOTEXTILE.sub(lambda m: shelve(_escape_text(m[1])), text)
            text = _OFFTAG_INLINE.sub(lambda m: shelve(code_span(html.unescape(m[2]))), text)
        if "==" in text:
            text = _DOUBLE_EQUALS.sub(lambda m: shelve("") + m[1] + shelve(""), text)
        if "{{" in text:
            text = _inline_macros(text, shelve)
        if "[[" in text:
            text = _WIKI_LINK.sub(lambda m: shelve(_escape_text(_wiki_link_label(m))), text)
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
            text = _issue_links(text, self.link_issues, shelve)
        if "!" in text:
            text = _ESCAPED_REDMINE_LINK.sub(r"\1", text)
        return shelve.restore(_escape_text(text))

    @staticmethod
    def image(match: re.Match[str], shelve: _Shelf) -> str:
        source, alt, href = match[2], match[3] or "", match[4]
        if not _is_safe_url(source.partition("?")[0]) or (href and not _is_safe_url(href)):
            return match[0]
        markdown = f"![{_escape_text(alt)}]({_link_destination(source)})"
        if href:
            return shelve(f"[{markdown}]({_link_destination(href)})") + (match[5] or "")
        return shelve(markdown)

    def spans(self, text: str, shelve: _Shelf, nesting: int = 0) -> str:
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
    def link(match: re.Match[str], shelve: _Shelf) -> str:
        label, title, slash = match[1], match[2], match[4] or ""
        url, post = _unbalanced_paren_out(match[3], match[5])
        if not _is_safe_url(url):
            return match[0]
        if url.startswith("www."):
            url = "http://" + url
        return shelve("[") + label + shelve("](" + _link_destination(url + slash) + _title(title) + ")") + post

    @staticmethod
    def auto_link(match: re.Match[str], shelve: _Shelf) -> str:
        leading, slash = match[1], match[3] or ""
        url, post = _unbalanced_paren_out(match[2], match[4])
        url += slash
        if url.startswith("www."):
            return leading + shelve(_link(_escape_text(url), "http://" + url)) + post
        return leading + shelve(f"<{url}>" if not re.search(r"[<>\s]", url) else _link(_escape_text(url), url)) + post


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


def _pair_code(text: str, shelve: _Shelf) -> str:
    """@code@ spans → Markdown code spans (content shown verbatim, entities decoded)."""
    closers = [m.start() for m in _CODE_CLOSER.finditer(text)]
    newlines = [m.start() for m in _NEWLINE.finditer(text)]
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


def _title(title: str | None) -> str:
    return ' "' + title.replace("\\", "\\\\").replace('"', '\\"') + '"' if title else ""


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


def _normalize_textile(text: str) -> str:
    """RedCloth's clean_white_space: tabs → 4 spaces, blank lines emptied, at most one blank line."""
    if "\t" in text:
        text = text.replace("\t", "    ")
    if " \n" in text or text.endswith(" "):
        text = _BLANK_LINE_SPACES.sub("", text)
    if "\n\n\n" in text:
        text = _MANY_NEWLINES.sub("\n\n", text)
    return _flush_left(text) if text.startswith(" ") or "\n " in text else text


# ---------------------------------------------------------------------------------------------
# CommonMark
# ---------------------------------------------------------------------------------------------

_BACKTICKS = re.compile(r"`+")
_NEWLINE = re.compile(r"\n")
_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}(?!.*`)|~{3,})")


def _common_mark(text: str, link_issues: str | None) -> str:
    """Redmine CommonMark is Markdown already: convert Redmine's additions outside code only, and
    close a fence left open (CommonMark would run it to the end of the document anyway)."""
    convert = "{{" in text or "[[" in text or bool(link_issues and "#" in text)
    out: list[str] = []
    plain: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is not None:
            out.append(line)
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line)
        if opening is None and not (convert and line.startswith("    ")):
            plain.append(line)
            continue
        if plain:
            out.append(_common_mark_plain("\n".join(plain), link_issues, convert))
            plain = []
        if opening:
            fence = opening[2]
        out.append(line)
    if plain:
        out.append(_common_mark_plain("\n".join(plain), link_issues, convert))
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


# GFM's tagfilter (which Redmine's commonmarker applies): these tags are shown as text.
_FILTERED_TAG = re.compile(r"<(?=/?(?:title|textarea|style|xmp|iframe|noembed|noframes|script|plaintext)\b)", re.I)


def _common_mark_plain(text: str, link_issues: str | None, convert: bool) -> str:
    if "<" in text:
        text = _FILTERED_TAG.sub("&lt;", text)
    return _common_mark_inline(text, link_issues) if convert else text


def _common_mark_inline(text: str, link_issues: str | None) -> str:
    shelve = _Shelf()
    if "`" in text:  # code spans are shelved first so that nothing inside them is touched
        text = _shelve_code_spans(text, shelve)
    if "{{" in text:
        text = _common_mark_macros(text, shelve)
    if "[[" in text:
        text = _WIKI_LINK.sub(lambda m: _escape_text(_wiki_link_label(m)), text)
    if link_issues and "#" in text:
        text = _issue_links(text, link_issues, shelve)
    return shelve.restore(text)


def _shelve_code_spans(text: str, shelve: _Shelf) -> str:
    """CommonMark code spans: a backtick run up to the next run of the same length."""
    runs = list(_BACKTICKS.finditer(text))
    by_length: dict[int, list[int]] = {}
    for index, run in enumerate(runs):
        by_length.setdefault(len(run[0]), []).append(index)
    out: list[str] = []
    position = 0
    index = 0
    while index < len(runs):
        run = runs[index]
        same_length = by_length[len(run[0])]
        following = bisect_right(same_length, index)
        if following == len(same_length):
            index += 1
            continue
        closing = runs[same_length[following]]
        out += [text[position : run.start()], shelve(text[run.start() : closing.end()])]
        position = closing.end()
        index = same_length[following] + 1
    out.append(text[position:])
    return "".join(out)


def _common_mark_macros(text: str, shelve: _Shelf) -> str:
    out: list[str] = []
    position = 0
    while (macro := _next_block_macro(text, position, len(text))) is not None:
        opening, close = macro
        title = (opening[3] or "").strip()  # block macro: keep the title and the body
        out += [text[position : opening.start()], title + "\n\n" if title else "", text[opening.end() : close]]
        position = close + len("\n}}")
    out.append(text[position:])
    return _inline_macros(_TOC_LINE.sub("", "".join(out)), shelve)


# ---------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------


def to_markdown(text: str, fmt: str, *, link_issues: str | None = None) -> str:
    """Convert Redmine text in ``fmt`` ("textile" or "common_mark") to Markdown.

    ``link_issues``: base URL of the Redmine; ``#123`` then becomes ``[#123](URL/issues/123)``.
    Headings keep their original levels; code blocks are always fenced and closed.
    """
    if fmt not in TEXT_FORMATS:
        raise ValueError(f"unknown text format {fmt!r} (expected one of {', '.join(TEXT_FORMATS)})")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _CONTROL_CHARS.search(text):
        text = _CONTROL_CHARS.sub(lambda m: "\ufffd" if m[0] in (_SHELF_OPEN, _SHELF_CLOSE) else "", text)
    if fmt == "common_mark":
        return _common_mark(text, link_issues).strip("\n")
    converter = _TextileConverter(link_issues)
    return "\n\n".join(block for block in converter.document(_normalize_textile(text)) if block)
