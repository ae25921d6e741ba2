"""Issue JSON + lookups → one anchored Markdown document. Pure: no I/O, no clock.

Shape (Japanese labels by default, English with ``lang="en"``)::

    # チケット #12345: VPN接続が不安定になる
    ## 基本情報
    > チケット #12345: VPN接続が不安定になる     (unless anchor_basic_info=False)
    - ステータス: 完了 …
    ## 説明
    > チケット #12345: VPN接続が不安定になる
    …description (its own headings demoted to #### and below, each anchored)…
    ## 対応履歴
    > チケット #12345: VPN接続が不安定になる
    ### [2026-03-15] 佐藤次郎
    > チケット #12345: VPN接続が不安定になる
    - ステータス: 対応中 → 完了
    …notes…
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from markdown_it.token import Token

from anchorkit.anchors import (
    anchor_line,
    exposed_ticket_ids,
    id_anchor_line,
    insert_anchors,
    may_hold_a_heading,
    neutralize_forgeries,
    one_line,
    shortened,
    strip_anchors,
    title_line,
)
from anchorkit.markdown_blocks import holds_complex_lines, parse_blocks, scannable_code_lines, top_level_blocks
from anchorkit.render.markdown_text import escape_plain
from anchorkit.render.spacing import TokenCounter, approx_tokens_with_margin, space_anchors
from anchorkit.render.textformat import to_markdown
from anchorkit.settings import default

Lookups = dict[str, dict[str, dict[str, Any]]]

# Content headings sit below the document's own levels (#, ##, ###).
CONTENT_HEADING_SHIFT = 3

LABELS: dict[str, dict[str, str]] = {
    "ja": {
        "ticket": "チケット",
        "details": "基本情報",
        "description": "説明",
        "history": "対応履歴",
        "project": "プロジェクト",
        "tracker": "トラッカー",
        "status": "ステータス",
        "priority": "優先度",
        "author": "作成者",
        "assignee": "担当者",
        "category": "カテゴリ",
        "version": "対象バージョン",
        "start_date": "開始日",
        "due_date": "期日",
        "created": "作成日",
        "updated": "更新日",
        "closed": "終了日",
        "done_ratio": "進捗率",
        "estimated_hours": "予定工数",
        "parent": "親チケット",
        "children": "子チケット",
        "relations": "関連するチケット",
        "attachments": "添付ファイル",
        "subject": "題名",
        "private": "プライベート",
        "description_updated": "説明を更新",
        "added": "追加",
        "removed": "削除",
        "relates": "関連している",
        "duplicates": "次のチケットと重複",
        "duplicated": "次のチケットに重複されている",
        "blocks": "ブロック先",
        "blocked": "ブロック元",
        "precedes": "先行",
        "follows": "後続",
        "copied_to": "コピー先",
        "copied_from": "コピー元",
    },
    "en": {
        "ticket": "Ticket",
        "details": "Details",
        "description": "Description",
        "history": "History",
        "project": "Project",
        "tracker": "Tracker",
        "status": "Status",
        "priority": "Priority",
        "author": "Author",
        "assignee": "Assignee",
        "category": "Category",
        "version": "Target version",
        "start_date": "Start date",
        "due_date": "Due date",
        "created": "Created",
        "updated": "Updated",
        "closed": "Closed",
        "done_ratio": "% Done",
        "estimated_hours": "Estimated time",
        "parent": "Parent task",
        "children": "Subtasks",
        "relations": "Related issues",
        "attachments": "Files",
        "subject": "Subject",
        "private": "Private",
        "description_updated": "Description updated",
        "added": "added",
        "removed": "removed",
        "relates": "related to",
        "duplicates": "duplicates",
        "duplicated": "duplicated by",
        "blocks": "blocks",
        "blocked": "blocked by",
        "precedes": "precedes",
        "follows": "follows",
        "copied_to": "copied to",
        "copied_from": "copied from",
    },
}

# Journal attribute → (label key, lookup table or None for plain values).
_ATTRIBUTES: dict[str, tuple[str, str | None]] = {
    "status_id": ("status", "statuses"),
    "tracker_id": ("tracker", "trackers"),
    "priority_id": ("priority", "priorities"),
    "assigned_to_id": ("assignee", "users"),
    "category_id": ("category", "categories"),
    "fixed_version_id": ("version", "versions"),
    "project_id": ("project", "projects"),
    "author_id": ("author", "users"),
    "parent_id": ("parent", None),
    "subject": ("subject", None),
    "start_date": ("start_date", None),
    "due_date": ("due_date", None),
    "done_ratio": ("done_ratio", None),
    "estimated_hours": ("estimated_hours", None),
    "is_private": ("private", None),
}


DEFAULT_CHUNK_TOKENS: int = default("chunk_tokens")
DEFAULT_ANCHOR_SUBJECT_CHARS: int = default("anchor_subject_chars")


@dataclass(frozen=True)
class RenderOptions:
    lang: str = default("lang")
    include_private: bool = default("include_private")
    # Heading-based chunkers cut the basic info away from the title, so it is anchored by default.
    anchor_basic_info: bool = default("anchor_basic_info")
    # Any window of this many tokens holds a complete anchor or the title (spacing.space_anchors);
    # 0: only the anchors after headings. 300 is Amazon Bedrock's default fixed-size chunk.
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    # The subject in anchors (not in the title) is cut to this many characters (0: whole).
    anchor_subject_chars: int = DEFAULT_ANCHOR_SUBJECT_CHARS
    # The anchors spacing places: "short" (``> チケット #12345:``) or "full" (with the subject, as the
    # anchors after headings, which always carry it).
    spacing_anchors: str = default("spacing_anchors")
    # A single format, or [(since ISO timestamp, format), ...]: texts created before the first
    # "since" are Textile (Redmine's historical default), later ones use the last format in force.
    text_format: str | tuple[tuple[str, str], ...] = "textile"
    timezone: str = default("timezone")
    labels: dict[str, str] = field(default_factory=dict)  # overrides of LABELS[lang]
    link_issues: str | None = None  # Redmine base URL: "#123" in ticket text becomes a link
    # The snapshot may hold private subtasks' subjects (pulled with --include-private): without include_private
    # its subtasks are shown by number only (transform.resolve_render_options).
    private_subtask_subjects: bool = False
    # Custom fields only some roles may see whose values the snapshot holds (pulled with --include-private):
    # without include_private they are left out (transform.render_ticket).
    restricted_custom_fields: frozenset[int] = frozenset()

    @property
    def subtask_subjects(self) -> bool:
        return self.include_private or not self.private_subtask_subjects

    def label(self, key: str) -> str:
        return self.labels.get(key) or LABELS[self.lang][key]


def render_document(
    issue: dict[str, Any],
    lookups: Lookups,
    options: RenderOptions,
    count_tokens: TokenCounter = approx_tokens_with_margin,
    journals: list[dict[str, Any]] | None = None,
) -> str:
    """The anchored Markdown document of one issue (byte-identical for identical input). ``journals``:
    its ``history_journals`` when the caller has them already.

    Section anchors are placed as the document is assembled, and each piece of ticket text is
    anchored on its own (its headings), so no ticket pays for parsing the whole document;
    ``anchors.insert_anchors`` over the result changes nothing (tested). Then spacing anchors
    bound the distance between anchors for ``options.chunk_tokens``, measured with ``count_tokens``.

    Every text from Redmine is escaped as plain text (``_inline``) or converted from its format
    (``content_markdown``), and every line made from it is neutralised as a whole
    (``anchors.neutralize_forgeries``), so no chunk of the document, wherever it starts, holds an
    anchor or a title of another ticket.
    """
    ticket_id, label = issue["id"], options.label("ticket")
    body_subject = escape_plain(shortened(issue["subject"], options.anchor_subject_chars))
    anchor = anchor_line(ticket_id, body_subject, label)
    parts = []
    for part, kind in _parts(issue, lookups, options, journals):
        parts.append(insert_anchors(part, ticket_id, body_subject, label) if kind is _TEXT else part)
        if kind is _HEADING or (kind is _DETAILS_HEADING and options.anchor_basic_info):
            parts.append(anchor)
    document = "\n\n".join(part for part in parts if part) + "\n"
    if not options.chunk_tokens:
        return document
    spacing = id_anchor_line(ticket_id, label) if options.spacing_anchors == "short" else anchor
    return space_anchors(document, spacing, options.chunk_tokens, count_tokens)


@dataclass(frozen=True)
class Outline:
    """A ticket's content, its document without anchors (``anchors.strip_anchors`` of ``render_document``'s,
    whatever the spacing options), and where its section and journal headings are in it: (offset, "##" or
    "###", the heading line), the basic info's heading aside. What the chunker cuts, without anchors to
    place and then find and take out again."""

    content: str
    headings: list[tuple[int, str, str]]


def render_outline(
    issue: dict[str, Any], lookups: Lookups, options: RenderOptions, journals: list[dict[str, Any]] | None = None
) -> Outline:
    """The outline of the document ``render_document`` writes (tested: its content is that document's
    without anchors)."""
    ticket_id, label = issue["id"], options.label("ticket")
    parts: list[str] = []
    headings: list[tuple[int, str, str]] = []
    offset = 0
    for part, kind in _parts(issue, lookups, options, journals):
        if kind is _TEXT and may_hold_a_heading(part):
            # Its headings' anchors bring blank lines that stay when they are taken out (one after a heading).
            part = strip_anchors(insert_anchors(part, ticket_id, "", label))
        if not part:
            continue
        if kind is _HEADING:
            headings.append((offset, part[: part.index(" ")], part))
        parts.append(part)
        offset += len(part) + 2
    return Outline("\n\n".join(parts) + "\n", headings)


# What each part of a document is: an anchored section or journal heading, the basic info's heading
# (anchored with anchor_basic_info), ticket text (its own headings anchored), or other lines.
_HEADING, _DETAILS_HEADING, _TEXT, _LINES = "heading", "details heading", "text", "lines"


def _parts(
    issue: dict[str, Any], lookups: Lookups, options: RenderOptions, journals: list[dict[str, Any]] | None
) -> list[tuple[str, str]]:
    """The parts of the document, in order, with what each is; joined by blank lines, with anchors."""
    if journals is None:
        journals = history_journals(issue, lookups, options)
    parts = [
        (title_line(issue["id"], _inline(issue["subject"]), options.label("ticket")), _LINES),
        (f"## {options.label('details')}", _DETAILS_HEADING),
        (_details(issue, options), _LINES),
    ]
    description = (issue.get("description") or "").strip()
    if description:
        fmt = text_format_at(options.text_format, issue.get("created_on"))
        parts += [
            (f"## {options.label('description')}", _HEADING),
            (content_markdown(description, fmt, options.link_issues), _TEXT),
        ]
    entries = [_journal_entry(j, issue, lookups, options) for j in journals]
    if entries:
        parts.append((f"## {options.label('history')}", _HEADING))
        for heading, body in entries:
            parts += [(heading, _HEADING), (body, _TEXT)]
    return parts


def content_markdown(text: str, fmt: str, link_issues: str | None = None) -> str:
    """Ticket text (description or note) as Markdown that cannot alter the document around it.

    Converted from Redmine's format; headings demoted below the document's levels; fences and
    HTML blocks left open are closed; lines shaped like anchors or titles neutralised, as they are
    written and as they read once their character references are decoded.
    """
    markdown = _contain(to_markdown(text, fmt, link_issues=link_issues).strip("\n"))
    return neutralize_forgeries(_without_encoded_forgeries(markdown) if "&" in markdown else markdown)


def _without_encoded_forgeries(markdown: str) -> str:
    """``markdown`` with the ``&`` of each line escaped (``&amp;``) whose character references, decoded, would
    make an anchor or a title: ``> チケット &#35;99:``, ``&gt; チケット #99:`` are none as written, but a
    Markdown renderer decodes them into one. Escaped, they read as written (html.unescape decodes more than
    CommonMark does, "&gt" without its ";" too: a line it flags is escaped, never one it misses)."""
    lines = markdown.split("\n")
    for index, line in enumerate(lines):
        if "&" in line and (decoded := html.unescape(line)) != line and _forged(decoded):
            lines[index] = line.replace("&", "&amp;")
    return "\n".join(lines)


def _forged(text: str) -> bool:
    """Whether ``text`` holds an anchor or a title, or what the neutraliser takes for one."""
    return bool(exposed_ticket_ids(text)) or neutralize_forgeries(text) != text


def text_format_at(setting: str | tuple[tuple[str, str], ...], created_on: str | None) -> str:
    """The text format in force when a text was created (Redmine never converts old texts)."""
    if isinstance(setting, str):
        return setting
    fmt = "textile"
    for since, later_format in setting:
        if created_on is not None and created_on >= since:
            fmt = later_format
    return fmt


# ---------------------------------------------------------------- containment of content


# An ATX heading, also inside quotes and list items; setext headings are COMPLEX_LINEs.
_ANY_HEADING = re.compile(r"^(?:[ \t]*(?:>|[-*+](?=[ \t])|\d{1,9}[.)](?=[ \t])))*[ \t]*#{1,6}(?:[ \t]|$)", re.M)
_CONTAINER_PREFIX = re.compile(r"^(?:[ \t]*(?:>|[-*+](?=[ \t])|\d{1,9}[.)](?=[ \t]))[ \t]?)*[ \t]*")
_HTML_BLOCK_CLOSERS = (
    (re.compile(r"^ {0,3}<(pre|script|style|textarea)(?:\s|>|$)", re.I), None),
    (re.compile(r"^ {0,3}<!--"), "-->"),
    (re.compile(r"^ {0,3}<\?"), "?>"),
    (re.compile(r"^ {0,3}<![A-Za-z]"), ">"),
    (re.compile(r"^ {0,3}<!\[CDATA\["), "]]>"),
)
_TAG_BLOCK_END = re.compile(r"</(?:pre|script|style|textarea)>", re.I)  # what ends the first kind above
_SENTINEL = "anchorkit-end-of-content"


def _contain(markdown: str) -> str:
    """Headings demoted and constructs left open closed, by the cheapest way exact for this text."""
    code: set[int] = set()
    text = markdown
    if holds_complex_lines(markdown):
        lines = markdown.split("\n")
        scannable = scannable_code_lines(lines)
        if scannable is None:
            return _contain_parsed(markdown)
        code = scannable
        text = "\n".join(line for number, line in enumerate(lines) if number not in code)
    heading_starts = {m[0][0] for m in _ANY_HEADING.finditer(text)}
    if not heading_starts:
        return markdown  # no heading to demote, and without COMPLEX_LINEs nothing can be left open
    return _demote_top_level_headings(markdown, code) if heading_starts == {"#"} else _contain_parsed(markdown)


def _demote_top_level_headings(markdown: str, code: set[int]) -> str:
    """``_contain`` for a text whose COMPLEX_LINE constructs are closed code blocks (lines ``code``) and
    whose headings all start a line.

    There every other line starting with '#' that parses as a heading is a top-level ATX heading (see
    markdown_blocks.COMPLEX_LINE) and no fence or HTML block can be left open, so the heading lines
    are parsed alone, which costs a fraction of parsing the text (tested to agree with it).
    """
    lines = markdown.split("\n")
    for number, line in enumerate(lines):
        if line[:1] == "#" and number not in code:
            tokens = parse_blocks(line)
            if tokens and tokens[0].type == "heading_open":
                lines[number] = _demoted_heading("", tokens[0], tokens[1])
    return "\n".join(lines)


def _demoted_heading(prefix: str, heading_open: Token, inline: Token) -> str:
    level = min(6, int(heading_open.tag[1]) + CONTENT_HEADING_SHIFT)
    text = " ".join(inline.content.split("\n"))
    return prefix + "#" * level + (" " + text if text else "")


def _contain_parsed(markdown: str) -> str:
    lines = markdown.split("\n")
    tokens = parse_blocks(markdown)
    blocks = top_level_blocks(tokens)
    closer = (
        _closer(blocks[-1].kind, lines[blocks[-1].start : blocks[-1].end])
        if blocks and blocks[-1].end >= len(lines)
        else ""
    )
    # Demote every heading, nested ones too (a chunker may strip the container prefix); bottom-up
    # so that replacing a two-line setext heading by one ATX line keeps earlier line numbers valid.
    for index in range(len(tokens) - 1, -1, -1):
        token = tokens[index]
        if token.type != "heading_open" or token.map is None:
            continue
        start, end = token.map
        prefix = _CONTAINER_PREFIX.match(lines[start])[0] if token.level else ""  # type: ignore[index]
        lines[start:end] = [_demoted_heading(prefix, token, tokens[index + 1])]
    markdown = "\n".join(lines) + closer
    if closer and not _ends_cleanly(markdown):
        # Last resort for anything the closers above do not know: an indented code block is inert.
        markdown = "\n".join("    " + line if line else line for line in markdown.split("\n"))
    return markdown


def _closer(kind: str, block_lines: list[str]) -> str:
    """What closes a top-level construct that runs to the end of the content (or "")."""
    if kind == "fence":
        fence = re.match(r" {0,3}(`{3,}|~{3,})", block_lines[0])
        closing = block_lines[-1].strip()
        closed = (
            len(block_lines) > 1 and closing.startswith(fence[1]) and set(closing) == {fence[1][0]} if fence else True
        )
        if fence and not closed:
            return "\n" + fence[1]
    if kind == "html_block":
        for pattern, closer in _HTML_BLOCK_CLOSERS:
            match = pattern.match(block_lines[0])
            if match:
                # Such a block ends at the first line holding its end (its first line too): closed if the last does.
                closed = bool(_TAG_BLOCK_END.search(block_lines[-1])) if closer is None else closer in block_lines[-1]
                return "" if closed else "\n" + (closer or f"</{match[1].lower()}>")
    return ""


def _ends_cleanly(markdown: str) -> bool:
    """True when a heading placed after the content is parsed as a top-level heading."""
    blocks = top_level_blocks(parse_blocks(markdown + f"\n\n## {_SENTINEL}\n"))
    return bool(blocks) and blocks[-1].kind == "heading" and blocks[-1].text == _SENTINEL


# ---------------------------------------------------------------- details and journals


def _inline(value: Any) -> str:
    """A plain value from Redmine (a subject, a name, a custom field value) as Markdown text on one
    line: it cannot break the line, start markup or raw HTML. (Whole lines are neutralised.)"""
    return escape_plain(one_line(str(value)))


def _name(value: Any) -> str:
    if isinstance(value, dict):
        return _inline(value.get("name") or (_unknown_id(value["id"]) if "id" in value else ""))
    return "" if value is None else _inline(value)


def _unknown_id(value: Any) -> str:
    """A user, status, version, custom field... known only by its id: written ``ID 31``, never ``#31``,
    which a reader (and a model) takes for a ticket."""
    return f"ID {value}"


def _custom_field_value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_inline(v) for v in value if v not in (None, ""))
    return "" if value is None else _inline(value)


def parse_time(value: Any) -> datetime | None:
    """A Redmine timestamp (``2026-03-15T09:12:00Z``) as an aware UTC datetime, or None."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _local_date(timestamp: str | None, tz: str, with_time: bool = False) -> str:
    """``2026-03-15``, or with the time ``2026-03-15 10:00 +09:00`` (its UTC offset, so that a reader
    of the document alone knows which zone it is in)."""
    if not timestamp:
        return ""
    moment = parse_time(timestamp)
    if moment is None:
        return _inline(timestamp)
    if tz != "UTC":
        moment = moment.astimezone(ZoneInfo(tz))
    # Formatted by hand: strftime costs more than the rest of a journal heading (and pads years < 1000 differently by
    # platform).
    date = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    if not with_time:
        return date
    offset = int(moment.utcoffset().total_seconds()) // 60  # type: ignore[union-attr]
    sign, offset = ("-", -offset) if offset < 0 else ("+", offset)
    return f"{date} {moment.hour:02d}:{moment.minute:02d} {sign}{offset // 60:02d}:{offset % 60:02d}"


