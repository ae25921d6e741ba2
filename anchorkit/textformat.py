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
from collections.abc import Callable

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


_MD_TRIGGER = re.compile(r"[\\`*\[\]_<&~]")


def _escape_text(text: str) -> str:
    """Escape plain text so that Markdown renders it literally (entities decoded first)."""
    if _MD_TRIGGER.search(text) is None:  # fast path: most text has nothing to escape
        return text
    if "&" in text:
        text = _ENTITY.sub(lambda m: html.unescape(m[0]), text)
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

# Redmine's MACROS_RE: {{name(args)}} or {{name(args)\nblock text\n}}; "!{{" escapes.
_MACRO = re.compile(r"(!)?\{\{(\w+)(?:\(([^\n\r]*?)\))?(?:(\n.*?\n))?\}\}", re.S)
_TOC_MACRO = re.compile(r"\{\{[<>]?toc\}\}", re.I)
# Macros whose output depends on data we do not have (wiki pages, other projects): kept as text.
_BUILTIN_MACROS = {"collapse", "issue", "thumbnail", "hello_world", "macro_list", "child_pages", "include"}
_WIKI_LINK = re.compile(r"(!)?\[\[([^\]\n|]+?)(?:\|([^\]\n]+?))?\]\]")


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


def _inline_macro(name: str, args: str | None) -> str | None:
    """Markdown for a bodyless macro, or None to keep its text."""
    arguments = [a.strip() for a in (args or "").split(",") if a.strip()]
    if name == "issue" and arguments and arguments[0].isdigit():
        return "#" + arguments[0]
    if name == "thumbnail" and arguments:
        return "![](" + _link_destination(arguments[0]) + ")"
    return None


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
_A = r"(?:(?:<>|<|>|=|[()]+)+)?[\-^~]?"
_C = r"(?:\([^\")]+\))?(?:\{[^{][^\"}]+\})?(?:\[[a-z\-_]+\])?"
_S = r"(?:\\\d+)?(?:/\d+)?"

_PRE_OPEN = re.compile(r"<pre\b[^>\n]*>", re.I)
_PRE_CLOSE = re.compile(r"</pre\s*>", re.I)
_CODE_CLASS = re.compile(r"\A\s*<code(?:\s+class=(?:\"([^\"]*)\"|'([^']*)'))?[^>]*>", re.I)
_CODE_END = re.compile(r"</code\s*>\s*\Z", re.I)

