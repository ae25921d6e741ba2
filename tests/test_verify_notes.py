"""verify on anchorkit's own chunks: citations link to the Redmine note, and a cited note must have been retrieved.

The chunks are real: the fixtures, numbered as pull numbers Redmine's notes, rendered and cut by
anchorkit.chunk.chunk_document (cl100k_base, 300 tokens), then retrieved in each shape verify reads.
"""

from __future__ import annotations

import copy
import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from anchorkit.chunk import chunk_document
from anchorkit.chunk.sources import TicketDocument, iter_source
from anchorkit.chunk.writers import chunk_record
from anchorkit.note_ranges import format_note_numbers, parse_note_numbers
from anchorkit.tokens import load_cl100k_base
from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.evaluation import evaluate, load_cases
from anchorkit.verify.html import render_report
from anchorkit.verify.links import chunk_notes, metadata_notes, note_references, note_source
from anchorkit.verify.shapes import InputError, load_retrieval, load_retrieval_json, read_answer, read_retrieval
from tests.test_chunk_io import numbered_fixtures
from tests.test_verify_cli import run
from tests.test_verify_html import parse

REDMINE = "https://redmine.example.co.jp"
TICKET = 12345
OTHER = 12352
PHANTOM = 12399

Record = dict[str, Any]


def fixture_chunks(folder: Path) -> tuple[list[TicketDocument], dict[str, Record]]:
    """The fixtures' documents with their metadata (as `anchorkit chunk` reads a snapshot), and every
    chunk of them as `anchorkit chunk --jsonl` writes it, by chunk id."""
    snapshot = numbered_fixtures(folder / "snapshot")
    documents = [item for item in iter_source(snapshot) if isinstance(item, TicketDocument)]
    tokenizer = load_cl100k_base()
    records = {
        chunk.id: chunk_record(chunk)
        for document in documents
        for chunk in chunk_document(document.document, document.metadata, tokenizer, 300).chunks
    }
    return documents, records


@pytest.fixture(scope="module")
def chunked(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[TicketDocument], dict[str, Record]]:
    return fixture_chunks(tmp_path_factory.mktemp("notes"))


@pytest.fixture(scope="module")
def documents(chunked: tuple[list[TicketDocument], dict[str, Record]]) -> list[TicketDocument]:
    return chunked[0]


@pytest.fixture(scope="module")
def records(chunked: tuple[list[TicketDocument], dict[str, Record]]) -> dict[str, Record]:
    return chunked[1]


def held(record: Record) -> list[int]:
    return parse_note_numbers(record["metadata"].get("chunk_notes")) or []


@pytest.fixture(scope="module")
def packed(records: dict[str, Record]) -> Record:
    """A chunk of TICKET's history that holds several notes (short journals packed together)."""
    return next(
        r
        for r in records.values()
        if r["ticket_id"] == TICKET and r["metadata"]["section"] == "history" and len(held(r)) >= 2
    )


@pytest.fixture(scope="module")
def elsewhere(records: dict[str, Record], packed: Record) -> int:
    """A note of TICKET that another chunk holds, not the packed one."""
    return next(n for r in records.values() if r["ticket_id"] == TICKET for n in held(r) if n not in held(packed))


def other_chunk(records: dict[str, Record]) -> Record:
    return next(r for r in records.values() if r["ticket_id"] == OTHER)


# --------------------------------------------------------------------------- retrieval shapes


def bedrock_result(record: Record) -> dict[str, Any]:
    """A Bedrock Retrieve result of a chunk file with its sidecar (a data source with chunking NONE):
    Bedrock returns numeric metadata as floats."""
    uri = f"s3://kb/chunks/{record['ticket_id']}/{record['id']}.md"
    metadata = {k: float(v) if isinstance(v, int) else v for k, v in record["metadata"].items()}
    return {
        "content": {"type": "TEXT", "text": record["text"]},
        "location": {"type": "S3", "s3Location": {"uri": uri}},
        "metadata": {**metadata, "x-amz-bedrock-kb-source-uri": uri, "x-amz-bedrock-kb-chunk-id": record["id"]},
        "score": 0.62,
    }


SHAPES: dict[str, Callable[[list[Record]], Any]] = {
    "jsonl_records": lambda rs: rs,
    "bedrock_retrieve": lambda rs: {"retrievalResults": [bedrock_result(r) for r in rs]},
    "retrieve_and_generate": lambda rs: {
        "output": {"text": "VPN 切断は解消しました。"},
        "citations": [
            {
                "generatedResponsePart": {"textResponsePart": {"text": "VPN 切断は解消しました。"}},
                "retrievedReferences": [bedrock_result(r) for r in rs],
            }
        ],
    },
    "langchain": lambda rs: [{"id": r["id"], "page_content": r["text"], "metadata": r["metadata"]} for r in rs],
    "langchain_dumpd": lambda rs: [
        {
            "lc": 1,
            "type": "constructor",
            "id": ["langchain", "schema", "document", "Document"],
            "kwargs": {"id": r["id"], "page_content": r["text"], "metadata": r["metadata"]},
        }
        for r in rs
    ],
    "llamaindex": lambda rs: {
        "response": "…",
        "source_nodes": [
            {"node": {"id_": r["id"], "text": r["text"], "metadata": r["metadata"]}, "score": 0.5} for r in rs
        ],
    },
}
shapes = pytest.mark.parametrize("shape", list(SHAPES))


