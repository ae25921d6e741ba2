"""Links to the exact note: Redmine's note numbers, from pull through the sidecar to each chunk's url."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from support.redmine_server import RedmineAdmin, RedmineServer

from anchorkit.chunk.core import ChunkedTicket
from anchorkit.chunk.sources import chunk_items, iter_source
from anchorkit.note_ranges import format_note_numbers, parse_note_numbers
from anchorkit.render.sidecar import MAX_STRING_CHARS, build_sidecar
from anchorkit.render.transform import TransformOptions, transform_snapshot
from anchorkit.source.notes import note_numbers, with_note_numbers
from anchorkit.source.pull import PullReport, PullSettings, pull
from anchorkit.source.redmine import RetryPolicy
from anchorkit.untrusted import public_url
from tests.test_chunk import BYTES

FAST = RetryPolicy(attempts=8, backoff_base_s=0.01, backoff_max_s=0.05, connect_timeout_s=2, read_timeout_s=5.0)


def journal(journal_id: int, created_on: str, **fields: Any) -> dict[str, Any]:
    return {"id": journal_id, "created_on": created_on, "notes": "", "private_notes": False, "details": [], **fields}


def test_journals_are_numbered_in_created_on_then_id_order_whatever_the_list_order() -> None:
    journals = [
        journal(30, "2026-03-02T09:00:00Z"),
        journal(10, "2026-03-01T09:00:00Z"),
        journal(20, "2026-03-01T09:00:00Z", private_notes=True),  # same second as #10: the id decides
    ]
    numbered = with_note_numbers({"issue": {"id": 1, "journals": journals}})["issue"]["journals"]
    assert [(j["id"], j["note_number"]) for j in numbered] == [(30, 3), (10, 1), (20, 2)]
    reversed_list = with_note_numbers({"issue": {"id": 1, "journals": journals[::-1]}})["issue"]["journals"]
    assert {j["id"]: j["note_number"] for j in reversed_list} == {30: 3, 10: 1, 20: 2}


def test_note_numbers_are_all_or_nothing() -> None:
    assert note_numbers([{"note_number": 1}, {"note_number": 4}]) == [1, 4]
    assert note_numbers([{"note_number": 1}, {}]) is None
    assert note_numbers([]) is None


@pytest.mark.parametrize(
    ("numbers", "text"), [([1, 2, 3, 5], "1-3,5"), ([2], "2"), ([4, 5, 1, 2], "4-5,1-2"), ([7, 9, 10, 11], "7,9-11")]
)
def test_note_numbers_are_written_as_ranges_and_read_back(numbers: list[int], text: str) -> None:
    assert format_note_numbers(numbers) == text
    assert parse_note_numbers(text) == numbers


@pytest.mark.parametrize("text", ["1-", "a", "3-1", "1,,2", "1;2", "1-999999999"])
def test_note_numbers_that_are_not_ranges_are_refused(text: str) -> None:
    assert parse_note_numbers(text) is None


def test_the_document_sidecar_carries_the_issue_url_and_the_history_note_numbers() -> None:
    issue = {"id": 7, "subject": "件名", "status": {"id": 1, "name": "新規"}}
    data, warnings = build_sidecar(issue, {}, url="https://r.example/issues/7", notes=[1, 2, 3, 6])
    attributes = json.loads(data)["metadataAttributes"]
    assert (attributes["url"], attributes["note_numbers"], warnings) == ("https://r.example/issues/7", "1-3,6", [])
    typed = json.loads(build_sidecar(issue, {}, "typed", url="https://r.example/issues/7")[0])["metadataAttributes"]
    assert typed["url"]["value"] == {"type": "STRING", "stringValue": "https://r.example/issues/7"}
    assert "note_numbers" not in typed


def test_the_recorded_redmine_url_never_keeps_credentials() -> None:
    assert public_url("https://bot:s3cret@redmine.example.com:8443/redmine/?x=1#y") == (
        "https://redmine.example.com:8443/redmine"
    )


def test_transform_sidecars_list_the_note_numbers_of_the_journals_the_document_shows(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    (snap / "issues").mkdir(parents=True)
    journals = [
        journal(1, "2026-03-01T09:00:00Z", notes="公開メモ", note_number=1),
        journal(2, "2026-03-02T09:00:00Z", notes="非公開メモ", private_notes=True, note_number=2),
        journal(3, "2026-03-03T09:00:00Z", note_number=3),  # nothing a reader cares about: no heading
        journal(4, "2026-03-04T09:00:00Z", notes="次のメモ", note_number=4),
    ]
    issue = {"id": 9, "subject": "件名", "description": "説明", "journals": journals}
    (snap / "issues" / "9.json").write_text(json.dumps({"issue": issue}, ensure_ascii=False), encoding="utf-8")
    (snap / "state.json").write_text(json.dumps({"redmine_url": "https://r.example"}), encoding="utf-8")
    report = transform_snapshot(snap, tmp_path / "out", TransformOptions(sidecars=True), jobs=1)
    assert not report.failed
    attributes = json.loads((tmp_path / "out" / "9.md.metadata.json").read_text(encoding="utf-8"))["metadataAttributes"]
    assert (attributes["url"], attributes["note_numbers"]) == ("https://r.example/issues/9", "1,4")


def test_a_ticket_with_hundreds_of_journals_links_every_history_chunk_to_its_note(tmp_path: Path) -> None:
    """900 journals, every third a private note pull left out (its number stays a gap): the numbers are longer
    than a sidecar attribute may be, and a snapshot's chunks get them all the same, with no word of a sidecar."""
    snap = tmp_path / "snap"
    (snap / "issues").mkdir(parents=True)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    journals = [
        journal(
            n, f"{start + timedelta(minutes=n):%Y-%m-%dT%H:%M:%SZ}", notes=f"メモ{n}です。", private_notes=not n % 3
        )
        for n in range(1, 901)
    ]
    issue = with_note_numbers({"issue": {"id": 4001, "subject": "長い履歴", "journals": journals}})["issue"]
    issue["journals"] = [j for j in issue["journals"] if not j["private_notes"]]  # as pull stores them
    assert len(format_note_numbers(note_numbers(issue["journals"]) or [])) > MAX_STRING_CHARS
    (snap / "issues" / "4001.json").write_text(json.dumps({"issue": issue}, ensure_ascii=False), encoding="utf-8")
    (snap / "state.json").write_text(json.dumps({"redmine_url": "https://r.example"}), encoding="utf-8")

    result = chunked(snap, 300)
    assert result.warnings == []
    history = [chunk for chunk in result.chunks if chunk.metadata["section"] == "history"]
    assert len(history) > 20
    for chunk in history:
        # Journal n is note n (numbered in created_on order): the note of the journal the chunk begins in.
        first = int(re.search(r"メモ(\d+)です", chunk.text[len(chunk.header) :])[1])  # type: ignore[index]
        assert (chunk.metadata["note"], chunk.metadata["url"]) == (first, f"https://r.example/issues/4001#note-{first}")


