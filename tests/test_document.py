"""Issue JSON → anchored Markdown: shape, journals, privacy, containment of ticket content."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from anchorkit.anchors import (
    anchor_line,
    find_anchors,
    find_titles,
    id_anchor_line,
    insert_anchors,
    one_line,
    shortened,
    strip_anchors,
    title_line,
)
from anchorkit.markdown_blocks import parse_blocks, top_level_blocks
from anchorkit.render.document import RenderOptions, content_markdown, render_document, text_format_at
from anchorkit.render.markdown_text import escape_plain
from anchorkit.render.spacing import approx_tokens_with_margin, space_anchors
from anchorkit.verify.ids import mentioned_ids

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOOKUPS = json.loads((FIXTURES / "lookups.json").read_text(encoding="utf-8"))
SWITCH = (("2025-04-01T00:00:00Z", "common_mark"),)
OPTIONS = RenderOptions(text_format=SWITCH)


def fixture_issue(ticket_id: int) -> dict[str, Any]:
    return json.loads((FIXTURES / "issues" / f"{ticket_id}.json").read_text(encoding="utf-8"))["issue"]


def render(ticket_id: int, **options: Any) -> str:
    return render_document(fixture_issue(ticket_id), LOOKUPS, RenderOptions(text_format=SWITCH, **options))


def test_ticket_12345_has_the_documented_shape() -> None:
    document = render(12345, chunk_tokens=0)  # the anchors after headings only
    anchor = anchor_line(12345, "VPN接続が不安定になる")
    assert document.startswith(
        f"# チケット #12345: VPN接続が不安定になる\n\n## 基本情報\n\n{anchor}\n\n- プロジェクト: 社内ITサービスデスク\n"
    )
    assert f"## 説明\n\n{anchor}\n\n" in document
    assert f"## 対応履歴\n\n{anchor}\n\n" in document
    assert (
        f"### [2026-03-15] 佐藤 次郎\n\n{anchor}\n\n- ステータス: 対応中 → 完了\n- 進捗率: 80 → "
        "100\n\nルーターのファームウェア更新で解消しました。" in document
    )
    # Every section and journal entry is anchored: as many anchors as headings of level 2+.
    headings = [line for line in document.split("\n") if line.startswith("##")]
    assert len(find_anchors(document)) == len(headings)
    assert find_titles(document) == [find_anchors(document)[0]]
    # By default spacing anchors come on top, in the short form "> チケット #12345:", and take nothing away.
    spaced = render(12345)
    assert "\n\n> チケット #12345:\n\n" in spaced
    assert set(find_anchors(spaced)) == {*find_anchors(document), (12345, "")}
    assert len(find_anchors(spaced)) > len(headings)
    assert strip_anchors(spaced) == strip_anchors(document)
    # --spacing-anchors full: spacing anchors are the line after headings, subject and all.
    full = render(12345, spacing_anchors="full")
    assert set(find_anchors(full)) == set(find_anchors(document)) and len(find_anchors(full)) > len(headings)
    assert strip_anchors(full) == strip_anchors(document)


def test_basic_info_is_anchored_unless_turned_off() -> None:
    assert "## 基本情報\n\n> チケット #12345: " in render(12345)
    assert "## 基本情報\n\n- " in render(12345, anchor_basic_info=False)


def test_dates_with_a_time_carry_their_utc_offset() -> None:
    assert "- 作成日: 2026-02-16 01:20 +00:00\n" in render(12345)
    assert "- 作成日: 2026-02-16 10:20 +09:00\n" in render(12345, timezone="Asia/Tokyo")
    assert "- 作成日: 2026-02-15 21:50 -03:30\n" in render(12345, timezone="America/St_Johns")


def test_anchor_subjects_are_cut_while_the_title_keeps_the_whole_subject() -> None:
    issue = fixture_issue(12345) | {
        "subject": "大阪支社の VPN 接続が不安定になる件（名古屋営業所・福岡営業所からも同様の報告あり、業務影響大）"
    }
    document = render_document(issue, LOOKUPS, OPTIONS)
    assert find_titles(document)[0].subject == issue["subject"]
    assert {a.subject for a in find_anchors(document)} == {
        "大阪支社の VPN 接続が不安定になる件（名古屋営業所・福岡営業所からも同様の…",  # 40 characters
        "",  # the short spacing anchors
    }
    whole = render_document(issue, LOOKUPS, RenderOptions(text_format=SWITCH, anchor_subject_chars=0))
    assert {a.subject for a in find_anchors(whole)} == {issue["subject"], ""}


def test_english_labels() -> None:
    document = render(12345, lang="en")
    assert document.startswith("# Ticket #12345: VPN接続が不安定になる\n\n## Details\n")
    assert "## Description\n\n> Ticket #12345: " in document
    assert "## History\n" in document and "- Status: 対応中 → 完了" in document


def test_journals_are_sorted_by_id_even_when_redmine_returns_them_reversed() -> None:
    issue = fixture_issue(12318)
    ids = [j["id"] for j in issue["journals"]]
    assert ids != sorted(ids), "fixture must store the journals reversed"
    ordered = copy.deepcopy(issue)
    ordered["journals"].sort(key=lambda j: j["id"])
    assert render_document(issue, LOOKUPS, OPTIONS) == render_document(ordered, LOOKUPS, OPTIONS)
    dates = [line[5:15] for line in render_document(issue, LOOKUPS, OPTIONS).split("\n") if line.startswith("### [")]
    assert dates == sorted(dates)


def test_details_resolve_to_names_and_unknown_ids_fall_back_to_the_id() -> None:
    issue = {
        "id": 5,
        "subject": "s",
        "journals": [
            {
                "id": 1,
                "user": {"id": 9, "name": "佐藤"},
                "created_on": "2026-03-15T01:00:00Z",
                "details": [
                    {"property": "attr", "name": "status_id", "old_value": "1", "new_value": "3"},
                    {"property": "attr", "name": "assigned_to_id", "old_value": "424242", "new_value": None},
                    {"property": "cf", "name": "3", "old_value": "個人", "new_value": "全社"},
                    {"property": "attr", "name": "priority_id", "old_value": None, "new_value": "x"},
                ],
            }
        ],
    }
    document = render_document(issue, LOOKUPS, OPTIONS)
    assert "- ステータス: 新規 → 解決" in document
    # An id no lookup names is no ticket: written so that no reader, model or verify takes it for one.
    assert "- 担当者: ID 424242 → —" in document and "#424242" not in document
    assert 424242 not in {mention.ticket_id for mention in mentioned_ids(document)}
    assert "- 影響範囲: 個人 → 全社" in document
    assert "- 優先度: — → ID x" in document


def test_description_edits_are_summarised_not_pasted() -> None:
    issue = fixture_issue(12355)
    edit = next(d for j in issue["journals"] for d in j["details"] if d["name"] == "description")
    document = render_document(issue, LOOKUPS, OPTIONS)
    assert "- 説明を更新" in document
    assert "と出ます。" in edit["old_value"] and "と出ます。" not in document
    synthetic = {
        "id": 3,
        "subject": "s",
        "description": "current",
        "journals": [
            {
                "id": 1,
                "user": {"name": "u"},
                "created_on": "2026-01-01T00:00:00Z",
                "details": [
                    {
                        "property": "attr",
                        "name": "description",
                        "old_value": "OLD TEXT " * 500,
                        "new_value": "NEW TEXT " * 500,
                    }
                ],
            }
        ],
    }
    document = render_document(synthetic, LOOKUPS, OPTIONS)
    assert "- 説明を更新" in document and "OLD TEXT" not in document and "NEW TEXT" not in document


def test_private_notes_are_left_out_unless_asked_for() -> None:
    issue = fixture_issue(12345)
    private = [j for j in issue["journals"] if j.get("private_notes") and j.get("notes")]
    assert private
    secret = private[0]["notes"].strip().splitlines()[0]
    assert secret not in render(12345)
    assert secret in render(12345, include_private=True)


def test_field_only_journals_are_kept_and_empty_ones_dropped() -> None:
    issue = {
        "id": 8,
        "subject": "s",
        "journals": [
            {"id": 1, "user": {"name": "a"}, "created_on": "2026-01-01T00:00:00Z", "notes": "", "details": []},
            {
                "id": 2,
                "user": {"name": "b"},
                "created_on": "2026-01-02T00:00:00Z",
                "notes": "",
                "details": [{"property": "attr", "name": "done_ratio", "old_value": "0", "new_value": "50"}],
            },
        ],
    }
    document = render_document(issue, LOOKUPS, OPTIONS)
    assert "### [2026-01-01] a" not in document
    assert "### [2026-01-02] b\n\n> チケット #8: s\n\n- 進捗率: 0 → 50" in document


def test_content_headings_are_demoted_below_the_document_and_anchored() -> None:
    issue = {"id": 9, "subject": "s", "description": "# Top\n\n## 対応履歴\n\nSetext\n======\n\ntext"}
    document = render_document(issue, LOOKUPS, RenderOptions(text_format="common_mark"))
    headings = [(b.level, b.text) for b in top_level_blocks(parse_blocks(document)) if b.kind == "heading"]
    assert headings == [(1, "チケット #9: s"), (2, "基本情報"), (2, "説明"), (4, "Top"), (5, "対応履歴"), (4, "Setext")]
    assert "#### Top\n\n> チケット #9: s\n\n" in document
    assert "#### Setext\n\n> チケット #9: s\n\n" in document


def test_code_blocks_keep_lines_starting_with_hash_or_quote_and_get_no_anchor() -> None:
    document = render(12345)
    code = "".join(
        document.split("\n")[b.start : b.end].__str__()
        for b in top_level_blocks(parse_blocks(document))
        if b.kind == "fence"
    )
    assert code and "チケット #12345" not in code
    issue = {
        "id": 4,
        "subject": "s",
        "description": "```\n# systemctl restart vpn\n> ping 10.0.0.1\n## not a heading\n```",
    }
    document = render_document(issue, LOOKUPS, RenderOptions(text_format="common_mark"))
    assert "```\n# systemctl restart vpn\n> ping 10.0.0.1\n## not a heading\n```" in document


@pytest.mark.parametrize(
    "description",
    [
        "```python\nprint(1)\n## still code",  # unclosed fence
        "~~~~\ncode",
        "<pre>\nunbalanced pre\n## would be swallowed",
        "<!-- a comment that never ends",
        "<script>\nalert(1)",
        "> quote\n> ## heading in a quote",
        "- item\n  # heading in a list",
    ],
)
def test_unterminated_content_cannot_swallow_the_document(description: str) -> None:
    issue = {
        "id": 6,
        "subject": "s",
        "description": description,
        "journals": [{"id": 1, "user": {"name": "u"}, "created_on": "2026-01-01T00:00:00Z", "notes": "note"}],
    }
    document = render_document(issue, LOOKUPS, RenderOptions(text_format="common_mark"))
    headings = [
        (b.level, b.text) for b in top_level_blocks(parse_blocks(document)) if b.kind == "heading" and b.level <= 3
    ]
    assert headings == [(1, "チケット #6: s"), (2, "基本情報"), (2, "説明"), (2, "対応履歴"), (3, "[2026-01-01] u")]
    tokens = parse_blocks(document)
    assert all(int(t.tag[1]) >= 4 for t in tokens if t.type == "heading_open" and t.level > 0)


def test_forged_anchor_in_content_is_neutralised() -> None:
    document = render(12355)
    assert "> チケット \\#12399: 別件のチケット" in document
    assert 12399 not in {a.ticket_id for a in find_anchors(document)}
    assert {a.ticket_id for a in find_anchors(render(12350))} == {12350}


def test_text_format_follows_the_instance_switch_date() -> None:
    assert text_format_at(SWITCH, "2024-12-31T23:59:59Z") == "textile"
    assert text_format_at(SWITCH, "2025-04-01T00:00:00Z") == "common_mark"
    assert text_format_at("common_mark", "2001-01-01T00:00:00Z") == "common_mark"
    assert content_markdown("h2. Textile heading", "textile").startswith("##### Textile heading")


def test_rendering_is_deterministic_and_does_not_touch_its_input() -> None:
    issue = fixture_issue(12345)
    before = copy.deepcopy(issue)
    assert render_document(issue, LOOKUPS, OPTIONS) == render_document(copy.deepcopy(issue), LOOKUPS, OPTIONS)
    assert issue == before


def test_timezone_changes_the_dates_shown() -> None:
    issue = {
        "id": 1,
        "subject": "s",
        "journals": [{"id": 1, "user": {"name": "u"}, "created_on": "2026-03-15T20:00:00Z", "notes": "n"}],
    }
    assert "### [2026-03-15] u" in render_document(issue, LOOKUPS, OPTIONS)
    assert "### [2026-03-16] u" in render_document(issue, LOOKUPS, RenderOptions(timezone="Asia/Tokyo"))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"chunk_tokens": 120},
        {"chunk_tokens": 0},
        {"anchor_basic_info": False, "lang": "en"},
        {"spacing_anchors": "full", "chunk_tokens": 120},
    ],
)
def test_anchoring_a_rendered_document_again_changes_nothing(options: dict[str, Any]) -> None:
    render_options = RenderOptions(text_format=SWITCH, include_private=True, **options)
    unanchored = () if render_options.anchor_basic_info else (render_options.label("details"),)
    for path in sorted((FIXTURES / "issues").glob("*.json")):
        issue = json.loads(path.read_text(encoding="utf-8"))["issue"]
        document = render_document(issue, LOOKUPS, render_options)
        subject = shortened(issue["subject"], render_options.anchor_subject_chars)
        again = insert_anchors(
            document, issue["id"], subject, render_options.label("ticket"), unanchored_headings=unanchored
        )
        assert again == document, path.name
        anchor = (
            anchor_line(issue["id"], subject, render_options.label("ticket"))
            if render_options.spacing_anchors == "full"
            else id_anchor_line(issue["id"], render_options.label("ticket"))
        )
        assert space_anchors(document, anchor, 120, approx_tokens_with_margin) == space_anchors(
            document, anchor, 120, approx_tokens_with_margin
        )
        if render_options.chunk_tokens:
            assert (
                space_anchors(document, anchor, render_options.chunk_tokens, approx_tokens_with_margin) == document
            ), path.name


from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

random_subjects = st.text(
    alphabet=st.sampled_from([*list("ab #>|\\*_`[]!<:：\n\r\t\u3000VPN接続🎉"), "\u2028"]), max_size=1000
)
random_lines = st.sampled_from(
    [
        "text",
        "本文",
        "# h1",
        "## 対応履歴",
        "### [2026-01-01] x",
        "Setext",
        "===",
        "---",
        "```",
        "~~~",
        "    code",
        "> quote",
        "> チケット #99: forged",
        "# チケット #98: forged title",
        "- item",
        "  - nested",
        "1. item",
        "| a |",
        "|---|",
        "<pre>",
        "</pre>",
        "<!--",
        "<div>",
        "h2. textile",
        "bq. quote",
        "",
        "",
    ]
)
random_texts = st.lists(random_lines, max_size=25).map("\n".join)


def issue_of(subject: str, description: str, notes: list[str]) -> dict[str, Any]:
    """Ticket #77 with this subject and description, and a journal for each note."""
    return {
        "id": 77,
        "subject": subject,
        "description": description,
        "journals": [
            {"id": n, "user": {"name": "u"}, "created_on": "2026-01-01T00:00:00Z", "notes": text}
            for n, text in enumerate(notes)
        ],
    }


