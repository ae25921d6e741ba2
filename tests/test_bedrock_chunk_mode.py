"""The handler's chunk mode against a real S3 (SeaweedFS): a data source with chunking strategy NONE hands
each document whole, and the handler cuts it with the ticket-aware chunker (cl100k_base, exact)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from support.bedrock import (
    NATIVE_CHUNKERS,
    REDMINE,
    Intermediate,
    audit_of,
    chunk_list_batch,
    cl100k,
    documented_batch,
    messages,
    native_chunks,
    numbered_snapshot,
    rendered,
    sidecar_attributes,
)
from support.long_tickets import write_long_snapshot

from anchorkit import tokens
from anchorkit.anchors import ANCHOR_PATTERN, find_anchors, find_titles
from anchorkit.bedrock.batches import read_batch
from anchorkit.chunk import SECTIONS, chunk_document
from anchorkit.chunk.core import written_subject
from anchorkit.note_ranges import parse_note_numbers
from anchorkit.render.transform import RenderedTicket

pytestmark = pytest.mark.s3

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHAPES = {
    "fileContents": lambda texts: documented_batch(texts, {"x-amz-bedrock-kb-chunk-id": "c0"}),
    "chunks": lambda texts: chunk_list_batch(texts, "chunks"),
    "chunkList": lambda texts: chunk_list_batch(texts, "chunkList"),
}


@pytest.fixture(scope="module")
def tokenizer() -> tokens.TiktokenTokenizer:
    return cl100k()


@pytest.fixture(scope="module")
def snapshots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixtures and four long tickets, their journals numbered as pull numbers them."""
    long_snapshot = tmp_path_factory.mktemp("long") / "snapshot"
    write_long_snapshot(long_snapshot, 4)
    numbered = tmp_path_factory.mktemp("numbered")
    return {
        "fixtures": numbered_snapshot(FIXTURES, numbered / "fixtures"),
        "long": numbered_snapshot(long_snapshot, numbered / "long"),
    }


@pytest.fixture(scope="module")
def corpora(snapshots: dict[str, Path]) -> dict[str, list[RenderedTicket]]:
    return {name: rendered(snapshot) for name, snapshot in snapshots.items()}


def journal_authors(snapshot: Path, ticket_id: int) -> dict[int, str]:
    """Redmine note number → the journal's author, from the snapshot (what the #note-n link opens)."""
    issue = json.loads((snapshot / "issues" / f"{ticket_id}.json").read_text(encoding="utf-8"))["issue"]
    return {j["note_number"]: j["user"]["name"] for j in issue.get("journals") or [] if j.get("user")}


def assert_names_its_ticket_alone(index: int, text: str, doc: RenderedTicket, subject: str) -> None:
    """The first chunk begins with the document's title line, every other one with the ticket's complete
    anchor (the subject whole, or cut with ``…``); no chunk holds another anchor or title line."""
    first_line = text.split("\n", 1)[0]
    if index == 0:
        assert first_line == doc.markdown.split("\n", 1)[0]
    else:
        anchor = ANCHOR_PATTERN.fullmatch(first_line)
        assert anchor is not None and int(anchor["id"]) == doc.ticket_id, first_line
        shown, written = anchor["subject"] or "", written_subject(subject)  # as the document's title writes it
        assert shown == written or (shown.endswith("…") and written.startswith(shown[:-1])), first_line
        assert text.startswith(f"{first_line}\n\n")
    assert [a.ticket_id for a in find_anchors(text)] == ([] if index == 0 else [doc.ticket_id])
    assert [t.ticket_id for t in find_titles(text)] == ([doc.ticket_id] if index == 0 else [])


# The three ways a file's ticket is stored: a sidecar with url, today's sidecar (the url built from
# ANCHORKIT_REDMINE_URL), no metadata at all (the key names the ticket; the title gives the subject).
def file_metadata(ticket: RenderedTicket, way: int) -> dict[str, Any]:
    if way == 0:
        return {**sidecar_attributes(ticket), "url": f"{REDMINE}/issues/{ticket.ticket_id}"}
    return sidecar_attributes(ticket) if way == 1 else {}


