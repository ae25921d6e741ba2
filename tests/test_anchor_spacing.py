"""Spacing anchors: every window of N tokens names its ticket, and stripping gives the content back."""

from __future__ import annotations

import json
import random
import re
from bisect import bisect_left
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorkit.anchors import (
    ANCHOR_PATTERN,
    TABLE_DELIMITER,
    TITLE_PATTERN,
    anchor_line,
    find_anchors,
    id_anchor_line,
    insert_anchors,
    neutralize_forgeries,
    strip_anchors,
    title_line,
)
from anchorkit.markdown_blocks import parse_blocks, top_level_blocks
from anchorkit.render.document import RenderOptions, content_markdown, render_document
from anchorkit.render.spacing import (
    LineAdditive,
    _memoized,
    _Paragraph,
    _Pieces,
    _plan,
    _plan_by_lines,
    approx_tokens_with_margin,
    space_anchors,
)
from anchorkit.tokens import byte_offsets, load_cl100k_base
from tests.support.long_tickets import TEXT_FORMAT, long_issue, lookups, write_long_snapshot

ANCHOR = anchor_line(5, "VPN接続が不安定になる")
SHORT = id_anchor_line(5)  # "> チケット #5:", the default form of spacing anchors
TITLE = title_line(5, "VPN接続が不安定になる")


def utf8_bytes(text: str) -> int:
    """A tokenizer whose tokens are UTF-8 bytes: positions are exact, so windows can be slid in a pure test."""
    return len(text.encode("utf-8"))


def spaced(body: str, chunk: int = 120, count=utf8_bytes) -> str:  # type: ignore[no-untyped-def]
    return space_anchors(f"{TITLE}\n\n{body}\n", ANCHOR, chunk, count)


def windows_without_anchor(document: str, chunk: int, positions: list[int]) -> list[int]:
    """Starts of the ``chunk``-token windows that hold no complete anchor or title line.

    ``positions[i]``: the token index where character i starts (len(document) + 1 entries).
    """
    spans = sorted(
        (positions[m.start()], positions[m.end()])
        for pattern in (ANCHOR_PATTERN, TITLE_PATTERN)
        for m in pattern.finditer(document)
    )
    starts = [start for start, _ in spans]
    total = positions[-1]
    missing = []
    for window in range(max(total - chunk, 0) + 1):
        index = bisect_left(starts, window)
        if index == len(spans) or spans[index][1] > window + chunk:
            missing.append(window)
    return missing


def byte_positions(document: str) -> list[int]:
    return byte_offsets(document, range(len(document) + 1))


def lines_longer_than(document: str, limit: int, positions: list[int]) -> list[tuple[int, int]]:
    """Token ranges of the lines that alone are longer than ``limit`` tokens (they cannot be cut)."""
    ranges, offset = [], 0
    for line in document.split("\n"):
        start, end = positions[offset], positions[offset + len(line)]
        if end - start > limit:
            ranges.append((start, end))
        offset += len(line) + 1
    return ranges


def test_a_long_code_block_is_closed_and_reopened_with_its_info_string_between_two_lines() -> None:
    code = [f"2026-03-01 10:{minute:02d}:00 [ERROR] vpn-gw01 ike: phase1 negotiation failed" for minute in range(12)]
    body = "```bash\n" + "\n".join(code) + "\n```"
    document = spaced(body)
    assert f"```\n\n{ANCHOR}\n\n\n```bash\n" in document
    blocks = top_level_blocks(parse_blocks(document))
    fences = [block for block in blocks if block.kind == "fence"]
    assert len(fences) > 1 and all(document.split("\n")[fence.start] == "```bash" for fence in fences)
    assert strip_anchors(document) == f"{TITLE}\n\n{body}\n"


