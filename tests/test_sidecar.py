"""Bedrock Knowledge Base metadata sidecars and Bedrock's limits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anchorkit.render.sidecar import MAX_FILE_BYTES, MAX_LIST_ITEMS, MAX_STRING_CHARS, build_sidecar

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LOOKUPS = json.loads((FIXTURES / "lookups.json").read_text(encoding="utf-8"))


def fixture_issue(ticket_id: int) -> dict[str, Any]:
    return json.loads((FIXTURES / "issues" / f"{ticket_id}.json").read_text(encoding="utf-8"))["issue"]


def attributes(issue: dict[str, Any], schema: str = "simple") -> tuple[dict[str, Any], list[str], bytes]:
    data, warnings = build_sidecar(issue, LOOKUPS, schema)
    return json.loads(data)["metadataAttributes"], warnings, data


def test_simple_sidecar_of_12345() -> None:
    attrs, warnings, _ = attributes(fixture_issue(12345))
    assert warnings == []
    assert attrs["ticket_id"] == 12345
    assert attrs["project"] == "helpdesk"
    assert attrs["status"] == "完了" and attrs["is_closed"] is True
    assert attrs["tracker"] == "障害" and attrs["priority"] == "高め"
    assert attrs["assignee"] == "佐藤 次郎"
    # Dates as epoch seconds (for greaterThan/lessThan filters) and as ISO strings.
    assert attrs["closed_at"] == "2026-03-15T01:00:00Z" and attrs["closed"] == 1773536400
    assert attrs["created"] < attrs["updated"] == attrs["closed"]
    assert attrs["cf_影響範囲"] == "拠点全体"


def test_open_ticket_is_not_closed_and_has_no_closed_date() -> None:
    issue = {
        "id": 1,
        "subject": "s",
        "status": {"id": 1, "name": "新規"},
        "created_on": "2026-01-01T00:00:00Z",
        "closed_on": None,
    }
    attrs, _, _ = attributes(issue)
    assert attrs["is_closed"] is False and "closed" not in attrs and "closed_at" not in attrs


def test_typed_schema_uses_bedrock_value_types() -> None:
    issue = {
        "id": 2,
        "subject": "s",
        "status": {"id": 5, "name": "完了"},
        "custom_fields": [{"id": 1, "name": "OS", "value": ["Win", "Mac"]}],
    }
    attrs, _, _ = attributes(issue, "typed")
    assert attrs["ticket_id"] == {"value": {"type": "NUMBER", "numberValue": 2}, "includeForEmbedding": False}
    assert attrs["status"]["value"] == {"type": "STRING", "stringValue": "完了"}
    assert attrs["is_closed"]["value"] == {"type": "BOOLEAN", "booleanValue": True}
    assert attrs["cf_OS"]["value"] == {"type": "STRING_LIST", "stringListValue": ["Win", "Mac"]}


def test_bedrock_limits_are_enforced_with_warnings() -> None:
    issue = {
        "id": 3,
        "subject": "s",
        "status": {"id": 1, "name": "x" * 5000},
        "custom_fields": [{"id": 1, "name": "tags", "value": [f"t{i}" for i in range(25)]}]
        + [{"id": 10 + i, "name": f"field {i}", "value": "値" * 2000} for i in range(6)],
    }
    attrs, warnings, data = attributes(issue)
    assert len(data) <= MAX_FILE_BYTES
    assert len(attrs["status"]) == MAX_STRING_CHARS
    assert attrs["cf_tags"] == [f"t{i}" for i in range(MAX_LIST_ITEMS)]
    # Least important first: the last custom fields go, the ticket id and status stay.
    assert "cf_field_5" not in attrs and "cf_field_0" in attrs and attrs["ticket_id"] == 3
    assert any("'status' truncated" in w for w in warnings)
    assert any("dropped attribute 'cf_field_5'" in w for w in warnings)
    assert all(w.startswith("#3: ") for w in warnings)


def test_reserved_bedrock_keys_never_appear_and_output_is_deterministic() -> None:
    issue = fixture_issue(12345)
    first, _ = build_sidecar(issue, LOOKUPS)
    second, _ = build_sidecar(json.loads(json.dumps(issue)), LOOKUPS)
    assert first == second
    assert not any(key.startswith("x-amz-bedrock-kb-") for key in json.loads(first)["metadataAttributes"])


def test_both_schemas_carry_the_subject_for_query_time_injection() -> None:
    simple, _, _ = attributes(fixture_issue(12345))
    typed, _, _ = attributes(fixture_issue(12345), "typed")
    assert simple["subject"] == "VPN接続が不安定になる"
    assert typed["subject"] == {
        "value": {"type": "STRING", "stringValue": "VPN接続が不安定になる"},
        "includeForEmbedding": False,
    }


def test_the_subject_is_one_line_within_bedrocks_string_limit() -> None:
    issue = {"id": 4, "subject": "VPN\r\n切断\t（大阪）  " + "長" * 3000, "status": {"id": 1, "name": "新規"}}
    for schema in ("simple", "typed"):
        attrs, warnings, data = attributes(issue, schema)
        subject = attrs["subject"] if schema == "simple" else attrs["subject"]["value"]["stringValue"]
        assert subject.startswith("VPN 切断 （大阪） 長") and "\n" not in subject and "\t" not in subject
        assert len(subject) == MAX_STRING_CHARS and len(data) <= MAX_FILE_BYTES
        assert "#4: sidecar attribute 'subject' truncated to 2048 characters" in warnings


def test_a_ticket_without_subject_has_no_subject_attribute() -> None:
    attrs, _, _ = attributes({"id": 5, "subject": "  ", "status": {"id": 1, "name": "新規"}})
    assert "subject" not in attrs and attrs["ticket_id"] == 5