def _details(issue: dict[str, Any], options: RenderOptions) -> str:
    label = options.label
    rows: list[tuple[str, str]] = [
        (label("project"), _name(issue.get("project"))),
        (label("tracker"), _name(issue.get("tracker"))),
        (label("status"), _name(issue.get("status"))),
        (label("priority"), _name(issue.get("priority"))),
        (label("author"), _name(issue.get("author"))),
        (label("assignee"), _name(issue.get("assigned_to"))),
        (label("category"), _name(issue.get("category"))),
        (label("version"), _name(issue.get("fixed_version"))),
        (label("start_date"), _name(issue.get("start_date"))),
        (label("due_date"), _name(issue.get("due_date"))),
        (label("created"), _local_date(issue.get("created_on"), options.timezone, True)),
        (label("updated"), _local_date(issue.get("updated_on"), options.timezone, True)),
        (label("closed"), _local_date(issue.get("closed_on"), options.timezone, True)),
        (label("done_ratio"), f"{issue['done_ratio']}%" if isinstance(issue.get("done_ratio"), int) else ""),
    ]
    for custom_field in issue.get("custom_fields") or []:
        if isinstance(custom_field, dict):
            rows.append((_name(custom_field.get("name")), _custom_field_value(custom_field.get("value"))))
    parent = issue.get("parent")
    if isinstance(parent, dict) and parent.get("id"):
        rows.append((label("parent"), f"#{_inline(parent['id'])}"))
    children = [
        f"#{_inline(c['id'])} {_name(c.get('subject')) if options.subtask_subjects else ''}".strip()
        for c in issue.get("children") or []
        if isinstance(c, dict) and "id" in c
    ]
    rows.append((label("children"), ", ".join(children)))
    rows.append(
        (
            label("relations"),
            ", ".join(_relation(r, issue["id"], options) for r in issue.get("relations") or [] if isinstance(r, dict)),
        )
    )
    rows.append(
        (
            label("attachments"),
            ", ".join(_name(a.get("filename")) for a in issue.get("attachments") or [] if isinstance(a, dict)),
        )
    )
    return neutralize_forgeries("\n".join(f"- {name}: {value}" for name, value in rows if name and value))