@pytest.mark.parametrize(("opener", "closer"), [("<pre>", "</pre>"), ('<pre><code class="bash">', "</code></pre>")])
def test_a_long_pre_block_is_closed_and_reopened_with_the_same_tags_between_two_lines(opener: str, closer: str) -> None:
    code = [f"2026-03-01 10:{minute:02d}:00 [ERROR] vpn-gw01 ike: phase1 negotiation failed" for minute in range(12)]
    body = f"{opener}\n" + "\n".join(code) + f"\n{closer}"
    document = spaced(body, chunk=300)
    assert f"{closer}\n\n{ANCHOR}\n\n\n{opener}\n2026-03-01" in document
    blocks = [block for block in top_level_blocks(parse_blocks(document)) if block.kind == "html_block"]
    lines = document.split("\n")
    assert len(blocks) > 1 and all((lines[block.start], lines[block.end - 1]) == (opener, closer) for block in blocks)
    assert strip_anchors(document) == f"{TITLE}\n\n{body}\n"
    assert windows_without_anchor(document, 300, byte_positions(document)) == []


def test_a_pre_block_whose_tags_share_a_line_with_text_is_never_cut() -> None:
    body = (
        "<pre>first line\n" + "\n".join(f"log line {n:03d} with some words in it" for n in range(12)) + "\nlast</pre>"
    )
    document = spaced(body)
    assert body in document


def test_pipe_led_lines_of_a_paragraph_are_cut_between_lines_unless_a_delimiter_row_follows() -> None:
    rows = [f"| 拠点{n} | PC-{n:05d} | 再起動で復旧 |" for n in range(20)]
    body = "|_. 拠点 |_. 端末 |_. 状態 |\n" + "\n".join(rows)  # Textile typed into CommonMark: one paragraph
    document = spaced(body, chunk=200)
    assert f"\n\n{ANCHOR}\n\n\n| 拠点" in document
    assert not [block for block in top_level_blocks(parse_blocks(document)) if block.kind == "table"]
    assert strip_anchors(document) == f"{TITLE}\n\n{body}\n"
    assert windows_without_anchor(document, 200, byte_positions(document)) == []
    # Before a row followed by a delimiter row the second half would become a table: no cut there.
    tricky = "text\n" + "\n".join(rows[:12]) + "\n| a | b | c |\n|---|---|\n" + "\n".join(rows[12:])
    assert "\n\n\n| a | b | c |" not in spaced(tricky, chunk=200)


def test_a_long_table_repeats_its_header_and_delimiter_rows_after_each_anchor() -> None:
    rows = [f"| 大阪 | PC-{n:05d} | 対応中 |" for n in range(20)]
    body = "| 拠点 | 端末 | 状態 |\n|---|---|---|\n" + "\n".join(rows)
    document = spaced(body, chunk=200)
    assert f"\n\n{ANCHOR}\n\n\n| 拠点 | 端末 | 状態 |\n|---|---|---|\n| 大阪 | PC-" in document
    tables = [block for block in top_level_blocks(parse_blocks(document)) if block.kind == "table"]
    assert len(tables) > 2
    assert strip_anchors(document) == f"{TITLE}\n\n{body}\n"


def test_a_long_list_is_cut_between_items_and_a_paragraph_after_a_sentence() -> None:
    items = "\n".join(f"- 項目 {n}: 利用者から再度問い合わせがありました。" for n in range(15))
    paragraph = "ログを確認したところ、認証サーバーでタイムアウトが発生していました。" * 8
    document = spaced(f"{items}\n\n{paragraph}")
    lines = document.split("\n")
    assert lines[-2:] == [ANCHOR, ""]  # a section longer than a chunk ends with an anchor
    for index, line in enumerate(lines[:-2]):
        if line == ANCHOR:
            after = next(text for text in lines[index + 1 :] if text)
            assert after.startswith(("- 項目", "ログを確認"))
    assert "。\n\n" + ANCHOR + "\n\n\n\nログを確認" in document  # cut inside the paragraph's line
    assert strip_anchors(document) == f"{TITLE}\n\n{items}\n\n{paragraph}\n"


