"""The handler's pure core: batch shapes, complete anchors, settings, the audit line read back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.bedrock import chunk_list_batch, documented_batch

from anchorkit.bedrock.anchoring import Ticket, chunk, holds_complete_anchor, inject, ticket_from_texts, with_anchor
from anchorkit.bedrock.audit import audit_line, count_batches, read_audit_lines
from anchorkit.bedrock.batches import BatchError, read_batch
from anchorkit.bedrock.counts import Counts
from anchorkit.bedrock.runner import DEFAULT_OPTIONS, ConfigurationError, Settings, chunk_tokenizer, output_key
from anchorkit.render.document import RenderOptions, render_document
from anchorkit.tokens import VOCABULARY_FILE_ENV

SUBJECT = "在宅勤務時にVPNが5〜10分おきに切断される"
TICKET = Ticket(12301, SUBJECT, None, "metadata")
ANCHOR = f"> チケット #12301: {SUBJECT}"


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        (f"本文\n\n{ANCHOR}\n\n続き", True),  # a whole line inside
        (f"# チケット #12301: {SUBJECT}\n\n## 基本情報", True),  # the title
        (f"本文\n\n{ANCHOR}", True),  # the last line, the whole subject
        ("本文\n\n> チケット #12301: 在宅勤務時にVPNが5〜10分お…", True),  # as transform shortens it
        ("本文\n\n> チケット #12301: 在宅勤務時にVPNが5〜10", False),  # cut inside the line
        ("本文\n\n> チケット #12301:", False),
        (f"{ANCHOR[5:]}\n\n本文", False),  # the line's start cut off
        (f"> チケット #12399: {SUBJECT}\n\n本文", False),  # another ticket's anchor
        (f"> チケット \\#12301: {SUBJECT}\n\n本文", False),  # a neutralised look-alike
        (f"本文 > チケット #12301: {SUBJECT}\n", False),  # not at the start of a line
        ("# チケット #12301: 在宅勤務時にVPNが5〜10", True),  # the start of a title too long for a chunk, alone
        ("# チケット #12301: 在宅勤務時にVPNが5〜11", False),  # not its title's start
        ("# チケット #12399: 在宅勤務時にVPNが5〜10", False),  # another ticket's
        ("本文\n# チケット #12301: 在宅勤務時にVPNが5〜10", False),  # not the chunk's start
    ],
)
def test_a_chunk_names_its_ticket_only_with_a_whole_anchor_or_title_line(text: str, holds: bool) -> None:
    assert holds_complete_anchor(text, TICKET) is holds


def test_chunk_mode_keeps_the_first_chunk_of_a_title_longer_than_a_chunk_within_the_chunk_length() -> None:
    """255 rare kanji of subject are more tokens than a chunk: the chunker's first chunk is as much of the title
    line as fits, which names the ticket. It passed for a chunk without its anchor, so the Lambda put the whole
    anchor in front of it: 557 tokens in a 300-token chunk, and the chunk no longer began with the title."""
    subject = "".join(chr(code) for code in range(0x4E00, 0x9FFF, 97))[:255]
    issue = {"id": 12301, "subject": subject, "description": "本文です。", "journals": []}
    document = render_document(issue, {}, RenderOptions(chunk_tokens=0))
    ticket = Ticket(12301, subject, None, "metadata")
    batch = read_batch(json.dumps(documented_batch([document])).encode())
    tokenizer = chunk_tokenizer()

    items, counts, _ = chunk(batch, ticket, {"ticket_id": 12301, "subject": subject}, tokenizer, DEFAULT_OPTIONS)

    texts = [batch.text(item) or "" for item in items]
    assert max(map(tokenizer.count, texts)) <= DEFAULT_OPTIONS.chunk_tokens
    assert document.startswith(texts[0]) and "\n" not in texts[0]  # the title line's start, alone
    assert (counts.chunks_out, counts.already_anchored, counts.anchored) == (len(items), len(items), 0)
    assert count_batches([batch.encode(items)]).missing_anchor == 0


def test_an_anchor_that_ends_a_chunk_counts_whole_with_its_subject_escaped_as_documents_write_it() -> None:
    ticket = Ticket(12301, "VPN *至急* <b>", None, "metadata")
    assert holds_complete_anchor("本文\n\n> チケット #12301: VPN \\*至急\\* \\<b>", ticket)
    assert holds_complete_anchor("本文\n\n> チケット #12301: VPN \\*至…", ticket)
    assert not holds_complete_anchor("本文\n\n> チケット #12301: VPN \\*至", ticket)


def test_a_subject_read_from_the_text_is_the_one_the_sidecar_has_not_its_markdown_escapes() -> None:
    subject = "C# と *強調* <b> #"
    issue = {"id": 5, "subject": subject, "description": "本文"}
    document = render_document(issue, {}, RenderOptions(text_format="common_mark"))
    assert "\\*強調\\*" in document  # escaped in the Markdown

    ticket = ticket_from_texts([document], None, {}, DEFAULT_OPTIONS)

    assert ticket == Ticket(5, subject, None, "title")


def test_without_a_stored_ticket_a_file_is_a_tickets_only_when_it_starts_with_its_title_line() -> None:
    document = ["# チケット #5: VPN\n\n## 説明\n\n> チケット #5: VPN\n\n本文", "続き"]
    wiki = [
        "社内Wiki: VPN FAQ\n\n> チケット #99999: 偽のチケット\n\nルーターを再起動",
        "続き",
    ]  # a quote, not its ticket

    assert ticket_from_texts(document, None, {}, DEFAULT_OPTIONS) == Ticket(5, "VPN", None, "title")
    assert ticket_from_texts(["", *document], None, {}, DEFAULT_OPTIONS) == Ticket(5, "VPN", None, "title")
    assert ticket_from_texts(wiki, None, {}, DEFAULT_OPTIONS) is None
    assert ticket_from_texts(["前置き", *document], None, {}, DEFAULT_OPTIONS) is None  # the title is not its start


def test_another_tickets_anchor_in_a_chunk_of_a_known_ticket_is_escaped_and_counted() -> None:
    batch = read_batch(json.dumps(documented_batch([f"> チケット #99999: 偽\n\n本文\n\n{ANCHOR}\n\n続き"])).encode())

    [item], counts = inject(batch, TICKET, DEFAULT_OPTIONS)

    assert batch.text(item) == f"> チケット \\#99999: 偽\n\n本文\n\n{ANCHOR}\n\n続き"
    assert (counts.neutralised, counts.already_anchored, counts.anchored) == (1, 1, 0)


def test_an_empty_or_blank_chunk_passes_as_it_is_not_as_a_chunk_holding_only_an_anchor() -> None:
    raw = json.dumps(documented_batch(["", " \n", "本文"])).encode()
    batch = read_batch(raw)

    items, counts = inject(batch, TICKET, DEFAULT_OPTIONS)

    assert items[:2] == batch.items[:2]
    assert [batch.text(item) for item in items] == ["", " \n", with_anchor("本文", TICKET, "チケット")]
    assert (counts.not_text, counts.anchored) == (2, 1)
    written = count_batches([batch.encode(items)])
    assert (written.not_text, written.missing_anchor, written.coverage) == (2, 0, 1.0)


def test_the_anchor_put_in_front_cannot_carry_a_second_anchor_in_its_subject() -> None:
    forged = Ticket(1, "VPN\n> チケット #99: 偽物", None, "metadata")
    assert with_anchor("本文", forged, "チケット") == "> チケット #1: VPN > チケット \\#99: 偽物\n\n本文"


def test_both_shapes_are_written_back_as_they_came_with_the_keys_anchorkit_does_not_touch() -> None:
    documented = read_batch(json.dumps({**documented_batch(["a"], {"k": "v"}), "extra": 1}).encode())
    item = documented.updated(documented.items[0], "b", {"ticket_id": 5})
    assert json.loads(documented.encode([item])) == {
        "fileContents": [{"contentBody": "b", "contentType": "TEXT", "contentMetadata": {"k": "v", "ticket_id": 5}}],
        "extra": 1,
    }
    listed = read_batch(json.dumps(chunk_list_batch(["a"], "chunkList")).encode())
    item = listed.updated(
        listed.items[0], "b", {"ticket_id": 5, "url": "https://r/issues/5", "x-amz-bedrock-kb-chunk-id": "c9"}
    )
    assert json.loads(listed.encode([item])) == {
        "version": "1.0",
        "chunkList": [
            {
                "content": {"type": "TEXT", "text": "b"},
                "metadata": {
                    "attributes": [
                        {"key": "ticket_id", "value": 5, "type": "NUMBER"},
                        {"key": "url", "value": "https://r/issues/5", "type": "STRING"},
                        {"key": "x-amz-bedrock-kb-chunk-id", "value": "c9", "type": "STRING"},
                    ]
                },
            }
        ],
    }
    assert listed.metadata(item) == {"ticket_id": 5, "url": "https://r/issues/5", "x-amz-bedrock-kb-chunk-id": "c9"}


@pytest.mark.parametrize(
    "metadata", [None, {"attributes": None}, {}], ids=["metadata null", "attributes null", "no attributes"]
)
def test_a_chunk_whose_metadata_is_null_is_read_and_written_as_one_without_metadata(metadata: Any) -> None:
    batch = read_batch(
        json.dumps(
            {"version": "1.0", "chunks": [{"content": {"type": "TEXT", "text": "a"}, "metadata": metadata}]}
        ).encode()
    )
    assert batch.metadata(batch.items[0]) == {}
    item = batch.updated(batch.items[0], "b", {"ticket_id": 5})
    assert item["metadata"]["attributes"] == [{"key": "ticket_id", "value": 5, "type": "NUMBER"}]


def test_items_that_are_not_text_are_read_as_such() -> None:
    batch = read_batch(json.dumps({"fileContents": [{"contentBody": "iVBOR", "contentType": "IMAGE"}]}).encode())
    assert batch.text(batch.items[0]) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"[1]", "a JSON list, not an object with fileContents or chunks"),
        (
            b'{"fileContents": [], "chunks": []}',
            "both fileContents and chunks: which one holds the chunks is ambiguous",
        ),
        (b'{"chunks": []}', "chunks batch of version None (anchorkit reads '1.0')"),
        (b'{"fileContents": {}}', "fileContents is a JSON dict, not a list"),
        (
            b'{"fileContents": [{"contentBody": "a", "contentMetadata": []}]}',
            "fileContents[0]: contentMetadata is not an object",
        ),
        (b'{"version": "1.0", "chunks": [{"text": "a"}]}', "chunks[0]: no content object"),
        (
            b'{"version": "1.0", "chunks": [{"content": {"type": "TEXT", "text": "a"}, '
            b'"metadata": {"attributes": [{"value": 1}]}}]}',
            "chunks[0]: metadata.attributes is not a list of {key, value, type} objects",
        ),
    ],
)
def test_a_batch_of_no_known_shape_is_refused_with_what_is_wrong(raw: bytes, message: str) -> None:
    with pytest.raises(BatchError, match=re.escape(message)):
        read_batch(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"[" * 100_000, "JSON nested too deeply (more than 200 levels)"),
        (
            b'{"fileContents": [{"contentBody": "x", "contentMetadata": {"ticket_id": 1' + b"0" * 5000 + b"}}]}",
            "a JSON number of more than 4,300 digits",
        ),
    ],
)
def test_json_too_deep_or_with_a_number_too_long_is_a_bad_batch_not_a_crash(raw: bytes, message: str) -> None:
    with pytest.raises(BatchError, match=re.escape(message)):  # a BatchError fails its file alone
        read_batch(raw)


def test_half_an_emoji_that_a_chunker_cut_off_is_read_and_written_back_as_a_replacement_character() -> None:
    batch = read_batch(b'{"fileContents": [{"contentBody": "\\ud83d cut \\ud83d\\ude00 x", "contentType": "TEXT"}]}')
    assert batch.text(batch.items[0]) == "\ufffd cut \U0001f600 x"
    assert json.loads(batch.encode(batch.items))["fileContents"][0]["contentBody"] == "\ufffd cut \U0001f600 x"


def test_a_bad_setting_quotes_a_long_value_only_in_part() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # pasted into the wrong variable

    with pytest.raises(ConfigurationError) as raised:
        Settings.from_environment({"ANCHORKIT_CHUNK_TOKENS": secret})

    assert str(raised.value).startswith("ANCHORKIT_CHUNK_TOKENS='wJalrXUt…': expected a positive whole number")
    assert secret[8:] not in str(raised.value)


def test_chunk_tokens_are_read_from_the_environment() -> None:
    assert Settings.from_environment({}).options.chunk_tokens == 300
    assert Settings.from_environment({"ANCHORKIT_CHUNK_TOKENS": ""}).options.chunk_tokens == 300  # as unset
    assert Settings.from_environment({"ANCHORKIT_CHUNK_TOKENS": " 0512 "}).options.chunk_tokens == 512


def test_chunk_mode_without_its_tokenizer_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocabulary = tmp_path / "cl100k_base.tiktoken"
    vocabulary.write_bytes(b"not a vocabulary\n")
    monkeypatch.setenv(VOCABULARY_FILE_ENV, str(vocabulary))

    with pytest.raises(
        ConfigurationError, match=rf"chunk mode needs the cl100k_base tokenizer: .*{vocabulary}: sha256"
    ):
        chunk_tokenizer()


def test_output_batches_go_beside_the_input_under_anchorkit() -> None:
    assert output_key("kb/job/file_1/batch_1.json") == "kb/job/file_1/anchorkit/batch_1.json"
    assert output_key("batch_1.json") == "anchorkit/batch_1.json"


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        *(
            (
                {"ANCHORKIT_CHUNK_TOKENS": value},
                re.escape(
                    f"ANCHORKIT_CHUNK_TOKENS={value!r}: expected a positive whole number of tokens (default 300)"
                ),
            )
            for value in ("0", "-300", "3.5", "300 tokens", "²")
        ),
        ({"ANCHORKIT_URI_PATTERN": r"/\d+\.md$"}, "ANCHORKIT_URI_PATTERN: URI pattern .* must have exactly one group"),
        ({"ANCHORKIT_BEDROCK_STRICT": "yes"}, "ANCHORKIT_BEDROCK_STRICT='yes': expected true or false"),
        ({"ANCHORKIT_LABEL": "L" * 41}, "ANCHORKIT_LABEL: at most 40 characters, not 41"),
    ],
)
def test_a_bad_setting_is_named(environment: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Settings.from_environment(environment)


def test_a_label_of_the_longest_length_anchors_recognise_is_a_setting() -> None:
    assert Settings.from_environment({"ANCHORKIT_LABEL": "L" * 40}).options.label == "L" * 40


def test_audit_lines_are_read_back_and_summed_from_plain_and_json_log_formats() -> None:
    first = Counts(
        files=2, chunks_in=10, chunks_out=10, already_anchored=7, anchored=3, batches=2, shapes={"fileContents": 2}
    )
    second = Counts(
        files=1, failed_files=1, chunks_in=4, chunks_out=4, unknown_ticket=4, batches=1, shapes={"chunks": 1}
    )
    plain = f"[INFO]\t2026-05-01T00:00:00.000Z\treq-1\t{audit_line(first, {'ingestionJobId': 'J1'})}"
    as_json = json.dumps({"timestamp": "…", "level": "INFO", "message": audit_line(second, {}), "requestId": "req-2"})
    other = "[INFO]\tanchorkit: s3://kb/1.md: inject mode, …"

    total, found = read_audit_lines([plain, other, as_json, "START RequestId: req-3"])

    assert found == 2
    assert total == first + second
    assert (total.files, total.chunks_out, total.named, total.shapes) == (3, 14, 10, {"fileContents": 2, "chunks": 1})
    assert total.coverage == 10 / 14


def test_output_batches_are_counted_as_the_knowledge_base_will_ingest_them() -> None:
    anchored = with_anchor("本文", TICKET, "チケット")
    batch = documented_batch([anchored], {"ticket_id": 12301.0, "subject": SUBJECT})  # Bedrock's numbers are floats
    batch["fileContents"] += [
        {"contentBody": "続き", "contentType": "TEXT", "contentMetadata": {"ticket_id": 12301}},
        {"contentBody": "x", "contentType": "TEXT"},
        {"contentBody": "iVBOR", "contentType": "IMAGE"},
    ]

    counts = count_batches([json.dumps(batch).encode()])

    assert (
        counts.chunks_out,
        counts.already_anchored,
        counts.missing_anchor,
        counts.unknown_ticket,
        counts.not_text,
    ) == (4, 1, 1, 1, 1)
    assert counts.coverage == 1 / 3


@pytest.mark.parametrize("value", ["0", "²", "١٢", "-5", "10000000", "9" * 5000])
def test_chunk_tokens_that_are_no_positive_count_below_ten_million_are_a_configuration_error(value: str) -> None:
    with pytest.raises(ConfigurationError, match="expected a positive whole number of tokens"):
        Settings.from_environment({"ANCHORKIT_CHUNK_TOKENS": value})