_RELATION_PAIRS = {"duplicates": "duplicated", "blocks": "blocked", "precedes": "follows", "copied_to": "copied_from"}
# Both directions: seen from the other issue, "blocks" reads "blocked" and "blocked" reads "blocks".
_INVERSE_RELATION = _RELATION_PAIRS | {inverse: kind for kind, inverse in _RELATION_PAIRS.items()}


def _relation(relation: dict[str, Any], ticket_id: int, options: RenderOptions) -> str:
    kind = str(relation.get("relation_type", "relates"))
    other = relation.get("issue_to_id")
    if other == ticket_id:
        # Redmine lists a relation on both issues with the same direction; seen from the target it is the inverse.
        other = relation.get("issue_id")
        kind = _INVERSE_RELATION.get(kind, kind)
    return f"{_relation_label(kind, options)} #{_inline(other)}"


_RELATION_KINDS = frozenset(
    {"relates", "duplicates", "duplicated", "blocks", "blocked", "precedes", "follows", "copied_to", "copied_from"}
)


def _relation_label(kind: str, options: RenderOptions) -> str:
    return options.label(kind) if kind in _RELATION_KINDS else _inline(kind)


def _journals(issue: dict[str, Any]) -> list[dict[str, Any]]:
    return [j for j in issue.get("journals") or [] if isinstance(j, dict)]