def test_a_single_line_longer_than_a_chunk_stays_whole_and_anchors_come_right_around_it() -> None:
    blob = "MII" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 20  # base64: no sentence end, no space
    document = spaced(f"前置きの文です。\n\n{blob}\n\n後ろの文です。" * 3, chunk=200)
    assert blob in document.split("\n")
    assert f"{ANCHOR}\n\n{blob}\n\n{ANCHOR}\n\n" in document  # anchors right before and after it
    positions = byte_positions(document)
    long_lines = lines_longer_than(document, 200 - 2 * utf8_bytes(ANCHOR + "\n") - 2, positions)
    missing = windows_without_anchor(document, 200, positions)
    assert missing and all(
        any(start < window + 200 and window < end for start, end in long_lines) for window in missing
    )


def test_text_shaped_like_an_anchor_is_neutralised_and_never_counts() -> None:
    forged = neutralize_forgeries("> チケット #5: 偽のアンカー\n\n" + "本文の文です。" * 40)
    document = spaced(forged)
    assert "> チケット \\#5: 偽のアンカー" in document
    assert all(anchor.subject == "VPN接続が不安定になる" for anchor in find_anchors(document))
    assert strip_anchors(document) == f"{TITLE}\n\n{forged}\n"


# ---------------------------------------------------------------------------------------------
# Random documents: stripping inverts placement, placement is a fixed point, anchors stay top level

BLOCKS = st.one_of(
    st.lists(
        st.sampled_from(
            ["文です。", "Sentence one. ", "Two! ", "三つ目？", "**太字。**", "`a. b`", "[link. x](u)", "次の行"]
        ),
        min_size=1,
        max_size=12,
    ).map("".join),
    st.lists(
        st.sampled_from(["- 項目です。", "- item two", "  - nested item", "1. first", "2. second"]),
        min_size=1,
        max_size=8,
    ).map("\n".join),
    st.lists(
        st.sampled_from(["log line 1", "x = 1", "", "# comment", "> quoted in code"]), min_size=1, max_size=10
    ).map(lambda lines: "```text\n" + "\n".join(lines) + "\n```"),
    st.lists(st.sampled_from(["| a | b |", "| 長い行です。 | 2 |", "| x | y |"]), min_size=1, max_size=8).map(
        lambda rows: "| h1 | h2 |\n|---|---|\n" + "\n".join(rows)
    ),
    st.lists(st.sampled_from(["> 引用です。", "> quote line", ">"]), min_size=1, max_size=6).map("\n".join),
    st.lists(st.sampled_from(["    code a", "    code b"]), min_size=1, max_size=5).map("\n".join),
    st.sampled_from(["#### 見出し", "<div>\nhtml\n</div>", "---", "1) a\n2) b", "text\n2. not a list", "a | b\n--|--"]),
    st.lists(st.sampled_from(["行その一。", "line two", "三行目です。"]), min_size=2, max_size=6).map("\n".join),
    # Textile habits in CommonMark: <pre> blocks (an HTML block), pipe-led lines (a paragraph, or a table)
    st.tuples(
        st.sampled_from(
            [
                ("<pre>", "</pre>"),
                ('<pre><code class="ruby">', "</code></pre>"),
                ("<pre>x", "</pre>"),
                ("<pre>", "end</pre>"),
            ]
        ),
        st.lists(
            st.sampled_from(["log line 1", "", "# comment", "<pre>", "</code>", "> quoted", "| a | b |"]),
            min_size=1,
            max_size=10,
        ),
    ).map(lambda tags_lines: "\n".join([tags_lines[0][0], *tags_lines[1], tags_lines[0][1]])),
    st.lists(
        st.sampled_from(
            ["|_. 拠点 |_. 端末 |", "| 拠点0 | 文です。 |", "| x | y |", "|---|---|", "a | b", "文_です。", "| *強調 |"]
        ),
        min_size=1,
        max_size=8,
    ).map("\n".join),
)


