"""Valid ticket ids and the filtering of answers.

A ticket id is *valid* for an answer when it came from a retrieved chunk: from the chunk's source URI
(``s3://bucket/tickets/12345.md``) or from a genuine anchor/title line in its text (anchors.py, the one
place that knows the anchor format). A free-text mention such as ``#12300 と同様`` inside a chunk is
not a source: any ticket could otherwise vouch for any other ticket's id. In later turns of a
conversation the ids of earlier retrievals come from the context message the backend put into the
prompt (its genuine anchors), or from the earlier retrievals themselves.

Mentions of ticket ids in an answer (``#123``, ``チケット 123``, Redmine issue URLs) are found by one scan of
the text as a reader sees it (verify.folding: compatibility characters as NFKC makes them, invisible ones
dropped) and kept, dropped or flagged by whether they are valid; inline citation markers (``[2]``,
``【2】``, ``[SRC:id]``) too.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Set,
)
from dataclasses import dataclass
from typing import Any, Generic, Literal

from anchorkit.anchors import (
    ANCHOR_PATTERN,
    DEFAULT_LABEL,
    TITLE_PATTERN,
    find_anchors,
    find_titles,
    identified_ticket_ids,
    one_line,
)
from anchorkit.errors import UsageError
from anchorkit.settings import default
from anchorkit.verify.folding import Folded, fold
from anchorkit.verify.model import (
    DEFAULT_MIN_ID_DIGITS,
    DEFAULT_URI_PATTERN,
    UNVERIFIED_MARKER,
    Chunk,
    OnEmpty,
    OnInvalid,
    T,
)

# Words that name a ticket right before its number. "Bug"/"Feature"/"Support" are Redmine's default
# trackers ("Bug #123" is how Redmine itself writes a ticket).
LABEL_WORDS = rf"{re.escape(DEFAULT_LABEL)}(?:番号)?|課題|(?i:ticket|issue|redmine|bug|feature|support)"
# A ticket number: digits, or digits in groups of three ("#12,300" is ticket 12300, not 12).
# Any length: a 13-digit id no ticket has is named all the same, and must be flagged (ticket_number).
_DIGITS = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+(?!\d))"
# Not a ticket even after "#" or a label: a number that starts a date or a time ("#2024-03-14", "#12/07",
# "#12:30", "ticket 2024年", "#3月"). Only a whole date or time: "#12399-12401" is a range of tickets,
# "#12345/12399" a list and "#12399月次…" ticket #12399 followed by a word.
DATE_OR_TIME = (
    r"(?:\d{4}[-/.](?:0?[1-9]|1[0-2])(?:[-/.](?:0?[1-9]|[12]\d|3[01]))?|(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])"
    r"|(?:[01]?\d|2[0-4])[:：][0-5]\d)(?!\d)"
    r"|\d{4}年|(?:0?[1-9]|1[0-2])月|(?:0?[1-9]|[12]\d|3[01])日|(?:[01]?\d|2[0-4])時|[0-5]?\d[分秒]"
)
# Not a ticket without a "#" either: a version ("Redmine 5.1.2", "Support 2.0").
VERSION = r"\d+\.\d"
# A URL is read up to white space, a closing bracket or quote, or a character that is not ASCII: Japanese
# writes no space after one ("…/issues/5、チケット#99です"), and what follows it is text to check. It starts
# with its scheme, or without one with a host name that an issue path follows ("redmine.example.com/issues/5":
# a chat window makes that a link too).
_HOST = r"(?:[A-Za-z0-9-]+\.)+[A-Za-z0-9-]+(?::\d+)?"
# After "http:" or "https:" a browser takes any number of "/" or "\" ("https:/host", "https:\\host"): the host
# follows at once.
_SCHEME = r"(?i:https?):[/\\]+(?=[^\W_]|[\[%])"
# A host that is not ASCII ("https://レッドマイン.example/issues/5", an internationalised domain name) is read as
# part of the URL only when a Redmine issue path follows it, so that an ASCII URL that runs into Japanese text
# still ends where the Japanese begins. Possessive: no backtracking over a long text without a "/".
_ISSUE_PATH_AHEAD = r"(?=(?:[/\\][^/\\\s]+)?[/\\](?i:issues)[/\\])"
_ANY_HOST = rf"[^\s/\\?#<>\"'`\[\]()「」『』【】、]*+{_ISSUE_PATH_AHEAD}"
# Without its scheme, a host that is not ASCII ("レッドマイン.example/issues/5") starts after white space, a bracket, a
# quote or a punctuation mark; glued to the prose before it ("詳細はレッドマイン.example/issues/5"), the host is read
# from the start of the phrase, and verify.hosts finds the Redmine's name at its end.
_IDN_HOST_CHARACTER = r"[^\s/\\?#<>\"'`\[\]()「」『』【】、。]"
_BARE_IDN_HOST = (
    rf"(?<![^\s(\[<\"'「『【、。,;=])(?={_IDN_HOST_CHARACTER}*?[^\x00-\x7f])(?={_IDN_HOST_CHARACTER}*?\.)"
    rf"{_IDN_HOST_CHARACTER}*+{_ISSUE_PATH_AHEAD}"
)
# A link relative to the Redmine's own pages: "/issues/5" (in prose too), "/redmine/issues/5", and "issues/5" as
# a link's target ("[x](issues/5)", 'href="issues/5"'). It names ticket 5 on the Redmine the answer is about.
_RELATIVE = (
    r"(?<![A-Za-z0-9.@/\\:_~-])(?=(?:/[A-Za-z0-9._~%-]+)?/(?i:issues)/\d)"
    r"|(?:(?<=\]\()|(?<=(?i:href)=[\"']))(?=(?i:issues)/\d)"
)
_URL_START = rf"{_SCHEME}(?:{_ANY_HOST})?|(?<![A-Za-z0-9.@/:_-])(?={_HOST}(?:/[^/\s]+)?/(?i:issues)/)"
_URL_BODY = r"[^\x00-\x20\x7f-\U0010ffff<>\"'`\]\)]+"
# A colour written in hexadecimal with a letter in it ("#336a99", "#33a"): no ticket number, whatever its digits.
_HEX_COLOUR = r"(?=[0-9A-Fa-f]*[A-Fa-f])(?:[0-9A-Fa-f]{8}|[0-9A-Fa-f]{6}|[0-9A-Fa-f]{3,4})(?![0-9A-Za-z_])"
# One scan finds the three ways an answer names a ticket, in the folded view (verify.folding: NFKC per
# character, invisible characters dropped, "&#35;" and "♯" read as "#"; "＃" is there for callers reading
# raw text). URLs come first: a fragment ("page#12") or a path inside one is not a mention, a Redmine issue
# URL ("…/issues/12345#note-3") is. A bare "#" after "&" is no mention ("&#123;" is "{"); after "_" it is
# ("__#12399__" is Markdown's bold).
# The look-ahead at the first characters of the alternatives lets the scan skip other positions fast.
_MENTION_AFTER_URL = (
    rf"|(?<![A-Za-z0-9_])(?:{LABEL_WORDS})[ \t\u3000]*(?i:no\.?|number|id)?[ \t\u3000:：]*"
    rf"(?:(?P<lhash>[#＃])[ \t]*)?(?!{DATE_OR_TIME})(?(lhash)|(?!{VERSION}))(?P<lid>{_DIGITS})"
    rf"|(?<![&A-Za-z0-9])[#＃](?!{DATE_OR_TIME}|{_HEX_COLOUR})(?P<bid>{_DIGITS}))"
)
MENTION = re.compile(
    rf"(?=[#＃{DEFAULT_LABEL[0]}課A-Za-z0-9])(?:(?P<url>(?:{_URL_START}){_URL_BODY}){_MENTION_AFTER_URL}"
)
# The same, with the forms that can only be there when the text holds an issue path ("issues/"): links relative
# to the Redmine, and hosts that are not ASCII written without their scheme. Two scans, so that the many texts
# without such a path do not pay for trying them at every position.
_MENTION_WITH_PATHS = re.compile(
    rf"(?=[#＃{DEFAULT_LABEL[0]}課A-Za-z0-9/]|(?<![^\s(\[<\"'「『【、。,;=])[^\x00-\x7f])"
    rf"(?:(?P<url>(?:{_URL_START}|{_BARE_IDN_HOST}|{_RELATIVE}){_URL_BODY}){_MENTION_AFTER_URL}"
)
# (case by case rather than (?i): a scan for a literal's letters is several times faster)
_ISSUE_PATH = re.compile(r"[Ii][Ss][Ss][Uu][Ee][Ss]/")
# A word right before a bare "#" that says the number is of another kind: an extension ("内線 #1234", "ext.
# #1234"), an error, exit or status code ("エラーコード #1603", "error code: #1603"), a pull or merge request
# ("PR #1603"); a colour ("色 #336699", "color: #336699") when the number is as long as one (3, 4, 6 or 8
# hexadecimal digits). Not a word that may as well precede a ticket: "同じエラー #12345" is the same error as
# ticket #12345, "手順 #123" a ticket as long as any (a step number is shorter than --min-id-digits).
_OTHER_NUMBER_WORDS = (
    r"内線(?:番号)?|電話(?:番号)?|(?<![A-Za-z])(?i:ext\.?|extension|tel\.?|phone)"
    r"|(?:エラー|終了|ステータス|リターン)(?:コード|番号)"
    r"|(?<![A-Za-z])(?i:(?:error|exit|status|return)[ \t]+(?:code|no\.?))"
    r"|(?<![A-Za-z])(?:PR|MR|(?i:pull|merge)[ \t]+(?i:request))|プルリク(?:エスト)?"
    r"|(?P<colour>(?:色|カラー)(?:コード)?|(?<![A-Za-z])(?i:colou?r|background(?:-color)?|bgcolor))"
)
# A CSS declaration that may hold a colour ("border: 1px solid #336699", "--brand: #336699", 'fill="#336699"'):
# the values before the colour may come between its name and the "#".
_CSS_PROPERTY = (
    r"(?<![A-Za-z0-9_-])(?:--[A-Za-z0-9-]+"
    r"|(?i:-?(?:[a-z]+-)*(?:colou?r|background|border|outline|fill|stroke|shadow)(?:-[a-z]+)*))"
)
_OTHER_NUMBER = re.compile(
    rf"(?:(?:{_OTHER_NUMBER_WORDS})[ \t\u3000]*(?:[:=]|は)?"
    rf"|(?P<css>{_CSS_PROPERTY})[ \t]*[:=][ \t]*[\"']?(?:[^;{{}}\n#:\"']*[ \t(,])?)[ \t\u3000]*\Z"
)
# Whether a text holds such a word at all: one search a text, and most hold none (the look-ahead at their
# first characters lets it skip other positions fast).
_ANY_OTHER_NUMBER_WORD = re.compile(
    rf"(?=[内電エ終スリプ色カeEtTpPsSrRmMcCbBfFoO-])(?:{_OTHER_NUMBER_WORDS}|(?i:border|outline|fill|stroke|shadow)|--)"
)
_COLOUR_DIGITS = frozenset({3, 4, 6, 8})
# How far before a bare "#" such a word is looked for (within _STREAM_LOOKBACK: a stream reads what it emitted).
_OTHER_NUMBER_REACH = 32
# What joins the numbers of a list or a range of tickets ("#12345, 12399", "#12345/12399", "#12399-12401",
# "チケット 12345、12399", "#12345 と 12399", "#12345 and 12399").
_LIST_SEPARATOR = r"[ \t\u3000]*(?:[,、・/~〜–-]|(?i:and)|と)[ \t\u3000]*"
# Units a count or a size is given in ("2 times", "10GB", "3 users").
UNIT_WORDS = r"(?i:[kmgt]b|ms|secs?|seconds?|mins?|minutes?|hours?|days?|times|users?|pcs?)(?![A-Za-z])"
# A number that continues a ticket mention's list is a ticket number too, unless it is a date, a time, a
# version or a quantity ("#12345 と 2026年", "#12345, 100 件", "#12345 と 10GB", "#12345, 10000 times").
_LIST_NEXT = re.compile(
    rf"{_LIST_SEPARATOR}(?!{DATE_OR_TIME}|{VERSION})(?P<id>\d+)"
    rf"(?!\d|[ \t\u3000]*(?:[件台個人回通名枚本円%]|{UNIT_WORDS})|[A-Za-z])"
)
# Where a list member ends when it stands alone, nothing but the list around it: the end of the phrase, another
# separator, or a particle ("#12345 と 999 を参照", "#12345, 999."). A shorter number than the tickets before it is
# a ticket there, not before a word that says what it counts or is ("#12345 と 500 エラー").
_LIST_MEMBER_END = re.compile(
    rf"[ \t\u3000]*(?:[)\]」』】>,、。.;:!?\n]|\Z|[をはがにへの](?![\u30a0-\u30ff])|{_LIST_SEPARATOR}[#＃]?\d)"
)
# Redmine's issue URL: /issues/<id> at the root or under one sub-URI segment ("/redmine/issues/5");
# not GitHub's or GitLab's (/owner/repo/issues/5, /group/project/-/issues/5). Matched against the URL
# as a browser requests it (as_requested).
# A link relative to the Redmine's pages ("/issues/5", "issues/5") names its ticket too (on that Redmine).
_REDMINE_ISSUE = re.compile(
    r"\A(?:(?:https?://[^/\s]+|[^/\s]*\.[^/\s]+)?(?:/[^/\s]+)?/|(?=issues/))issues/(\d+)(?!\d)", re.IGNORECASE
)
# "http:" or "https:" and the slashes after it, any number of them, either way round (as_requested).
_WEB_SCHEME = re.compile(r"\A(?i:https?):[/\\]*")
# A URL's parts up to its path, its path, and its query and fragment.
_URL_PARTS = re.compile(r"(?P<head>(?:[A-Za-z][A-Za-z0-9+.-]*://)?[^/?#]*)(?P<path>[^?#]*)(?P<tail>.*)", re.DOTALL)
_PERCENT_ENCODED = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# Inline citation markers: "[2]", "[1, 3]", "【2】", "[^2]" (a 1-based position in the retrieval) and
# "[SRC:id]" (a source id). Not after an ASCII word character: "a[1]" is an index.
MARKER = re.compile(
    r"(?=[\[［【])(?<![A-Za-z0-9_])(?:[\[［【]\^?(?P<numbers>\d{1,4}(?:[ \t]*[,，、][ "
    r"\t]*\d{1,4})*)[\]］】]|\[SRC:(?P<src>[^\]\s]+)\])"
)
# A "#" or what may still become one: a character reference to it cut short ("&#3", "&nu").
_PARTIAL_HASH = r"(?:[#＃]|&(?:#(?:[xX][0-9A-Fa-f]*|\d*)|n(?:um?)?)?)"
# The end of a text that may still grow into a mention ("…#123" → "…#12345", "チケ" → "チケット12345",
# "https://red", "redmine.exa", "/iss" or a phrase that may be a host ("詳細はレッドマイン") → a Redmine URL,
# "#12345, 12" → a list, "#2024-0" → a date): a streaming filter holds it back. Read in the folded view, as
# MENTION. A list is held whole, so that a number continuing it is always read with the mention that starts it.
_TRAILING_PARTIAL_MENTION = re.compile(
    r"(?:(?i:https?):/?/?\S*|(?:/|[A-Za-z0-9])[-A-Za-z0-9.]*(?::\d*)?(?:/[!-~]*)?"
    rf"|(?<![^\s(\[<\"'「『【、。,;=])(?={_IDN_HOST_CHARACTER}*?[^\x00-\x7f]){_IDN_HOST_CHARACTER}*(?:/[!-~]*)?"
    rf"|[A-Za-z\u30a0-\u30ff番号課題]*[ \t\u3000]*(?i:no\.?|number|id)?[ \t\u3000:：]*(?:{_PARTIAL_HASH}[ \t]*)?"
    rf"[\d,.:：]*(?:{_LIST_SEPARATOR}{_PARTIAL_HASH}?[\d,.:：]*)*[ \t\u3000]*(?i:an?)?)\Z"
)
# How much already emitted text (folded) a streaming filter looks back at (labels and look-behinds before a cut).
_STREAM_LOOKBACK = 48


# Python converts at most 4,300 digits to an int (sys.int_info.default_max_str_digits).
_MAX_NUMBER_DIGITS = 4000


def ticket_number(digits: str) -> int:
    """The id ``digits`` (ASCII digits) name. No ticket's id is longer than a few digits, so a longer
    number can only be a phantom; one of more than 4,000 digits is taken by its first 4,000 (still no
    ticket's) rather than crash the conversion."""
    return int(digits[:_MAX_NUMBER_DIGITS])


# --------------------------------------------------------------------------- valid ids


def compile_uri_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """The operator's URI pattern (configuration, never untrusted text); exactly one group: the id."""
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
    if compiled.groups != 1:
        raise ValueError(f"URI pattern {compiled.pattern!r} must have exactly one group (the ticket id)")
    return compiled


def checked_uri_pattern(pattern: str) -> re.Pattern[str]:
    """``--uri-pattern`` compiled; a bad one is a usage error (exit 2), not a traceback."""
    try:
        return compile_uri_pattern(pattern)
    except (re.error, ValueError) as exc:
        raise UsageError(f"--uri-pattern: {exc}") from None


def uri_ticket_id(uri: str | None, uri_pattern: re.Pattern[str]) -> int | None:
    """The ticket a source URI names: by the operator's pattern (the knowledge base's layout), else as
    a Redmine issue URL (``https://host:3000/issues/12345#note-3``)."""
    if not uri:
        return None
    match = uri_pattern.search(uri)
    if match is not None and match.group(1) and match.group(1).isdigit() and match.group(1).isascii():
        return ticket_number(match.group(1))
    return redmine_issue_id(uri)


def as_requested(url: str) -> str:
    """The URL as a browser requests it: percent-encoded letters, digits and ``-._~`` decoded, and the
    dot segments of its path resolved (``/issues/%31%32`` is ``/issues/12``, ``/issues/5/../12`` is
    ``/issues/12``); in a web URL, ``\\`` before the query read as ``/`` and the slashes after the scheme as
    ``//`` (``https:\\\\host\\issues\\12`` is ``https://host/issues/12``). Other escapes (``%2F``) stay: they
    are not what they encode to the server."""

    def decoded(match: re.Match[str]) -> str:
        char = chr(int(match[1], 16))
        return char if char in _UNRESERVED else match[0]

    scheme = _WEB_SCHEME.match(url)
    if scheme is not None:
        # Before its query and fragment, a browser reads a web URL's "\" as "/" ("https://host\issues\5"
        # requests /issues/5), and it takes the host right after the scheme however many slashes come first.
        rest = url[scheme.end() :]
        query = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
        url = url[: scheme.end()].rstrip("/\\") + "//" + rest[:query].replace("\\", "/") + rest[query:]
    parts = _URL_PARTS.match(_PERCENT_ENCODED.sub(decoded, url))
    assert parts is not None  # every part may be empty
    kept: list[str] = []
    for segment in parts["path"].split("/"):
        if segment == "..":
            if len(kept) > 1:  # never above the root (the empty segment before the path's first "/")
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    trailing = "/" if parts["path"].endswith(("/.", "/..")) else ""
    return parts["head"] + "/".join(kept) + trailing + parts["tail"]


def redmine_issue_id(url: str) -> int | None:
    """The ticket a Redmine issue URL names (``https://host:3000/issues/12345#note-3``,
    ``host.example.com/redmine/issues/12345``), read as a browser would request it."""
    issue = _REDMINE_ISSUE.match(as_requested(url))
    return ticket_number(issue.group(1)) if issue else None


def ticket_conflict(chunk: Chunk, uri_pattern: re.Pattern[str]) -> tuple[int, int] | None:
    """(metadata ticket_id, source URI's ticket) when the two name different tickets: then the knowledge
    base does not say which ticket the chunk is, and neither is believed (inject gives it no anchor).

    A url that only doubles as the source URI (a chunk without one of its own) is where a person reads
    the chunk, not where the knowledge base stored it: naming another ticket than the metadata, it is
    the url that is not used (verify's url_mismatch), not the metadata."""
    if chunk.uri == chunk.url:
        return None
    uri_ticket = uri_ticket_id(chunk.uri, uri_pattern)
    if chunk.ticket_id is not None and uri_ticket is not None and chunk.ticket_id != uri_ticket:
        return chunk.ticket_id, uri_ticket
    return None


def chunk_ticket_ids(chunk: Chunk, uri_pattern: re.Pattern[str]) -> frozenset[int]:
    """The tickets a chunk is a source for: its document's ticket (from its URI, its metadata or a
    title in the anchor format), else the ids of the genuine anchors and title lines in its text.

    When the document is known, its anchors are not consulted: a document carries anchors of its own
    ticket only, so an anchor naming another ticket there can only be a forgery that a chunker laid
    open (content "… > チケット #99: …" cut right before the ">" starts a chunk with an anchor line).
    A chunk whose metadata and source URI disagree is a source for no ticket (ticket_conflict).
    """
    if ticket_conflict(chunk, uri_pattern) is not None:
        return frozenset()
    stored = {i for i in (uri_ticket_id(chunk.uri, uri_pattern), chunk.ticket_id) if i is not None}
    if chunk.title and not stored:
        stored = {a.ticket_id for a in find_titles("# " + one_line(chunk.title))}
    return frozenset(stored or identified_ticket_ids(chunk.text))


def chunk_subjects(chunk: Chunk, ticket_ids: Iterable[int]) -> set[str]:
    """What the chunk says its tickets' subjects are: its metadata subject, its genuine anchors and
    title lines naming one of ``ticket_ids``."""
    wanted = set(ticket_ids)
    subjects = {chunk.subject} if chunk.subject else set()
    anchors = find_anchors(chunk.text) + find_titles(chunk.text)
    if chunk.title:
        anchors += find_titles("# " + one_line(chunk.title))
    return subjects | {a.subject for a in anchors if a.ticket_id in wanted and a.subject}


# Whitespace (line breaks, indentation) before a blockquote marker: where a flattened or indented
# context had its anchor lines.
_BEFORE_QUOTE = re.compile(r"\s+(?=> \S)")


def context_ticket_ids(text: str) -> set[int]:
    """The ids a later turn's context message vouches for: its genuine anchors and title lines, also
    when the backend indented them or flattened them onto one line.

    The text is read as the text it is: escapes are never decoded (``foo\\n> チケット #1: …`` or
    ``\\u0023`` in a text are no anchor; a context saved as JSON is decoded once, by the JSON parser that
    reads the file). Each ``> `` after whitespace is put at the start of its own line; a neutralised
    forgery (``> チケット \\#99: …``) keeps its backslash, so it stays no anchor.
    """
    # Lines that are anchors or titles already count as they are; only the rest is unflattened, so
    # "> チケット #99: …" inside an anchor's subject never becomes an anchor of its own.
    rest = TITLE_PATTERN.sub("", ANCHOR_PATTERN.sub("", text))
    return identified_ticket_ids(text) | identified_ticket_ids(_BEFORE_QUOTE.sub("\n", rest))


def valid_ids(
    chunks: Iterable[Chunk],
    uri_pattern: str | re.Pattern[str] = DEFAULT_URI_PATTERN,
    context: str | Iterable[str] | None = None,
) -> set[int]:
    """Ticket ids an answer may name: those of the retrieved chunks, plus those of the context.

    ``context`` is the context message of a later conversation turn (the text the backend put into
    the prompt from earlier retrievals), or several of them: only its genuine anchors and title lines
    count (context_ticket_ids), exactly as for a chunk's text.
    """
    pattern = compile_uri_pattern(uri_pattern)
    ids: set[int] = set()
    for chunk in chunks:
        ids |= chunk_ticket_ids(chunk, pattern)
    contexts = [context] if isinstance(context, str) else list(context or ())
    for text in contexts:
        ids |= context_ticket_ids(text)
    return ids


# --------------------------------------------------------------------------- filtering


def parse_ticket_id(value: object) -> int | None:
    """A ticket id given as 12345, 12345.0 (Bedrock returns numeric metadata as floats), "12345",
    "#12345" or full-width "１２３４５"; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        # NFKC: "１２３４５" and "＃１２３４５" are read like the same ids written in a text.
        digits = unicodedata.normalize("NFKC", value).strip().removeprefix("#")
        if digits.isdigit() and digits.isascii():
            return ticket_number(digits) or None
    return None


def issue_id_of(item: Any) -> int | None:
    """The ticket id of a ticket result ``{"issue_id": 12345, …}``."""
    return parse_ticket_id(item.get("issue_id")) if isinstance(item, Mapping) else None


Status = Literal["valid", "invalid", "unchecked"]


@dataclass(frozen=True)
class Checked(Generic[T]):
    """An item with its verdict: ``valid``, ``invalid`` (id missing or not retrieved) or ``unchecked``
    (nothing retrieved carried an id and ``on_empty="pass"``: passed through, flagged)."""

    item: T
    ticket_id: int | None
    status: Status


@dataclass(frozen=True)
class FilterResult(Generic[T]):
    """``checked``: every item with its verdict, in order; ``kept``: the items to show (under
    ``on_invalid="flag"`` these include the ``rejected`` ones, which the caller marks)."""

    checked: list[Checked[T]]
    kept: list[T]

    @property
    def rejected(self) -> list[T]:
        return [c.item for c in self.checked if c.status == "invalid"]

    @property
    def unchecked(self) -> bool:
        return any(c.status == "unchecked" for c in self.checked)


class IdChecker(Generic[T]):
    """The one decision behind filter_ids and filter_stream."""

    def __init__(
        self,
        valid: set[int] | frozenset[int],
        on_invalid: OnInvalid,
        on_empty: OnEmpty,
        id_of: Callable[[T], int | None],
    ) -> None:
        if on_invalid not in ("drop", "flag") or on_empty not in ("pass", "block"):
            raise ValueError(f"on_invalid must be drop|flag and on_empty pass|block, not {on_invalid!r}/{on_empty!r}")
        self.valid = valid
        self.on_invalid = on_invalid
        self.on_empty = on_empty
        self.id_of = id_of

    @property
    def unchecked(self) -> bool:
        """Nothing is valid and ``on_empty="pass"``: every item passes through unchecked."""
        return not self.valid and self.on_empty == "pass"

    def status(self, ticket_id: int | None) -> Status:
        if self.unchecked:
            return "unchecked"
        return "valid" if ticket_id in self.valid else "invalid"

    def check(self, item: T) -> Checked[T]:
        ticket_id = self.id_of(item)
        return Checked(item, ticket_id, self.status(ticket_id))

    def keeps(self, checked: Checked[T]) -> bool:
        return checked.status != "invalid" or self.on_invalid == "flag"


def filter_ids(
    items: Iterable[T],
    valid: set[int] | frozenset[int],
    *,
    on_invalid: OnInvalid = default("on_invalid"),
    on_empty: OnEmpty = default("on_empty"),
    id_of: Callable[[T], int | None] = issue_id_of,
) -> FilterResult[T]:
    """Drop (``on_invalid="drop"``) or only flag (``"flag"``) items whose ticket id is not valid.

    When ``valid`` is empty (nothing retrieved carried a ticket id), ``on_empty="pass"`` passes every
    item through marked ``unchecked``, so a backend never answers with a silently empty list;
    ``on_empty="block"`` treats every item as invalid instead (the strict variant).
    """
    checker = IdChecker(valid, on_invalid, on_empty, id_of)
    checked = [checker.check(item) for item in items]
    return FilterResult(checked, [c.item for c in checked if checker.keeps(c)])


async def filter_stream(
    items: AsyncIterable[T],
    valid: set[int] | frozenset[int],
    *,
    on_invalid: OnInvalid = default("on_invalid"),
    on_empty: OnEmpty = default("on_empty"),
    id_of: Callable[[T], int | None] = issue_id_of,
) -> AsyncIterator[Checked[T]]:
    """filter_ids for a streaming backend: yields each item's verdict as soon as the item arrives
    (invalid items are not yielded under ``on_invalid="drop"``)."""
    checker = IdChecker(valid, on_invalid, on_empty, id_of)
    async for item in items:
        checked = checker.check(item)
        if checker.keeps(checked):
            yield checked


@dataclass(frozen=True)
class Mention:
    """A ticket id named in a text; ``start``/``end``: what a filter replaces (``#12345``, the digits
    of ``チケット12345``, or a whole Redmine URL), the label words stay. ``view_start``/``view_end``: the
    same in the folded view the scan read (verify.folding), where what follows it is read too."""

    ticket_id: int
    start: int
    end: int
    view_start: int
    view_end: int
    url: bool = False  # a Redmine issue URL (its note is its fragment's)


def iter_mentions(text: str | Folded, min_digits: int, known: Set[int], offset: int = 0) -> Iterator[Mention]:
    """The mentions of ``text`` (or of a text already folded) that start at ``offset`` or later. The scan
    reads the folded view: ``﹟12399``, ``Ｔｉｃｋｅｔ 12399`` and ``#12399`` with a zero-width space inside
    name #12399 as plainly as ``#12399`` does to a reader."""
    view = text if isinstance(text, Folded) else fold(text)
    scan = 0
    other_numbers: bool | None = None  # whether the text holds a word of _OTHER_NUMBER, once it matters
    scanner = _MENTION_WITH_PATHS if "/" in view.text and _ISSUE_PATH.search(view.text) else MENTION
    while (match := scanner.search(view.text, scan)) is not None:
        start, scan = match.span()
        if match["url"] is not None:
            # (a fragment or a path inside another URL names no ticket). The scan goes on after the URL:
            # what runs on after it is text to check.
            ticket_id = redmine_issue_id(match["url"])
            if ticket_id is not None and view.start(start) >= offset:
                yield Mention(ticket_id, view.start(start), view.end(scan), start, scan, url=True)
            continue
        group = "lid" if match["lid"] is not None else "bid"
        digits = match[group].replace(",", "")
        ticket_id = ticket_number(digits)
        # Labelled with "#" always counts; labelled without it or bare only when long enough (or known).
        labelled = match["lhash"] is not None
        if not (labelled or bare_number_is_ticket(digits, min_digits, known if group == "bid" else frozenset())):
            continue
        if ticket_id <= 0:
            continue
        if group == "bid":
            if other_numbers is None:
                other_numbers = _ANY_OTHER_NUMBER_WORD.search(view.text) is not None
            if other_numbers and _other_number(view.text, start, digits):
                continue
        start = start if group == "bid" else match.start("lhash" if labelled else "lid")
        if view.start(start) >= offset:
            yield Mention(ticket_id, view.start(start), view.end(scan), start, scan)
        # The numbers of a list or a range it starts: each as long as the ticket numbers around it (at most
        # one digit shorter than the one before: "#12345 と 500 エラー" names no ticket #500).
        while (more := _LIST_NEXT.match(view.text, scan)) is not None:
            if len(more["id"]) < min_digits or not ticket_number(more["id"]):
                break
            if len(more["id"]) < len(digits) - 1 and _LIST_MEMBER_END.match(view.text, more.end()) is None:
                break
            digits, scan = more["id"], more.end()
            if view.start(more.start("id")) >= offset:
                yield Mention(
                    ticket_number(digits), view.start(more.start("id")), view.end(scan), more.start("id"), scan
                )


def bare_number_is_ticket(digits: str, min_digits: int, known: Set[int]) -> bool:
    """Whether a bare ``#`` and these digits name a ticket: ``min_digits`` of them, or an id in ``known``
    (the retrieved ids); else it is a step or an item (``手順 #2``)."""
    return len(digits) >= min_digits or ticket_number(digits) in known


def _other_number(view: str, hash_at: int, digits: str) -> bool:
    """Whether the word before the bare ``#`` at ``hash_at`` says its number is no ticket's (_OTHER_NUMBER)."""
    word = _OTHER_NUMBER.search(view, max(0, hash_at - _OTHER_NUMBER_REACH), hash_at)
    return word is not None and ((word["colour"] is None and word["css"] is None) or len(digits) in _COLOUR_DIGITS)


def mentioned_ids(text: str, min_digits: int = DEFAULT_MIN_ID_DIGITS, known: Set[int] = frozenset()) -> list[Mention]:
    """The ticket ids a text names, in order: ``#12345``, ``＃１２３４５``, ``チケット #12345``,
    ``チケット12345``, ``Ticket#12345``, ``Redmine #12,345``, ``https://host/issues/12345#note-3``, and
    each of them in compatibility characters or with invisible characters inside (``﹟12345``, ``#12345``
    with a zero-width space or a soft hyphen between its digits).

    A bare ``#n`` needs ``min_digits`` digits unless ``n`` is in ``known`` (the retrieved ids): see
    DEFAULT_MIN_ID_DIGITS. Not a mention: ``&#123;``, ``page#12``, fragments of other URLs (a URL ends at
    its first character that is not ASCII: ``…/issues/5、#12399`` names #5 and #12399).
    """
    return list(iter_mentions(text, min_digits, known))


def _replace_mentions(
    text: str,
    valid: Set[int],
    marker: str,
    min_digits: int,
    start: int = 0,
    end: int | None = None,
    elsewhere: Callable[[str], bool] | None = None,
) -> tuple[str, int]:
    """text[start:end] with every mention there of an id not in ``valid`` (or of a Redmine URL, as written,
    that ``elsewhere`` is true of) replaced, and where the text so replaced ends: ``end``, or past it when a
    mention starting before ``end`` runs on beyond it (a character NFKC makes several of, cut in the middle
    by a stream's hold-back). The text around that window is context only (labels before it, what follows a
    number after it)."""
    end = len(text) if end is None else end
    pieces: list[str] = []
    position = start
    for mention in iter_mentions(text, min_digits, valid, start):
        if mention.start >= end:
            break
        if mention.ticket_id not in valid or (
            mention.url and elsewhere is not None and elsewhere(text[mention.start : mention.end])
        ):
            pieces += [text[position : mention.start], marker]
            position = mention.end
    end = max(end, position)
    pieces.append(text[position:end])
    return "".join(pieces), end


def filter_text(
    text: str,
    valid: Set[int],
    *,
    on_empty: OnEmpty = default("on_empty"),
    marker: str = UNVERIFIED_MARKER,
    min_digits: int = DEFAULT_MIN_ID_DIGITS,
    elsewhere: Callable[[str], bool] | None = None,
) -> str:
    """Replace every mention of a ticket id that is not valid with ``marker``; every other character of
    the text stays as it is. ``elsewhere``: whether a Redmine URL (as written) leads to another place than
    the retrieved tickets (verify: another host than their Redmine's); such a URL is replaced too.

    With an empty ``valid`` set, ``on_empty="pass"`` leaves the text as it is (the caller flags it)
    and ``"block"`` replaces every mention.
    """
    if not valid and on_empty == "pass":
        return text
    return _replace_mentions(text, valid, marker, min_digits, elsewhere=elsewhere)[0]


async def filter_text_stream(
    deltas: AsyncIterable[str],
    valid: Set[int],
    *,
    on_empty: OnEmpty = default("on_empty"),
    marker: str = UNVERIFIED_MARKER,
    min_digits: int = DEFAULT_MIN_ID_DIGITS,
) -> AsyncIterator[str]:
    """filter_text for a token stream: the end of what has arrived that may still grow into a mention
    is held back until it cannot, so the output equals ``filter_text`` of the whole text."""
    if not valid and on_empty == "pass":
        async for delta in deltas:
            yield delta
        return
    pending = ""
    # The folded view of the last characters already emitted: labels and look-behinds reach back into
    # them. Kept folded (folding it again changes nothing), so invisible characters cannot fill it.
    emitted = ""
    async for delta in deltas:
        pending += delta
        view = fold(pending)
        hold = _TRAILING_PARTIAL_MENTION.search(view.text)
        cut = view.start(hold.start()) if hold else len(pending)
        if cut:
            # What is held back is still context: a number followed by "-0" is a date, not a mention.
            replaced, done = _replace_mentions(
                emitted + pending, valid, marker, min_digits, len(emitted), len(emitted) + cut
            )
            yield replaced
            cut = done - len(emitted)
            emitted = fold(emitted + pending[:cut]).text[-_STREAM_LOOKBACK:]
            pending = pending[cut:]
    if pending:
        yield _replace_mentions(emitted + pending, valid, marker, min_digits, len(emitted))[0]


@dataclass(frozen=True)
class Marker:
    """An inline citation marker: ``[2]`` (``position`` 1, 0-based) or ``[SRC:doc#sec3]`` (``source_id``)."""

    source_id: str
    position: int | None
    start: int


def _markers(match: re.Match[str]) -> list[Marker]:
    """What one MARKER match cites: its source id, or each of its numbers."""
    if match["src"] is not None:
        return [Marker(match["src"], None, match.start())]
    return [Marker(f"[{int(n)}]", int(n) - 1, match.start()) for n in re.split(r"[^\d]+", match["numbers"])]


def citation_markers(text: str) -> list[Marker]:
    """The inline citation markers of a text, one per cited number (``[1, 3]`` cites two)."""
    return [marker for match in MARKER.finditer(text) for marker in _markers(match)]


def filter_markers(text: str, cites: Callable[[Marker], bool], marker: str = UNVERIFIED_MARKER) -> str:
    """Replace every inline citation marker that cites nothing (``cites`` is false: ``[SRC:12399]``, a
    ``[5]`` of four chunks) with ``marker``; ``[1, 5]`` keeps the ``[1]`` it cites too."""

    def kept(match: re.Match[str]) -> str:
        markers = _markers(match)
        cited = [m for m in markers if cites(m)]
        if len(cited) == len(markers):
            return match[0]
        return (f"[{', '.join(m.source_id[1:-1] for m in cited)}]" if cited else "") + marker

    return MARKER.sub(kept, text)