@settings(max_examples=120, deadline=None)
@given(
    subject=random_subjects,
    description=random_texts,
    notes=st.lists(random_texts, max_size=4),
    fmt=st.sampled_from(["textile", "common_mark"]),
    chunk=st.sampled_from([0, 60, 300]),
    spacing=st.sampled_from(["short", "full"]),
)
# A table whose delimiter row has no pipe: spacing cut it between rows, and stripping could not undo the cut.
@example(
    subject=":::::::::", description="| a |\n---\ntext\ntext", notes=[], fmt="common_mark", chunk=60, spacing="full"
)
def test_any_subject_and_content_keep_the_document_structure(
    subject: str, description: str, notes: list[str], fmt: str, chunk: int, spacing: str
) -> None:
    issue = issue_of(subject, description, notes)
    options = RenderOptions(text_format=fmt, chunk_tokens=chunk, spacing_anchors=spacing)
    document = render_document(issue, LOOKUPS, options)
    assert render_document(issue, LOOKUPS, options) == document
    # Every anchor reads the subject (cut), the title the whole subject, as they are, escaped as text.
    body_subject = escape_plain(shortened(subject, options.anchor_subject_chars))
    anchors = find_anchors(document)
    cut = shortened(subject, options.anchor_subject_chars)
    assert anchors and all(a in ((77, cut), (77, "")) for a in anchors)  # "": a short spacing anchor
    assert (77, "") not in anchors or spacing == "short" or not cut
    assert find_titles(document) == [(77, one_line(subject))]
    # The document's own skeleton is the only structure at levels 1-3.
    blocks = top_level_blocks(parse_blocks(document))
    skeleton = [b.text for b in blocks if b.kind == "heading" and b.level <= 3]
    expected = [title_line(77, escape_plain(one_line(subject))).removeprefix("# "), "基本情報"]
    expected += ["説明"] if description.strip() else []
    expected += (
        (["対応履歴"] + ["[2026-01-01] u"] * sum(1 for n in notes if n.strip()))
        if any(n.strip() for n in notes)
        else []
    )
    assert [t.strip() for t in skeleton] == [e.strip() for e in expected]
    # Every anchor line is a standalone top-level quote (so never inside code, tables or HTML).
    quote_lines = {b.start for b in blocks if b.kind == "blockquote" and b.end - b.start == 1}
    lines = document.split("\n")
    assert {i for i, line in enumerate(lines) if find_anchors(line)} <= quote_lines
    assert insert_anchors(document, 77, body_subject) == document
    if chunk:
        spacing_anchor = id_anchor_line(77) if spacing == "short" else anchor_line(77, body_subject)
        assert space_anchors(document, spacing_anchor, chunk, approx_tokens_with_margin) == document
        assert strip_anchors(document) == strip_anchors(
            render_document(issue, LOOKUPS, RenderOptions(text_format=fmt, chunk_tokens=0))
        )