@settings(max_examples=300, deadline=None)
@given(
    blocks=st.lists(BLOCKS, min_size=1, max_size=12),
    separators=st.lists(st.sampled_from(["\n\n", "\n\n\n", "\n"]), min_size=12, max_size=12),
    chunk=st.sampled_from([40, 80, 200]),
    spacing=st.sampled_from([SHORT, ANCHOR]),
)
def test_stripping_gives_back_exactly_the_content_and_placing_again_changes_nothing(
    blocks: list[str], separators: list[str], chunk: int, spacing: str
) -> None:
    body = content_markdown("".join(block + separator for block, separator in zip(blocks, separators)), "common_mark")
    original = insert_anchors(f"{TITLE}\n\n{body}\n", 5, "VPN接続が不安定になる")  # as render_document has it
    for count in (utf8_bytes, approx_tokens_with_margin):
        document = space_anchors(original, spacing, chunk, count)
        assert strip_anchors(document) == strip_anchors(original)
        assert space_anchors(document, spacing, chunk, count) == document
        # Every anchor is a standalone top-level quote: never inside code, a table, a list or HTML.
        lines = document.split("\n")
        quotes = {
            block.start
            for block in top_level_blocks(parse_blocks(document))
            if block.kind == "blockquote" and block.end - block.start == 1
        }
        assert {index for index, line in enumerate(lines) if line in (ANCHOR, SHORT)} <= quotes


# ---------------------------------------------------------------------------------------------
# Every window over generated long tickets


@pytest.mark.parametrize("chunk", [1024, 1536])  # bytes: a Japanese character is 3 bytes and about 1 token
def test_every_window_of_a_long_ticket_holds_an_anchor_or_lies_in_a_line_that_cannot_be_cut(chunk: int) -> None:
    for seed in range(4):
        issue = long_issue(50001 + seed, random.Random(seed))
        document = render_document(
            issue, lookups(), RenderOptions(chunk_tokens=chunk, text_format=TEXT_FORMAT), utf8_bytes
        )
        positions = byte_positions(document)
        anchor = ANCHOR_PATTERN.search(document)[0]  # type: ignore[index]
        # A line that cannot be cut fits between two anchors only if shorter than N - 2A (and two blank lines).
        long_lines = lines_longer_than(document, chunk - 2 * utf8_bytes(anchor + "\n") - 2, positions)
        for window in windows_without_anchor(document, chunk, positions):
            assert any(start < window + chunk and window < end for start, end in long_lines), (
                seed,
                document.encode()[window : window + chunk].decode(errors="replace"),
            )


@pytest.mark.parametrize("chunk", [1024, 1536])
def test_the_last_window_of_any_fixed_chunker_holds_an_anchor_however_short(chunk: int) -> None:
    # Its windows end at the document's end wherever the windows before it started: an anchor ends it.
    for seed in range(4):
        issue = long_issue(50001 + seed, random.Random(seed), stress=False)
        document = render_document(
            issue, lookups(), RenderOptions(chunk_tokens=chunk, text_format=TEXT_FORMAT), utf8_bytes
        )
        end_anchor = document.rstrip("\n").rsplit("\n", 1)[1]
        assert end_anchor == id_anchor_line(issue["id"])
        data = document.encode("utf-8")
        for length in range(utf8_bytes(end_anchor + "\n"), chunk + 1):
            assert find_anchors(data[-length:].decode("utf-8", "ignore")), (seed, length)


def test_a_window_after_a_short_anchor_still_holds_the_next_anchor_after_a_heading_whole() -> None:
    # The stretch before an anchor after a heading leaves room for that (longer) anchor, not the short one's:
    # sections of a chunk or less (no anchor at their end) whose lines end anywhere between two anchors.
    for lines in range(1, 30):
        body = "\n\n".join(f"#### 見出し{n}\n\n" + "\n".join(["文です。"] * lines) for n in range(4))
        document = space_anchors(
            insert_anchors(f"{TITLE}\n\n{body}\n", 5, "VPN接続が不安定になる"), SHORT, 200, utf8_bytes
        )
        assert windows_without_anchor(document, 200, byte_positions(document)) == [], lines
        assert strip_anchors(document) == f"{TITLE}\n\n{body}\n"


