"""Hostile but realistic Redmine tickets in the snapshot layout, to attack the ticket-aware chunker with.

long_tickets.py writes tidy long tickets; real ones are not tidy. People paste a 50 KB log line
with no space in it, a base64 certificate, a page of Japanese typed without punctuation or line
breaks, emoji with ZWJ sequences, right-to-left names, zero-width and non-breaking spaces where a
splitter would cut, tabs, CR LF and lone CR (browsers send CR LF; some mail gateways lone CR);
code in ``~~~`` fences with ````` inside, fences left open, 4-space and tab-indented code, ``<pre>``,
fences inside list items and quotes; tables with a header longer than a chunk, 300 rows, pipes
inside code; journals that are only headings or only attribute changes; 500 journals; 2,000 lines
without a blank line; lists nested 10 deep; text that forges other tickets' anchors and titles
(in code, in quotes, after a NBSP, full width); subjects at Redmine's 255 characters with
Markdown, HTML and backslashes. Textile before the format switch, CommonMark after it, as the
snapshot records (``state.json``), each journal numbered as pull numbers it (``note_number``).

    write_hostile_snapshot(Path("snap"), 300, seed=0)   # -> the ticket ids written

Every shape is a function of a ``random.Random`` and whether the text is Textile; ``SHAPES`` names
them, so a test can draw a ticket from chosen shapes (``hostile_issue(..., shapes=[...])``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from anchorkit.source.notes import with_note_numbers
from support.long_tickets import EN_SENTENCES, JA_SENTENCES, USERS, lookups

FIRST_ID = 70001
SWITCH = "2025-04-01T00:00:00Z"
TEXT_FORMAT = ((SWITCH, "common_mark"),)
REDMINE_URL = "https://redmine.example.co.jp"

_HIRAGANA = "".join(chr(c) for c in range(0x3041, 0x3097))
_KATAKANA = "".join(chr(c) for c in range(0x30A1, 0x30FB))
_COMMON_KANJI = (
    "日本語文字列処理接続障害対応確認設定変更調査結果原因報告手順端末利用者拠点支社本社業務影響発生復旧再起動"
)
_RARE_KANJI = "".join(chr(c) for c in range(0x4E00, 0x9FFF, 97))  # spread over the block: many are 2-3 tokens
_EXT_B = "".join(chr(c) for c in range(0x20000, 0x2A6DF, 401))  # outside the BMP: 4 UTF-8 bytes each
_ZWJ_EMOJI = [
    "👨\u200d👩\u200d👧\u200d👦",
    "🏳\ufe0f\u200d🌈",
    "👩🏽\u200d💻",
    "🧑\u200d🤝\u200d🧑",
    "❤\ufe0f",
    "1\ufe0f\u20e3",
    "🇯🇵",
]
_COMBINING = ["e\u0301", "a\u0308", "n\u0303", "\u304b\u3099", "\u30cf\u309a", "o\u0302\u0323"]
_RTL = ["שלום עולם", "مرحبا بالعالم", "\u202eevil\u202c", "\u2067עברית\u2069", "\u200f"]
_ODD_SPACES = ["\u200b", "\u00a0", "\u3000", "\u2009", "\u202f", "\ufeff", "\u2060", "\u00ad"]
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# hostile_issue(small=True): every size at most its cap (the same shapes, small enough for a property test).
_SMALL: ContextVar[bool] = ContextVar("small", default=False)


def _size(rng: random.Random, options: Sequence[int], cap: int) -> int:
    size = rng.choice(options)
    return min(size, cap) if _SMALL.get() else size


def _sentence(rng: random.Random) -> str:
    return rng.choice(EN_SENTENCES if rng.random() < 0.3 else JA_SENTENCES)


def _paragraph(rng: random.Random, count: int) -> str:
    return "".join(_sentence(rng) for _ in range(count))


def _fence(rng: random.Random, body: str, textile: bool, marker: str = "```") -> str:
    if textile:
        return f"<pre>\n{body}\n</pre>"
    return f"{marker}{rng.choice(['', 'text', 'bash', 'json'])}\n{body}\n{marker}"


# ------------------------------------------------------------------ the shapes


def long_log_line(rng: random.Random, textile: bool) -> str:
    """A single log line of 5 to 50 KB without a space (a query string, a stack trace glued together)."""
    size = _size(rng, [5_000, 20_000, 50_000], 1_500)
    kind = rng.randrange(4)
    parts: list[str] = []
    length = 0
    while length < size:
        n = rng.randrange(10**6)
        if kind == 0:
            part = f"&p{n % 97}={n:x}%2F{rng.choice(['abc', 'ログ', 'x%20y'])}"
        elif kind == 1:
            part = f"at\tcom.example.batch.Job{n % 13}.run(Job{n % 13}.java:{n % 900})"
        elif kind == 2:
            part = f"{n:08x}"
        else:
            part = f"[{n}]接続失敗;retry={n % 7};host=vpn-gw{n % 3:02d}"
        parts.append(part)
        length += len(part)
    line = "GET/api/v1/search?q=" + "".join(parts) if kind == 0 else "".join(parts)
    return _fence(rng, line, textile) if rng.random() < 0.5 else line


def base64_blob(rng: random.Random, textile: bool) -> str:
    """A 2 to 20 KB base64 blob: one line, or wrapped at 64/76 characters (a PEM certificate)."""
    size = _size(rng, [2_000, 20_000], 1_000)
    blob = "".join(rng.choice(_B64) for _ in range(size))
    wrap = rng.choice([0, 64, 76])
    if wrap:
        blob = "\n".join(blob[i : i + wrap] for i in range(0, len(blob), wrap))
        blob = f"-----BEGIN CERTIFICATE-----\n{blob}\n-----END CERTIFICATE-----"
    return rng.choice(["証明書:\n\n", "", "添付の鍵です "]) + (
        _fence(rng, blob, textile) if rng.random() < 0.5 else blob
    )


def cjk_run(rng: random.Random, textile: bool) -> str:
    """Japanese (or rare kanji, or kanji outside the BMP) with no punctuation and no line break."""
    alphabet = rng.choice([_HIRAGANA + _KATAKANA + _COMMON_KANJI, _RARE_KANJI, _EXT_B, _COMMON_KANJI])
    return "".join(rng.choice(alphabet) for _ in range(_size(rng, [600, 3000, 8000], 400)))


def unicode_soup(rng: random.Random, textile: bool) -> str:
    """Words separated by zero-width spaces, NBSP, ideographic spaces...; emoji ZWJ sequences, combining
    marks, variation selectors and right-to-left text at the places a splitter would cut."""
    words = []
    for _ in range(_size(rng, [200, 1500, 4000], 120)):
        roll = rng.random()
        if roll < 0.25:
            word = rng.choice(_ZWJ_EMOJI) * rng.randint(1, 4)
        elif roll < 0.4:
            word = "".join(rng.choice(_COMBINING) for _ in range(rng.randint(1, 6)))
        elif roll < 0.5:
            word = rng.choice(_RTL)
        elif roll < 0.7:
            word = rng.choice(["VPN", "接続", "ログ", "error", "0x8007", "café", "naïve"])
        else:
            word = "".join(rng.choice(_HIRAGANA) for _ in range(rng.randint(1, 5)))
        words.append(word + rng.choice(_ODD_SPACES))
    text = "".join(words)
    if rng.random() < 0.3:  # some of it on lines
        cut = [rng.randrange(len(text)) for _ in range(rng.randint(1, 20))]
        for at in sorted(cut, reverse=True):
            text = text[:at] + "\n" + text[at:]
    return text


def tabs(rng: random.Random, textile: bool) -> str:
    """Tab-separated output pasted as is: tabs inside lines, lines that begin with a tab (code to CommonMark)."""
    lines = []
    for n in range(_size(rng, [10, 80, 400], 30)):
        cells = [f"PC-{rng.randrange(10000, 99999)}", rng.choice(["OK", "NG", "接続不可"]), str(n), _sentence(rng)]
        lines.append(("\t" if rng.random() < 0.3 else "") + "\t".join(cells))
    return "\n".join(lines)


def code_fences(rng: random.Random, textile: bool) -> str:
    """Code in every way people write it: ~~~ with ``` inside, left open, indented, <pre>, in lists and quotes."""
    log = "\n".join(
        f"2026-03-{rng.randint(1, 28):02d} 10:{n % 60:02d} [ERROR] {_sentence(rng)} # {'x' * rng.randrange(30)}"
        for n in range(_size(rng, [5, 40, 150], 15))
    )
    kind = rng.randrange(9)
    if kind == 0:
        return f"~~~\n{log}\n```\n{log}\n```\n{log}\n~~~"
    if kind == 1:
        return f"```\n{log}"  # never closed
    if kind == 2:
        return "\n".join("    " + line for line in log.split("\n"))
    if kind == 3:
        return f'<pre><code class="bash">\n{log}\n</code></pre>'
    if kind == 4:
        return f"<pre>\n{log}\n</pre>"
    if kind == 5:
        inner = "\n".join("   " + line for line in f"```\n{log}\n```".split("\n"))
        return f"1. 手順:\n\n{inner}\n\n2. 次に再起動します。"
    if kind == 6:
        return "\n".join("> " + line for line in f"```\n{log}\n```".split("\n"))
    if kind == 7:
        return f"````\n```\n{log}\n```\n````"
    return "\n".join("\t" + line for line in log.split("\n"))