def check(shape: str, chunks: list[Record], answer: Any) -> VerifyReport:
    retrieval = read_retrieval(SHAPES[shape](copy.deepcopy(chunks)), shape)
    return verify_citations(read_answer(answer, "answer"), retrieval.chunks, notes=retrieval.notes)


def kinds(report: VerifyReport) -> list[tuple[str, str]]:
    return [(f.kind, f.severity) for f in report.findings]


def claim_citing(text: str, *citations: Any) -> dict[str, Any]:
    return {"claims": [{"text": text, "citations": list(citations)}]}


# --------------------------------------------------------------------------- the chunks


def test_real_chunks_say_every_note_they_hold_and_link_to_the_first(
    documents: list[TicketDocument], records: dict[str, Record]
) -> None:
    history = [r for r in records.values() if r["metadata"]["section"] == "history"]
    assert history and all(r["metadata"]["note"] == held(r)[0] for r in history)
    assert all(r["metadata"]["url"] == f"{REDMINE}/issues/{r['ticket_id']}#note-{held(r)[0]}" for r in history)
    assert any(len(held(r)) > 1 for r in history)  # packed journals: the url names only the first
    for document in documents:
        # A chunk of the basic info may run on into the first journals of a short ticket: it holds them too.
        notes = [n for r in records.values() if r["ticket_id"] == document.ticket_id for n in held(r)]
        assert notes == sorted(notes)  # in the history's order; a long journal cut in two is in both
        assert sorted(set(notes)) == sorted(parse_note_numbers(document.metadata.get("note_numbers")) or [])
    noteless = [r for r in records.values() if not held(r)]
    assert noteless and all(metadata_notes(r["metadata"]) is None for r in noteless)
    # Of those, the chunks of the details and the description hold none: their section says so.
    assert {r["metadata"]["section"] for r in noteless} == {"details", "description"}
    assert all(chunk_notes(r["text"], r["metadata"]) == frozenset() for r in noteless)


# --------------------------------------------------------------------------- 1. links to the note


@shapes
def test_a_citation_of_a_chunk_links_to_its_redmine_note_in_json_and_html(
    shape: str, records: dict[str, Record], packed: Record
) -> None:
    chunks = [packed, other_chunk(records)]
    note = held(packed)[-1]
    answer = claim_citing(f"チケット #{TICKET} で解消しました。", {"ticket_id": TICKET, "note": note})
    report = check(shape, chunks, answer)
    assert [k for k in kinds(report) if k[1] == "critical"] == []
    data = report.to_json()
    [source] = data["sources"]
    assert source["chunk_id"] == packed["id"] and source["ticket_ids"] == [TICKET]
    assert source["url"] == packed["metadata"]["url"] and source["notes"] == held(packed)
    [citation] = data["filtered_answer"]["claims"][0]["citations"]
    assert (citation["note"], citation["url"]) == (note, f"{REDMINE}/issues/{TICKET}#note-{note}")
    page = parse(render_report(report))
    assert packed["metadata"]["url"] in page.hrefs()
    assert not any(h.startswith("s3://") for h in page.hrefs())


@shapes
def test_a_note_of_a_retrieved_ticket_whose_chunk_was_not_retrieved_is_flagged(
    shape: str, records: dict[str, Record], packed: Record, elsewhere: int
) -> None:
    answer = claim_citing(f"チケット #{TICKET} で解消しました。", {"ticket_id": TICKET, "note": elsewhere})
    report = check(shape, [packed, other_chunk(records)], answer)
    assert kinds(report) == [("note_not_retrieved", "critical")]
    finding = report.findings[0]
    assert (finding.ticket_id, finding.claim, finding.citation) == (TICKET, 0, 0)
    assert f"note {elsewhere} of #{TICKET}" in finding.message
    assert TICKET in report.valid_ids and TICKET in report.cited_ids  # the ticket itself is no phantom
    assert report.filtered_answer["claims"] == []  # its only citation was not retrieved
    assert report.to_json()["ok"] is False


