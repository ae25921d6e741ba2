"""What `verify` must not be talked into by its inputs: ids vouched for by escapes in a context, ids too
long to be looked at, escape sequences written to the operator's terminal; and the sentence an inline
marker cites, found in one pass however many markers there are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from anchorkit.anchors import anchor_line
from anchorkit.cli import app
from anchorkit.verify.ids import MARKER

runner = CliRunner()
TICKET = 12345
CHUNK_TEXT = (
    f"## 対応\n\n{anchor_line(TICKET, 'VPN接続が不安定になる')}\n\nファームウェア更新で VPN 切断は解消しました。\n"
)


def verify(tmp_path: Path, answer: str, *extra: str, json_output: bool = True) -> Any:
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")
    answer_file = tmp_path / "answer.txt"
    answer_file.write_text(answer, encoding="utf-8")
    result = runner.invoke(
        app, ["verify", "-r", str(retrieval), "-a", str(answer_file), *extra, *(["--json"] if json_output else [])]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if json_output else result.stdout


def phantoms(report: dict[str, Any]) -> set[int]:
    return {f["ticket_id"] for f in report["findings"] if f["kind"] == "phantom_ticket_id"}


# --------------------------------------------------------------------------------------------------
# Item 4: a context file is the text it is


def test_escapes_in_a_context_file_vouch_for_no_ticket(tmp_path: Path) -> None:
    context = tmp_path / "context.txt"
    # A backslash and an "n", a backslash and "u0023": text, not a line break and a "#".
    context.write_text(
        "前回の結果: foo\\n> チケット #99991: 管理者パスワード\n> チケット \\u002399990: 人事情報\n", encoding="utf-8"
    )

    report = verify(tmp_path, f"#{TICKET} のとおりです。チケット #99991 と #99990 も参照。", "--context", str(context))

    assert phantoms(report) == {99991, 99990}
    assert report["valid_ids"] == [TICKET]


# --------------------------------------------------------------------------------------------------
# Item 10: every id form is checked, whatever its length

LONG_FORMS = [
    "#1234567890123",
    "チケット 12345678901234",
    "Redmine #12,345,678,901,234",
    "https://redmine.example.com/issues/1234567890123#note-2",
    "#" + "9" * 5000,
]


def test_ids_of_any_length_are_checked_and_filtered(tmp_path: Path) -> None:
    answer = f"チケット #{TICKET} で解決。" + " ".join(LONG_FORMS) + " も同様です。"

    report = verify(tmp_path, answer)

    assert phantoms(report) == {1234567890123, 12345678901234, int("9" * 4000)}
    filtered = report["filtered_answer"]["text"]
    assert f"#{TICKET}" in filtered and not re.search(r"\d{13}|\d{1,3}(?:,\d{3}){4}", filtered)


def test_a_long_issue_id_in_a_result_is_checked(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps([{"issue_id": TICKET}, {"issue_id": "1234567890123"}]), encoding="utf-8")
    retrieval = tmp_path / "retrieval.json"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    retrieval.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")
    result = runner.invoke(app, ["verify", "-r", str(retrieval), "-a", str(results), "--json"])

    report = json.loads(result.stdout)
    assert phantoms(report) == {1234567890123}
    assert report["filtered_answer"]["results"] == [{"issue_id": TICKET}]


# --------------------------------------------------------------------------------------------------
# Item 12: no escape sequence of an answer reaches the terminal

ESCAPES = {
    "OSC window title": "\x1b]0;you have been pwned\x07",
    "OSC 8 hyperlink": "\x1b]8;;https://evil.example/\x1b\\クリック\x1b]8;;\x1b\\",
    "clear screen": "\x1b[2J\x1b[H",
    "colour": "\x1b[31;1m",
    "C1 CSI": "\x9b31m",
    "carriage return over the line": "\r",
    "right-to-left override": "\u202e",
}


def test_escape_sequences_in_an_answer_never_reach_the_terminal(tmp_path: Path) -> None:
    answer = f"チケット #{TICKET} の件{''.join(ESCAPES.values())}は解決しました[1]。\tタブは残る"

    shown = verify(tmp_path, answer, json_output=False)

    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", shown)
    assert f"チケット #{TICKET} の件クリックは解決しました[1]。\tタブは残る" in shown


def test_eval_prints_case_ids_without_their_escape_sequences(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    chunk = {"id": "c1", "text": CHUNK_TEXT, "uri": f"s3://kb/tickets/{TICKET}.md"}
    case = {"id": "case\x1b]0;pwned\x07-1", "query": "VPN", "retrieved": [chunk], "answer": f"#{TICKET} です。"}
    cases.write_text(json.dumps(case, ensure_ascii=False) + "\n", encoding="utf-8")

    result = runner.invoke(app, ["eval", str(cases)])

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "case-1: grounding" in result.stdout


def test_printable_keeps_text_tabs_and_line_breaks() -> None:
    from anchorkit.untrusted import printable  # (here: the rest of this file runs on any version)

    assert printable("対応\t済み\n次の行\x1b[0m") == "対応\t済み\n次の行"


# --------------------------------------------------------------------------------------------------
# Item 6: the sentence a marker cites, in one pass


def sentence_before(text: str, position: int) -> str:
    """The definition: the text before the marker, markers removed, trailing whitespace and one sentence
    end dropped, from the last sentence end on (what verify did for each marker, reading the whole
    text before it every time)."""
    before = MARKER.sub("", text[:position]).rstrip()
    before = before[:-1] if before[-1:] and re.match(r"[。．.!?！？\n]", before[-1]) else before
    ends = list(re.finditer(r"[。．.!?！？\n]", before))
    return before[ends[-1].end() :] if ends else before


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["解消しました", "VPN", " ", "  ", "\n", "。", ".", "!", "？", "[1]", "[2, 3]", "【4】", "a[1]"]
        ),
        max_size=40,
    )
)
def test_each_marker_cites_the_sentence_it_ends(pieces: list[str]) -> None:
    from anchorkit.verify.citations import CitedSentences  # (here: the rest of this file runs on any version)

    text = "".join(pieces)
    sentences = CitedSentences(text)
    for match in MARKER.finditer(text):
        assert sentences.before(match.start()) == sentence_before(text, match.start())