def tables(rng: random.Random, textile: bool) -> str:
    """Tables: a header longer than a chunk, 300 rows, cells with pipes in code."""
    kind = rng.randrange(3)
    if kind == 0:
        header = [f"列{n}:{_sentence(rng)}" for n in range(_size(rng, [8, 40], 12))]
    else:
        header = ["拠点", "端末", "状態", "備考"]
    rows = _size(rng, [5, 60, 300], 25)
    lines = []
    if textile:
        lines.append("|_. " + " |_. ".join(header) + " |")
    else:
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for n in range(rows):
        cells = [rng.choice(["本社", "大阪", "名古屋"]) for _ in header]
        if kind == 2:
            cells[-1] = rng.choice(["`a|b`", "`grep -E 'x|y'`", "a \\| b", "@cat a | sort@", "||"])
        if n == rows // 2 and rng.random() < 0.3:
            cells[-1] = _paragraph(rng, 20)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def no_blank_lines(rng: random.Random, textile: bool) -> str:
    """Up to 2,000 short lines with no blank line between them (a pasted mail, a console session)."""
    return "\n".join(
        rng.choice([_sentence(rng), f"$ ping 10.0.0.{n % 255}", f"> {_sentence(rng)}", "", "-"])
        if rng.random() < 0.05
        else _sentence(rng)[: rng.randint(5, 60)]
        for n in range(_size(rng, [200, 2000], 120))
    ).replace("\n\n", "\n")