TEXT_FORMS = [
    "#{t}-note-{n}",
    "#{t}#note-{n}",
    "チケット #{t} の note-{n}",
    "チケット{t}のnote {n}",
    "#{t} の注記 #{n}",
    "{redmine}/issues/{t}#note-{n}",
    "チケット #{t} のノート {n}",
    "#{t} のコメント #{n}",
    "＃{t}－note－{n}",
    "チケット #{t} の ｎｏｔｅ-{wide}",
    "#{t}（note-{n}）",
    "#{t} (comment {n})",
    "#{t}, note {n}",
    "#{t}、ノート{n}",
    "＃{t}\u200b-note-{n}",
    "チケット #{t} の #note-{n}",  # Redmine's fragment, as a model copies it from the note's URL
    "#{t} の＃note-{n}",
    "#{t} #note-{n}",
    "#{t} - note {n}",
    "#{t} － ノート {n}",
    # Redmine shows a note's number as "#n"; with the note word after it, it names the note.
    "#{t} の #{n} の注記",
    "チケット #{t} の #{n} のコメント",
    # The note before the ticket, in English.
    "note #{n} of #{t}",
    "comment {n} on ticket {t}",
    "the note-{n} in issue #{t}",
    # The number designated, or in parentheses.
    "#{t} の注記番号 {n}",
    "#{t} note No. {n}",
    "#{t} の注記({n})",
    # A URL's fragment as a reader sees it (a browser scrolls to the note for the escaped one), a URL with
    # backslashes as a browser follows it, a URL followed by the note in words.
    "{redmine}/issues/{t}#NOTE-{n}",
    "{redmine}/issues/{t}#note-{escaped}",
    "{redmine}\\issues\\{t}#note-{n}",
    "{redmine}/issues/{t} の注記 {n}",
]


def wide(number: int) -> str:
    return str(number).translate(str.maketrans("0123456789", "０１２３４５６７８９"))


def named(template: str, note: int, **more: int) -> str:
    """A text naming TICKET's note as ``template`` writes it (``{t}``, ``{n}``, ``{wide}``, ``{escaped}``,
    ``{redmine}``, and ``more``)."""
    escaped = "".join(f"%{ord(d):X}" for d in str(note))
    return template.format(t=TICKET, n=note, wide=wide(note), escaped=escaped, redmine=REDMINE, **more)


@pytest.mark.parametrize("template", TEXT_FORMS)
@pytest.mark.parametrize("shape", ["jsonl_records", "bedrock_retrieve", "llamaindex"])
def test_every_way_of_naming_a_note_in_a_text_is_checked(
    shape: str, template: str, records: dict[str, Record], packed: Record, elsewhere: int
) -> None:
    def text(note: int) -> str:
        return f"この件は {named(template, note)} を参照してください。"

    assert kinds(check(shape, [packed], text(held(packed)[1]))) == []
    report = check(shape, [packed], text(elsewhere))
    assert [(f.kind, f.ticket_id, f.part) for f in report.findings] == [("note_not_retrieved", TICKET, "text")]
    assert report.cited_ids == {TICKET}
    assert note_references(text(elsewhere), 3) and note_references(text(elsewhere), 3)[0].note == elsewhere


@pytest.mark.parametrize(
    "template",
    ["(#{t}: note {n})", "#{t}: note {n}。", "チケット #{t}：注記 {n}、", "#{t}: #note-{n}.", "#{t}: comment {n}"],
)
def test_a_note_after_a_colon_is_checked_where_it_ends_the_phrase(
    template: str, packed: Record, elsewhere: int
) -> None:
    """Not a subject (``#12345: Note 3 の同期に失敗する``): the note is all there is after the colon."""
    assert kinds(check("jsonl_records", [packed], f"根拠は {named(template, held(packed)[1])}")) == []
    report = check("jsonl_records", [packed], f"根拠は {named(template, elsewhere)}")
    assert [(f.kind, f.ticket_id) for f in report.findings] == [("note_not_retrieved", TICKET)]


# A list or a range of notes: "{a}" and "{b}" are two notes.
LIST_FORMS = [
    "チケット #{t} の注記 {a} と {b}",
    "#{t} notes {a} and {b}",
    "#{t} の注記{a}、{b}",
    "#{t}#note-{a}, #note-{b}",
    "#{t} の注記 #{a} と #{b}",
    "#{t} のコメント {a} や {b}",
    "#{t} (notes {a}, {b})",
    "#{t} notes {a}, and {b}",
    "#{t}: notes {a} and {b}.",
    "#{t} の #{a} と #{b} の注記",
    "notes {a} and {b} of ticket #{t}",
    "{redmine}/issues/{t}#note-{a}, #note-{b}",
    "{redmine}/issues/{t}#note-{a} と note-{b}",
    "＃{t} の注記 {a}・{b}",
]


