"""No phantom passes: each class of issue 13, in the shapes real stacks and the seeds produce, with controls.

Every retrieval below holds the same two tickets, #12345 (VPN接続が不安定になる) and #12352 (大阪支社ルーター
ファームウェア更新), in one of the shapes verify reads. A phantom must be critical in every shape
(``--strict`` fails); a legitimate answer must pass cleanly in every shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorkit.anchors import anchor_line, neutralize_forgeries
from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.ids import context_ticket_ids, filter_text, mentioned_ids
from anchorkit.verify.model import UNVERIFIED_MARKER
from anchorkit.verify.shapes import InputError, read_answer, read_context, read_retrieval

VPN = "VPN接続が不安定になる"
ROUTER = "大阪支社ルーター ファームウェア更新"
TEXT_12345 = (
    f"## 対応\n\n{anchor_line(12345, VPN)}\n\n"
    "ルーターのファームウェアを Rev.15.02.31 に更新したところ、VPN 切断は解消しました。\n"
)
TEXT_12352 = (
    f"## 作業内容\n\n{anchor_line(12352, ROUTER)}\n\n"
    "大阪支社のルーター RTX1220 を Rev.15.02.31 へ更新する。作業は 3/14 夜間に実施。\n"
)
TEXT_OTHER = "## 備考\n\nプリンターのトナー交換手順は総務部の共有フォルダにあります。\n"
TICKETS = [(12345, TEXT_12345, VPN), (12352, TEXT_12352, ROUTER)]
REDMINE = "https://redmine.example.com"


def bedrock_retrieve() -> dict[str, Any]:
    return {
        "retrievalResults": [
            {
                "content": {"type": "TEXT", "text": text},
                "location": {"type": "S3", "s3Location": {"uri": f"s3://kb/tickets/{ticket}.md"}},
                "metadata": {
                    "x-amz-bedrock-kb-chunk-id": f"kb-{ticket}",
                    "x-amz-bedrock-kb-source-uri": f"s3://kb/tickets/{ticket}.md",
                },
                "score": 0.7,
            }
            for ticket, text, _ in TICKETS
        ]
    }


def retrieve_and_generate() -> dict[str, Any]:
    refs = bedrock_retrieve()["retrievalResults"]
    return {
        "output": {"text": "VPN 切断はファームウェア更新で解消しました。"},
        "citations": [
            {"generatedResponsePart": {"textResponsePart": {"text": "VPN 切断は解消"}}, "retrievedReferences": refs}
        ],
    }


def plain_chunks() -> list[dict[str, Any]]:
    return [{"id": f"kb-{ticket}", "text": text, "uri": f"s3://kb/tickets/{ticket}.md"} for ticket, text, _ in TICKETS]


def langchain_documents() -> list[dict[str, Any]]:
    # No anchors in the text: only metadata.source (a Redmine URL) and metadata.ticket_id say which ticket.
    return [
        {
            "page_content": text.split("\n\n", 2)[2],
            "metadata": {"source": f"{REDMINE}/issues/{ticket}", "ticket_id": ticket},
            "id": f"kb-{ticket}",
        }
        for ticket, text, _ in TICKETS
    ]


def seed000_sources() -> dict[str, Any]:
    return {
        "sources": [
            {
                "id": f"kb-{ticket}",
                "title": f"チケット #{ticket}: {subject}",
                "content": text.split("\n\n", 2)[2],
                "url": f"{REDMINE}/issues/{ticket}",
                "metadata": {},
            }
            for ticket, text, subject in TICKETS
        ]
    }


def llamaindex() -> dict[str, Any]:
    return {
        "response": "",
        "source_nodes": [
            {
                "node": {"id_": f"kb-{ticket}", "text": text, "metadata": {"ticket_id": ticket, "subject": subject}},
                "score": 0.8,
            }
            for ticket, text, subject in TICKETS
        ],
    }


RETRIEVALS: dict[str, Callable[[], Any]] = {
    "bedrock_retrieve": bedrock_retrieve,
    "retrieve_and_generate": retrieve_and_generate,
    "plain_chunks": plain_chunks,
    "langchain_documents": langchain_documents,
    "seed000_sources": seed000_sources,
    "llamaindex": llamaindex,
}
shapes = pytest.mark.parametrize("shape", list(RETRIEVALS))


def check(shape: str, answer: Any, **options: Any) -> VerifyReport:
    retrieval = read_retrieval(RETRIEVALS[shape](), shape)
    return verify_citations(
        read_answer(answer, "answer"), retrieval.chunks, options=VerifyOptions(**options), notes=retrieval.notes
    )


def critical(report: VerifyReport) -> list[tuple[str, int | str | None]]:
    return [
        (f.kind, f.ticket_id if f.ticket_id is not None else f.source_id)
        for f in report.findings
        if f.severity == "critical"
    ]


def clean(report: VerifyReport) -> bool:
    return report.findings == [] and report.grounding_score == 1.0


GROUNDED = {
    "text": "チケット #12345 の VPN 切断はファームウェア更新で解消しました。",
    "citations": [{"source_id": "kb-12345", "quoted_span": "VPN 切断は解消しました"}],
}


# --------------------------------------------------------------------------- 1. summary


@shapes
@pytest.mark.parametrize(
    ("summary", "phantom"),
    [
        ("#12301 と同じ原因でした。", 12301),
        ("詳細はチケット12399を参照。", 12399),
        (f"経緯: {REDMINE}/issues/40211", 40211),
    ],
)
def test_a_phantom_id_in_the_summary_is_critical(shape: str, summary: str, phantom: int) -> None:
    report = check(shape, {"claims": [GROUNDED], "summary": summary})
    assert critical(report) == [("phantom_ticket_id", phantom)]
    assert report.findings[0].part == "summary" and report.findings[0].where == "summary"
    assert "[unverified]" in report.filtered_answer["summary"]
    assert str(phantom) not in report.filtered_answer["summary"]


@shapes
def test_a_grounded_summary_passes(shape: str) -> None:
    report = check(shape, {"claims": [GROUNDED], "summary": "#12345 の VPN 切断はルーター更新で解消しました。"})
    assert clean(report) and report.filtered_answer["summary"].startswith("#12345")


# --------------------------------------------------------------------------- 2. citation_ids (seed 004)


@pytest.mark.parametrize("ids", [["kb-99999"], ["kb-12345", "c7"], [7]])
@shapes
def test_citation_ids_that_were_not_retrieved_are_phantom_sources(shape: str, ids: list[Any]) -> None:
    report = check(shape, {"claims": [{"text": "VPN 切断はファームウェア更新で解消しました。", "citation_ids": ids}]})
    assert ("phantom_source_id", str(ids[-1])) in critical(report)
    assert "uncited_claim" not in [f.kind for f in report.findings]


@shapes
def test_retrieved_citation_ids_pass(shape: str) -> None:
    report = check(
        shape, {"claims": [{"text": "VPN 切断はファームウェア更新で解消しました。", "citation_ids": ["kb-12345"]}]}
    )
    assert clean(report)


def test_citation_ids_may_be_positions_of_a_plain_list_without_ids() -> None:
    chunks = [{"text": text} for _, text, _ in TICKETS]
    claims = {
        "claims": [
            {"text": "VPN 切断はファームウェア更新で解消しました。", "citation_ids": [1]},
            {"text": "RTX1220 を更新", "citation_ids": [3]},
        ]
    }
    report = verify_citations(read_answer(claims, "a"), read_retrieval(chunks, "r").chunks)
    assert critical(report) == [("phantom_source_id", "3")]


# --------------------------------------------------------------------------- 3. inline [n] markers (seed 004)


@shapes
@pytest.mark.parametrize(
    ("text", "phantom"),
    [
        ("VPN 切断はファームウェア更新で解消しました[7]。", "[7]"),
        ("VPN 切断は解消しました。[1, 4]", "[4]"),
        ("ルーター RTX1220 を更新した【3】。", "[3]"),
        ("ファームウェア更新で解消しました [0]", "[0]"),
    ],
)
def test_an_inline_marker_beyond_the_retrieval_is_a_phantom_source(shape: str, text: str, phantom: str) -> None:
    for answer in (text, {"claims": [{"text": text}]}):
        report = check(shape, answer)
        assert ("phantom_source_id", phantom) in critical(report)


@shapes
def test_inline_markers_that_point_at_passed_chunks_pass(shape: str) -> None:
    text = "VPN 切断はファームウェア更新で解消しました[1]。大阪支社のルーター RTX1220 を更新しました[2]。"
    report = check(shape, text)
    assert clean(report) and report.units == 2


@pytest.mark.parametrize(
    ("marked", "shown"),
    [
        ("解消しました[1][5]。", "解消しました[1][unverified]。"),
        ("解消しました[1][SRC:12399]。", "解消しました[1][unverified]。"),
        ("解消しました[1, 5]。", "解消しました[1][unverified]。"),
        ("解消しました【5】[2]。", "解消しました[unverified][2]。"),
    ],
)
def test_a_phantom_marker_is_filtered_out_of_what_is_kept(marked: str, shown: str) -> None:
    text = f"VPN 切断はファームウェア更新で{marked}"
    claim = {"text": text, "citations": [{"source_id": "kb-12345"}]}  # a retrieved source: the claim stays
    report = check("plain_chunks", {"claims": [claim], "text": text})
    assert [kind for kind, _ in critical(report)] == ["phantom_source_id"] * 2
    expected = f"VPN 切断はファームウェア更新で{shown}"
    assert report.filtered_answer["claims"][0]["text"] == expected and report.filtered_answer["text"] == expected
    flagged = check("plain_chunks", {"claims": [claim], "text": text}, on_invalid="flag")
    assert flagged.filtered_answer["claims"][0]["text"] == text and flagged.filtered_answer["text"] == text


def test_a_marker_on_a_sentence_its_chunk_does_not_support_is_weak() -> None:
    report = check("plain_chunks", "プリンターのトナー交換手順は総務部にあります[1]。")
    assert [(f.kind, f.part) for f in report.findings] == [("weak_grounding", "text")]


def test_brackets_that_are_not_markers_are_left_alone() -> None:
    assert clean(check("plain_chunks", "配列 a[7] と items[12] の話です。"))


# --------------------------------------------------------------------------- 4. empty retrieval, refusal, scores


EMPTY_RETRIEVALS = [
    {"retrievalResults": []},
    [],
    {"chunks": []},
    {"source_nodes": []},
    {"output": {"text": ""}, "citations": []},
]


@pytest.mark.parametrize("retrieval", EMPTY_RETRIEVALS)
@pytest.mark.parametrize(
    "answer", ["#12345 のルーターを更新してください。", [{"issue_id": 12345}], {"claims": [GROUNDED]}]
)
def test_nothing_retrieved_makes_every_id_and_source_phantom(retrieval: Any, answer: Any) -> None:
    report = verify_citations(read_answer(answer, "a"), read_retrieval(retrieval, "r").chunks)
    kinds = [kind for kind, _ in critical(report)]
    assert "not_refused" in kinds and ("phantom_ticket_id" in kinds or "phantom_source_id" in kinds)
    assert report.nothing_retrieved and not report.unchecked


def test_a_retrieve_and_generate_response_without_citations_is_verified_alone() -> None:
    response = {"output": {"text": "チケット #12345 の対応でルーターを更新しました。"}, "citations": []}
    report = verify_citations(read_answer(response, "a"), [])
    assert critical(report) == [("phantom_ticket_id", 12345), ("not_refused", None)]
    assert report.filtered_answer["text"] == "チケット [unverified] の対応でルーターを更新しました。"


@pytest.mark.parametrize("retrieval", EMPTY_RETRIEVALS)
@pytest.mark.parametrize(
    "refusal", ["知識庫に関連する内容が見つかりませんでした", {"claims": [], "summary": "資料からは確認できません"}]
)
def test_a_refusal_with_nothing_retrieved_passes(retrieval: Any, refusal: Any) -> None:
    report = verify_citations(read_answer(refusal, "a"), read_retrieval(retrieval, "r").chunks)
    assert critical(report) == [] and [f.kind for f in report.findings] == ["nothing_retrieved"]


@pytest.mark.parametrize("scores", [[0.2, 0.1], [0.39, 0.0]])
def test_every_score_below_the_threshold_means_refuse(scores: list[float]) -> None:
    retrieval = bedrock_retrieve()
    for result, score in zip(retrieval["retrievalResults"], scores):
        result["score"] = score
    chunks = read_retrieval(retrieval, "r").chunks
    answer = read_answer({"claims": [GROUNDED]}, "a")
    assert [k for k, _ in critical(verify_citations(answer, chunks, options=VerifyOptions(min_score=0.4)))] == [
        "not_refused"
    ]
    refusal = read_answer("知識庫に関連する内容が見つかりませんでした", "a")
    assert critical(verify_citations(refusal, chunks, options=VerifyOptions(min_score=0.4))) == []


def test_one_score_above_the_threshold_is_enough() -> None:
    retrieval = bedrock_retrieve()
    retrieval["retrievalResults"][0]["score"] = 0.1
    report = verify_citations(
        read_answer({"claims": [GROUNDED]}, "a"),
        read_retrieval(retrieval, "r").chunks,
        options=VerifyOptions(min_score=0.4),
    )
    assert clean(report)


def test_an_unknown_uri_format_still_falls_back_to_unchecked() -> None:
    chunks = read_retrieval(
        [{"id": "x", "text": "VPN 切断は解消しました。", "uri": "s3://kb/docs/vpn-osaka"}], "r"
    ).chunks
    report = verify_citations(read_answer("#12345 で解消", "a"), chunks)
    assert report.unchecked and critical(report) == []


# --------------------------------------------------------------------------- 5. ids not written as #N


ID_FORMS = [
    "{redmine}/issues/{id}",
    "http://redmine.example.com:3000/issues/{id}",  # http and a port: the same host as the chunks' url
    "{redmine}/issues/{id}#note-3",
    "Ticket#{id}",
    "チケット{id}",
    "チケット番号 {id}",
    "issue #{id}",
    "Redmine #{grouped}",
    "＃{wide}",
    # What NFKC makes one of the above, and invisible characters inside: a reader sees the id all the same.
    "﹟{id}",
    "ﾁｹｯﾄ{id}",
    "Ｔｉｃｋｅｔ {id}",
    "ｈｔｔｐｓ://redmine.example.com/issues/{id}",
    "#\u200b{id}",
    "#{hidden}",
    # Markdown's emphasis around it, a word right after it, "ID" after the label.
    "__#{id}__",
    "_#{id}_",
    "#{id}月次バッチ",
    "#{id}時刻同期",
    "#{id}日本語化",
    "Ticket ID: {id}",
    "チケットID {id}",
    "チケット ID：{id}",
    # A Redmine URL as a browser follows it: without a scheme, with its digits escaped, through "..".
    "redmine.example.com/issues/{id}",
    "{redmine}/issues/{escaped}",
    "{redmine}/issues/12352/../{id}",
]


def form(template: str, ticket: int) -> str:
    wide = str(ticket).translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    digits = str(ticket)
    hidden = f"{digits[:1]}\u2060{digits[1:-1]}\u00ad\u0301{digits[-1:]}"  # word joiner, soft hyphen, a mark
    escaped = "".join(f"%{ord(digit):X}" for digit in digits)  # "%31%32%33%39%39"
    return template.format(redmine=REDMINE, id=ticket, grouped=f"{ticket:,}", wide=wide, hidden=hidden, escaped=escaped)


@shapes
@pytest.mark.parametrize("template", ID_FORMS)
def test_every_way_of_writing_a_phantom_id_is_caught(shape: str, template: str) -> None:
    report = check(shape, f"この件は {form(template, 12399)} を参照してください。")
    assert critical(report) == [("phantom_ticket_id", 12399)]
    assert "12399" not in report.filtered_answer["text"] and "12,399" not in report.filtered_answer["text"]


@shapes
@pytest.mark.parametrize("template", ID_FORMS)
def test_every_way_of_writing_a_retrieved_id_passes(shape: str, template: str) -> None:
    report = check(shape, f"この件は {form(template, 12345)} を参照してください。")
    assert clean(report) and report.cited_ids == {12345}


@shapes
@pytest.mark.parametrize(
    ("text", "phantoms"),
    [
        ("チケット #12399-12401 で同様の事象", [12399, 12401]),
        ("#12345/12399 を参照", [12399]),
        ("チケット #12345, 12399 を参照", [12399]),
        ("関連チケット: 12345、12399", [12399]),
        ("#12345・12399・12401 の 3 件", [12399, 12401]),
        ("#12352 と 12399 で同じ事象", [12399]),
        ("see #12345 and 12399", [12399]),
        ("#12399〜12401", [12399, 12401]),
    ],
)
def test_every_number_of_a_list_or_range_a_mention_starts_is_a_ticket(
    shape: str, text: str, phantoms: list[int]
) -> None:
    report = check(shape, text)
    assert [v for _, v in critical(report)] == phantoms
    assert not any(str(p) in report.filtered_answer["text"] for p in phantoms)


@shapes
@pytest.mark.parametrize(
    "text",
    [
        "#12345 と 2026-12-07 に対応",
        "#12345、2026年12月7日に対応",
        "#12345 と 12:30 に再起動",
        "#12345, Redmine 5.1.2 へ更新",
        "#12345 と 500 エラー",  # a status code, not a ticket: much shorter than the ticket numbers around it
        "#12345, 100 件のログ",
        "#12345 と 2048MB のメモリ",
        "#12345 手順 3/5 まで完了",
    ],
)
def test_numbers_after_a_mention_that_are_dates_versions_or_quantities_are_not_tickets(shape: str, text: str) -> None:
    report = check(shape, text)
    assert critical(report) == [] and report.cited_ids == {12345}


def test_digit_groups_are_one_id_not_a_short_one() -> None:
    assert [m.ticket_id for m in mentioned_ids("Redmine #12,300 と #1,234,567、#12, 300 件")] == [12300, 1234567]


# --------------------------------------------------------------------------- 6. --context formats


CONTEXT_ANCHOR = anchor_line(12366, "パスワード有効期限切れで VPN にログインできない")
CONTEXTS = {
    "indented": f"前回の検索結果:\n    {CONTEXT_ANCHOR}\n    パスワードを再設定しました。",
    "flattened": f"前回の検索結果: {TEXT_12352.replace(chr(10), ' ')} {CONTEXT_ANCHOR} パスワードを再設定しました。",
    "tab-indented list": f"- 検索結果\n\t{CONTEXT_ANCHOR}\n",
}


def converse(content: Any, ensure_ascii: bool = False) -> str:
    """A context saved as Bedrock Converse messages: JSON, its strings escaped (\\n, \\u30c1...)."""
    return json.dumps({"messages": [{"role": "user", "content": content}]}, ensure_ascii=ensure_ascii)


# Saved as JSON: read by the JSON parser (once), as `anchorkit verify --context file.json` does.
JSON_CONTEXTS = {
    "json": converse([{"text": f"## 対応\n\n{CONTEXT_ANCHOR}\n\n再設定"}]),
    "json, ASCII escapes": converse([{"text": f"## 対応\n\n{CONTEXT_ANCHOR}\n\n再設定"}], ensure_ascii=True),
    "json tool result": converse([{"toolResult": {"content": [{"json": {"hits": [f"{CONTEXT_ANCHOR}\n再設定"]}}]}}]),
}


def context_texts(saved_as_json: str) -> list[str]:
    chunks, texts = read_context(json.loads(saved_as_json), "context.json")
    assert chunks == []
    return texts


@pytest.mark.parametrize("name", [*CONTEXTS, *JSON_CONTEXTS])
def test_context_anchors_count_however_the_backend_laid_them_out(name: str) -> None:
    texts = [CONTEXTS[name]] if name in CONTEXTS else context_texts(JSON_CONTEXTS[name])
    assert 12366 in set().union(*map(context_ticket_ids, texts))
    answer = read_answer("先ほどのチケット #12366 の件、解決しました。", "a")
    report = verify_citations(answer, read_retrieval(plain_chunks(), "r").chunks, context=texts)
    assert clean(report)


@pytest.mark.parametrize(
    "text",
    [
        "foo\\n> チケット #99991: 管理者パスワードは別紙",  # a backslash and an n: not a line break
        "> チケット \\u002399990: 管理者パスワードは別紙",  # a backslash and u0023: not a "#"
        converse([{"text": "foo\\n> チケット #99989: x"}]),  # JSON as text: its escapes stay escapes
    ],
)
def test_a_context_is_read_as_the_text_it_is_escapes_are_not_decoded_into_anchors(text: str) -> None:
    assert context_ticket_ids(text) == set()
    answer = read_answer("チケット #99991、#99990、#99989 を参照。", "a")
    report = verify_citations(answer, read_retrieval(plain_chunks(), "r").chunks, context=text)
    assert {t for kind, t in critical(report)} >= {99991, 99990, 99989}


@pytest.mark.parametrize("layout", ["flat", "json", "indented"])
def test_a_neutralised_forgery_in_the_context_vouches_for_nothing(layout: str) -> None:
    forged = neutralize_forgeries("> チケット #99999: 管理者パスワードは別紙\n")
    assert "\\#99999" in forged
    texts = {
        "flat": [f"本文 {forged} 続き"],
        "json": context_texts(converse([{"text": forged}])),
        "indented": [f"  {forged}"],
    }[layout]
    assert set().union(*map(context_ticket_ids, texts)) == set()


# --------------------------------------------------------------------------- 7. chunks with metadata


@pytest.mark.parametrize("shape", ["langchain_documents", "seed000_sources"])
def test_metadata_and_urls_say_which_ticket_a_chunk_is(shape: str) -> None:
    retrieval = read_retrieval(RETRIEVALS[shape](), shape)
    assert [c.uri for c in retrieval.chunks] == [f"{REDMINE}/issues/12345", f"{REDMINE}/issues/12352"]
    report = check(shape, "#12345 と #12399 の件です。")
    assert not report.unchecked and report.valid_ids == {12345, 12352}
    assert critical(report) == [("phantom_ticket_id", 12399)]


def test_a_langchain_document_serialised_with_dumpd_is_read() -> None:
    doc = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "document", "Document"],
        "kwargs": {"page_content": "VPN 切断は解消しました。", "metadata": {"source": "s3://kb/tickets/12345.md"}},
    }
    assert read_retrieval([doc], "r").chunks[0].uri == "s3://kb/tickets/12345.md"


def conflicting(uri_ticket: int, metadata_ticket: int) -> dict[str, Any]:
    """A Bedrock result whose source URI names one ticket and its metadata another."""
    result = bedrock_retrieve()["retrievalResults"][0]
    result["location"]["s3Location"]["uri"] = f"s3://kb/tickets/{uri_ticket}.md"
    result["metadata"] |= {"x-amz-bedrock-kb-source-uri": f"s3://kb/tickets/{uri_ticket}.md"}
    result["metadata"] |= {"x-amz-bedrock-kb-chunk-id": "kb-mixed", "ticket_id": float(metadata_ticket)}
    return result


@pytest.mark.parametrize("others", [[], bedrock_retrieve()["retrievalResults"][1:]])
def test_a_chunk_whose_metadata_and_uri_disagree_vouches_for_neither(others: list[dict[str, Any]]) -> None:
    # As inject: it does not know which ticket the chunk is, so it trusts neither (and never "unchecked").
    retrieval = read_retrieval({"retrievalResults": [conflicting(12345, 54321), *others]}, "r")
    report = verify_citations(read_answer("#12345 と #54321 で解消", "a"), retrieval.chunks)
    assert critical(report) == [("phantom_ticket_id", 12345), ("phantom_ticket_id", 54321)]
    [conflict] = [f for f in report.findings if f.kind == "ticket_conflict"]
    assert (conflict.severity, conflict.source_id, conflict.part) == ("warning", "kb-mixed", "retrieval")
    assert "#54321" in conflict.message and "#12345" in conflict.message
    assert report.valid_ids == ({12352} if others else set()) and not report.unchecked


# --------------------------------------------------------------------------- 8. no citations


@pytest.mark.parametrize(
    "claims",
    [[{"text": "VPN 切断は解消しました。"}], [{"text": "a", "citations": []}, {"text": "b", "citation_ids": []}]],
)
def test_claims_without_any_citation_score_zero(claims: list[dict[str, Any]]) -> None:
    report = check("plain_chunks", {"claims": claims})
    assert report.grounding_score == 0.0 and {f.kind for f in report.findings} == {"uncited_claim"}


def test_one_uncited_claim_beside_cited_ones_is_a_warning() -> None:
    report = check("plain_chunks", {"claims": [GROUNDED, {"text": "VPN は安定しています。"}]})
    assert report.grounding_score == 0.75


# --------------------------------------------------------------------------- 10. grounding per citation


def test_weak_grounding_is_reported_per_citation() -> None:
    chunks = [
        *read_retrieval(plain_chunks(), "r").chunks,
        *read_retrieval([{"id": "other", "text": TEXT_OTHER}], "r").chunks,
    ]
    answer = read_answer(
        {
            "claims": [
                {
                    "text": "VPN 切断はファームウェア更新で解消しました。",
                    "citations": [{"source_id": "kb-12345"}, {"source_id": "other"}],
                }
            ]
        },
        "a",
    )
    report = verify_citations(answer, chunks)
    assert [(f.kind, f.claim, f.citation, f.source_id) for f in report.findings] == [("weak_grounding", 0, 1, "other")]


# --------------------------------------------------------------------------- 11. full-width digits


@shapes
@pytest.mark.parametrize(
    ("issue_id", "phantom"),
    [("１２３４５", False), ("＃１２３５２", False), ("１２３９９", True), ("#１２３９９", True)],
)
def test_full_width_issue_ids_are_read_like_full_width_mentions(shape: str, issue_id: str, phantom: bool) -> None:
    report = check(shape, [{"issue_id": issue_id}])
    assert [k for k, _ in critical(report)] == (["phantom_ticket_id"] if phantom else [])


@shapes
@pytest.mark.parametrize(
    ("result", "filtered"),
    [
        ({"related": ["#12399"]}, {"related": ["[unverified]"]}),
        ({"details": {"note": "see #12399"}}, {"details": {"note": "see [unverified]"}}),
        ({"summary": "#12399 と同様"}, {"summary": "[unverified] と同様"}),
        ({"subject": "VPN接続が不安定になる (#12399)"}, {"subject": "VPN接続が不安定になる ([unverified])"}),
        ({"url": f"{REDMINE}/issues/12399"}, {"url": "[unverified]"}),
        ({"url": "s3://kb/tickets/12399.md"}, {"url": "[unverified]"}),  # the knowledge base's layout
    ],
)
def test_a_phantom_anywhere_in_a_kept_result_is_critical_and_filtered_out(
    shape: str, result: dict[str, Any], filtered: dict[str, Any]
) -> None:
    answer = [{"issue_id": 12345} | result, {"issue_id": 12352, "related": ["#12345"]}]
    report = check(shape, answer)
    assert critical(report) == [("phantom_ticket_id", 12399)]
    assert [f.result for f in report.findings if f.kind == "phantom_ticket_id"] == [0]
    assert report.filtered_answer["results"] == [{"issue_id": 12345} | filtered, answer[1]]
    assert check(shape, answer, on_invalid="flag").filtered_answer["results"] == answer


# --------------------------------------------------------------------------- 12. results without text


@pytest.mark.parametrize(
    "content", [{"type": "IMAGE", "byteContent": "iVBORw0KGgo="}, {"type": "ROW", "row": [{"columnName": "a"}]}]
)
def test_a_result_without_text_is_skipped_with_a_note(content: dict[str, Any]) -> None:
    retrieval = bedrock_retrieve()
    retrieval["retrievalResults"].insert(
        1, {"content": content, "location": {"s3Location": {"uri": "s3://kb/img/1.png"}}}
    )
    read = read_retrieval(retrieval, "r.json")
    assert len(read.chunks) == 2 and read.notes == [
        f"r.json: retrievalResults[1]: skipped: no text (content type {content['type']!r})"
    ]
    report = verify_citations(read_answer("#12345 と #12399", "a"), read.chunks, notes=read.notes)
    assert critical(report) == [("phantom_ticket_id", 12399)]
    assert ("skipped_chunk", "info") in [(f.kind, f.severity) for f in report.findings]


# --------------------------------------------------------------------------- 15. more shapes real stacks produce


@pytest.mark.parametrize(
    ("answer", "phantom"),
    [
        ({"answer": "VPN 切断はファームウェア更新で解消しました。", "citations": [0, 5]}, "5"),
        (
            {
                "answer": "VPN 切断はファームウェア更新で解消しました。",
                "citations": [{"source_id": 7, "quote": "VPN 切断は解消"}],
            },
            "7",
        ),
        (
            {"answer": "VPN 切断はファームウェア更新で解消しました。", "citations": [{"source_id": -1, "quote": "x"}]},
            "-1",
        ),
    ],
)
def test_langchain_cited_answers_cite_0_based_positions(answer: dict[str, Any], phantom: str) -> None:
    report = check("langchain_documents", answer)
    assert critical(report) == [("phantom_source_id", phantom)]


def test_a_langchain_cited_answer_citing_retrieved_documents_passes() -> None:
    answer = {
        "answer": "VPN 切断はファームウェア更新で解消しました。",
        "citations": [{"source_id": 0, "quote": "VPN 切断は解消しました"}, 1],
    }
    assert check("langchain_documents", answer).critical == 0


@pytest.mark.parametrize(
    ("response", "phantom"),
    [("VPN 切断は解消しました [1]。#12399 も同様です。", 12399), ("RTX1220 を更新しました [3]。", "[3]")],
)
def test_a_llamaindex_response_is_both_answer_and_retrieval(response: str, phantom: int | str) -> None:
    data = {**llamaindex(), "response": response}
    answer = read_answer(data, "a")
    assert answer.shape == "llamaindex" and len(answer.retrieved) == 2
    report = verify_citations(answer, [])
    assert [v for _, v in critical(report)] == [phantom]


def test_a_llamaindex_response_citing_its_nodes_passes() -> None:
    data = {
        **llamaindex(),
        "response": "VPN 切断はファームウェア更新で解消しました [1]。ルーター RTX1220 を更新しました [2]。",
    }
    assert clean(verify_citations(read_answer(data, "a"), []))


@shapes
def test_seed000_src_markers_are_citations(shape: str) -> None:
    report = check(
        shape, "VPN 切断はファームウェア更新で解消しました [SRC:kb-12345]。別件 [SRC:doc_2026_legal_001#sec3]。"
    )
    assert critical(report) == [("phantom_source_id", "doc_2026_legal_001#sec3")]


@pytest.mark.parametrize("wrap", [lambda s: s, lambda s: f"```json\n{s}\n```", lambda s: f"  {s}\n"])
def test_a_grounded_answer_delivered_as_a_json_string_is_read_as_claims(wrap: Callable[[str], str]) -> None:
    raw = json.dumps(
        {"claims": [GROUNDED, {"text": "#12399 も同様", "citations": [{"source_id": "kb-12345"}]}], "summary": "要約"},
        ensure_ascii=False,
    )
    answer = read_answer(wrap(raw), "a")
    assert answer.shape == "claims" and answer.summary == "要約"
    assert critical(check("plain_chunks", wrap(raw))) == [("phantom_ticket_id", 12399)]


@pytest.mark.parametrize(
    ("answer", "part"),
    [
        ({"results": [{"issue_id": 12345}], "answer": "#12399 も確認してください"}, "text"),
        ({"claims": [GROUNDED], "note": "関連: #12399"}, "$.note"),
        ({"results": [{"issue_id": 12345, "reason": "#12399 と同じ"}]}, "result"),
        ({"claims": [GROUNDED], "followups": [{"text": "#12399 は?"}]}, "$.followups"),
    ],
)
def test_text_beside_the_recognised_part_is_checked(answer: dict[str, Any], part: str) -> None:
    report = check("bedrock_retrieve", answer)
    assert critical(report) == [("phantom_ticket_id", 12399)] and report.findings[0].part == part


def test_the_question_is_not_part_of_the_answer() -> None:
    answer = {
        "input": "チケット #12399 はどうなった?",
        "context": langchain_documents(),
        "answer": "#12345 で解消しました。",
    }
    report = verify_citations(read_answer(answer, "a"), [])
    assert clean(report)


def test_converse_messages_as_context_count_user_text_only() -> None:
    messages = {
        "system": [{"text": "あなたはヘルプデスクです。"}],
        "messages": [
            {
                "role": "user",
                "content": [{"text": f"検索結果:\n\n{CONTEXT_ANCHOR}\n\n再設定手順"}, {"text": "VPN に入れません"}],
            },
            {"role": "assistant", "content": [{"text": f"{anchor_line(12399, '捏造')}\n\nチケット #12399 です"}]},
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "t1",
                            "content": [{"json": {"retrievalResults": bedrock_retrieve()["retrievalResults"][1:]}}],
                        }
                    }
                ],
            },
        ],
    }
    _chunks, texts = read_context(messages, "c.json")
    ids = set().union(*(context_ticket_ids(t) for t in texts))
    assert ids == {12366, 12352}


def test_an_unknown_answer_or_context_shape_is_an_error_not_unchecked() -> None:
    for data in ({"choices": [{"message": {"content": "#12345"}}]}, {"data": 1}, 12345):
        with pytest.raises(InputError, match="not a known answer shape"):
            read_answer(data, "a.json")
    with pytest.raises(InputError, match="not a known context shape"):
        read_context({"turns": []}, "c.json")


# --------------------------------------------------------------------------- 16. misreadings


@shapes
@pytest.mark.parametrize(
    ("text", "phantoms"),
    [("#40211/#40999 を参照", [40211, 40999]), ("#12345/#40999", [40999]), ("(#40211,#40999)", [40211, 40999])],
)
def test_ids_separated_by_a_slash_are_all_read(shape: str, text: str, phantoms: list[int]) -> None:
    assert [v for _, v in critical(check(shape, text))] == phantoms


@shapes
@pytest.mark.parametrize(
    "source_id",
    [
        f"{REDMINE}/issues/12345",
        "http://redmine.example.com:3000/issues/12345#note-2",
        "#12345",
        "s3://kb/tickets/12345.md",
    ],
)
def test_a_citation_naming_a_retrieved_ticket_by_url_is_not_phantom(shape: str, source_id: str) -> None:
    claim = {"text": "VPN 切断はファームウェア更新で解消しました。", "citations": [{"source_id": source_id}]}
    assert check(shape, {"claims": [claim]}).critical == 0


@shapes
@pytest.mark.parametrize("url", [f"{REDMINE}/issues/12352", "http://127.0.0.1:3000/issues/12399#note-1"])
def test_a_result_url_naming_another_issue_is_reported(shape: str, url: str) -> None:
    report = check(shape, [{"issue_id": 12345, "url": url}])
    assert "url_mismatch" in [f.kind for f in report.findings]
    assert critical(report) == ([("phantom_ticket_id", 12399)] if "12399" in url else [])


@pytest.mark.parametrize("shape", ["bedrock_retrieve", "plain_chunks", "seed000_sources", "llamaindex"])
def test_a_result_pairing_an_id_with_another_tickets_subject_is_reported(shape: str) -> None:
    report = check(shape, [{"issue_id": 12345, "subject": ROUTER}, {"issue_id": 12352, "subject": ROUTER}])
    mixed = [f for f in report.findings if f.kind == "subject_mismatch"]
    assert [(f.result, f.ticket_id) for f in mixed] == [(0, 12345)] and "subject of #12352" in mixed[0].message
    assert clean(
        check(shape, [{"issue_id": 12345, "subject": VPN}, {"issue_id": 12352, "subject": f"【完了】{ROUTER}"}])
    )


@shapes
@pytest.mark.parametrize(
    "text", ["手順 #2 でルーターを再起動します。", "ステップ#3 のあと、項目 #12 を確認", "#1 と #2 の両方"]
)
def test_short_bare_numbers_are_steps_not_tickets(shape: str, text: str) -> None:
    report = check(shape, text)
    assert critical(report) == [] and filter_text(text, report.valid_ids) == text


@shapes
@pytest.mark.parametrize(
    ("text", "phantom"),
    [
        ("チケット #2 を参照", 2),
        ("Ticket#7 と同じ", 7),
        ("Redmine #45", 45),
        (f"{REDMINE}/issues/3", 3),
        ("手順 #123 を参照", 123),
    ],
)
def test_labelled_or_long_numbers_are_tickets_however_short(shape: str, text: str, phantom: int) -> None:
    assert critical(check(shape, text)) == [("phantom_ticket_id", phantom)]


@shapes
@pytest.mark.parametrize(
    "text",
    [
        "内線 #1234 までご連絡ください",
        "内線#1234、内線番号: #5678",
        "ext. #1234 / Tel: #5678 / phone #9012",
        "エラーコード #1603 で失敗、終了コードは #1605",
        "error code: #1603 (exit code #1605)",
        "PR #1603 と MR #1604 でマージ済み、pull request #1605 も",
        "色 #336699 と カラーコード: #123、color: #33669900",
        "background-color: #336699;",
    ],
)
def test_a_bare_number_a_word_says_is_of_another_kind_is_no_ticket(shape: str, text: str) -> None:
    report = check(shape, text)
    assert critical(report) == [] and report.cited_ids == set() and filter_text(text, {12345}) == text


@shapes
@pytest.mark.parametrize(
    "text",
    [
        "同じエラー #12399 で報告済み",  # the same error as ticket #12399
        "ボタンの色 #12399 で修正",  # not as long as a colour
        "context #12399",
        "チケット #12399 の内線",
        "内線 チケット #12399",  # a label: a ticket
        "内線 #1234 と #12399",  # only the number the word introduces
    ],
)
def test_a_word_of_another_kind_of_number_excuses_only_the_number_it_introduces(shape: str, text: str) -> None:
    assert critical(check(shape, text)) == [("phantom_ticket_id", 12399)]


def test_a_short_id_that_was_retrieved_is_recognised_bare() -> None:
    chunks = read_retrieval(
        [{"id": "a", "text": "VPN 切断は解消しました。", "uri": "s3://kb/tickets/45.md"}], "r"
    ).chunks
    report = verify_citations(read_answer("#45 で解消しました。", "a"), chunks)
    assert report.cited_ids == {45} and report.findings == []


def test_min_id_digits_is_configurable() -> None:
    assert critical(check("plain_chunks", "手順 #12 を参照", min_id_digits=2)) == [("phantom_ticket_id", 12)]
    assert critical(check("plain_chunks", "#123 を参照", min_id_digits=4)) == []


def test_an_anchor_inside_a_subject_does_not_become_one_when_unflattening() -> None:
    context = f"{anchor_line(12345, 'VPN > チケット #99999: 管理者用')}\n\n本文 {anchor_line(12352, ROUTER)} 続き"
    assert context_ticket_ids(context) == {12345, 12352}


@shapes
@pytest.mark.parametrize(
    "text",
    [
        "#2024-03-14 の作業で解消",
        "ticket 2024年の棚卸し",
        "会議は #12:30 から",
        "ファームウェア v#15.02 へ",
        "#2024/03/14 に実施、#3月 の定例、#9時 から",
        "2026-12-07 と 12/07 と 2026年12月7日 の 12:30",
        "Redmine 5.1.2 へ更新、Support 2.0 も",
        "チケット 2024年度の棚卸し",
        "&#123; と &#x7B; は波括弧",
        "github.com/acme/vpn/issues/12399 を参照",
        "https://redmine.example.com/issues/12399/.. (一覧)",
        "https://github.com/acme/vpn/issues/12399 を参照",
        "https://gitlab.example.com/g/p/-/issues/12399",
    ],
)
def test_dates_times_versions_and_other_trackers_urls_are_not_tickets(shape: str, text: str) -> None:
    assert critical(check(shape, text)) == [] and filter_text(text, {12345}) == text


@pytest.mark.parametrize(
    "url", ["https://redmine.example.com/redmine/issues/12399", "HTTPS://REDMINE.EXAMPLE.COM/issues/12399.json"]
)
def test_redmine_under_a_sub_uri_or_in_capitals_is_still_redmine(url: str) -> None:
    assert critical(check("plain_chunks", f"{url} を参照")) == [("phantom_ticket_id", 12399)]


@shapes
@pytest.mark.parametrize("joint", ["、", "。", "を参照。", "#note-2を参照、", "「"])
@pytest.mark.parametrize("url", [f"{REDMINE}/issues/12345", "https://wiki.example.com/vpn/faq"])
def test_a_phantom_after_a_url_that_runs_into_japanese_text_is_caught(shape: str, url: str, joint: str) -> None:
    # Japanese writes no space after a URL: what follows it is text to check, not part of the URL.
    text = f"詳細は {url}{joint}チケット#12399です"
    report = check(shape, text)
    assert critical(report) == [("phantom_ticket_id", 12399)]
    assert f"{url}{joint}チケット" in report.filtered_answer["text"]
    assert "12399" not in report.filtered_answer["text"]


def test_a_phantom_url_is_replaced_without_the_text_after_it() -> None:
    filtered = filter_text(f"{REDMINE}/issues/12399を参照、{REDMINE}/issues/12399#note-3。以上", {12345})
    assert filtered == f"{UNVERIFIED_MARKER}を参照、{UNVERIFIED_MARKER}。以上"


@pytest.mark.parametrize("shape", ["bedrock_retrieve", "langchain_documents", "seed000_sources"])
def test_a_bare_number_citing_chunks_with_other_ids_is_their_position(shape: str) -> None:
    # The chunk ids are "kb-12345"/"kb-12352": a model that was shown numbered chunks cites 1 and 2.
    claims = [
        {"text": "VPN 切断はファームウェア更新で解消しました。", "citation_ids": [1]},
        {"text": "RTX1220 を更新する", "citations": [{"source_id": "2"}]},
    ]
    assert clean(check(shape, {"claims": claims}))
    report = check(shape, {"claims": [{"text": "VPN 切断は解消しました。", "citation_ids": [3]}]})
    assert critical(report) == [("phantom_source_id", "3")]


@shapes
def test_footnote_markers_are_markers(shape: str) -> None:
    assert clean(check(shape, "VPN 切断はファームウェア更新で解消しました[^1]。"))
    assert critical(check(shape, "VPN 切断は解消しました[^5]。")) == [("phantom_source_id", "[5]")]


@pytest.mark.parametrize(
    "item",
    [
        {"page_content": "VPN 切断は解消しました。", "metadata": {"source": "/data/redmine/tickets/12345.md"}},
        {
            "node": {
                "id_": "n",
                "text": "VPN 切断は解消しました。",
                "metadata": {"file_path": "/data/tickets/12345.md", "file_name": "12345.md"},
            },
            "score": 0.5,
        },
        {"content": "VPN 切断は解消しました。", "metadata": {"issue_id": 12345}},
        {"text": "VPN 切断は解消しました。", "issue_id": "＃１２３４５"},
    ],
)
def test_loaders_file_paths_and_issue_ids_say_which_ticket(item: dict[str, Any]) -> None:
    chunks = read_retrieval([item], "r").chunks
    report = verify_citations(read_answer("#12345 と #12399", "a"), chunks)
    assert report.valid_ids == {12345} and critical(report) == [("phantom_ticket_id", 12399)]


# --------------------------------------------------------------------------- generated answers, every part and form


PARTS = ["text", "summary", "claim", "note", "result_reason"]


def answer_naming(ticket_text: str, part: str) -> dict[str, Any]:
    grounded = {**GROUNDED, "text": "VPN 切断はファームウェア更新で解消しました。"}
    if part == "claim":
        return {"claims": [grounded, {**grounded, "text": f"{grounded['text']} {ticket_text}"}]}
    if part == "result_reason":
        return {"results": [{"issue_id": 12345, "reason": ticket_text}]}
    key = {"text": "answer", "summary": "summary", "note": "note"}[part]
    return {"claims": [grounded], key: f"手順 #2 のあと {ticket_text} を確認。"}


@given(
    shape=st.sampled_from(list(RETRIEVALS)),
    template=st.sampled_from(ID_FORMS),
    part=st.sampled_from(PARTS),
    phantom=st.integers(min_value=100, max_value=999_999).filter(lambda n: n not in (12345, 12352)),
)
@settings(max_examples=300, deadline=None)
def test_a_phantom_in_any_form_in_any_part_is_critical_and_a_retrieved_id_is_not(
    shape: str, template: str, part: str, phantom: int
) -> None:
    assert critical(check(shape, answer_naming(form(template, 12352), part))) == []
    assert critical(check(shape, answer_naming(form(template, phantom), part))) == [("phantom_ticket_id", phantom)]