heading_lines = st.sampled_from(
    [
        "# a",
        "## b ##",
        "### c ##  ",
        "###",
        "#\tx",
        "# x\u3000",
        "# \u3000y\u2003",
        "####### seven",
        "#x",
        "# \\#",
        "## ##",
        "# x #b",
        "# x\t#\t",
        "###### six",
        "# 見出し #",
        "text",
        "- item",
        "1. item",
        "2. item",
        "> quote",
        "> # nested",
        "- # nested",
        "| a | b |",
        "|---|---|",
        "| c | d |",
        "  two spaces",
        "",
        "",
    ]
)


# Code blocks the line scan delimits (closed or not), with heading-like and fence-like lines inside.
code_parts = st.sampled_from(
    [
        ["```", "# not a heading", "```"],
        ["~~~~ sh", "~~~", "# still code", "~~~~"],
        ["```", "# open to the end"],
        ["```", "x", "```\u3000", "# still code: not a closing fence"],
        ["<pre>", "# inside pre", "", "</pre>"],
        ['<pre><code class="bash">', "# root prompt", "</code></pre>", "</pre>", "# after a lone tag"],
        ["<pre>", "# never closed"],
        ["</pre>", "# continues the paragraph or the HTML"],
        ["    # indented code"],
        ["<div>", "# html"],
    ]
)


