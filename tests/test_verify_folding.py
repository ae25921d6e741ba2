"""verify reads a text as a reader sees it: ticket ids written in compatibility characters or with
invisible characters inside are caught and replaced exactly (verify.folding), and bidirectional controls,
which show a text in another order than it is checked, are flagged and never shown."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.folding import fold
from anchorkit.verify.html import render_report
from anchorkit.verify.ids import filter_text, mentioned_ids
from anchorkit.verify.model import Chunk
from anchorkit.verify.shapes import read_answer
from tests.test_verify_cli import run

CHUNKS = [
    Chunk("12345-003", "> チケット #12345: VPN接続が不安定になる\n\nログを添付します。", ticket_id=12345),
    Chunk("12352-002", "> チケット #12352: ルーター更新\n\n更新しました。", ticket_id=12352),
]
MARKER = "[unverified]"


def check(answer: Any, on_invalid: str = "drop") -> VerifyReport:
    options = VerifyOptions(on_invalid=on_invalid)  # type: ignore[arg-type]
    return verify_citations(read_answer(answer, "answer"), CHUNKS, options=options)


def critical(report: VerifyReport) -> list[tuple[str, Any]]:
    return [(f.kind, f.ticket_id) for f in report.findings if f.severity == "critical"]


# --------------------------------------------------------------------------- 1. compatibility and invisible characters

# (as written, its ticket, what stays of it in the filtered answer: the label words)
DISGUISED = [
    ("﹟{id}", 12399, ""),  # small number sign
    ("ﾁｹｯﾄ{id}", 12399, "ﾁｹｯﾄ"),  # half-width katakana
    ("ﾁｹｯﾄ #99", 99, "ﾁｹｯﾄ "),
    ("Ｔｉｃｋｅｔ {id}", 12399, "Ｔｉｃｋｅｔ "),  # full-width letters
    ("ｔｉｃｋｅｔ #99", 99, "ｔｉｃｋｅｔ "),
    ("Ｒｅｄｍｉｎｅ #99", 99, "Ｒｅｄｍｉｎｅ "),
    ("Ｂｕｇ #99", 99, "Ｂｕｇ "),
    ("ｈｔｔｐｓ://redmine.example.co.jp/issues/{id}", 12399, ""),
    ("＃１２３９９", 12399, ""),
    ("#\u200b{id}", 12399, ""),  # zero-width space
    ("#12\u200b399", 12399, ""),
    ("#12\u2060399", 12399, ""),  # word joiner
    ("#12\ufeff399", 12399, ""),  # BOM / zero-width no-break space
    ("#12\u00ad399", 12399, ""),  # soft hyphen
    ("#12\u0301399", 12399, ""),  # a combining mark after a digit
    ("#1239\ufe0f9", 12399, ""),  # a variation selector
    ("#⑫399", 12399, ""),  # one character NFKC makes two digits of
    ("♯{id}", 12399, ""),  # the music sharp sign, which NFKC leaves as it is
    ("&#35;{id}", 12399, ""),  # the character references of "#": a page or a chat window shows "#"
    ("&#x23;{id}", 12399, ""),
    ("&num;{id}", 12399, ""),
    ("チケット &#35;99", 99, "チケット "),
    ("#12\u3164399", 12399, ""),  # Hangul fillers: letters that show as nothing
    ("#12\uffa0399", 12399, ""),
    ("#12\u115f399", 12399, ""),
    ("#12\u1160399", 12399, ""),
]


def prose(written: str) -> str:
    # Full-width punctuation and an ideographic space around it: none of it may change.
    return f"（確認）{written}　を参照：済み。"


@pytest.mark.parametrize(("template", "ticket", "label"), DISGUISED)
def test_a_disguised_phantom_id_is_caught_and_exactly_its_characters_replaced(
    template: str, ticket: int, label: str
) -> None:
    written = template.format(id=12399)
    for answer in (prose(written), {"text": prose(written)}, {"summary": prose(written), "claims": []}):
        report = check(answer)
        assert critical(report) == [("phantom_ticket_id", ticket)]
    assert report.filtered_answer["summary"] == prose(label + MARKER)
    assert filter_text(prose(written), {12345}) == prose(label + MARKER)


@pytest.mark.parametrize(("template", "ticket", "label"), [d for d in DISGUISED if d[1] != 99])
def test_a_disguised_retrieved_id_passes_and_is_kept_as_written(template: str, ticket: int, label: str) -> None:
    written = template.format(id=12345).replace("１２３９９", "１２３４５").replace("1239\ufe0f9", "1234\ufe0f5")
    written = written.replace("399", "345")  # "⑫399", "12\u200b399", …
    report = check(prose(written))
    assert critical(report) == [] and report.cited_ids == {12345}
    assert report.filtered_answer["text"] == prose(written)


def test_a_disguised_phantom_in_a_claim_drops_the_claim() -> None:
    answer = {
        "claims": [
            {"text": "ログが添付された (﹟12399)。", "citations": [{"source_id": "12345-003"}]},
            {"text": "ログが添付された。", "citations": [{"source_id": "12345-003"}]},
        ]
    }
    report = check(answer)
    assert critical(report) == [("phantom_ticket_id", 12399)] and report.dropped_claims == {0}


def test_full_width_punctuation_and_text_without_mentions_is_left_as_it_is() -> None:
    text = "（注）　ＶＰＮの設定：ＯＫ。ﾃｽﾄ済み、#12345 と ＃１２３４５ を参照\u200b。ｶﾞ ¼ ㈱"
    assert filter_text(text, {12345}) == text
    assert [(m.ticket_id, text[m.start : m.end]) for m in mentioned_ids(text)] == [
        (12345, "#12345"),
        (12345, "＃１２３４５"),
    ]


def test_mention_offsets_are_the_original_texts() -> None:
    text = "㈱ ¼ 見て: ﾁｹｯﾄ #\u200b12\u0301399 と ｈｔｔｐｓ://r.example.com/issues/12345 。"
    mentions = mentioned_ids(text)
    assert [(m.ticket_id, text[m.start : m.end]) for m in mentions] == [
        (12399, "#\u200b12\u0301399"),
        (12345, "ｈｔｔｐｓ://r.example.com/issues/12345"),
    ]


INVISIBLE = {"Cf", "Mn", "Me"}
FILLERS = "\u115f\u1160\u3164\uffa0"


def folded_by_definition(text: str) -> tuple[str, list[int]]:
    """The view and, for each of its characters, the original character it comes from."""
    view: list[str] = []
    origins: list[int] = []
    for index, char in enumerate(text):
        if unicodedata.category(char) in INVISIBLE or char in FILLERS:
            continue
        for folded in "#" if char == "♯" else unicodedata.normalize("NFKC", char):
            if unicodedata.category(folded) not in INVISIBLE and folded not in FILLERS:
                view.append(folded)
                origins.append(index)
    return "".join(view), origins


@given(
    st.text(
        alphabet=st.sampled_from("a#1 ＃１﹟ﾁｶﾞ¼㈱⑫\u200b\u2060\ufeff\u00ad\u0301\u202e\u3099\u3000。（♯\u3164\uffa0"),
        max_size=30,
    )
)
def test_the_view_is_nfkc_per_character_without_invisible_characters_and_maps_back(text: str) -> None:
    view = fold(text)
    expected, origins = folded_by_definition(text)
    assert view.text == expected
    for index, origin in enumerate(origins):
        assert view.start(index) == origin and view.end(index + 1) == origin + 1
    assert view.start(len(view.text)) == len(text)
    assert fold(view.text).text == view.text  # folding twice changes nothing: the streaming filter keeps it folded


def test_every_character_of_the_basic_multilingual_plane_folds_as_defined() -> None:
    # fold looks for the characters to fold with a character class built from Unicode data: it misses none.
    for code in range(0x80, 0x10000):
        char = chr(code)
        assert fold(f"あ{char}").text == "あ" + folded_by_definition(char)[0], hex(code)
    assert fold("👍\U000e0041x").text == "👍x"  # beyond it: a tag character (Cf) goes, an emoji stays


@pytest.mark.parametrize("reference", ["&#35;", "&#035;", "&#x23;", "&#X23;", "&num;"])
def test_a_character_reference_to_the_number_sign_is_one_hash_in_the_view(reference: str) -> None:
    text = f"a{reference}1 ⑫{reference}"
    view = fold(text)
    assert view.text == "a#1 12#"
    n = len(reference)
    # Where each character of the view comes from: "a", the reference, "1", " ", "⑫" (twice), the reference.
    spans = [(0, 1), (1, 1 + n), (1 + n, 2 + n), (2 + n, 3 + n), (3 + n, 4 + n), (3 + n, 4 + n), (4 + n, 4 + 2 * n)]
    assert [(view.start(i), view.end(i + 1)) for i in range(len(view.text))] == spans
    assert fold(view.text).text == view.text


@pytest.mark.parametrize("text", ["&#123;", "&amp;#35;12399", "&#35 12399", "&NUM;12399", "&#3512399;", "&#x2312399;"])
def test_other_references_and_escaped_ones_stay_as_they_are(text: str) -> None:
    # "&amp;#35;" shows "&#35;", not "#"; a reference without its ";" or naming another character is none.
    assert fold(text).text == text and filter_text(text, {12345}) == text


def test_an_ascii_text_is_its_own_view() -> None:
    text = "#12345 and https://r.example.com/issues/12399"
    view = fold(text)
    assert view.text is text and view.start(7) == 7 and view.end(7) == 7


# --------------------------------------------------------------------------- 2. bidirectional controls

REORDERED = "Fixed in \u202e99321#\u202c, see log."  # a browser or terminal shows "Fixed in #12399, see log."


@pytest.mark.parametrize(
    "control", ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]
)
def test_a_bidirectional_control_is_critical_and_removed_from_the_filtered_answer(control: str) -> None:
    report = check({"text": f"#12345 で解消{control}しました。"})
    assert [(f.kind, f.severity, f.part) for f in report.findings] == [("bidi_control", "critical", "text")]
    assert f"U+{ord(control):04X}" in report.findings[0].message
    assert "another order" in report.findings[0].message
    assert report.filtered_answer["text"] == "#12345 で解消しました。"
    assert report.to_json()["ok"] is False


def test_a_reordered_phantom_id_is_reported_and_shown_in_the_order_it_was_checked() -> None:
    for on_invalid in ("drop", "flag"):
        report = check({"text": REORDERED}, on_invalid)
        assert critical(report) == [("bidi_control", None)] and report.grounding_score < 1.0
        assert report.filtered_answer["text"] == "Fixed in 99321#, see log."


def test_bidirectional_controls_anywhere_in_the_answer_are_found_and_removed() -> None:
    answer = {
        "claims": [{"text": f"a {REORDERED}", "citations": [{"source_id": "12345-003", "quoted_span": "ロ\u2067グ"}]}],
        "summary": "要約\u202b",
        "note": "x\u202d",
        "results": [{"issue_id": 12345, "reason": "r\u2066"}],
    }
    report = check(answer, "flag")
    assert [(f.kind, f.claim, f.citation, f.result, f.part) for f in report.findings if f.kind == "bidi_control"] == [
        ("bidi_control", 0, None, None, "claim"),
        ("bidi_control", 0, 0, None, "claim"),
        ("bidi_control", None, None, None, "summary"),
        ("bidi_control", None, None, None, "$.note"),
        ("bidi_control", None, None, 0, "result"),
    ]
    filtered = json.dumps(report.filtered_answer, ensure_ascii=False)
    assert not any(c in filtered for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert report.filtered_answer["claims"][0]["citations"][0]["quoted_span"] == "ログ"


def test_the_html_report_shows_no_bidirectional_control(tmp_path: Path) -> None:
    chunk = {"id": "c1", "text": "> チケット #12345: VPN\u202e\n\nログ\u2066を添付", "ticket_id": 12345}
    retrieval = tmp_path / "retrieval.json"
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"text": REORDERED}), encoding="utf-8")
    page = tmp_path / "report.html"

    code, out, err = run("verify", "-r", retrieval, "-a", answer, "--html", page)

    assert code == 0 and "critical bidi_control (text)" in err
    html = page.read_text(encoding="utf-8")
    assert "Fixed in 99321#, see log." in html and "shown reordered" in html
    assert not any(c in html + out for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert not any(c in render_report(check({"text": REORDERED})) for c in "\u202e\u202c")
