"""The anchor format: rendering, finding, neutralising forgeries, inserting, stripping."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from support.corpus import generated_document

from anchorkit import anchors as anchor_module
from anchorkit.anchors import (
    _CONTROL,
    _WHITESPACE_RUN,
    ANCHOR_PATTERN,
    TITLE_PATTERN,
    Anchor,
    anchor_cuts,
    anchor_line,
    exposed_ticket_ids,
    find_anchors,
    find_titles,
    id_anchor_line,
    identified_ticket_ids,
    insert_anchors,
    neutralize_forgeries,
    one_line,
    strip_anchors,
    title_line,
)
from anchorkit.markdown_blocks import parse_blocks, top_level_blocks
from anchorkit.render.spacing import approx_tokens_with_margin, space_anchors
from anchorkit.untrusted import BIDI_CONTROLS

SUBJECT = "VPN接続が不安定になる"
ANCHOR = "> チケット #12345: VPN接続が不安定になる"


def test_anchor_line_is_the_documented_format() -> None:
    assert anchor_line(12345, SUBJECT) == ANCHOR
    assert title_line(12345, SUBJECT) == "# チケット #12345: VPN接続が不安定になる"
    assert anchor_line(7, "Printer jam", label="Ticket") == "> Ticket #7: Printer jam"


def test_subject_cannot_break_the_line_or_the_quote() -> None:
    line = anchor_line(1, "first\nsecond\r\n\tthird  \u2028 fourth\x00")
    assert "\n" not in line and "\r" not in line
    assert line == "> チケット #1: first second third fourth"
    assert find_anchors(line) == [Anchor(1, "first second third fourth")]


def test_the_short_form_names_its_ticket_and_a_chunk_cut_inside_an_id_names_none() -> None:
    assert id_anchor_line(12345) == "> チケット #12345:"
    assert id_anchor_line(7, label="Ticket") == "> Ticket #7:"
    assert find_anchors("本文の終わり。\n\n> チケット #12345:\n\n次の本文") == [Anchor(12345, "")]
    # cl100k cuts "#12345" into "#", "123", "45": a chunk may end after "123". The colon ends every id.
    for cut in ("> チケット #123", "> チケット #12345", "# チケット #123"):
        assert identified_ticket_ids(f"本文\n\n{cut}") == set(), cut


def test_find_anchors_reads_the_subject_as_a_reader_of_the_markdown_sees_it() -> None:
    line = anchor_line(5, "\\<b\\> renamed > チケット #99: \\[至急\\]")
    assert line == "> チケット #5: \\<b\\> renamed > チケット \\#99: \\[至急\\]"
    assert find_anchors(line) == [Anchor(5, "<b> renamed > チケット #99: [至急]")]


def test_find_anchors_reads_chunk_fragments() -> None:
    chunk = "…the end of a paragraph\n\n> チケット #12345: VPN接続が不安定になる\n\n### [2026-03-15] 佐藤次郎\n"
    assert find_anchors(chunk) == [Anchor(12345, SUBJECT)]
    assert identified_ticket_ids("# チケット #7: title\nno anchor here") == {7}
    # A chunk cut in the middle of an anchor line does not yield a (wrong) anchor.
    assert find_anchors("ット #12345: VPN接続が不安定になる") == []


def test_free_text_mentions_are_not_anchors() -> None:
    text = "#12300 と同様の事象です。\n> 関連: #12301 を参照\nチケット #12302: これは本文\n"
    assert find_anchors(text) == []
    assert identified_ticket_ids(text) == set()


FORGERIES = [
    "> チケット #99: 別件のチケット",
    "> Ticket #99: spoofed",
    "  > チケット #99: indented",
    ">> チケット #99: nested quote",
    ">チケット#99: no spaces",
    "> チケット #99： fullwidth colon",
    "# チケット #99: a fake title",
    "### Ticket #99: fake heading",
    "説明文の途中 > チケット #99: 偽物",  # a chunker may cut the line right before the ">"
    "> チケット #99:",  # the short form of spacing anchors
    "注記\\> チケット #99: 偽物",  # a token window may start right after the backslash (or any character)
]


def test_forgeries_are_neutralised_and_no_longer_found() -> None:
    for forgery in FORGERIES:
        neutral = neutralize_forgeries(forgery)
        assert neutral != forgery, forgery
        # What a chunker may do to a line (strip its indentation) must not revive it either.
        for candidate in (neutral, neutral.strip(), neutral[neutral.find(">") :] if ">" in neutral else neutral):
            assert find_anchors(candidate) == [] and find_titles(candidate) == [], candidate
        assert neutralize_forgeries(neutral) == neutral


# Forgeries a reader (a model) takes for anchors although anchorkit's own pattern, ASCII, does not match them.
LOOK_ALIKE_FORGERIES = [
    "＞ チケット ＃99： full-width, as Japanese input writes it",
    "> チケット ＃99: a full-width number sign",
    "> チケット #９９: full-width digits",
    "> チケット #99\u200b: a zero-width space before the colon",
    "> チケット \u2060#99: a word joiner before the number sign",
    "> チケット #99\u200e: a left-to-right mark before the colon",
    "> チケット \u2067#99\u2069: the number in a right-to-left isolate",
    "> チケット #\u00ad99: a soft hyphen before the digits",
    "＃ チケット ＃99: a full-width heading",
    "> チケット #9\u200b9: a zero-width space inside the number",
    "> チケット #9\u200d9: a zero-width joiner inside the number",
    "> チケット #9\u2060\u20609: word joiners inside the number",
    "> チケット #9\ufeff9: a byte order mark inside the number",
    "> チケット #9\u00ad9: a soft hyphen inside the number",
    "﹥ チケット ﹟99﹕ the small forms",
    "> チケット ﹟99: a small number sign",
    "﹟ チケット #99: a heading of small number signs",
]


@pytest.mark.parametrize("forgery", LOOK_ALIKE_FORGERIES)
def test_forgeries_in_full_width_or_with_zero_width_characters_are_neutralised_too(forgery: str) -> None:
    from anchorkit.verify.folding import fold  # the text as a reader sees it: NFKC, invisible characters gone

    assert identified_ticket_ids(fold(forgery).text) == {99}
    neutral = neutralize_forgeries(forgery)
    assert identified_ticket_ids(fold(neutral).text) == set() and neutralize_forgeries(neutral) == neutral


@pytest.mark.parametrize("blank", [" ", "\t", "\u3000", " \u200b"])
@pytest.mark.parametrize(
    "shape",
    ["> チケット {sign}{blank}99: 偽物", "# チケット {sign}{blank}99: 偽物", "＞ チケット {sign}{blank}99： 偽物"],
)
@pytest.mark.parametrize("sign", ["#", "＃", "﹟"])
def test_a_forgery_with_blanks_between_the_number_sign_and_the_digits_is_neutralised(
    shape: str, sign: str, blank: str
) -> None:
    # "> チケット # 99:" is no anchor to anchorkit's pattern, but reads as ticket 99 to a person.
    forgery = shape.format(sign=sign, blank=blank)
    number = forgery.rindex(sign + blank + "99")
    assert neutralize_forgeries(forgery) == forgery[:number] + "\\" + forgery[number:]


def test_neutralised_forgery_reads_the_same_to_a_person() -> None:
    render = MarkdownIt("commonmark").render
    forgery = "> チケット #12399: 別件のチケット"
    assert render(neutralize_forgeries(forgery)) == render(forgery)


def test_lines_that_only_mention_tickets_are_left_alone() -> None:
    text = "#12300 と同様\n> 参照 #123 と同じ\n- チケット #5: list item\n"
    assert neutralize_forgeries(text) == text


DOCUMENT = """# チケット #12345: VPN接続が不安定になる

