"""The handler against events and batch files shaped as AWS's contract allows and a real ingestion writes
them, beyond the tidy ones: several files and batches per event, metadata absent or null, values that
are not strings, items that are not text, S3 keys with spaces and escapes, and files of other kinds in
the same data source. Real S3 (SeaweedFS)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.bedrock import REDMINE, Intermediate, audit_of, documented_batch, messages

pytestmark = pytest.mark.s3

TITLE = "# チケット #4242: VPN が切れる"


def test_an_ingestions_files_with_null_or_missing_metadata_and_items_of_every_kind_are_anchored(
    kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    items: list[dict[str, Any]] = [
        {"contentBody": f"{TITLE}\n\n本文", "contentType": "TEXT", "contentMetadata": None},
        {"contentBody": "続き", "contentType": "TEXT"},
        {"contentBody": "数値", "contentType": "TEXT", "contentMetadata": {"page": 3, "draft": False, "tags": ["a"]}},
        {"contentBody": None, "contentType": "TEXT", "contentMetadata": None},
        {"contentBody": "", "contentType": "TEXT", "contentMetadata": {}},
        {"contentBody": "iVBORw0KGgo=", "contentType": "IMAGE", "contentMetadata": None},
    ]
    by_sidecar = kb.put("plain name/4242.md", [{"fileContents": items[:3]}, {"fileContents": items[3:]}])
    by_sidecar["fileMetadata"] = {"ticket_id": "4242"}  # a sidecar's number, written as a string
    by_key = kb.put("dir with space/ü+%2B x/4243.md", [documented_batch(["# チケット #4243: 印刷", "続き"])])
    del by_key["fileMetadata"]
    null_metadata = kb.put("4244.md", [documented_batch(["# チケット #4244: 申請", "本文"])])
    null_metadata["fileMetadata"] = None

    answer = kb.run([by_sidecar, by_key, null_metadata])

    sidecar, key, null = answer["outputFiles"]
    ticket = {"ticket_id": 4242, "subject": "VPN が切れる", "url": f"{REDMINE}/issues/4242"}
    anchor = "> チケット #4242: VPN が切れる\n\n"
    assert kb.chunks(sidecar) == [
        (f"{TITLE}\n\n本文", ticket),
        (f"{anchor}続き", ticket),
        (f"{anchor}数値", {"page": 3, "draft": False, "tags": ["a"], **ticket}),
        ("", {}),  # an empty chunk, null as an absent body: passes as it is
        ("", {}),
        ("", {}),  # the image: not text
    ]
    assert [batch["key"].rsplit("/", 2)[1:] for batch in sidecar["contentBatches"]] == [
        ["anchorkit", "batch_1.json"],
        ["anchorkit", "batch_2.json"],
    ]
    assert kb.chunks(key)[1] == ("> チケット #4243: 印刷\n\n続き", {"ticket_id": 4243, "subject": "印刷"} | url(4243))
    assert key["contentBatches"][0]["key"].endswith("/dir with space/ü+%2B x/4243.md/anchorkit/batch_1.json")
    assert "fileMetadata" in key and null["fileMetadata"] == {}  # the documented output has the field, an object
    assert kb.chunks(null)[1] == ("> チケット #4244: 申請\n\n本文", {"ticket_id": 4244, "subject": "申請"} | url(4244))
    counts = audit_of(logs)
    assert (counts.files, counts.failed_files, counts.anchored, counts.not_text) == (3, 0, 4, 3)
    assert messages(logs, logging.ERROR) == []


def url(ticket_id: int) -> dict[str, str]:
    return {"url": f"{REDMINE}/issues/{ticket_id}"}


def test_a_file_whose_name_ends_in_a_number_but_holds_no_ticket_is_not_tagged(
    kb: Intermediate, logs: pytest.LogCaptureFixture
) -> None:
    notes = ["# Release notes 2024\n\n- VPN client 5.2", "- printer drivers"]
    other_source = kb.put("notes", [documented_batch(notes)], source_uri="s3://kb-docs/release-notes/2024.md")

    (answer,) = kb.run([other_source])["outputFiles"]

    assert kb.chunks(answer) == [(text, {}) for text in notes]  # not ticket #2024's: no anchor, no url
    assert audit_of(logs).unknown_ticket == 2
    assert any(
        "release-notes/2024.md: the file name says #2024, but its text holds no title or anchor line of that ticket"
        in m
        for m in messages(logs, logging.WARNING)
    )