_HEADING_OR_BLOCK = re.compile(rf"^(h[1-6]|bq|p|fn[0-9]+)({_A}{_C})\.(?::(\S+))? (.*)$", re.S)
_LIST_ITEM = re.compile(rf"^([#*]+)(?:{_A}{_C}) (.*)$")
_LIST_START = re.compile(rf"^[#*]+{_C} ")
_TABLE_START = re.compile(rf"^(?:table{_S}{_A}{_C}\. ?$|{_A}{_C}\.? ?\|)")
_TABLE_ATTRS_LINE = re.compile(rf"^table{_S}{_A}{_C}\. ?$")
_ROW_ATTRS = re.compile(rf"^{_A}{_C}\. (?=\|)")
_CELL = re.compile(rf"\|(_?{_S}{_A}{_C}\. ?)?((?:\[\[[^|\]]*\|[^|\]]*\]\]|[^|])*?)(?=\|)")
_RULE = re.compile(r"^(?: ?\* ?){3,}$|^(?: ?- ?){3,}$|^(?: ?_ ?){3,}$")
_QUOTE_LINE = re.compile(r"^>")
_QUOTE_PREFIX = re.compile(r"^([> ]+)(.*)$", re.S)
_NOTEXTILE = re.compile(r"<notextile>(.*?)</notextile>", re.S | re.I)
# Redmine's "==text==" only wraps text in <notextile> AFTER the offtags were cut out, so it does
# not protect anything; it just acts as a word boundary for the span rules.
_DOUBLE_EQUALS = re.compile(r"(?:(?<=^)|(?<=\s))==([^=].*?)==(?=\s|$)", re.M)
_OFFTAG_INLINE = re.compile(r"<(code|kbd)\b[^>]*>(.*?)</\1>", re.S | re.I)
_CODE = re.compile(rf"(?:(?<=^)|(?<=[^{_ASCII_WORD}]))@(?:\|\w+?\|)?([^@\n](?:.*?[^\n])?)@(?=[^{_ASCII_WORD}]|$)", re.M)
_IMAGE = re.compile(
    rf"(?:(?<=^)|(?<=[>{_WS}\ue001]))!([<=>])?{_C}(?:\. )?([^{_WS}(!]+?)[{_WS}]?"
    r"(?:\(((?:[^()]|\([^)]+\))+?)\))?!"
    rf"(?::([^{_WS}]+?)([^\w{_WS}/;=?]*?)(?=[{_WS}<]|$))?",
    re.M,
)
_LINK = re.compile(
    rf"\"{_C}([^\"\n]+?)[{_WS}]?(?:\(([^)]+?)\)(?=\"))?\":"
    rf"((?:/|[a-zA-Z]+://|www\.|mailto:)[\w/][^{_WS}]*?)(/)?([^\w=/;()\-]*?)(?=<|[{_WS}]|$)",
    re.M,
)
_AUTO_LINK = re.compile(
    rf"(^|[{_WS}(\[,;\ue001])((?:https?://|s?ftps?://|www\.)[^<{_WS}][^{_WS}]*?)(/)?([^\w=/;()\-]*?)(?=<|[{_WS}]|$)",
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
# One pass for all spans (RedCloth runs one gsub per delimiter; nested spans are handled by
# converting the content of each match again). The alternation order keeps "**" before "*".
_QTAG = re.compile(
    rf"(^|[>{_WS}(\ue001])(?!--)({_QTAGS_JOIN})"
    rf"(\w|[^{_WS}].*?[^{_WS}])(?!--)\2"
    rf"(?=(?:{_QTAGS_JOIN})?(?:[^\w{_WS}]|<|[{_WS}]|\)|$))",
    re.M | re.S,
)
_SPAN_ATTRS = re.compile(rf"^({_C})(.+)$", re.S)
_SPAN_CHARS = frozenset("*?-_%+^~")


class _Shelf:
    """Converted fragments kept out of later passes (RedCloth's ``shelve``): a token replaces them
    in the working text and ``restore`` puts them back after the plain text has been escaped."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, markdown: str) -> str:
        self.items.append(markdown)
        return f"{_SHELF_OPEN}{len(self.items) - 1}{_SHELF_CLOSE}"

    def restore(self, text: str) -> str:
        while _SHELF_OPEN in text:
            text = _SHELF_TOKEN.sub(lambda m: self.items[int(m[1])], text)
        return text


class _TextileConverter:
    def __init__(self, link_issues: str | None) -> None:
        self.link_issues = link_issues

    # -- document level: <pre> blocks and block macros are cut out before blocks are split ------

    def document(self, text: str) -> list[str]:
        blocks: list[str] = []
        position = 0
        while position < len(text):
            pre = _PRE_OPEN.search(text, position)
            macro = self._next_block_macro(text, position, pre.start() if pre else len(text))
            if macro is not None:
                blocks += self.text_blocks(text[position : macro.start()])
                blocks += self.block_macro(macro)
                position = macro.end()
            elif pre is not None:
                blocks += self.text_blocks(text[position : pre.start()])
                close = _PRE_CLOSE.search(text, pre.end())
                content_end = close.start() if close else len(text)
                blocks.append(self.pre_block(text[pre.end() : content_end]))
                position = close.end() if close else len(text)
            else:
                blocks += self.text_blocks(text[position:])
                break
        return blocks

    @staticmethod
    def _next_block_macro(text: str, start: int, before: int) -> re.Match[str] | None:
        for macro in _MACRO.finditer(text, start):
            if macro.start() >= before:
                return None
            if macro[4] is not None and not macro[1] and macro[2].lower() in _BUILTIN_MACROS:
                return macro
        return None

    def block_macro(self, macro: re.Match[str]) -> list[str]:
        """{{collapse(title)\\nbody\\n}}: the title as a paragraph, the body converted in place."""
        blocks = self.text_blocks(macro[3]) if macro[3] else []
        return blocks + self.document(_flush_left(macro[4].strip("\n")))

    @staticmethod
    def pre_block(content: str) -> str:
        language = ""
        code_open = _CODE_CLASS.match(content)
        if code_open:
            language = (code_open[1] or code_open[2] or "").split()[0] if (code_open[1] or code_open[2]) else ""
            content = _CODE_END.sub("", content[code_open.end() :])
        return code_block(content, language)

    # -- blocks --------------------------------------------------------------------------------

    def text_blocks(self, text: str) -> list[str]:
        """Split text (no <pre> inside) into Textile blocks and convert each one."""
        blocks: list[str] = []
        lines = text.split("\n")
        current: list[str] = []
        index = 0
        while index < len(lines):
            line = lines[index]
            if _QUOTE_LINE.match(line):
                blocks += self.block(current)
                current = []
                end = index
                while end < len(lines) and _QUOTE_LINE.match(lines[end]):
                    end += 1
                blocks.append(self.quote(lines[index:end]))
                index = end
                continue
            if line.strip():
                current.append(line)
                index += 1
                continue
            # A blank line ends the block unless indented lines follow (RedCloth: "\n\n(?! )").
            end = index
            while end < len(lines) and not lines[end].strip():
                end += 1
            if current and end < len(lines) and lines[end].startswith(" "):
                tail_end = end
                while tail_end < len(lines) and (lines[tail_end].startswith(" ") or not lines[tail_end].strip()):
                    tail_end += 1
                blocks += self.block(current, indented_tail=lines[end:tail_end])
                current = []
                index = tail_end
                continue
            blocks += self.block(current)
            current = []
            index = end
        blocks += self.block(current)
        return blocks

    def block(self, lines: list[str], indented_tail: list[str] | None = None) -> list[str]:
        if not lines:
            return []
        lines[0] = lines[0].lstrip(" ")
        blocks = self.head_block(lines)
        if indented_tail:
            tail = _flush_left("\n".join(indented_tail).strip("\n"))
            if lines[0][:1] in ("#", "*", ">"):  # not a plain block: the tail is Textile again
                blocks += self.text_blocks(tail)
            else:  # after a plain paragraph, indented lines are preformatted text
                blocks.append(code_block(tail))
        return blocks

    def head_block(self, lines: list[str]) -> list[str]:
        blocks: list[str] = []
        split = next(
            (i for i, line in enumerate(lines) if _TABLE_START.match(line) or _LIST_START.match(line)),
            len(lines),
        )
        leading, structured = lines[:split], lines[split:]
        if leading:
            blocks += self.prefixed_or_paragraph("\n".join(leading))
        if structured:
            if _LIST_START.match(structured[0]):
                blocks.append(self.list_block(structured))
            else:
                blocks += self.table_block(structured)
        return blocks

    def prefixed_or_paragraph(self, text: str) -> list[str]:
        if len(text) >= 3 and _RULE.match(text):
            return ["---"]
        prefixed = _HEADING_OR_BLOCK.match(text) if "." in text[:40] else None
        if prefixed is None:
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

    def list_block(self, lines: list[str]) -> str:
        """Textile lists → Markdown lists; nesting from the marker length, type from its last char."""
        out: list[str] = []
        # Open lists, outermost first: (marker string, indentation of the item content, counter).
        stack: list[list] = []
        for line in lines:
            item = _LIST_ITEM.match(line)
            if item is None:  # continuation line (Redmine: a <br /> inside the previous item)
                indent = stack[-1][1] if stack else 0
                text = _escape_line_start(self.inline(line.strip()))
                if text:
                    out.append(" " * indent + text)
                continue
            marker = item[1]
            while stack and len(stack[-1][0]) > len(marker):
                stack.pop()
            if stack and len(stack[-1][0]) == len(marker) and stack[-1][0][-1] != marker[-1]:
                stack.pop()  # same depth, other list type: a new list
            if not stack or len(stack[-1][0]) < len(marker):
                parent_indent = stack[-1][1] if stack else 0
                stack.append([marker, parent_indent, 0])
            entry = stack[-1]
            entry[2] += 1
            indent = stack[-2][1] if len(stack) > 1 else 0
            bullet = f"{entry[2]}. " if marker[-1] == "#" else "- "
            entry[1] = indent + len(bullet)
            content = "\n".join(
                _escape_line_start(part) if n == 0 else " " * entry[1] + _escape_line_start(part)
                for n, part in enumerate(self.inline(item[2]).split("\n"))
                if part.strip() or n == 0
            )
            out.append(" " * indent + bullet + content)
        return "\n".join(out)

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
            text = self.inline_macros(text, shelve)
        if "[[" in text:
            text = _WIKI_LINK.sub(lambda m: shelve(_escape_text(_wiki_link_label(m))), text)
        if "!" in text:
            text = _IMAGE.sub(lambda m: self.image(m, shelve), text)
        if "@" in text:
            text = _CODE.sub(lambda m: shelve(code_span(html.unescape(m[1]))), text)
        if not _SPAN_CHARS.isdisjoint(text):
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
        return shelve.restore(_escape_text(text))

    def inline_macros(self, text: str, shelve: _Shelf) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match[2].lower()
            if match[1] or name not in _BUILTIN_MACROS:
                return match[0][1:] if match[1] else match[0]
            markdown = _inline_macro(name, match[3])
            return shelve(markdown) if markdown is not None else match[0]

        text = _TOC_MACRO.sub("", text)
        return _MACRO.sub(replace, text)

    @staticmethod
    def image(match: re.Match[str], shelve: _Shelf) -> str:
        source, alt, href = match[2], match[3] or "", match[4]
        if not _is_safe_url(source.partition("?")[0]) or (href and not _is_safe_url(href)):
            return match[0]
        markdown = f"![{_escape_text(alt)}]({_link_destination(source)})"
        if href:
            return shelve(f"[{markdown}]({_link_destination(href)})") + (match[5] or "")
        return shelve(markdown)

    def spans(self, text: str, shelve: _Shelf) -> str:
        def replace(match: re.Match[str]) -> str:
            start, delimiter, content = match.groups()
            attributes = _SPAN_ATTRS.match(content)
            if attributes and attributes[1]:
                content = attributes[2]
            if not _SPAN_CHARS.isdisjoint(content):
                content = self.spans(content, shelve)
            markdown = _QTAG_MARKDOWN[delimiter]
            if markdown is None:
                return start + content
            return start + shelve(markdown[0]) + content + shelve(markdown[1])

        return _QTAG.sub(replace, text)

    @staticmethod
    def link(match: re.Match[str], shelve: _Shelf) -> str:
        label, title, url, slash, post = match[1], match[2], match[3], match[4] or "", match[5]
        if url.endswith(")") and url.count("(") < url.count(")"):
            url, post = url[:-1], ")" + post
        if not _is_safe_url(url):
            return match[0]
        if url.startswith("www."):
            url = "http://" + url
        return shelve("[") + label + shelve("](" + _link_destination(url + slash) + _title(title) + ")") + post

    @staticmethod
    def auto_link(match: re.Match[str], shelve: _Shelf) -> str:
        leading, url, slash, post = match[1], match[2], match[3] or "", match[4]
        if url.endswith(")") and url.count("(") < url.count(")"):
            url, post = url[:-1], ")" + post
        url += slash
        if url.startswith("www."):
            return leading + shelve(_link(_escape_text(url), "http://" + url)) + post
        return leading + shelve(f"<{url}>" if not re.search(r"[<>\s]", url) else _link(_escape_text(url), url)) + post


def _title(title: str | None) -> str:
    return ' "' + title.replace("\\", "\\\\").replace('"', '\\"') + '"' if title else ""


def _flush_left(text: str) -> str:
    """Remove the indentation common to all non-blank lines (RedCloth's flush_left)."""
    indents = [len(line) - len(line.lstrip(" ")) for line in text.split("\n") if line.strip()]
    common = min(indents, default=0)
    if common == 0:
        return text
    return "\n".join(line[common:] if line.strip() else "" for line in text.split("\n"))


def _normalize_textile(text: str) -> str:
    """RedCloth's clean_white_space: tabs → 4 spaces, blank lines emptied, at most one blank line."""
    text = text.replace("\t", "    ")
    text = re.sub(r"(?m)^ +$", "", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return _flush_left(text)


# ---------------------------------------------------------------------------------------------
# CommonMark
# ---------------------------------------------------------------------------------------------

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
            out.append(_common_mark_inline("\n".join(plain), link_issues) if convert else "\n".join(plain))
            plain = []
        if opening:
            fence = opening[2]
        out.append(line)
    if plain:
        out.append(_common_mark_inline("\n".join(plain), link_issues) if convert else "\n".join(plain))
    if fence is not None:
        out.append(fence)
    return "\n".join(out)


def _common_mark_inline(text: str, link_issues: str | None) -> str:
    shelve = _Shelf()
    # Code spans are shelved first so that nothing inside them is touched.
    text = re.sub(r"(`+)(?:.+?)\1", lambda m: shelve(m[0]), text, flags=re.S)
    if "{{" in text:
        text = _common_mark_macros(text, shelve)
    if "[[" in text:
        text = _WIKI_LINK.sub(lambda m: _escape_text(_wiki_link_label(m)), text)
    if link_issues and "#" in text:
        text = _issue_links(text, link_issues, shelve)
    return shelve.restore(text)


def _common_mark_macros(text: str, shelve: _Shelf) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match[2].lower()
        if match[1] or name not in _BUILTIN_MACROS:
            return match[0][1:] if match[1] else match[0]
        if match[4] is not None:  # block macro: keep the title and the body
            title = (match[3] or "").strip()
            return (title + "\n\n" if title else "") + match[4].strip("\n")
        markdown = _inline_macro(name, match[3])
        return shelve(markdown) if markdown is not None else match[0]

    text = _TOC_MACRO.sub("", text)
    return _MACRO.sub(replace, text)


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