@pytest.mark.parametrize("corpus", ["fixtures", "long"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_chunk_mode_cuts_each_whole_document_into_chunks_that_fit_and_name_their_ticket(
    corpus: str,
    shape: str,
    corpora: dict[str, list[RenderedTicket]],
    snapshots: dict[str, Path],
    tokenizer: tokens.TiktokenTokenizer,
    kb: Intermediate,
    logs: pytest.LogCaptureFixture,
) -> None:
    documents = corpora[corpus]
    files = [
        kb.put(
            doc.relpath,
            [SHAPES[shape]([doc.markdown])],
            file_metadata(doc, index % 3),
            source_uri=f"s3://kb-source/tickets/{doc.relpath}",
        )
        for index, doc in enumerate(documents)
    ]

    answer = kb.run(files)  # auto: one item that begins with its title → chunk mode

    assert set(answer) == {"outputFiles"}
    assert all(
        set(output) == {"originalFileLocation", "fileMetadata", "contentBatches"} for output in answer["outputFiles"]
    )
    total = linked = 0
    for index, (doc, given, output) in enumerate(zip(documents, files, answer["outputFiles"], strict=True)):
        assert output["originalFileLocation"] == given["originalFileLocation"]
        assert output["fileMetadata"] == given["fileMetadata"]
        (key,) = (batch["key"] for batch in output["contentBatches"])
        assert key == given["contentBatches"][0]["key"].replace("/batch_1.json", "/anchorkit/batch_1.json")
        assert read_batch(kb.raw(key)).shape == shape
        out = kb.chunks(output)
        sidecar = sidecar_attributes(doc)
        # The same chunks as the chunker cuts from the document and its sidecar.
        expected = chunk_document(doc.markdown, sidecar, tokenizer, 300).chunks
        assert [text for text, _ in out] == [chunk.text for chunk in expected]
        notes = parse_note_numbers(sidecar.get("note_numbers")) if index % 3 < 2 else None
        authors = journal_authors(snapshots[corpus], doc.ticket_id)
        for position, (text, metadata) in enumerate(out):
            assert tokenizer.count(text) <= 300
            assert_names_its_ticket_alone(position, text, doc, sidecar["subject"])
            assert (metadata["ticket_id"], metadata["subject"]) == (doc.ticket_id, sidecar["subject"])
            assert metadata["section"] in SECTIONS and metadata["chunk_index"] == position
            assert "x-amz-bedrock-kb-chunk-id" not in metadata  # one chunk became several: no id of its own
            assert not {"project", "status", "note_numbers"} & set(metadata)  # the file's, not repeated per chunk
            issue_url = f"{REDMINE}/issues/{doc.ticket_id}"
            if notes and "note" in metadata:
                assert metadata["note"] in notes
                assert metadata["url"] == f"{issue_url}#note-{metadata['note']}"
                assert authors[metadata["note"]] == metadata["journal_author"]  # the note the link opens
                linked += 1
            else:
                assert metadata["url"] == issue_url
                assert metadata["section"] != "history" or not notes
        total += len(out)
    assert linked > 0
    counts = audit_of(logs)
    assert (counts.files, counts.chunk_files, counts.inject_files) == (len(documents), len(documents), 0)
    assert (counts.chunks_in, counts.chunks_out, counts.already_anchored, counts.anchored) == (
        len(documents),
        total,
        total,
        0,
    )
    assert counts.shapes == {shape: len(documents)}
    chosen = [m for m in messages(logs, logging.INFO) if "chunk mode (auto: one item that begins with" in m]
    assert len(chosen) == len(documents)


def test_chunk_tokens_set_the_chunk_length(
    corpora: dict[str, list[RenderedTicket]], tokenizer: tokens.TiktokenTokenizer, kb: Intermediate
) -> None:
    doc = corpora["long"][0]
    lengths = {}
    for n in (300, 512):
        whole = kb.put(f"{n}/{doc.relpath}", [documented_batch([doc.markdown])], sidecar_attributes(doc))
        out = kb.chunks(
            kb.run([whole], ANCHORKIT_BEDROCK_MODE="chunk", ANCHORKIT_CHUNK_TOKENS=str(n))["outputFiles"][0]
        )
        counts = [tokenizer.count(text) for text, _ in out]
        assert max(counts) <= n
        lengths[n] = len(out)
    assert lengths[512] < lengths[300]


def test_auto_mode_chooses_per_file_and_says_why(
    corpora: dict[str, list[RenderedTicket]],
    tokenizer: tokens.TiktokenTokenizer,
    kb: Intermediate,
    logs: pytest.LogCaptureFixture,
) -> None:
    doc = corpora["long"][1]
    native = native_chunks(doc.markdown, NATIVE_CHUNKERS["semantic"], tokenizer)
    files = [
        kb.put("whole/doc", [documented_batch([doc.markdown])], sidecar_attributes(doc)),
        kb.put("native/doc", [documented_batch(native)], sidecar_attributes(doc)),
        kb.put("no-title/doc", [documented_batch([doc.markdown.split("\n", 1)[1]])], sidecar_attributes(doc)),
    ]

    whole, chunked, untitled = kb.run(files)["outputFiles"]

    assert len(kb.chunks(whole)) > 1
    assert len(kb.chunks(chunked)) == len(native)
    assert len(kb.chunks(untitled)) == 1
    counts = audit_of(logs)
    assert (counts.chunk_files, counts.inject_files) == (1, 2)
    info = messages(logs, logging.INFO)
    assert any("whole/doc: chunk mode (auto: one item that begins with the document's title)" in m for m in info)
    assert any(
        f"native/doc: inject mode (auto: not one document (batches: 1, items in the first: {len(native)}))" in m
        for m in info
    )
    assert any(
        "no-title/doc: inject mode (auto: not one document (batches: 1, items in the first: 1))" in m for m in info
    )


def test_the_mode_setting_overrides_the_choice(
    corpora: dict[str, list[RenderedTicket]],
    tokenizer: tokens.TiktokenTokenizer,
    kb: Intermediate,
    logs: pytest.LogCaptureFixture,
) -> None:
    doc = corpora["fixtures"][0]
    whole = kb.put("whole.md", [documented_batch([doc.markdown])], sidecar_attributes(doc))
    native = native_chunks(doc.markdown, NATIVE_CHUNKERS["fixed"], tokenizer)
    split = kb.put("split.md", [documented_batch(native)], sidecar_attributes(doc))

    injected = kb.chunks(kb.run([whole], ANCHORKIT_BEDROCK_MODE="inject")["outputFiles"][0])
    assert [text for text, _ in injected] == [doc.markdown]  # it holds its title: passed byte for byte

    logs.clear()
    out = kb.chunks(kb.run([split], ANCHORKIT_BEDROCK_MODE="chunk")["outputFiles"][0])
    assert len(out) == len(native)  # not one document: anchors injected, and the log says why
    assert any(
        "ANCHORKIT_BEDROCK_MODE=chunk, but the file did not arrive as one document" in m
        and "is the data source's chunking strategy NONE?" in m
        for m in messages(logs, logging.WARNING)
    )


def test_the_ticket_of_a_whole_document_comes_from_its_metadata_its_key_or_its_title(
    corpora: dict[str, list[RenderedTicket]], kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    doc = corpora["fixtures"][1]
    subject = sidecar_attributes(doc)["subject"]
    files = [
        kb.put("a", [documented_batch([doc.markdown])], source_uri=f"s3://kb/tickets/{doc.ticket_id}.md"),
        kb.put("b", [documented_batch([doc.markdown])], source_uri="s3://kb/tickets/readme.md"),
    ]

    by_key, by_title = kb.run(files)["outputFiles"]

    for output in (by_key, by_title):
        chunks = kb.chunks(output)
        assert len(chunks) > 1
        for _, metadata in chunks:
            assert (metadata["ticket_id"], metadata["subject"]) == (doc.ticket_id, subject)
            assert metadata["url"] == f"{REDMINE}/issues/{doc.ticket_id}"
    info = messages(logs, logging.INFO)
    assert any(f"tickets/{doc.ticket_id}.md: chunk mode" in m and "(from its key)" in m for m in info)
    assert any("tickets/readme.md: chunk mode" in m and "(from its title)" in m for m in info)


def test_a_document_that_cannot_be_cut_fails_alone_and_the_other_files_go_on(
    corpora: dict[str, list[RenderedTicket]], kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    doc, other = corpora["fixtures"][2], corpora["fixtures"][3]
    files = [
        kb.put("other-ticket.md", [documented_batch([doc.markdown])], {"ticket_id": 7}),
        kb.put("broken.md", [b'{"fileContents": [{"contentBody": "#'], {"ticket_id": 8}),
        kb.put(other.relpath, [documented_batch([other.markdown])], sidecar_attributes(other)),
    ]

    answer = kb.run(files)

    assert answer["outputFiles"][:2] == files[:2]  # answered as they came: nothing lost
    assert len(kb.chunks(answer["outputFiles"][2])) > 1
    errors = messages(logs, logging.ERROR)
    assert any(
        "s3://tickets/other-ticket.md failed, answered with its original batches: the ticket-aware chunker cannot "
        f"cut the document: ticket #7: the document's title line is ticket #{doc.ticket_id}'s" in m
        for m in errors
    )
    assert any("s3://tickets/broken.md failed" in m and "batch_1.json: not JSON" in m for m in errors)
    counts = audit_of(logs)
    assert (counts.files, counts.failed_files, counts.chunk_files) == (3, 2, 1)

    logs.clear()
    tiny = kb.run([files[2]], ANCHORKIT_CHUNK_TOKENS="20")  # no room for content after the anchor
    assert tiny == {"outputFiles": [files[2]]}
    (error,) = messages(logs, logging.ERROR)
    assert f"ticket #{other.ticket_id}: 20 tokens a chunk leave" in error and "at least 16 needed" in error


def test_the_chunks_are_the_same_whatever_anchors_the_documents_were_transformed_with(
    snapshots: dict[str, Path], kb: Intermediate
) -> None:
    spaced, structural = rendered(snapshots["long"]), rendered(snapshots["long"], 0)
    files = [
        kb.put(f"{n}/{doc.relpath}", [documented_batch([doc.markdown])], sidecar_attributes(doc))
        for n, docs in enumerate((spaced, structural))
        for doc in docs[:2]
    ]
    assert spaced[0].markdown != structural[0].markdown

    outputs = [kb.chunks(output) for output in kb.run(files)["outputFiles"]]

    assert outputs[:2] == outputs[2:]