def nested_lists(rng: random.Random, textile: bool) -> str:
    """Lists nested 10 deep, items long and short."""
    lines = []
    for _ in range(_size(rng, [3, 20], 3)):
        for depth in range(rng.randint(1, 10)):
            marker = ("*" * (depth + 1) if textile else "  " * depth + rng.choice(["-", "*", "1."])) + " "
            lines.append(marker + _paragraph(rng, rng.choice([1, 1, 6])))
    return "\n".join(lines)


def forgeries(rng: random.Random, textile: bool, label: str = "チケット") -> str:
    """Lines that forge another ticket's anchor or title, bare, in code, in quotes, after odd spaces."""
    ids = [rng.choice([1, 999, 12345, 70001, 999999999999])]
    other = ids[0]
    forms = [
        f"> {label} #{other}: 偽のチケット",
        f"# {label} #{other}: 偽",
        f"## {label} #{other}: x",
        f"\u00a0> {label} #{other}: x",
        f"> > {label} #{other}: 引用の中",
        f"＞ {label} ＃{other}： 全角",
        f"> {label} #{other}:",
        f"text> {label} #{other}: glued",
        f"> Ticket #{other}: english",
        f"> {label} #{other}\u200b: zw",
        f"- > {label} #{other}: in a list",
        f"    > {label} #{other}: indented code",
        f"bq. {label} #{other}: textile quote",
        f"h1. {label} #{other}: textile heading",
        f"> {label} &#35;{other}: encoded",
        f"\\> {label} #{other}: escaped",
        f"`> {label} #{other}: in code span`",
    ]
    lines = [rng.choice(forms) for _ in range(rng.randint(3, 12))]
    text = "\n\n".join(lines)
    if rng.random() < 0.5:
        text += "\n\n" + _fence(rng, "\n".join(rng.sample(forms, 4)), textile)
    return text