def test_with_cl100k_every_window_holds_an_anchor_or_lies_in_a_line_that_cannot_be_cut() -> None:
    tokenizer = load_cl100k_base()
    for seed in range(3):
        issue = long_issue(50001 + seed, random.Random(seed))
        document = render_document(issue, lookups(), RenderOptions(text_format=TEXT_FORMAT), tokenizer.count)
        tokens = tokenizer.tokenize_many([document])[0]
        positions = [*tokens.tokens_at(byte_positions(document)[:-1]), tokens.token_count]
        anchor = ANCHOR_PATTERN.search(document)[0]  # type: ignore[index]
        long_lines = lines_longer_than(document, 300 - 2 * tokenizer.count(anchor + "\n") - 2, positions)
        missing = windows_without_anchor(document, 300, positions)
        assert all(any(start < window + 300 and window < end for start, end in long_lines) for window in missing), seed


def test_counting_each_piece_once_places_exactly_what_counting_every_text_whole_places() -> None:
    # The speed-up (LineAdditive: stretches, sections and tails counted as sums of their pieces) changes
    # no byte: on the fixtures, on long tickets with every stress shape, at two chunk lengths.
    tokenizer = load_cl100k_base()
    fixtures = Path(__file__).resolve().parent.parent / "fixtures"
    fixture_lookups = json.loads((fixtures / "lookups.json").read_text(encoding="utf-8"))
    tickets = [
        (json.loads(path.read_text(encoding="utf-8"))["issue"], fixture_lookups, "common_mark")
        for path in sorted((fixtures / "issues").glob("*.json"))
    ]
    tickets += [(long_issue(50001 + seed, random.Random(seed)), lookups(), TEXT_FORMAT) for seed in range(6)]
    for issue, ticket_lookups, text_format in tickets:
        for chunk in (300, 512):
            options = RenderOptions(chunk_tokens=chunk, text_format=text_format)
            whole = render_document(issue, ticket_lookups, options, tokenizer.count)
            assert render_document(issue, ticket_lookups, options, LineAdditive(tokenizer.count)) == whole, issue["id"]


# Lines whose starts decide where cl100k's tokens may be cut: blank, white space only (ASCII and
# full-width), indented, and text that a line break right before it leaves alone.
PIECE_LINES = ["", " ", "  ", "\u3000", "\t", "  indented", "\tcode", "\u3000全角", "text", "。", "- item", "> quote"]


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.sampled_from(PIECE_LINES), min_size=1, max_size=12), final_line_break=st.booleans())
def test_counting_lines_by_pieces_gives_the_count_of_their_text(lines: list[str], final_line_break: bool) -> None:
    # The sum of the pieces (cut only before a line that starts with other than white space) is the
    # count of the whole text: within() says "fits" at exactly that many tokens, not one fewer.
    count = load_cl100k_base().count
    text = "\n".join(lines) + ("\n" if final_line_break else "")
    tokens = count(text)
    pieces = _Pieces(_memoized(LineAdditive(count)), additive=True)
    assert pieces.within(lines, tokens, final_line_break)
    assert not pieces.within(lines, tokens - 1, final_line_break)


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(BLOCKS, min_size=1, max_size=12),
    separators=st.lists(st.sampled_from(["\n\n", "\n\n\n", "\n"]), min_size=12, max_size=12),
    chunk=st.sampled_from([40, 80, 200]),
)
def test_sums_of_pieces_place_what_whole_counts_place_on_random_documents(
    blocks: list[str], separators: list[str], chunk: int
) -> None:
    body = content_markdown("".join(block + separator for block, separator in zip(blocks, separators)), "common_mark")
    original = insert_anchors(f"{TITLE}\n\n{body}\n", 5, "VPN接続が不安定になる")
    for spacing in (SHORT, ANCHOR):
        expected = space_anchors(original, spacing, chunk, utf8_bytes)
        assert space_anchors(original, spacing, chunk, LineAdditive(utf8_bytes)) == expected