@pytest.mark.parametrize("template", LIST_FORMS)
def test_every_note_of_a_list_is_checked(template: str, records: dict[str, Record], packed: Record) -> None:
    first, second, outside = held(packed)[0], held(packed)[1], held(packed)[-1] + 1

    def text(b: int) -> str:
        return f"この件は {named(template, first, a=first, b=b)} を参照してください。"

    assert [r.note for r in note_references(text(outside), 3)] == [first, outside]
    assert kinds(check("jsonl_records", [packed], text(second))) == []
    report = check("jsonl_records", [packed], text(outside))
    assert [(f.kind, f.ticket_id, f.part) for f in report.findings] == [("note_not_retrieved", TICKET, "text")]
    assert report.findings[0].message.startswith(f"note {outside} of #{TICKET} was not retrieved")
    # In a claim: the claim goes, as for one note that was not retrieved.
    claim = claim_citing(text(outside), {"source_id": packed["id"]})
    assert check("jsonl_records", [packed], claim).filtered_answer["claims"] == []


@pytest.mark.parametrize(
    "template",
    [
        "#{t} notes {a}-{b}",
        "#{t} の注記 {a}〜{b}",
        "#{t} の注記{a}～{b}",
        "#{t} notes {a} – {b}",
        "notes {a}-{b} of #{t}",
    ],
)
def test_every_note_of_a_range_is_checked(template: str, records: dict[str, Record], packed: Record) -> None:
    later = next(
        r for r in records.values() if r["ticket_id"] == TICKET and min(held(r), default=0) > held(packed)[-1] + 2
    )
    low, high = held(packed)[1], held(later)[0]
    text = f"{named(template, low, a=low, b=high)} を参照。"
    assert [r.note for r in note_references(text, 3)] == list(range(low, high + 1))
    report = check("jsonl_records", [packed, later], text)
    missing = [n for n in range(low, high + 1) if n not in held(packed) + held(later)]
    assert missing and [f.message.split(" of ")[0] for f in report.findings] == [f"note {n}" for n in missing]
    assert {f.kind for f in report.findings} == {"note_not_retrieved"}


def test_a_range_of_more_notes_than_any_ticket_cites_at_once_is_read_as_its_ends() -> None:
    assert [r.note for r in note_references(f"#{TICKET} notes 10-150", 3)] == [10, 150]
    assert [r.note for r in note_references(f"#{TICKET} notes 10-110", 3)] == list(range(10, 111))


@pytest.mark.parametrize(
    "written",
    [
        "チケット #{t} の注記 {a} と 9 台の PC",  # a quantity
        "#{t} の注記 {a}、9 月に",  # a date
        "#{t} の注記 {a}, 9 分後に",
        "#{t} の注記 {a} と 9 つのログ",
        "#{t} note {a} and 9GB",
        "#{t} の注記 {a} と 12:30 に",
        "#{t} の注記 {a} と 9.2 へ更新",  # a version
        "#{t} の注記 {a} と 500 エラー",  # much longer than a note number before it
        "#{t} の注記 #{a} と #12399",  # a ticket mention: a phantom, no note of #{t}
        "#{t} note {a} to 9",  # "to" joins no list or range: what follows it may be anything
    ],
)
def test_a_list_of_notes_ends_where_its_numbers_are_no_notes(written: str, packed: Record) -> None:
    text = f"{written.format(t=TICKET, a=held(packed)[0])} を確認しました。"
    assert [r.note for r in note_references(text, 3)] == [held(packed)[0]]
    assert [k for k in kinds(check("jsonl_records", [packed], text)) if k[0] == "note_not_retrieved"] == []


@pytest.mark.parametrize(
    "written",
    [
        "#{t} のコメント 3件",
        "#{t} のコメント 3 件",
        "#{t} のノート 3個",
        "#{t} has 3 notes",
        "#{t} notes 3",
        "#{t}, 3 comments",
        "#{t} (comments: 3)",
        "#{t} のコメント欄 3",
        "#{t} notebook 3",
        "#{t} notes 3",
        "#{t} の 3 番目の注記",  # the third note need not be Redmine's note 3
        "#{t} の注記 3 番目",
        "#{t} のコメント 3月5日",  # a date, a time, a version
        "#{t} note 12:30",
        "#{t} note 3.1",
        "#{t}-3",  # a ticket's chunk, a sub-number: no note
        "#{t} の #3",  # a step as well as a note
        "Galaxy Note 3 in #{t}",  # a phone
        "the comments 3 in #{t}",
    ],
)
def test_a_count_of_notes_is_no_note(written: str, records: dict[str, Record]) -> None:
    text = f"{written.format(t=TICKET)} を確認しました。"
    assert note_references(text, 3) == []
    every_chunk = [r for r in records.values() if r["ticket_id"] == TICKET]
    assert kinds(check("jsonl_records", every_chunk[:1], text)) == []


@pytest.mark.parametrize("written", ["チケット #{t}: Note 3 の同期に失敗する", "#{t}: コメント 3 が表示されない"])
def test_a_subject_after_a_colon_is_no_note(written: str, records: dict[str, Record]) -> None:
    """``#12345: subject`` is how anchors and title lines write a ticket: a subject may begin with a note word."""
    text = f"{written.format(t=TICKET)} は解決済みです。"
    assert note_references(text, 3) == []
    first = next(r for r in records.values() if r["ticket_id"] == TICKET)
    assert kinds(check("jsonl_records", [first], text)) == []


