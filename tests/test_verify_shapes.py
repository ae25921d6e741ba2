"""verify_shapes.py: the retrieval and answer shapes verify and eval accept."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorkit.verify.citations import verify_citations
from anchorkit.verify.ids import valid_ids
from anchorkit.verify.model import Answer, Chunk, Citation
from anchorkit.verify.shapes import (
    InputError,
    load_answers,
    load_context,
    load_retrieval,
    read_answer,
    read_retrieval,
)

EVAL = Path(__file__).resolve().parent.parent / "fixtures" / "eval"


def load_answer(path: Path) -> Answer:
    [(_, answer)], errors = load_answers(path)
    assert errors == []
    return answer


def test_bedrock_retrieve_response() -> None:
    retrieval = load_retrieval(EVAL / "retrieval-bedrock.json")
    chunks = retrieval.chunks
    assert retrieval.shape == "bedrock_retrieve"
    assert [(c.id, c.uri) for c in chunks] == [
        ("kb-12345-07", "s3://kb-tickets/tickets/12345.md"),
        ("kb-12345-02", "s3://kb-tickets/tickets/12345.md"),
        ("kb-12352-02", "s3://kb-tickets/tickets/infra/12352.md"),
    ]
    assert chunks[0].text.startswith("### [2026-03-14] 高橋 健一")


def test_bedrock_results_without_location_or_chunk_id() -> None:
    data = {
        "retrievalResults": [
            {"content": {"text": "一"}, "metadata": {"x-amz-bedrock-kb-source-uri": "s3://b/t/12345.md"}},
            {"content": {"text": "二"}, "location": {"type": "WEB", "webLocation": {"url": "https://w/12352.md"}}},
        ]
    }
    assert read_retrieval(data, "r.json").chunks == [
        Chunk("1", "一", "s3://b/t/12345.md"),
        Chunk("2", "二", "https://w/12352.md"),
    ]


def test_retrieve_and_generate_response_is_both_retrieval_and_answer() -> None:
    path = EVAL / "retrieve-and-generate.json"
    retrieval = load_retrieval(path)
    [(_, answer)], _ = load_answers(path)
    assert retrieval.shape == "retrieve_and_generate" and [c.id for c in retrieval.chunks] == ["kb-12345-07"]
    assert answer.shape == "retrieve_and_generate" and answer.retrieved == tuple(retrieval.chunks)
    assert answer.claims[0].citations == (Citation("kb-12345-07"),)
    assert verify_citations(answer, retrieval.chunks).findings == []
    assert verify_citations(answer, []).findings == []  # the response carries its own retrieval


def test_plain_chunk_lists() -> None:
    listed = read_retrieval([{"id": "a", "text": "本文", "uri": "s3://b/1.md"}, {"text": "二"}], "x")
    wrapped = read_retrieval({"chunks": [{"id": 7, "text": "本文"}]}, "x")
    assert (listed.shape, listed.chunks) == ("chunks", [Chunk("a", "本文", "s3://b/1.md"), Chunk("2", "二", None)])
    assert (wrapped.shape, wrapped.chunks) == ("chunks", [Chunk("7", "本文", None)])


def test_answer_shapes() -> None:
    assert load_answer(EVAL / "answer-claims.json").shape == "claims"
    assert load_answer(EVAL / "answer-results.json").results[2]["issue_id"] == 12301
    assert read_answer({"results": [{"issue_id": "12345"}]}, "a").shape == "results"
    assert read_answer("チケット #12345", "a").text == "チケット #12345"
    assert read_answer({"answer": "#12345 です"}, "a").text == "#12345 です"
    text = load_answer(EVAL / "answer.txt")
    assert text.shape == "text" and "#12301" in text.text


def test_unknown_shapes_list_what_is_accepted() -> None:
    with pytest.raises(InputError) as retrieval:
        read_retrieval({"hits": []}, "r.json")
    assert str(retrieval.value).startswith("r.json: not a known retrieval shape")
    for accepted in (
        "retrievalResults",
        "RetrieveAndGenerate",
        "LlamaIndex",
        "a list of chunks",
        "LangChain documents",
    ):
        assert accepted in str(retrieval.value)
    with pytest.raises(InputError) as answer:
        read_answer({"choices": []}, "a.json")
    assert "a.json: not a known answer shape" in str(answer.value) and "issue_id" in str(answer.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"text": 5}], "r.json: chunks[0]: no text"),
        ([{"body": "x"}], "r.json: chunks[0]: no text"),
        (["x"], "r.json: chunks[0]: a chunk must be an object"),
        ([{"text": "x", "uri": 3}], 'r.json: chunks[0]: "uri" must be a string'),
    ],
)
def test_bad_retrieval_entries_are_named(data: object, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_retrieval(data, "r.json")


def test_bad_claims_are_named() -> None:
    with pytest.raises(InputError, match=r"a\.json: claims\[1\]\.citations\[0\]: a citation"):
        read_answer({"claims": [{"text": "ok"}, {"text": "x", "citations": [{"quoted_span": "q"}]}]}, "a.json")


def test_malformed_json_names_the_file_and_position(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"retrievalResults": [\n  {"content": }\n]}')
    with pytest.raises(InputError, match=r"broken\.json: malformed JSON: .* at line 2 column 15"):
        load_retrieval(path)
    path.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match="invalid UTF-8 at byte 0"):
        load_retrieval(path)
    path.write_text("[" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        load_retrieval(path)


def test_context_file_text_or_earlier_retrieval() -> None:
    chunks, texts = load_context(EVAL / "context.txt")
    assert chunks == [] and "> チケット #12366:" in texts[0]
    chunks, texts = load_context(EVAL / "retrieval-chunks.json")
    assert texts == [] and len(chunks) == 3


def test_the_sidecar_ticket_id_attribute_vouches_for_its_document() -> None:
    data = {
        "retrievalResults": [
            {
                "content": {"text": "本文"},
                "location": {"s3Location": {"uri": "s3://b/docs/vpn-osaka"}},
                "metadata": {"ticket_id": 12345.0},
            },
            {"content": {"text": "本文"}, "metadata": {"ticket_id": "not an id"}},
        ]
    }
    retrieval = read_retrieval(data, "r.json")
    assert [c.ticket_id for c in retrieval.chunks] == [12345, None]
    assert retrieval.notes == ["r.json: retrievalResults[1]: ticket_id 'not an id' is not a ticket id: ignored"]
    assert valid_ids(retrieval.chunks) == {12345}
    assert read_retrieval([{"text": "本文", "ticket_id": 12352}], "r.json").chunks[0].ticket_id == 12352