@settings(max_examples=600, deadline=None)
@given(parts=st.lists(st.one_of(heading_lines.map(lambda line: [line]), code_parts), max_size=20))
def test_demoting_headings_line_by_line_agrees_with_parsing_the_whole_text(parts: list[list[str]]) -> None:
    from anchorkit.render.document import _contain, _contain_parsed

    text = "\n".join(line for part in parts for line in part)
    assert _contain(text) == _contain_parsed(text)


@pytest.mark.parametrize(
    ("text", "contained"),
    [
        ("ログ:\n\n<pre>\nerror\n</pre>", "ログ:\n\n<pre>\nerror\n</pre>"),  # closed: no second closing tag
        ('<pre><code class="bash">\n# ls\n</code></pre>', '<pre><code class="bash">\n# ls\n</code></pre>'),
        ("<!-- a -->", "<!-- a -->"),
        ("ログ:\n\n<pre>\nerror", "ログ:\n\n<pre>\nerror\n</pre>"),  # left open: closed
        ("<PRE>\nerror", "<PRE>\nerror\n</pre>"),
        ("<!-- a\nb", "<!-- a\nb\n-->"),
    ],
)
def test_an_html_block_that_ends_the_text_is_closed_only_if_it_is_open(text: str, contained: str) -> None:
    from anchorkit.render.document import _contain

    assert _contain(text) == contained


def test_headings_after_closed_code_blocks_are_demoted_without_parsing_the_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anchorkit.render import document

    monkeypatch.setattr(document, "_contain_parsed", lambda text: pytest.fail("parsed " + text))
    text = "# 原因\n\n```\n# コメント\n```\n\n<pre>\n# root\n</pre>\n</pre>\n\n## 対処"
    assert document._contain(text) == "#### 原因\n\n```\n# コメント\n```\n\n<pre>\n# root\n</pre>\n</pre>\n\n##### 対処"