def _journal_id(journal: dict[str, Any]) -> int:
    value = journal.get("id")
    return value if isinstance(value, int) else 0


# An empty old or new value of a change.
EMPTY_VALUE = "—"


def _lookup(lookups: Lookups, table: str, value: Any) -> str:
    if value in (None, ""):
        return EMPTY_VALUE
    entry = lookups.get(table, {}).get(str(value))
    return _name(entry) if entry else _inline(_unknown_id(value))


def _change(detail: dict[str, Any], issue: dict[str, Any], lookups: Lookups, options: RenderOptions) -> str:
    label = options.label
    prop, name = detail.get("property"), str(detail.get("name", ""))
    old, new = detail.get("old_value"), detail.get("new_value")
    if prop == "attr":
        if name == "description":
            return label("description_updated")
        key, table = _ATTRIBUTES.get(name, (None, None))
        title = label(key) if key else _inline(name)
        if table:
            return f"{title}: {_lookup(lookups, table, old)} → {_lookup(lookups, table, new)}"
        if name == "parent_id":
            old, new = (f"#{v}" if v else None for v in (old, new))
        return f"{title}: {_plain(old)} → {_plain(new)}"
    if prop == "cf":
        field_name = _custom_field_name(name, issue, lookups)
        return f"{field_name}: {_plain(old)} → {_plain(new)}"
    if prop == "attachment":
        change = label("added") if new else label("removed")
        return f"{label('attachments')}: {_plain(new) if new else _plain(old)} ({change})"
    if prop == "relation":
        change = label("added") if new else label("removed")
        return f"{label('relations')}: {_relation_label(name, options)} #{_inline(new or old)} ({change})"
    return ""


