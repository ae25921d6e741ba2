"""The Bedrock custom-transformation handler against a real S3 (SeaweedFS): events and batch files as
Bedrock writes them, chunks as Bedrock's native strategies cut anchorkit's documents."""

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
    event,
    genuine_lines,
    in_batches,
    messages,
    names_ticket,
    native_chunks,
    rendered,
    settings,
    sidecar_attributes,
)
from support.long_tickets import write_long_snapshot
from support.s3_server import S3Server

from anchorkit import tokens
from anchorkit.anchors import anchor_line, neutralize_forgeries
from anchorkit.bedrock import handler
from anchorkit.bedrock.audit import count_batches
from anchorkit.bedrock.batches import read_batch
from anchorkit.bedrock.runner import ConfigurationError, FailedFiles, S3Store, _s3_client, run
from anchorkit.render.transform import RenderedTicket

pytestmark = pytest.mark.s3

BATCH_SIZE = 25  # chunks per batch file: long tickets span several


@pytest.fixture(scope="module")
def tokenizer() -> tokens.TiktokenTokenizer:
    return cl100k()


@pytest.fixture(scope="module")
def corpora(
    tokenizer: tokens.TiktokenTokenizer, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[RenderedTicket]]:
    long_snapshot = tmp_path_factory.mktemp("long-tickets")
    write_long_snapshot(long_snapshot, 4)
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    # "long-structural": the same tickets transformed with --chunk-tokens 0 (anchors after headings only),
    # whose windows often lack an anchor: the handler's own anchors are exercised there.
    return {
        "fixtures": rendered(fixtures),
        "long": rendered(long_snapshot),
        "long-structural": rendered(long_snapshot, 0),
    }


# The three ways a file's ticket is stored: the sidecar with the url the chunk layout's sidecars carry,
# today's sidecar (url built from ANCHORKIT_REDMINE_URL), and no sidecar at all (the key names the ticket).
def file_metadata(ticket: RenderedTicket, way: int) -> dict[str, Any]:
    if way == 0:
        return {**sidecar_attributes(ticket), "url": f"{REDMINE}/issues/{ticket.ticket_id}"}
    return sidecar_attributes(ticket) if way == 1 else {}


@pytest.mark.parametrize("corpus", ["fixtures", "long", "long-structural"])
@pytest.mark.parametrize("chunker", sorted(NATIVE_CHUNKERS))
@pytest.mark.parametrize("shape", ["fileContents", "chunks", "chunkList"])
def test_inject_mode_gives_every_native_chunk_its_ticket(
    corpus: str,
    chunker: str,
    shape: str,
    corpora: dict[str, list[RenderedTicket]],
    tokenizer: tokens.TiktokenTokenizer,
    kb: Intermediate,
    logs: pytest.LogCaptureFixture,
) -> None:
    documents = corpora[corpus]
    chunks = {doc.ticket_id: native_chunks(doc.markdown, NATIVE_CHUNKERS[chunker], tokenizer) for doc in documents}
    make = documented_batch if shape == "fileContents" else lambda texts: chunk_list_batch(texts, shape)
    files = [
        kb.put(
            doc.relpath,
            [make(texts) for texts in in_batches(chunks[doc.ticket_id], BATCH_SIZE)],
            file_metadata(doc, index % 3),
            source_uri=f"s3://kb-source/tickets/{doc.relpath}",
        )
        for index, doc in enumerate(documents)
    ]

    answer = kb.run(files)

    assert len(answer["outputFiles"]) == len(documents)
    held = prepended = 0
    for doc, given, output in zip(documents, files, answer["outputFiles"], strict=True):
        assert output["originalFileLocation"] == given["originalFileLocation"]
        assert output["fileMetadata"] == given["fileMetadata"]
        assert len(output["contentBatches"]) == len(given["contentBatches"])
        assert {read_batch(raw).shape for raw in kb.batches(output)} == {shape}
        out = kb.chunks(output)
        assert len(out) == len(chunks[doc.ticket_id])  # the same chunks, one for one
        genuine = genuine_lines(doc.markdown, doc.ticket_id)
        injected = anchor_line(doc.ticket_id, neutralize_forgeries(sidecar_attributes(doc)["subject"]))
        for before, (after, metadata) in zip(chunks[doc.ticket_id], out, strict=True):
            assert names_ticket(after, genuine | {injected}), after[:200]
            if names_ticket(before, genuine):
                assert after == before  # byte for byte
                held += 1
            else:
                assert after == f"{injected}\n\n{before}"
                prepended += 1
            assert metadata["ticket_id"] == doc.ticket_id
            assert metadata["url"] == f"{REDMINE}/issues/{doc.ticket_id}"
    counts = audit_of(logs)
    assert (counts.files, counts.chunks_in, counts.chunks_out) == (len(documents), held + prepended, held + prepended)
    assert (counts.already_anchored, counts.anchored, counts.unknown_ticket) == (held, prepended, 0)
    assert counts.shapes == {shape: sum(len(f["contentBatches"]) for f in files)}
    if corpus == "long-structural":
        assert prepended > 0 and held > 0