def test_the_long_ticket_snapshot_is_deterministic_and_long(tmp_path: Path) -> None:
    ids = write_long_snapshot(tmp_path / "a", 3, seed=7)
    write_long_snapshot(tmp_path / "b", 3, seed=7)
    for ticket_id in ids:
        name = f"issues/{ticket_id}.json"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    issue = long_issue(ids[0], random.Random(7 * 1_000_003 + ids[0]))
    assert len(issue["journals"]) >= 30 and len(issue["custom_fields"]) >= 8
    assert {"lookups.json", "state.json", "issues"} <= {path.name for path in (tmp_path / "a").iterdir()}


FAST_LINES = st.sampled_from(
    [
        "文です。文です。",
        "Sentence. Next one",
        "- 項目",
        "- item",
        "  - nested",
        "   - deeper",
        "-  two spaces",
        "* star",
        "+ plus",
        "1. first",
        "2) second",
        "10. tenth",
        "> 引用",
        "> - quoted item",
        ">",
        "> > nested",
        "#### 見出し",
        "#hashtag",
        "  indented text",
        "**bold. text**",
        "* * *",
        "_ _ _",
        "text `a. b`",
        "[x](y). z",
        "[ref]: http://x",
        "-",
        "1.",
        "- ",
        "1.  two spaces",
        "snake_case",
        "a * b",
        "```",
        "```bash",
        "````",
        "~~~",
        "``` a`b",
        " ```",
        "2026-03-01 10:00:00 [ERROR] log line",
        "    at com.example.Job(Job.java:42)",
        "<pre>",
        "</pre>",
        '<pre><code class="bash">',
        "</code></pre>",
        "<PRE>log</pre>",
        "<style>",
        "<div>",
        "</div>",
        "</pre>  ",
        "| 拠点 | 件数 |",
        "| a | b |",
        "| a |",
        "|---|---|",
        "| :--- | ---: |",
        "|---|",
        "| -- | - |",
        "| 本社 | 12 |",
        "| x |  ",
        "|_. 見出し |_. 値 |",
        "| a \\| b |",
        "|",
        "a | b",
        "",
        "",
        "",
    ]
)


# Whole blocks the line scan delimits itself (tables, <pre> and fences), to mix with the lines above.
FAST_BLOCKS = st.sampled_from(
    [
        ["| 拠点 | 件数 |", "|---|---|", "| 本社 | 12 |", "| 大阪 | 3 |", "| 名古屋 | 1 |"],
        ["| a | b |", "| :--- | ---: |", "| 1 | 2 |"],
        ["| a |", "|---|", "| x |", "| y | z |", "| w |", "| a |"],
        ["| a | b |", "|---|---|", "| 1 | 2 |", "|---|---|", "| 3 | 4 |"],
        ["<pre>", "log 1", "", "log 2", "</pre>"],
        ['<pre><code class="bash">', "# ls", "```", "x", "</code></pre>"],
        ["<pre>", "a", "b", "c", "</pre> tail"],
        ["<pre>", "a", "b", "c", "</pre>", "</pre>"],
        ["```", "| a | b |", "|---|---|", "```"],
        ["a | b", "|---|---|", "| 1 | 2 |", "| 3 | 4 |"],  # a table, but not one the scan delimits
        ["|_. 拠点 |_. 件数 |", "| 本社 | 12 |", "| 大阪 | 3 |"],  # Textile rows: a paragraph
    ]
)