@pytest.mark.parametrize(
    "source_id",
    [
        "{t}#note-{n}",
        "#{t}-note-{n}",
        "{t}-note-{n}",
        "{redmine}/issues/{t}#note-{n}",
        "チケット #{t} の note-{n}",
        "#{t} のコメント {n}",
        "{t} ﾉｰﾄ {n}",
    ],
)
def test_a_source_id_may_name_a_note(
    source_id: str, records: dict[str, Record], packed: Record, elsewhere: int
) -> None:
    def answer(note: int) -> dict[str, Any]:
        cited = source_id.format(t=TICKET, n=note, redmine=REDMINE)
        return claim_citing("VPN 切断は解消しました。", {"source_id": cited})

    assert note_source(source_id.format(t=TICKET, n=3, redmine=REDMINE)) is not None
    passed = check("jsonl_records", [packed], answer(held(packed)[0]))
    assert [k for k in kinds(passed) if k[1] == "critical"] == [] and passed.cited_chunks[0].id == packed["id"]
    assert [f.kind for f in check("jsonl_records", [packed], answer(elsewhere)).findings] == ["note_not_retrieved"]


def test_a_citation_of_a_chunk_with_a_note_needs_that_chunk_to_hold_it(
    records: dict[str, Record], packed: Record, elsewhere: int
) -> None:
    every_chunk = [r for r in records.values() if r["ticket_id"] == TICKET]
    kept = check("jsonl_records", every_chunk, claim_citing("x", {"source_id": packed["id"], "note": held(packed)[1]}))
    assert [c.id for c in kept.cited_chunks] == [packed["id"]] and kept.critical == 0
    # The note is retrieved, in another chunk: this chunk does not hold it.
    moved = check("jsonl_records", every_chunk, claim_citing("x", {"source_id": packed["id"], "note": elsewhere}))
    assert [(f.kind, f.source_id) for f in moved.findings if f.severity == "critical"] == [
        ("note_not_retrieved", packed["id"])
    ]


def test_a_note_cited_from_a_chunk_that_does_not_hold_it_is_said_to_be_in_the_chunk_that_does(
    records: dict[str, Record], packed: Record, elsewhere: int
) -> None:
    holder = next(r for r in records.values() if r["ticket_id"] == TICKET and elsewhere in held(r))
    answer = claim_citing(
        f"#{TICKET} の note-{elsewhere} によると解消しました。", {"source_id": packed["id"], "note": elsewhere}
    )
    report = check("jsonl_records", [packed, holder], answer)
    assert [(f.kind, f.source_id, f.ticket_id) for f in report.findings] == [
        ("note_not_retrieved", packed["id"], TICKET)
    ]
    assert report.findings[0].message == (
        f"chunk {packed['id']!r} of #{TICKET} does not hold note {elsewhere} "
        f"(it holds notes {format_note_numbers(held(packed))}); note {elsewhere} is in chunk {holder['id']!r}"
    )
    assert report.missing_notes == frozenset()  # it was retrieved: the claim's text names it rightly
    assert report.filtered_answer["claims"] == []  # its only citation is of a chunk without the note
    page = render_report(report)
    assert "The cited chunk does not hold this note: chunk" in page
    assert "not this note" not in page and "this note was not retrieved" not in page
    # A note in no retrieved chunk is not retrieved: said of all the ticket's chunks, not only the one cited.
    absent = check("jsonl_records", [packed, holder], claim_citing("x", {"source_id": packed["id"], "note": 999}))
    every = format_note_numbers(sorted({*held(packed), *held(holder)}))
    assert [f.message for f in absent.findings] == [
        f"note 999 of #{TICKET} was not retrieved (the retrieved chunks hold notes {every})"
    ]
    assert absent.missing_notes == {(TICKET, 999)}


def before_history(records: dict[str, Record]) -> list[Record]:
    """TICKET's chunks of its details and its description that hold no note."""
    ticket = [r for r in records.values() if r["ticket_id"] == TICKET]
    return [r for r in ticket if r["metadata"]["section"] != "history" and not held(r)]


def unnumbered(record: Record) -> Record:
    """The chunk as `anchorkit chunk` writes it from a snapshot pulled without note numbers."""
    chunk = copy.deepcopy(record)
    for key in ("note", "chunk_notes"):
        chunk["metadata"].pop(key, None)
    chunk["metadata"]["url"] = f"{REDMINE}/issues/{record['ticket_id']}"
    return chunk