def headings_only(rng: random.Random, textile: bool) -> str:
    """A note that is nothing but headings."""
    marks = ["h1. ", "h2. ", "h3. "] if textile else ["# ", "## ", "### ", "#### ", "###### "]
    return "\n\n".join(rng.choice(marks) + _sentence(rng)[: rng.randint(3, 40)] for _ in range(rng.randint(1, 12)))


def crlf_text(rng: random.Random, textile: bool) -> str:
    """Another shape with CR LF line breaks, or lone CRs, as some clients send them."""
    text = rng.choice(SHAPE_LIST[:-1])(rng, textile)
    if rng.random() < 0.5:
        return text.replace("\n", "\r\n")
    return "".join(ch if ch != "\n" or rng.random() < 0.5 else "\r" for ch in text) + "\r"


def plain(rng: random.Random, textile: bool) -> str:
    return _paragraph(rng, rng.choice([1, 3, 12]))


SHAPES: dict[str, Callable[[random.Random, bool], str]] = {
    "long_log_line": long_log_line,
    "base64_blob": base64_blob,
    "cjk_run": cjk_run,
    "unicode_soup": unicode_soup,
    "tabs": tabs,
    "code_fences": code_fences,
    "tables": tables,
    "no_blank_lines": no_blank_lines,
    "nested_lists": nested_lists,
    "forgeries": forgeries,
    "headings_only": headings_only,
    "plain": plain,
    "crlf_text": crlf_text,  # (last: it draws from the others)
}
SHAPE_LIST = list(SHAPES.values())


def hostile_subject(rng: random.Random, label: str = "チケット") -> str:
    kind = rng.randrange(6)
    if kind == 0:
        return _paragraph(rng, 1)[:60]
    if kind == 1:  # Redmine's maximum, with Markdown, HTML, backslashes and a forged anchor
        parts = [
            "**至急** ",
            "<b>太字</b> ",
            "<script>alert(1)</script> ",
            "\\\\fs01\\share\\経理部\\ ",
            "`code` ",
            "[link](https://example.com) ",
            "# not a heading ",
            "| pipe | ",
            f"> {label} #999: 偽 ",
            "_em_ ",
            "\\#12345: ",
            "&amp; &lt;tag&gt; ",
            "C:\\Users\\田中\\AppData\\ ",
        ]
        subject = ""
        while len(subject) < 255:
            subject += rng.choice(parts)
        return subject[:255]
    if kind == 2:  # 255 rare kanji: more tokens than a small chunk
        return "".join(rng.choice(_RARE_KANJI) for _ in range(255))
    if kind == 3:
        return ("".join(rng.choice(_ZWJ_EMOJI + _RTL + _COMBINING) for _ in range(80)))[:255]
    if kind == 4:
        return ("VPN\u00a0接続\u3000が\u200b不安定 " * 30)[:255]
    return "x" * 255


def _details(rng: random.Random) -> list[dict[str, Any]]:
    details = []
    for _ in range(rng.randint(1, 4)):
        name = rng.choice(["status_id", "assigned_to_id", "priority_id", "done_ratio", "due_date"])
        details.append({"property": "attr", "name": name, "old_value": str(rng.randint(1, 5)), "new_value": "2"})
    if rng.random() < 0.3:
        details.append({"property": "cf", "name": "3", "old_value": "個人", "new_value": "拠点全体"})
    return details