@settings(max_examples=3000, deadline=None)
@given(parts=st.lists(st.one_of(FAST_LINES.map(lambda line: [line]), FAST_BLOCKS), max_size=20))
def test_the_line_scan_plans_the_same_cuts_as_the_parser_wherever_it_answers(parts: list[list[str]]) -> None:
    lines = [line for part in parts for line in part]
    by_lines = _plan_by_lines(lines)
    if by_lines is not None:
        parsed = _plan(lines)
        assert (
            dict(by_lines),
            by_lines.paragraph_lines,
            by_lines.code_openers,
            by_lines.code_blocks,
            by_lines.table_heads,
        ) == (dict(parsed), parsed.paragraph_lines, parsed.code_openers, parsed.code_blocks, parsed.table_heads)


def joined_cut_rule(before: str, after: str, rest: list[str]) -> bool:
    """Where a paragraph may be cut, said on the joined texts: ``after`` starts no other block and no table,
    and every bracket and inline mark opened before the cut is closed there, or never closed after it."""
    if re.match(r"(?:[ \t]*$| {4}|\t| {0,3}(?:[-+*=_#><\[~`]|\d{1,9}[.)]))", after) or TABLE_DELIMITER.match(after):
        return False
    if "|" in after and rest and TABLE_DELIMITER.match(rest[0]):
        return False
    if before.count("[") != before.count("]") or before.count("<") != before.count(">"):
        return False
    later = "\n".join([after, *rest])
    return not any(before.count(mark) % 2 and mark in later for mark in "`*_~")


paragraph_lines = st.lists(
    st.lists(st.sampled_from(["文です。", "word", " ", "[", "]", "<", ">", "`", "*", "_", "~", "|", "-", "---", "1."]))
    .map("".join)
    .filter(lambda line: line.strip() != ""),
    min_size=1,
    max_size=8,
)


@settings(max_examples=1000, deadline=None)
@given(lines=paragraph_lines, columns=st.sets(st.integers(0, 30), max_size=6).map(sorted))
def test_a_paragraph_is_cut_where_the_rule_on_its_joined_text_allows(lines: list[str], columns: list[int]) -> None:
    paragraph = _Paragraph(lines)
    for number in range(1, len(lines)):
        expected = joined_cut_rule("\n".join(lines[:number]), lines[number], lines[number + 1 :])
        assert paragraph.may_cut(number) == expected, number
    for number, line in enumerate(lines):
        inside = [column for column in columns if column < len(line)]
        allowed = [
            column
            for column in inside
            if joined_cut_rule("\n".join([*lines[:number], line[:column]]), line[column:], lines[number + 1 :])
        ]
        assert paragraph.cuts_inside(number, inside) == allowed, number


def test_the_line_scan_answers_for_tables_and_pre_blocks_at_block_starts() -> None:
    table = ["| 拠点 | 件数 |", "|---|---|", "| 本社 | 12 |", "| 大阪 | 3 |", "| 名古屋 | 1 |"]
    pre = ['<pre><code class="bash">', "# systemctl restart vpn", "", "> ping 10.0.0.1", "</code></pre>"]
    content = ["文です。", "", *table, "", *pre, "", "- 項目"]
    plan = _plan_by_lines(content)
    assert plan is not None
    assert plan[5] == plan[6] == "in a table" and plan.table_heads[6] == (table[0], table[1])
    assert plan.code_blocks == {8: 13} and plan.code_openers[10] == pre[0]
    # A table that interrupts a paragraph: the parser decides. Pipes without a row that could make a
    # table of them are text (Textile rows typed into CommonMark).
    assert _plan_by_lines(["文です。", *table]) is None
    textile_rows = ["|_. 見出し |_. 値 |", "| 本社 | 12 |", "| 大阪 | 3 |"]
    assert _plan_by_lines(textile_rows) == _plan(textile_rows) == {1: "at a line break", 2: "at a line break"}
    assert _plan_by_lines(["a | b", "--- | ---", "c | d"]) is None
    assert _plan_by_lines(["a | b", "|---|---|", "| 1 | 2 |", "| 3 | 4 |"]) is None  # a table the scan cannot see