@shapes
def test_a_note_of_a_ticket_whose_details_and_description_alone_were_retrieved_is_flagged(
    shape: str, records: dict[str, Record], packed: Record
) -> None:
    chunks = before_history(records)
    assert chunks and {r["metadata"]["section"] for r in chunks} <= {"details", "description"}
    note = held(packed)[0]
    text = check(shape, chunks, f"チケット #{TICKET} の注記 {note} によると、再起動で直りました。")
    assert [(f.kind, f.part, f.ticket_id) for f in text.findings] == [("note_not_retrieved", "text", TICKET)]
    assert text.findings[0].message == f"note {note} of #{TICKET} was not retrieved (the retrieved chunks hold no note)"
    cited = check(shape, chunks, claim_citing("再起動で直りました。", {"ticket_id": TICKET, "note": note}))
    assert [f.kind for f in cited.findings if f.severity == "critical"] == ["note_not_retrieved"]
    assert cited.filtered_answer["claims"] == []
    described = check(shape, chunks[-1:], claim_citing("x", {"source_id": chunks[-1]["id"], "note": note}))
    assert [f.kind for f in described.findings if f.severity == "critical"] == ["note_not_retrieved"]


def test_a_note_stays_unchecked_where_the_chunks_cannot_say_whether_they_hold_it(
    records: dict[str, Record], packed: Record
) -> None:
    note = held(packed)[0]
    first = before_history(records)[0]
    without_section = copy.deepcopy(first)
    del without_section["metadata"]["section"]  # a chunk without anchorkit's metadata
    # A description that runs on into the first journals of a short ticket: without note numbers it may hold them.
    runs_on = next(
        r for r in records.values() if r["ticket_id"] == TICKET and r["metadata"]["section"] != "history" and held(r)
    )
    # A chunk of the details says none; a history chunk without note numbers says nothing of the others.
    for chunks in ([without_section], [unnumbered(runs_on)], [first, unnumbered(packed)]):
        report = check("jsonl_records", chunks, f"#{TICKET} の注記 {note} によると、再起動で直りました。")
        assert report.findings == [] and report.missing_notes == frozenset(), [c["id"] for c in chunks]


def test_a_marker_may_name_a_note(records: dict[str, Record], packed: Record, elsewhere: int) -> None:
    kept = check("jsonl_records", [packed], f"VPN 切断は解消しました [SRC:{TICKET}#note-{held(packed)[0]}]。")
    assert [k for k in kinds(kept) if k[1] == "critical"] == []
    missing = check("jsonl_records", [packed], f"VPN 切断は解消しました [SRC:{TICKET}#note-{elsewhere}]。")
    assert [(f.kind, f.part) for f in missing.findings] == [("note_not_retrieved", "text")]


def test_a_claim_naming_a_note_that_was_not_retrieved_is_dropped(
    records: dict[str, Record], packed: Record, elsewhere: int
) -> None:
    answer = {
        "claims": [
            {"text": f"#{TICKET}-note-{elsewhere} で解消しました。", "citations": [{"source_id": packed["id"]}]},
            {"text": f"#{TICKET}-note-{held(packed)[0]} で解消しました。", "citations": [{"source_id": packed["id"]}]},
        ]
    }
    report = check("jsonl_records", [packed], answer)
    assert [(f.kind, f.claim) for f in report.findings if f.severity == "critical"] == [("note_not_retrieved", 0)]
    assert report.dropped_claims == {0} and len(report.filtered_answer["claims"]) == 1
    flagged = verify_citations(
        read_answer(answer, "a"), read_retrieval([packed], "r").chunks, options=VerifyOptions(on_invalid="flag")
    )
    assert flagged.dropped_claims == frozenset() and flagged.critical == 1


def test_a_result_url_to_a_note_must_have_been_retrieved(packed: Record, elsewhere: int) -> None:
    def result(note: int) -> list[dict[str, Any]]:
        return [{"issue_id": TICKET, "url": f"{REDMINE}/issues/{TICKET}#note-{note}"}]

    assert kinds(check("jsonl_records", [packed], result(held(packed)[0]))) == []
    report = check("jsonl_records", [packed], result(elsewhere))
    assert [(f.kind, f.result) for f in report.findings] == [("note_not_retrieved", 0)]


# --------------------------------------------------------------------------- hostile and edge cases


def test_a_note_of_a_ticket_that_was_not_retrieved_is_a_phantom_as_before(packed: Record) -> None:
    report = check("jsonl_records", [packed], f"#{PHANTOM}-note-3 で解消しました。")
    assert [(f.kind, f.ticket_id) for f in report.findings] == [("phantom_ticket_id", PHANTOM)]
    cited = check("jsonl_records", [packed], claim_citing("解消しました。", {"ticket_id": PHANTOM, "note": 3}))
    assert [(f.kind, f.source_id) for f in cited.findings if f.severity == "critical"] == [
        ("phantom_source_id", f"#{PHANTOM}")
    ]


