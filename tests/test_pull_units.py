"""pull's pure helpers: privacy filtering, names for degraded lookups, Retry-After, cursor arithmetic."""

from __future__ import annotations

import email.utils
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from anchorkit.source import snapshot
from anchorkit.source.cursor import next_cursor, parse_cursor, shift_time
from anchorkit.source.lookups import ProjectScope, descendants, fill_missing, named_ids, names_in_issue, narrowed
from anchorkit.source.preflight import PullError
from anchorkit.source.privacy import without_private_notes
from anchorkit.source.pull import (
    PullSettings,
    SnapshotLocked,
    pull,
    snapshot_lock,
)
from anchorkit.source.redmine import RedmineError, RetryPolicy, listing_page, retry_after_s

ISSUE = {
    "issue": {
        "id": 7,
        "subject": "VPN接続が不安定になる",
        "project": {"id": 3, "name": "社内ITサービスデスク"},
        "status": {"id": 2, "name": "対応中", "is_closed": False},
        "author": {"id": 5, "name": "佐藤 次郎"},
        "assigned_to": {"id": 9, "name": "情報システム課"},
        "custom_fields": [{"id": 4, "name": "影響範囲", "value": "全社"}],
        "journals": [
            {"id": 1, "user": {"id": 5, "name": "佐藤 次郎"}, "notes": "公開メモ", "private_notes": False},
            {"id": 2, "user": {"id": 6, "name": "鈴木 花子"}, "notes": "社外秘", "private_notes": True},
        ],
    }
}


def test_private_notes_are_dropped_and_everything_else_kept_verbatim() -> None:
    public = without_private_notes(ISSUE)
    assert [j["notes"] for j in public["issue"]["journals"]] == ["公開メモ"]
    assert {k: v for k, v in public["issue"].items() if k != "journals"} == {
        k: v for k, v in ISSUE["issue"].items() if k != "journals"
    }
    assert len(ISSUE["issue"]["journals"]) == 2, "the input is not modified"


def test_names_seen_in_an_issue_fill_only_missing_lookup_rows() -> None:
    seen = names_in_issue(ISSUE["issue"])
    assert seen["users"] == {"5": {"name": "佐藤 次郎"}, "9": {"name": "情報システム課"}, "6": {"name": "鈴木 花子"}}
    assert seen["statuses"] == {"2": {"name": "対応中", "is_closed": False}}
    assert seen["custom_fields"] == {"4": {"name": "影響範囲"}}
    lookups = {"users": {"5": {"name": "Sato Jiro", "login": "sato"}}}
    fill_missing(lookups, seen)
    assert lookups["users"]["5"] == {"name": "Sato Jiro", "login": "sato"}, "API names win"
    assert lookups["users"]["6"] == {"name": "鈴木 花子"}


def test_an_issue_names_users_projects_and_custom_fields_by_name_and_by_id_in_its_history() -> None:
    moved = {
        "user": {"id": 8, "name": "高橋 一郎"},
        "details": [
            {"property": "attr", "name": "assigned_to_id", "old_value": "11", "new_value": "9"},
            {"property": "attr", "name": "project_id", "old_value": "12", "new_value": "3"},
            {"property": "attr", "name": "status_id", "old_value": "1", "new_value": "2"},
            {"property": "attr", "name": "author_id", "old_value": None, "new_value": ""},
            {"property": "cf", "name": "7", "old_value": "13", "new_value": "14"},  # a field no longer on it
        ],
    }
    issue = {**ISSUE["issue"], "journals": [*ISSUE["issue"]["journals"], moved]}
    assert named_ids(issue) == {
        "users": {"5", "6", "8", "9", "11"},
        "projects": {"3", "12"},
        "custom_fields": {"4", "7"},  # its own field, and the one its history shows a change of
    }

    lookups = {"users": {"5": {"name": "佐藤 次郎"}, "7": {"name": "山田 太郎"}}, "statuses": {"1": {"name": "新規"}}}
    assert narrowed(lookups, {"users": {"5", "9"}}) == {
        "users": {"5": {"name": "佐藤 次郎"}},
        "statuses": lookups["statuses"],
    }


def test_a_project_scope_holds_the_projects_named_and_their_subprojects_by_the_table() -> None:
    table = {
        "3": {"name": "社内ITサービスデスク", "identifier": "helpdesk", "parent_id": None},
        "4": {"name": "ネットワーク", "identifier": "network", "parent_id": 3},
        "10": {"name": "拠点", "identifier": "sites", "parent_id": 4},
        "5": {"name": "人事部", "identifier": "hr", "parent_id": None},
    }
    scope = ProjectScope.of(table, ("helpdesk",))
    assert scope is not None and scope.ids == {3, 4, 10} and 10 in scope and 5 not in scope
    assert scope.covers({"id": 1, "project": {"id": 4}}) and not scope.covers({"id": 1, "project": {"id": 5}})
    assert not scope.covers({"id": 1}), "a listing that does not say its project"
    assert ProjectScope.of(table, ("helpdesk", "5")) is not None
    assert ProjectScope.of(table, ("helpdsek",)) is None and ProjectScope.of(table, ("99",)) is None, "not in the table"


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    response = requests.Response()
    response.headers["Retry-After"] = "7"
    assert retry_after_s(response) == 7.0
    response.headers["Retry-After"] = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_s(response) or 0) <= 31
    response.headers["Retry-After"] = "soon"
    assert retry_after_s(response) is None


