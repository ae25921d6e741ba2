"""What both Redmine text formats share on the way to Markdown: escaping text so that it stays text, code
spans and blocks, links, the shelf of converted fragments, and Redmine's own additions (macros, wiki links,
issue links).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

# Private-use characters delimit shelved (already converted) fragments; input copies are replaced.
SHELF_OPEN = "\ue000"
SHELF_CLOSE = "\ue001"
_SHELF_TOKEN = re.compile("\ue000(\\d+)\ue001")
CONTROL_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ue000\ue001]")

# Ruby's \s and \w are ASCII-only in Redmine's regexes; Python's are Unicode. Spell them out.
RUBY_SPACE = " \t\n\r\f\v"
NEWLINE = re.compile(r"\n")
RUBY_WORD = "A-Za-z0-9_"

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
    return CONTROL_CHARS.sub("\ufffd", decoded)  # no control or shelf characters from "&#0;"


_MD_TRIGGER = re.compile(r"[\\`*\[\]_<&~]")


def escape_text(text: str) -> str:
    """Escape plain text so that Markdown renders it literally (entities decoded first)."""
    if _MD_TRIGGER.search(text) is None:  # fast path: most text has nothing to escape
        return text
    if "&" in text:
        text = _ENTITY.sub(_decode_entity, text)
    return _MD_SPECIAL.sub(r"\\\g<0>", text)


def escape_plain(text: str) -> str:
    """Escape a plain value (a subject, a name: no markup, so entities stay as typed) so that Markdown
    renders it literally."""
    return text if _MD_TRIGGER.search(text) is None else _MD_SPECIAL.sub(r"\\\g<0>", text)


_BLOCK_START_CHARS = frozenset("#>-+*=_`~|:0123456789")


def escape_line_start(line: str) -> str:
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


def paragraph_lines(text: str) -> str:
    return "\n".join(escape_line_start(line) for line in text.split("\n") if line.strip())


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


def link_destination(url: str) -> str:
    if re.search(r"[\s<>]", url) or url.count("(") != url.count(")"):
        return "<" + re.sub(r"([<>\\])", r"\\\1", url) + ">"
    return re.sub(r"([\\])", r"\\\1", url)


def markdown_link(label_md: str, url: str, title: str | None = None) -> str:
    return f"[{label_md}]({link_destination(url)}{link_title(title)})"


_SAFE_SCHEME = re.compile(r"(?:https?|s?ftps?|mailto):", re.I)
_ANY_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def is_safe_url(url: str) -> bool:
    """Redmine's uri_with_safe_scheme?: relative URLs and http(s)/ftp(s)/sftp/mailto only."""
    return not _ANY_SCHEME.match(url) or bool(_SAFE_SCHEME.match(url))


# ---------------------------------------------------------------------------------------------
# Redmine additions shared by both formats: macros, wiki links, issue links
# ---------------------------------------------------------------------------------------------

# Redmine's MACROS_RE: {{name(args)}} or {{name(args)\nblock text\n}}; "!{{" escapes. The block
# form is found by next_block_macro (a linear search, where a lazy ".*?" would be quadratic).
_INLINE_MACRO = re.compile(r"(!)?\{\{(\w+)(?:\(([^\n\r]{0,500}?)\))?\}\}")
_BLOCK_MACRO_OPENING = re.compile(r"(!)?\{\{(\w+)(?:\(([^\n\r]{0,500}?)\))?\n")
TOC_MACRO = re.compile(r"\{\{[<>]?toc\}\}", re.I)
TOC_LINE = re.compile(r"^[ \t]*\{\{[<>]?toc\}\}[ \t]*$", re.I | re.M)
# Macros whose output depends on data we do not have (wiki pages, other projects): kept as text.
_BUILTIN_MACROS = {"collapse", "issue", "thumbnail", "hello_world", "macro_list", "child_pages", "include"}
WIKI_LINK = re.compile(r"(!)?\[\[([^\[\]\n|]{1,500})(?:\|([^\[\]\n]{1,500}))?\]\]")


def wiki_link_label(match: re.Match[str]) -> str:
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


def next_block_macro(text: str, start: int, before: int) -> tuple[re.Match[str], int] | None:
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


def inline_macros(text: str, shelve: Callable[[str], str]) -> str:
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
        return "![](" + link_destination(arguments[0]) + ")"
    return None


# "!" before a Redmine link (!#123, !r758, !commit:abc, !document#1, !@user) stops the link and
# is not shown.
ESCAPED_REDMINE_LINK = re.compile(
    r"(^|[\s(,\-\[>])!(?=(?:[a-z0-9\-_]+:)?(?:##?[0-9]|r[0-9]|@\w|(?:attachment|document|version"
    r"|forum|news|message|project|commit|source|export|user)[:#]))",
    re.M,
)
# Redmine's parse_redmine_links: "#123" after start, whitespace or ( , - [ >; "!" escapes it.
_ISSUE_REF = re.compile(r"(^|[\s(,\-\[>])(!)?#([0-9]+)(?=[^\w/]|$)", re.M)


def issue_links(text: str, base_url: str, shelve: Callable[[str], str]) -> str:
    base = base_url.rstrip("/")

    def replace(match: re.Match[str]) -> str:
        if match[2]:
            return match[1] + "#" + match[3]
        return match[1] + shelve(f"[#{match[3]}]({base}/issues/{match[3]})")

    return _ISSUE_REF.sub(replace, text)


class Shelf:
    """Converted fragments kept out of later passes (RedCloth's ``shelve``): a token replaces them
    in the working text and ``restore`` puts them back after the plain text has been escaped."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def __call__(self, markdown: str) -> str:
        self.items.append(markdown)
        return f"{SHELF_OPEN}{len(self.items) - 1}{SHELF_CLOSE}"

    def restore(self, text: str) -> str:
        # Fragments may hold tokens of earlier fragments: at most len(items) levels deep.
        for _ in range(len(self.items) + 1):
            if SHELF_OPEN not in text:
                break
            text = _SHELF_TOKEN.sub(lambda m: self.items[int(m[1])], text)
        return text


def link_title(title: str | None) -> str:
    return ' "' + title.replace("\\", "\\\\").replace('"', '\\"') + '"' if title else ""