def _plain(value: Any) -> str:
    text = _inline(value) if value not in (None, "") else ""
    return text or EMPTY_VALUE


def _custom_field_name(field_id: str, issue: dict[str, Any], lookups: Lookups) -> str:
    entry = lookups.get("custom_fields", {}).get(field_id)
    if entry:
        return _name(entry)
    for custom_field in issue.get("custom_fields") or []:
        if isinstance(custom_field, dict) and str(custom_field.get("id")) == field_id:
            return _name(custom_field.get("name"))
    return _inline(_unknown_id(field_id))


def history_journals(issue: dict[str, Any], lookups: Lookups, options: RenderOptions) -> list[dict[str, Any]]:
    """The journals the history shows, in its order (one ``### [date] user`` heading each): private
    notes only with ``include_private``, and only journals that carry something a reader cares about."""
    journals = [
        j for j in sorted(_journals(issue), key=_journal_id) if options.include_private or not j.get("private_notes")
    ]
    return [j for j in journals if _notes(j) or any(_changes(j, issue, lookups, options))]


def _notes(journal: dict[str, Any]) -> str:
    notes = journal.get("notes")
    return notes.strip() if isinstance(notes, str) else ""


def _changes(journal: dict[str, Any], issue: dict[str, Any], lookups: Lookups, options: RenderOptions) -> list[str]:
    details = [d for d in journal.get("details") or [] if isinstance(d, dict)]
    return [change for change in (_change(d, issue, lookups, options) for d in details) if change]


def _journal_entry(
    journal: dict[str, Any], issue: dict[str, Any], lookups: Lookups, options: RenderOptions
) -> tuple[str, str]:
    """One history entry as (heading, body)."""
    changes = _changes(journal, issue, lookups, options)
    notes = _notes(journal)
    user = _name(journal.get("user")) or "?"
    date = _local_date(journal.get("created_on"), options.timezone) or "?"
    body = []
    if changes:
        body.append(neutralize_forgeries("\n".join(f"- {change}" for change in changes)))
    if notes:
        body.append(
            content_markdown(notes, text_format_at(options.text_format, journal.get("created_on")), options.link_issues)
        )
    return neutralize_forgeries(f"### [{date}] {user}"), "\n\n".join(body)