def _stamp(day: int, minute: int) -> str:
    from datetime import date, timedelta

    moment = date(2024, 1, 1) + timedelta(days=day + minute // 1440)
    minute %= 1440
    return f"{moment.isoformat()}T{minute // 60:02d}:{minute % 60:02d}:00Z"


def _text(rng: random.Random, textile: bool, parts: int, shapes: Sequence[str] | None, label: str) -> str:
    names = list(shapes or SHAPES)
    blocks = []
    for _ in range(parts):
        name = rng.choice(names)
        blocks.append(forgeries(rng, textile, label) if name == "forgeries" else SHAPES[name](rng, textile))
    return "\n\n".join(blocks)


def hostile_issue(
    ticket_id: int,
    rng: random.Random,
    shapes: Sequence[str] | None = None,
    label: str = "チケット",
    small: bool = False,
) -> dict[str, Any]:
    """One hostile ticket as Redmine's ``GET /issues/<id>.json?include=journals`` returns it (note numbers
    not yet added: ``write_hostile_snapshot`` adds them as pull does). ``shapes``: the names of the shapes
    its texts are drawn from (default: all); ``small``: every size capped (a few thousand tokens a ticket)."""
    token = _SMALL.set(small)
    try:
        return _hostile_issue(ticket_id, rng, shapes, label)
    finally:
        _SMALL.reset(token)


def _hostile_issue(ticket_id: int, rng: random.Random, shapes: Sequence[str] | None, label: str) -> dict[str, Any]:
    textile = rng.random() < 0.4
    day = rng.randrange(0, 400) if textile else rng.randrange(460, 700)
    users = list(USERS)
    roll = rng.random()
    journal_count = 500 if roll < 0.01 else rng.choice([0, 1, 3, 8, 20]) if roll < 0.9 else 60
    journal_count = min(journal_count, 12) if _SMALL.get() else journal_count
    journals = []
    minute = 600
    for index in range(journal_count):
        minute += rng.randrange(1, 600)
        kind = rng.random()
        if kind < 0.15:
            notes, details = "", _details(rng)  # attribute changes only
        elif kind < 0.25:
            notes, details = headings_only(rng, textile), []
        elif kind < 0.6 or journal_count > 100:
            notes, details = plain(rng, textile), []
        else:
            notes, details = _text(rng, textile, rng.randint(1, 2), shapes, label), []
        journals.append(
            {
                "id": ticket_id * 1000 + index,
                "user": {"id": (user := rng.choice(users)), "name": USERS[user]},
                "notes": notes,
                "created_on": _stamp(day, minute),
                "updated_on": _stamp(day, minute),
                "private_notes": False,
                "details": details,
            }
        )
    if journals and rng.random() < 0.1:
        journals.reverse()  # as Redmine lists them for a user who prefers comments in reverse order
    created = _stamp(day, 500)
    return {
        "id": ticket_id,
        "project": {"id": 1, "name": "社内ITサービスデスク"},
        "tracker": {"id": 1, "name": "障害"},
        "status": {"id": 2, "name": "対応中", "is_closed": False},
        "priority": {"id": 2, "name": "通常"},
        "author": {"id": 5, "name": USERS[5]},
        "subject": hostile_subject(rng, label),
        "description": "" if rng.random() < 0.05 else _text(rng, textile, rng.randint(1, 4), shapes, label),
        "start_date": created[:10],
        "done_ratio": 0,
        "is_private": False,
        "custom_fields": [{"id": 3, "name": "影響範囲", "value": rng.choice(["拠点全体", "個人", ""])}],
        "created_on": created,
        "updated_on": journals[-1]["created_on"] if journals else created,
        "closed_on": None,
        "attachments": [],
        "relations": [],
        "journals": journals,
    }


def write_hostile_snapshot(
    folder: Path,
    count: int,
    seed: int = 0,
    first_id: int = FIRST_ID,
    shapes: Sequence[str] | None = None,
    label: str = "チケット",
) -> list[int]:
    """Write ``count`` hostile tickets as a snapshot in ``folder`` (journals numbered, the Redmine URL and the
    text format switch recorded); the ticket ids written."""
    issues = folder / "issues"
    issues.mkdir(parents=True, exist_ok=True)
    ids = list(range(first_id, first_id + count))
    for ticket_id in ids:
        issue = hostile_issue(ticket_id, random.Random(seed * 1_000_003 + ticket_id), shapes, label)
        document = with_note_numbers({"issue": issue})
        (issues / f"{ticket_id}.json").write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    (folder / "lookups.json").write_text(json.dumps(lookups(), ensure_ascii=False), encoding="utf-8")
    state = {
        "version": 1,
        "cursor": "2026-03-17T08:00:00Z",
        "text_format": [{"since": SWITCH, "format": "common_mark"}],
        "redmine_url": REDMINE_URL,
    }
    (folder / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return ids