@pytest.mark.parametrize("note", [0, -1, 999, 10**20])
def test_a_note_number_out_of_range_is_not_retrieved(records: dict[str, Record], note: int) -> None:
    every_chunk = [r for r in records.values() if r["ticket_id"] == TICKET]
    report = check("jsonl_records", every_chunk, claim_citing("解消しました。", {"ticket_id": TICKET, "note": note}))
    assert [f.kind for f in report.findings if f.severity == "critical"] == ["note_not_retrieved"]
    if note > 0:
        text = check("jsonl_records", every_chunk, f"#{TICKET}-note-{note} で解消しました。")
        assert [f.kind for f in text.findings] == ["note_not_retrieved"]


@pytest.mark.parametrize("shape", ["jsonl_records", "bedrock_retrieve", "langchain"])
def test_a_url_of_another_ticket_is_neither_followed_nor_believed(shape: str, packed: Record) -> None:
    forged = copy.deepcopy(packed)
    forged["metadata"]["url"] = f"{REDMINE}/issues/{PHANTOM}#note-{held(packed)[0]}"
    report = check(shape, [forged], f"#{PHANTOM} と #{TICKET} で解消しました。")
    assert [(f.kind, f.severity, f.part, f.ticket_id) for f in report.findings] == [
        ("url_mismatch", "warning", "retrieval", PHANTOM),
        ("phantom_ticket_id", "critical", "text", PHANTOM),
    ]
    assert report.valid_ids == {TICKET} and report.links == {}
    page = render_report(report)
    assert not any(f"/issues/{PHANTOM}" in h for h in parse(page).hrefs())
    assert f"names #{PHANTOM}, not this chunk&#x27;s ticket: not linked" in page


def test_a_url_that_is_the_only_uri_cannot_vouch_for_another_ticket(packed: Record) -> None:
    chunk = {
        "id": "c1",
        "text": packed["text"],
        "url": f"{REDMINE}/issues/{PHANTOM}",
        "metadata": {"ticket_id": TICKET},
    }
    retrieval = read_retrieval([chunk], "r")
    assert retrieval.chunks[0].uri == retrieval.chunks[0].url  # the url doubles as the source URI
    report = verify_citations(read_answer(f"#{PHANTOM} で解消", "a"), retrieval.chunks)
    assert [f.kind for f in report.findings] == ["url_mismatch", "phantom_ticket_id"]
    assert report.valid_ids == {TICKET}


@pytest.mark.parametrize("url", ["javascript:alert(1)//issues/12345", "data:text/html,<script>alert(1)</script>"])
def test_only_web_urls_from_metadata_become_links(url: str, packed: Record) -> None:
    hostile = copy.deepcopy(packed)
    hostile["metadata"]["url"] = url
    report = check("bedrock_retrieve", [hostile], claim_citing("解消しました。", {"source_id": packed["id"]}))
    assert report.links == {} and report.to_json()["sources"][0]["url"] is None
    assert "url" not in report.filtered_answer["claims"][0]["citations"][0]
    page = render_report(report)
    assert not any(h.startswith(("javascript:", "data:")) for h in parse(page).hrefs())
    assert "<script>alert" not in page and f"<code>{html.escape(url)}</code>" in page  # shown, escaped


def test_a_url_cannot_break_out_of_its_link(packed: Record) -> None:
    hostile = copy.deepcopy(packed)
    hostile["metadata"]["url"] = f'{REDMINE}/issues/{TICKET}#note-3" onmouseover="alert(1)"><script>x</script>'
    page = render_report(check("bedrock_retrieve", [hostile], claim_citing("x", {"source_id": packed["id"]})))
    links = [attrs for tag, attrs in parse(page).tags if tag == "a" and (attrs.get("href") or "").startswith("http")]
    assert [set(attrs) for attrs in links] == [{"href"}]  # no attribute of the url's making
    assert links[0]["href"] == hostile["metadata"]["url"]  # the url as it is, escaped in the page
    assert "<script>x" not in page


def test_document_chunks_know_the_notes_of_their_document_only(packed: Record, elsewhere: int) -> None:
    """The document layout: Bedrock cut the document, each chunk carries its sidecar's note_numbers."""
    chunk = {
        "id": "doc-chunk",
        "text": packed["text"],
        "uri": f"s3://kb/tickets/{TICKET}.md",
        "metadata": {"ticket_id": TICKET, "url": f"{REDMINE}/issues/{TICKET}", "note_numbers": "1-8,10-17,19-22"},
    }
    retrieval = read_retrieval([chunk], "r")

    def findings(note: int) -> list[str]:
        answer = read_answer(claim_citing("解消しました。", {"ticket_id": TICKET, "note": note}), "a")
        return [f.kind for f in verify_citations(answer, retrieval.chunks).findings if f.severity == "critical"]

    assert findings(elsewhere) == [] and findings(9) == ["note_not_retrieved"]