# ---------------------------------------------------------------------------------------------
# Against the real Redmine: the link opens the note that holds the chunk's text


def note_blocks(html: str) -> dict[int, str]:
    """Note number → the HTML of that note on Redmine's issue page (``<div id="note-n">`` up to the next journal)."""
    blocks = {}
    for match in re.finditer(r'<div id="note-(\d+)" class="note">(.*?)(?=<div id="change-|\Z)', html, re.S):
        blocks[int(match[1])] = match[2]
    return blocks


def issue_page(server: RedmineServer, url: str) -> str:
    page = requests.get(url.split("#")[0], headers={"X-Redmine-API-Key": server.admin_key}, timeout=60)
    page.raise_for_status()
    return page.text


def help_desk_issue(admin: RedmineAdmin, server: RedmineServer, project_id: int, reader: str) -> int:
    """An issue with public and private notes and attribute-only changes: the n-th journal's text
    holds the marker 印0n (an attribute-only one sets a custom field to it)."""
    issue = admin.create_issue(project_id, "プリンタ障害の調査", description="三階のプリンタが止まる。")["id"]
    for number in range(1, 9):
        marker = f"印{number:02d}"
        if number in (3, 6):
            admin.add_note(issue, f"{marker}: 社外秘のメモです。" * 3, private=True)
        elif number in (2, 7):  # an attribute-only change, told apart by its value
            admin.update_issue(issue, custom_fields=[{"id": server.custom_field_id, "value": marker}])
        else:
            author = reader if number == 4 else None
            admin.add_note(issue, " ".join(f"{marker}: 文{n}です。" for n in range(12)), api_key=author)
    return issue