def test_backoff_grows_but_is_capped() -> None:
    policy = RetryPolicy(backoff_base_s=1, backoff_max_s=4)
    assert all(0 <= policy.backoff_s(attempt) <= 4 for attempt in range(10))
    assert max(policy.backoff_s(0) for _ in range(200)) <= 1


def test_overlap_moves_the_cursor_back_across_midnight() -> None:
    assert shift_time("2026-03-15T00:01:00Z", -120) == "2026-03-14T23:59:00Z"


def test_subprojects_belong_to_a_pulled_project() -> None:
    projects = {"1": {"parent_id": None}, "2": {"parent_id": 1}, "3": {"parent_id": 2}, "4": {"parent_id": None}}
    assert descendants(projects, {1}) == {1, 2, 3}


def test_pull_refuses_a_missing_key_a_bad_url_or_format_and_a_locked_snapshot(tmp_path: Path) -> None:
    with pytest.raises(PullError, match="no Redmine API key"):
        pull("http://127.0.0.1:9", tmp_path, api_key="  ")
    with pytest.raises(PullError, match="URL must look like"):
        pull("redmine.example.com", tmp_path, api_key="k")
    with pytest.raises(PullError, match="text format"):
        pull("http://127.0.0.1:9", tmp_path, "k", PullSettings(text_format="markdown"))
    taken, release = threading.Event(), threading.Event()

    def another_pull() -> None:  # the lock is re-entrant within a thread, not across threads
        with snapshot_lock(tmp_path):
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=another_pull)
    holder.start()
    try:
        assert taken.wait(10)
        with pytest.raises(SnapshotLocked, match="another pull is running") as locked, snapshot_lock(tmp_path):
            pass
        assert locked.value.exit_code == 3  # (a whole pull meets it after its key check: test_operator_mistakes)
    finally:
        release.set()
        holder.join()


def test_snapshot_writes_are_atomic_and_leftovers_of_a_crash_are_cleaned(tmp_path: Path) -> None:
    assert snapshot.write_issue(tmp_path, ISSUE) is True
    assert snapshot.write_issue(tmp_path, ISSUE) is False, "same bytes: not rewritten"
    leftover = tmp_path / "issues" / ".7.json.abc.tmp"
    leftover.write_text("{half")
    assert snapshot.remove_stale_temp_files(tmp_path) == 1
    assert not leftover.exists()
    assert snapshot.stored_issue_ids(tmp_path) == {7}
    assert snapshot.stored_stamp(tmp_path, 7) == snapshot.StoredStamp(None, 3)
    assert snapshot.load_issue(snapshot.issue_path(tmp_path, 7))["subject"] == "VPN接続が不安定になる"


def test_the_cursor_moves_to_the_newest_listed_issue_but_stays_below_a_failed_one() -> None:
    listed = ["2026-03-01T10:00:00Z", "2026-03-15T09:00:00Z", "2026-03-10T08:00:00Z"]
    assert next_cursor("2026-02-01T00:00:00Z", listed, failed=[]) == "2026-03-15T09:00:00Z"
    assert next_cursor("2026-02-01T00:00:00Z", listed, failed=["2026-03-01T10:00:00Z"]) == "2026-03-01T10:00:00Z"
    assert next_cursor("2026-04-01T00:00:00Z", [], failed=[]) == "2026-04-01T00:00:00Z", "never moves back"
    assert next_cursor(None, [], failed=[]) is None


def test_a_damaged_cursor_means_a_full_run_not_a_crash() -> None:
    assert parse_cursor("2026-03-15T09:00:00Z") == "2026-03-15T09:00:00Z"
    assert parse_cursor("yesterday") is None
    assert parse_cursor(12345) is None


@pytest.mark.parametrize(
    "body",
    [
        {"user": {"id": 1, "login": "admin"}},  # another endpoint's answer
        {},
        {"issues": "none", "total_count": 1},
        {"issues": [{"subject": "no id"}], "total_count": 1},
        {"issues": [None], "total_count": 1},
        {"issues": [{"id": "12"}], "total_count": 1},
        {"issues": [], "total_count": "many"},
    ],
)
def test_a_listing_of_another_shape_is_an_error_not_an_empty_listing_or_a_traceback(body: dict[str, Any]) -> None:
    with pytest.raises(RedmineError, match=r"GET /issues.json: unexpected response shape"):
        listing_page(body, after_id=0)


def test_a_listing_that_ignores_the_issue_id_filter_is_an_error_not_an_endless_loop() -> None:
    first = {"issues": [{"id": 5}, {"id": 9}], "total_count": 1000}
    assert [issue["id"] for issue in listing_page(first, after_id=0).issues] == [5, 9]
    assert listing_page({"issues": [], "total_count": 0}, after_id=9).issues == []
    with pytest.raises(RedmineError, match="issue_id filter was ignored"):
        listing_page(first, after_id=9)  # the same page again for "issue_id >= 10"