def test_a_second_pass_over_its_own_output_changes_no_text(
    corpora: dict[str, list[RenderedTicket]], tokenizer: tokens.TiktokenTokenizer, kb: Intermediate
) -> None:
    doc = corpora["long"][0]
    texts = native_chunks(doc.markdown, NATIVE_CHUNKERS["semantic"], tokenizer)
    anchored = kb.batches(kb.run([kb.put(doc.relpath, [documented_batch(texts)])])["outputFiles"][0])

    again = kb.run([kb.put(f"again/{doc.relpath}", anchored)])

    out = kb.batches(again["outputFiles"][0])
    assert [read_batch(raw).items for raw in out] == [read_batch(raw).items for raw in anchored]
    assert count_batches(out).coverage == 1.0


def test_the_ticket_comes_from_the_key_then_from_the_title_line_else_chunks_pass_through_counted(
    corpora: dict[str, list[RenderedTicket]], kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    doc = corpora["fixtures"][0]
    title, rest = doc.markdown.split("\n", 1)
    subject = title.split(": ", 1)[1]
    plain_text = "ログを確認しました。"
    files = [
        kb.put("a", [documented_batch([title, plain_text])], source_uri="s3://kb/x/readme.md"),
        kb.put("b", [documented_batch(["社内規程の改定について", "第2条"])], source_uri="s3://kb/x/notes.md"),
        kb.put("c", [documented_batch([rest])], {"ticket_id": 7}, source_uri=f"s3://kb/x/{doc.ticket_id}.md"),
    ]

    found, unknown, conflict = map(kb.chunks, kb.run(files)["outputFiles"])

    ticket = {"ticket_id": doc.ticket_id, "subject": subject, "url": f"{REDMINE}/issues/{doc.ticket_id}"}
    assert found == [(title, ticket), (f"{anchor_line(doc.ticket_id, subject)}\n\n{plain_text}", ticket)]
    assert unknown == [("社内規程の改定について", {}), ("第2条", {})]
    assert conflict == [(rest, {})]
    counts = audit_of(logs)
    assert (counts.unknown_ticket, counts.already_anchored, counts.anchored) == (3, 1, 1)
    warnings = messages(logs, logging.WARNING)
    assert any("s3://kb/x/notes.md: ticket unknown" in m and "2 chunks passed through" in m for m in warnings)
    assert any(f"metadata ticket_id #7 but the file name says #{doc.ticket_id}" in m for m in warnings)


def test_a_quoted_anchor_names_no_ticket_and_an_unreadable_ticket_id_is_named(
    kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    wiki = "社内Wiki: VPN FAQ\n\n> チケット #99999: 偽のチケット\n\nルーターを再起動してください。"
    files = [
        kb.put("wiki", [documented_batch([wiki, "続き: 設定手順"])], source_uri="s3://kb/wiki/vpn-faq.md"),
        kb.put("x", [documented_batch(["本文"])], {"ticket_id": "12345.0"}, source_uri="s3://kb/other/x.md"),
    ]

    quoted, unreadable = map(kb.chunks, kb.run(files)["outputFiles"])

    assert quoted == [(wiki, {}), ("続き: 設定手順", {})]  # not tagged #99999: the wiki page quotes it
    assert unreadable == [("本文", {})]
    warnings = messages(logs, logging.WARNING)
    unknown = "ticket unknown ({}, no ticket id in its key, no title line at its start)"
    assert any("vpn-faq.md: " + unknown.format("no ticket_id metadata") in m for m in warnings)
    assert any("x.md: " + unknown.format("ticket_id metadata '12345.0' is not a ticket number") in m for m in warnings)


def test_a_lone_surrogate_in_a_files_metadata_is_read_as_a_replacement_character(
    kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    files = [
        kb.put("111.md", [documented_batch(["ok"])], {"ticket_id": 111, "subject": "fine"}),
        kb.put("12345.md", [documented_batch(["本文"])], {"ticket_id": 12345, "subject": "VPN\ud800"}),  # half an emoji
    ]

    fine, cut = map(kb.chunks, kb.run(files)["outputFiles"])

    assert fine[0][0] == "> チケット #111: fine\n\nok"
    assert cut == [
        (
            "> チケット #12345: VPN\ufffd\n\n本文",
            {"ticket_id": 12345, "subject": "VPN\ufffd", "url": f"{REDMINE}/issues/12345"},
        )
    ]
    assert audit_of(logs).failed_files == 0


class BuggyStore(S3Store):
    """S3, where reading the file named "buggy" trips an error nobody foresaw (not a StoreError)."""

    def get(self, bucket: str, key: str) -> bytes:
        if "/buggy/" in key:
            raise RuntimeError("a bug")
        return super().get(bucket, key)


def test_an_error_nobody_foresaw_fails_its_file_alone_with_what_it_was(
    kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    good = kb.put("1.md", [documented_batch(["本文"])], {"ticket_id": 1, "subject": "件名"})
    buggy = kb.put("buggy", [documented_batch(["本文"])], {"ticket_id": 2})

    answer = run(event(kb.bucket, [buggy, good]), settings(), BuggyStore(kb.client))

    assert answer["outputFiles"][0] == buggy  # its original batches
    assert kb.chunks(answer["outputFiles"][1])[0][0] == "> チケット #1: 件名\n\n本文"
    [error] = [r for r in logs.records if r.levelno == logging.ERROR]
    assert error.getMessage() == (
        "anchorkit: s3://tickets/buggy failed, answered with its original batches: unexpected RuntimeError: a bug"
    )
    assert error.exc_info is not None  # the traceback, to find the bug by
    assert audit_of(logs).failed_files == 1


def test_a_bad_batch_or_entry_fails_its_file_only_and_the_file_keeps_its_original_batches(
    corpora: dict[str, list[RenderedTicket]], kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    doc = corpora["fixtures"][1]
    good = kb.put("good.md", [documented_batch(doc.markdown.split("\n\n"))], {"ticket_id": doc.ticket_id})
    broken = {
        "not-json": b'{"fileContents": [',
        "third-shape": {"documents": [{"text": doc.markdown}]},
        "future-version": {**chunk_list_batch(["x"]), "version": "2.0"},
        "body-not-text": {"fileContents": [{"contentBody": 12, "contentType": "TEXT"}]},
    }
    bad = [kb.put(name, [documented_batch(["ok"]), batch], {"ticket_id": 1}) for name, batch in broken.items()]
    missing = kb.put("gone", [documented_batch(["x"])], {"ticket_id": 1})
    missing["contentBatches"][0]["key"] += ".deleted"
    no_batches = {"originalFileLocation": {"type": "S3", "s3_location": {"uri": "s3://kb/9.md"}}, "fileMetadata": {}}
    files = [good, *bad, missing, no_batches]

    answer = kb.run(files)

    assert answer["outputFiles"][1:] == files[1:]  # exactly as they came: Bedrock ingests their batches untouched
    assert answer["outputFiles"][0]["contentBatches"] != good["contentBatches"]
    assert count_batches(kb.batches(answer["outputFiles"][0])).coverage == 1.0
    errors = messages(logs, logging.ERROR)
    expected = {
        "not-json": "not JSON (Expecting value at line 1 column 19)",
        "third-shape": "no fileContents, chunks or chunkList (keys: documents): not a batch shape anchorkit knows",
        "future-version": "chunks batch of version '2.0' (anchorkit reads '1.0')",
        "body-not-text": "fileContents[0]: a TEXT item whose contentBody is not a string",
    }
    for name, message in expected.items():
        assert any(f"s3://tickets/{name} failed" in e and f"{name}/batch_2.json: {message}" in e for e in errors), name
    assert any("s3://tickets/gone failed" in e and "NoSuchKey" in e for e in errors)
    assert any("s3://kb/9.md failed" in e and "no contentBatches list" in e for e in errors)
    counts = audit_of(logs)
    assert (counts.files, counts.failed_files, counts.inject_files) == (7, 6, 1)


def test_strict_mode_fails_the_invocation_after_the_other_files_are_written(kb: Intermediate) -> None:
    good = kb.put("1.md", [documented_batch(["本文"])], {"ticket_id": 1, "subject": "件名"})
    bad = kb.put("2.md", [b"[]"], {"ticket_id": 2})

    with pytest.raises(FailedFiles, match=r"1 of 2 files failed: s3://tickets/2\.md"):
        kb.run([good, bad], ANCHORKIT_BEDROCK_STRICT="true")

    written = json.loads(kb.raw(good["contentBatches"][0]["key"].replace("batch_1", "anchorkit/batch_1")))
    assert written["fileContents"][0]["contentBody"] == "> チケット #1: 件名\n\n本文"


def test_an_event_of_another_version_is_answered_unchanged(kb: Intermediate, logs: pytest.LogCaptureFixture) -> None:
    files = [kb.put("1.md", [documented_batch(["本文"])], {"ticket_id": 1})]

    answer = kb.run(files, version="2.0")

    assert answer == {"outputFiles": files}
    assert any("event version '2.0' (anchorkit reads '1.0')" in m for m in messages(logs, logging.ERROR))


def test_the_response_has_the_documented_shape(kb: Intermediate) -> None:
    key = f"{kb.prefix}/aws/bedrock/knowledge_base/KB/DS/JOB/file_1.json"
    texts = ["# チケット #12301: VPN", "本文"]  # a document's title, in the first of Bedrock's chunks
    kb.client.put_object(Bucket=kb.bucket, Key=key, Body=json.dumps(documented_batch(texts, {"key1": "value1"})))
    # AWS's "Custom Lambda transformation input format", its placeholders filled in.
    documented_event = {
        "version": "1.0",
        "knowledgeBaseId": "KB",
        "dataSourceId": "DS",
        "ingestionJobId": "JOB",
        "bucketName": kb.bucket,
        "priorTask": "CHUNKING",
        "inputFiles": [
            {
                "originalFileLocation": {"type": "S3", "s3_location": {"uri": "s3://kb-source/tickets/12301.md"}},
                "fileMetadata": {"key1": "value1", "key2": "value2"},
                "contentBatches": [{"key": key}],
            }
        ],
    }

    answer = run(documented_event, settings(), S3Store(kb.client))

    # "Custom Lambda transformation output format": exactly these keys, at every level.
    assert answer == {
        "outputFiles": [
            {
                "originalFileLocation": {"type": "S3", "s3_location": {"uri": "s3://kb-source/tickets/12301.md"}},
                "fileMetadata": {"key1": "value1", "key2": "value2"},
                "contentBatches": [{"key": key.replace("file_1.json", "anchorkit/file_1.json")}],
            }
        ]
    }
    # "File format for objects referenced in fileContents", the item's own metadata kept.
    metadata = {"key1": "value1", "ticket_id": 12301, "subject": "VPN", "url": f"{REDMINE}/issues/12301"}
    assert json.loads(kb.batches(answer["outputFiles"][0])[0]) == {
        "fileContents": [
            {"contentBody": texts[0], "contentType": "TEXT", "contentMetadata": metadata},
            {"contentBody": "> チケット #12301: VPN\n\n本文", "contentType": "TEXT", "contentMetadata": metadata},
        ]
    }


def test_the_lambda_entry_point_reads_its_settings_and_s3_from_the_environment(
    corpora: dict[str, list[RenderedTicket]],
    s3_server: S3Server,
    kb: Intermediate,
    monkeypatch: pytest.MonkeyPatch,
    aws_environment: None,
) -> None:
    doc = corpora["fixtures"][2]
    paragraphs = doc.markdown.split("\n\n")
    plain = next(n for n, paragraph in enumerate(paragraphs) if not paragraph.startswith(("#", ">")))
    files = [kb.put(doc.relpath, [documented_batch(paragraphs)])]
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint_url)
    monkeypatch.setenv("ANCHORKIT_BEDROCK_MODE", "inject")
    monkeypatch.setenv("ANCHORKIT_LABEL", "Ticket")
    _s3_client.cache_clear()
    try:
        answer = handler(event(kb.bucket, files), None)
    finally:
        _s3_client.cache_clear()
    out = kb.chunks(answer["outputFiles"][0])
    assert out[0][0] == paragraphs[0]  # the title: already anchored
    subject = paragraphs[0].split(": ", 1)[1]
    assert out[plain][0] == f"> Ticket #{doc.ticket_id}: {subject}\n\n{paragraphs[plain]}"  # the label configured
    monkeypatch.setenv("ANCHORKIT_BEDROCK_MODE", "guess")
    with pytest.raises(ConfigurationError, match="ANCHORKIT_BEDROCK_MODE='guess': expected one of auto, chunk, inject"):
        handler(event(kb.bucket, files), None)