def pulled_issue(
    tmp_path: Path, server: RedmineServer, admin: RedmineAdmin, project: dict[str, Any], role_id: int, key: str = ""
) -> tuple[Path, int, list[dict[str, Any]], PullReport]:
    """The snapshot a pull with ``key`` (a member with ``role_id`` when empty) makes of a help-desk
    issue, the issue's id, its stored journals and the pull's report."""
    member = admin.create_user()
    admin.add_member(project["id"], member["id"], [role_id])
    issue = help_desk_issue(admin, server, project["id"], member["api_key"])
    snap = tmp_path / "snap"
    report = pull(
        server.url, snap, key or member["api_key"], PullSettings(projects=(project["identifier"],), policy=FAST)
    )
    assert report.ok
    journals = json.loads((snap / "issues" / f"{issue}.json").read_text(encoding="utf-8"))["issue"]["journals"]
    return snap, issue, journals, report


def chunked(snap: Path, limit: int) -> ChunkedTicket:
    (result,) = list(chunk_items(iter_source(snap), BYTES, limit))
    assert isinstance(result, ChunkedTicket), result
    return result


def leading_marker(text: str) -> str:
    """The journal a chunk's text begins in, by its marker: the last one on the first line that has
    one (a custom field change reads "印02 → 印07": the journal set 印07)."""
    line = next(line for line in text.split("\n") if "印" in line)
    return re.findall(r"印\d\d", line)[-1]


@pytest.mark.redmine
def test_each_chunk_links_to_the_redmine_note_that_holds_its_text(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    snap, issue, stored, _ = pulled_issue(
        tmp_path,
        redmine_server,
        redmine_admin,
        redmine_project,
        redmine_server.reader_role_id,
        redmine_server.admin_key,
    )
    assert [j["note_number"] for j in stored] == [1, 2, 4, 5, 7, 8]  # the private notes #3 and #6 are left out

    chunks = chunked(snap, 220).chunks
    history = [c for c in chunks if c.metadata["section"] == "history"]
    assert len(history) >= 6
    blocks = note_blocks(issue_page(redmine_server, f"{redmine_server.url}/issues/{issue}"))
    assert sorted(blocks) == list(range(1, 9)), "Redmine's page shows every journal to the admin"
    linked = set()
    for chunk in history:
        note = chunk.metadata["note"]
        assert chunk.metadata["url"] == f"{redmine_server.url}/issues/{issue}#note-{note}"
        marker = leading_marker(chunk.text[len(chunk.header) :])
        # The note Redmine shows as #note-n is the first one that holds the chunk's first words.
        assert note == min(n for n, block in blocks.items() if marker in block), chunk.text
        linked.add(note)
    assert {2, 7} & linked and {1, 4, 5, 8} & linked  # attribute-only and noted journals both begin chunks
    assert not {3, 6} & linked


@pytest.mark.redmine
def test_a_key_that_cannot_see_private_notes_gets_links_to_the_issue_not_to_a_wrong_note(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    snap, issue, stored, _ = pulled_issue(
        tmp_path, redmine_server, redmine_admin, redmine_project, redmine_server.reader_role_id
    )
    assert len(stored) == 6 and all("note_number" not in j for j in stored)
    result = chunked(snap, 220)
    assert {c.metadata["url"] for c in result.chunks} == {f"{redmine_server.url}/issues/{issue}"}
    assert all("note" not in c.metadata for c in result.chunks)


@pytest.mark.redmine
def test_a_member_whose_role_may_view_private_notes_gets_the_note_numbers(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    roles = redmine_admin.request("GET", "/roles.json")["roles"]
    viewing = [
        role["id"]
        for role in roles
        if "view_private_notes" in redmine_admin.request("GET", f"/roles/{role['id']}.json")["role"]["permissions"]
    ]
    assert viewing, "Redmine's default roles (Manager, Developer) may view private notes"
    snap, _, stored, report = pulled_issue(tmp_path, redmine_server, redmine_admin, redmine_project, viewing[0])
    assert report.requests_by_purpose.get("roles") == 1  # read once, for the one project
    assert [j["note_number"] for j in stored] == [1, 2, 4, 5, 7, 8]
    state = json.loads((snap / "state.json").read_text(encoding="utf-8"))
    assert state["redmine_url"] == redmine_server.url