def test_chunks_that_do_not_say_which_notes_they_hold_leave_notes_unchecked(packed: Record) -> None:
    plain = [{"id": "c1", "text": packed["text"], "uri": f"s3://kb/tickets/{TICKET}.md"}]
    report = verify_citations(read_answer(f"#{TICKET}-note-99 を参照", "a"), read_retrieval(plain, "r").chunks)
    assert report.findings == [] and report.missing_notes == frozenset()


def test_a_malformed_note_in_a_citation_names_the_place(packed: Record) -> None:
    with pytest.raises(InputError, match=r"claims\[0\]\.citations\[0\]: \"note\" must be a note number"):
        read_answer(claim_citing("x", {"ticket_id": TICKET, "note": "three"}), "a.json")
    with pytest.raises(InputError, match=r"\"ticket_id\" must be a ticket number"):
        read_answer(claim_citing("x", {"ticket_id": "#x", "note": 3}), "a.json")


# --------------------------------------------------------------------------- the pages and the CLI


def test_the_page_strikes_a_note_that_was_not_retrieved_and_says_why(packed: Record, elsewhere: int) -> None:
    answer = claim_citing(
        f"チケット #{TICKET} の note-{elsewhere} で解消しました。", {"ticket_id": TICKET, "note": elsewhere}
    )
    page = render_report(check("bedrock_retrieve", [packed], answer))
    assert f'<del class="phantom" title="this note was not retrieved">#{TICKET} の note-{elsewhere}</del>' in page
    assert f"The ticket was retrieved, but not this note: note {elsewhere} of #{TICKET} was not retrieved" in page
    assert "note not retrieved" in page  # the claim's problem in words


def test_the_page_strikes_each_note_of_a_list_that_was_not_retrieved(packed: Record) -> None:
    first, outside = held(packed)[0], held(packed)[-1] + 1
    page = render_report(
        check("bedrock_retrieve", [packed], f"#{TICKET} の注記 {first}、{outside} と note {outside + 1}")
    )
    struck = re.findall(r'<del class="phantom" title="this note was not retrieved">([^<]*)</del>', page)
    assert struck == [str(outside), f"note {outside + 1}"]
    # Two notes in one URL's fragment, neither retrieved: the URL struck once, shown once.
    url = f"{REDMINE}/issues/{TICKET}#note-{outside},{outside + 1}"
    page = render_report(check("bedrock_retrieve", [packed], f"{url} を参照"))
    assert re.findall(r'title="this note was not retrieved">([^<]*)</del>', page) == [url]
    assert page.count(f"#note-{outside},") == 1


def test_jsonl_chunk_records_are_a_retrieval_file(tmp_path: Path, records: dict[str, Record], packed: Record) -> None:
    path = tmp_path / "retrieved.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [packed]), encoding="utf-8")
    chunks = load_retrieval(path).chunks
    assert [(c.id, c.ticket_id, c.url, c.notes) for c in chunks] == [
        (packed["id"], TICKET, packed["metadata"]["url"], frozenset(held(packed)))
    ]
    two = tmp_path / "two.jsonl"
    two.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [packed, packed]), encoding="utf-8")
    assert len(load_retrieval(two).chunks) == 2
    with pytest.raises(InputError, match="a retrieval must be one JSON document"):
        load_retrieval_json(two)  # inject writes back the shape it read: one document


def test_verify_and_eval_gate_on_a_note_that_was_not_retrieved(tmp_path: Path, packed: Record, elsewhere: int) -> None:
    retrieval = tmp_path / "retrieved.jsonl"
    retrieval.write_text(json.dumps(packed, ensure_ascii=False) + "\n", encoding="utf-8")
    answer = tmp_path / "answer.txt"
    answer.write_text(f"チケット #{TICKET} の note-{elsewhere} で解消しました。\n", encoding="utf-8")
    code, out, err = run("verify", "-r", retrieval, "-a", answer, "--strict", "--html", tmp_path / "page.html")
    assert code == 1 and f"critical note_not_retrieved (text): note {elsewhere} of #{TICKET}" in err
    assert f"#{TICKET}" in out  # the ticket stays in the filtered answer: it was retrieved
    assert "this note was not retrieved" in (tmp_path / "page.html").read_text(encoding="utf-8")
    code, out, _ = run("verify", "-r", retrieval, "-a", answer, "--json")
    assert code == 0 and [f["kind"] for f in json.loads(out)["findings"]] == ["note_not_retrieved"]
    cases = tmp_path / "cases.jsonl"
    case = {"query": "VPN", "retrieved": [packed], "answer": answer.read_text(encoding="utf-8")}
    cases.write_text(json.dumps(case, ensure_ascii=False) + "\n", encoding="utf-8")
    summary = evaluate(*load_cases(cases))
    assert summary.phantom_rate == 1.0
    assert run("eval", cases, "--max-phantom-rate", "0")[0] == 1