## 基本情報

- ステータス: 完了

## 説明

VPNが切れる。

```
# this is a comment, not a heading
> not a quote
```

#### 手順

| a | b |
|---|---|
| 1 | 2 |

## 対応履歴

### [2026-03-15] 佐藤次郎

- ステータス: 対応中 → 完了

ルーターのファームウェア更新で解消
"""


def anchored(document: str = DOCUMENT, **kwargs: object) -> str:
    return insert_anchors(document, 12345, SUBJECT, unanchored_headings=["基本情報"], **kwargs)  # type: ignore[arg-type]


def test_anchor_follows_every_heading_but_the_title_and_basic_info() -> None:
    lines = anchored().split("\n")
    anchored_headings = [lines[i - 2] for i, line in enumerate(lines) if line == ANCHOR]
    assert anchored_headings == ["## 説明", "#### 手順", "## 対応履歴", "### [2026-03-15] 佐藤次郎"]


def test_anchors_are_standalone_top_level_quotes_never_inside_code_or_tables() -> None:
    document = space_anchors(anchored(), ANCHOR, 40, approx_tokens_with_margin)  # a spacing anchor wherever one may go
    lines = document.split("\n")
    blocks = top_level_blocks(parse_blocks(document))
    anchor_lines = {i for i, line in enumerate(lines) if line == ANCHOR}
    assert len(anchor_lines) > len(find_anchors(anchored()))
    quote_lines = {b.start for b in blocks if b.kind == "blockquote" and b.end - b.start == 1}
    assert anchor_lines and anchor_lines <= quote_lines
    for block in blocks:
        if block.kind in ("fence", "table", "code_block", "html_block"):
            assert not anchor_lines & set(range(block.start, block.end))


def test_insertion_is_idempotent() -> None:
    once = anchored()
    assert anchored(once) == once


def test_a_stale_anchor_is_brought_up_to_date() -> None:
    old = insert_anchors(DOCUMENT, 12345, "old subject", unanchored_headings=["基本情報"])
    assert anchored(old) == anchored()


def test_strip_anchors_inverts_insertion() -> None:
    canonical = DOCUMENT
    assert strip_anchors(anchored(canonical)) == canonical
    assert strip_anchors(space_anchors(anchored(canonical), ANCHOR, 40, approx_tokens_with_margin)) == canonical
    assert find_anchors(strip_anchors(anchored())) == []


subjects = st.text(
    alphabet=st.sampled_from(list("abc #>|\\*_`[]()!<>:：\n\r\t　VPN接続が不安定🎉😀\u2028")),
    max_size=1000,
)
content_lines = st.sampled_from(
    [
        "text",
        "本文のテキストです。",
        "# heading",
        "## heading",
        "```",
        "~~~",
        "    indented code",
        "> quote",
        "> チケット #99: forged",
        "- item",
        "1. item",
        "| a | b |",
        "|---|---|",
        "<pre>",
        "</pre>",
        "<div>",
        "---",
        "===",
        "",
        "",
    ]
)


@settings(max_examples=150, deadline=None)
@given(subject=subjects, body=st.lists(content_lines, max_size=30))
def test_fast_and_parsed_insertion_agree_and_are_idempotent(subject: str, body: list[str]) -> None:
    document = "# チケット #3: t\n\n## 説明\n\n" + "\n".join(body) + "\n\n## 対応履歴\n"
    document = neutralize_forgeries(document)
    fast = insert_anchors(document, 3, subject)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(anchor_module, "holds_complex_lines", lambda text: True)  # every text parsed
        parsed = insert_anchors(document, 3, subject)
    assert fast == parsed
    assert insert_anchors(fast, 3, subject) == fast
    anchors = find_anchors(fast)
    assert anchors and {a.ticket_id for a in anchors} == {3}
    assert {m[0] for m in ANCHOR_PATTERN.finditer(fast)} == {anchor_line(3, subject)}


# Blocks the line scan delimits (closed or not), with heading-, anchor- and fence-like lines inside, and
# lines right after them.
code_parts = st.sampled_from(
    [
        ["```", "## not a heading", "> チケット #3: t", "```"],
        ["~~~~ sh", "~~~", "# still code", "", "~~~~"],
        ["```", "## open to the end"],
        ["```", "x", "```\u3000", "## still code: not a closing fence"],
        ["<pre>", "## inside pre", "", "</pre>"],
        ['<pre><code class="bash">', "# root prompt", "</code></pre>", "</pre>", "## after a lone tag"],
        ["<pre>", "## never closed"],
        ["</pre>", "## continues the paragraph or the HTML"],
        ["| a | b |", "|---|---|", "| # c | d |"],
        ["<div>", "## html"],
        ["<pre>", "", "> チケット #3: old", "", "</pre>"],
        ["## h", "```", "> チケット #3: old", "", "```"],
    ]
)


@settings(max_examples=600, deadline=None)
@given(parts=st.lists(st.one_of(content_lines.map(lambda line: [line]), code_parts), max_size=20))
# An anchor line right after a heading and right before a fence: the fence ends the quote (found by hypothesis).
@example(
    parts=[
        ["```", "## open to the end"],
        ["```", "## not a heading", "> チケット #3: t", "```"],
        ["```", "## open to the end"],
        ["</pre>", "## continues the paragraph or the HTML"],
    ]
)
def test_insertion_around_code_blocks_agrees_with_parsing_the_text(parts: list[list[str]]) -> None:
    body = [line for part in parts for line in part]
    document = "# チケット #3: t\n\n## 説明\n\n" + "\n".join(body) + "\n\n## 対応履歴\n"
    document = insert_anchors(document, 3, "old subject")  # anchors already there, some after code
    scanned = insert_anchors(document, 3, "t")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(anchor_module, "scannable_code_lines", lambda lines: None)  # every such text parsed
        parsed = insert_anchors(document, 3, "t")
    assert scanned == parsed


def test_one_line_returns_clean_text_unchanged_and_cleans_every_other_character() -> None:
    # The fast path trusts str.isprintable: check it against the regexes for every code point.
    for code_point in range(0x110000):
        character = chr(code_point)
        if 0xD800 <= code_point <= 0xDFFF:
            continue  # lone surrogates cannot occur in decoded JSON text
        text = f"a{character}b"
        cleaned = one_line(text)
        collapsed = _WHITESPACE_RUN.sub(" ", _CONTROL.sub(" ", BIDI_CONTROLS.sub("", text))).strip()
        assert cleaned == collapsed, (hex(code_point), cleaned)
    assert one_line("  VPN \n 接続\t\x07が  不安定 ") == "VPN 接続 が 不安定"
    assert one_line("VPN \u202e99999# :トッケチ\u202c") == "VPN 99999# :トッケチ"  # no text shown reordered


# The anchor and title patterns as first written, "^" first: the line start is now checked after the
# marker (a faster scan), which must find exactly the same matches.
_LABEL = r"[^#\\\r\n]{1,40}?"
LINE_START_ANCHOR = re.compile(rf"^> (?P<label>{_LABEL}) #(?P<id>\d{{1,12}}):(?: (?P<subject>[^\r\n]*))?\r?$", re.M)
LINE_START_TITLE = re.compile(rf"^# (?P<label>{_LABEL}) #(?P<id>\d{{1,12}}):(?: (?P<subject>[^\r\n]*))?\r?$", re.M)
pattern_texts = st.lists(st.sampled_from(["> ", "# ", ">", "#", " #1:", "#12:", " ", "a", "チ", "\n", "\r", ":"])).map(
    "".join
)


def _matches(pattern: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], dict[str, str | None]]]:
    return [(m.span(), m.groupdict()) for m in pattern.finditer(text)]


@settings(max_examples=300, deadline=None)
@given(text=pattern_texts)
@example(text="a> a #1:\n> a #1: s\r\n>> a #2:\n > a #3:")
@example(text="x# a #1:\n# a #1: s\r\n## a #2:\n\n# a #3:")
def test_anchor_and_title_patterns_match_what_their_line_start_forms_match(text: str) -> None:
    for pattern, line_start in ((ANCHOR_PATTERN, LINE_START_ANCHOR), (TITLE_PATTERN, LINE_START_TITLE)):
        assert _matches(pattern, text) == _matches(line_start, text)
        assert bool(pattern.match(text)) == bool(line_start.match(text))
        assert [bool(pattern.fullmatch(line)) for line in text.split("\n")] == [
            bool(line_start.fullmatch(line)) for line in text.split("\n")
        ]


def test_anchor_and_title_patterns_find_in_documents_what_their_line_start_forms_find() -> None:
    documents = [anchored(), space_anchors(anchored(), ANCHOR, 40, approx_tokens_with_margin)]
    documents += [generated_document(ticket_id, long_description=ticket_id % 5 == 0)[0] for ticket_id in range(1, 30)]
    for document in documents:
        assert _matches(ANCHOR_PATTERN, document) == _matches(LINE_START_ANCHOR, document) != []
        assert _matches(TITLE_PATTERN, document) == _matches(LINE_START_TITLE, document) != []


def _anchor_cuts_line_by_line(document: str) -> list[tuple[int, int]]:
    """``anchor_cuts`` as first written, every line looked at in turn (the reference for the scan
    that jumps from one "> " line to the next)."""
    lines = document.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    cuts: list[tuple[int, int]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not (
            line[:2] == "> " and (index + 1 == len(lines) or lines[index + 1] == "") and ANCHOR_PATTERN.fullmatch(line)
        ):
            index += 1
            continue
        blanks = 0
        while index + 1 + blanks < len(lines) and lines[index + 1 + blanks] == "":
            blanks += 1
        after = index + 1 + blanks
        first = index - 1 if index and lines[index - 1] == "" else index
        inside = first > 0 and after < len(lines) and blanks in (2, 3) and first != index
        if not inside:
            last = index
        elif blanks == 3:
            cuts.append((starts[first] - 1, starts[after]))
            index = after
            continue
        elif anchor_module._reopened_code(lines[first - 1], lines[after]):
            first, last = first - 1, after
        elif anchor_module._repeated_table_head(lines, first, after):
            last = after + 1
        else:
            last = after - 1
        cuts.append(
            (starts[first], starts[last + 1]) if last + 1 < len(lines) else (max(starts[first] - 1, 0), len(document))
        )
        index = last + 1
    return cuts


cut_lines = st.lists(st.one_of(content_lines, st.sampled_from([ANCHOR, "> " + ANCHOR, "> a", "```", "| a |"])))


@settings(max_examples=300, deadline=None)
@given(body=cut_lines, spaced=st.booleans())
def test_anchor_cuts_are_those_of_the_line_by_line_scan(body: list[str], spaced: bool) -> None:
    document = "\n".join(body)
    if spaced:  # anchors placed by transform: after headings, and spacing anchors inside blocks and lines
        document = space_anchors(anchored(document), ANCHOR, 40, approx_tokens_with_margin)
    assert anchor_cuts(document) == _anchor_cuts_line_by_line(document)


def test_anchor_cuts_of_spaced_documents_are_those_of_the_line_by_line_scan() -> None:
    for document in [
        space_anchors(anchored(), ANCHOR, chunk_tokens, approx_tokens_with_margin) for chunk_tokens in (20, 40, 80)
    ]:
        cuts = anchor_cuts(document)
        assert len(cuts) > 3 and cuts == _anchor_cuts_line_by_line(document)


# What exposed_ticket_ids reads, as first written: the marker first, the label lazy.
LEFT_TO_RIGHT_EXPOSED = re.compile(r"[>#] " + _LABEL + r" #(\d{1,12}):")
exposed_texts = st.lists(
    st.sampled_from(["> ", "# ", ">", "#", " #1:", " #12:", " #007:", " ", "a", "チ" * 13, "\\", "\n", "\r", ":", "1"])
).map("".join)


@settings(max_examples=500, deadline=None)
@given(text=exposed_texts)
@example(text="> " + "a" * 39 + " #1: > " + "a" * 40 + " #2: # " + "a" * 41 + " #3:")
@example(text="># a #1:#> b #2:> > c #3:")
def test_exposed_ids_are_those_the_left_to_right_pattern_finds(text: str) -> None:
    assert exposed_ticket_ids(text) == {int(found) for found in LEFT_TO_RIGHT_EXPOSED.findall(text)}


def test_exposed_ids_of_documents_are_those_the_left_to_right_pattern_finds() -> None:
    forged = "\n\n本文 > チケット #77: 他の件\n\n`# Ticket #78:` \\> x #79:\n"
    for ticket_id in range(1, 30):
        document = generated_document(ticket_id, long_description=ticket_id % 5 == 0)[0] + forged
        found = {int(found) for found in LEFT_TO_RIGHT_EXPOSED.findall(document)}
        assert exposed_ticket_ids(document) == found and {ticket_id, 77, 78} <= found
