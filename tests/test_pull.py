"""pull against the real Redmine (Debian package) on 127.0.0.1, faults injected by a proxy in front of it.

Every test builds its own project with :func:`helpdesk`, so tests do not see each other's issues.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.faultproxy import Fault, FaultProxy, Rewrite, fail_fraction, on_path
from support.redmine_server import RedmineAdmin, RedmineServer
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.source import redmine as redmine_module
from anchorkit.source import snapshot
from anchorkit.source.pull import PullReport, PullSettings, pull
from anchorkit.source.redmine import RedmineClient, RetryPolicy

pytestmark = pytest.mark.redmine

REPO = Path(__file__).resolve().parent.parent
# Quick retries so fault tests stay fast; the read timeout still leaves a loaded Rails room to answer.
FAST = RetryPolicy(attempts=8, backoff_base_s=0.01, backoff_max_s=0.05, connect_timeout_s=2, read_timeout_s=2.0)
CLOSED_STATUS_ID = 5
IN_PROGRESS_STATUS_ID = 2


@dataclass
class Helpdesk:
    """A project with a member, a version, a category and issues covering what pull must handle."""

    project: dict[str, Any]
    admin: dict[str, Any]  # a second administrator: sees private issues and notes, like ops' sync keys
    member: dict[str, Any]  # role without view_private_notes
    vpn: int  # notes (one private), status and assignee changes, a custom field, version, category
    printer: int  # plain
    closed: int  # closed status
    secret: int  # private issue

    @property
    def public_ids(self) -> list[int]:
        return [self.vpn, self.printer, self.closed]


def helpdesk(admin: RedmineAdmin, server: RedmineServer) -> Helpdesk:
    project = admin.create_project(name="社内ITサービスデスク")
    second_admin = admin.create_user(admin=True, firstname="花子", lastname="鈴木")
    member = admin.create_user(firstname="次郎", lastname="佐藤")
    admin.add_member(project["id"], member["id"], [server.reader_role_id])
    version = admin.request("POST", f"/projects/{project['id']}/versions.json", json={"version": {"name": "2026年3月"}})
    category = admin.request(
        "POST", f"/projects/{project['id']}/issue_categories.json", json={"issue_category": {"name": "ネットワーク"}}
    )
    vpn = admin.create_issue(
        project["id"],
        "VPN接続が不安定になる",
        description="在宅勤務中にVPNが切れる。",
        fixed_version_id=version["version"]["id"],
        category_id=category["issue_category"]["id"],
        custom_fields=[{"id": server.custom_field_id, "value": "全社"}],
    )["id"]
    admin.add_note(vpn, "ルーターのファームウェア更新で解消", api_key=member["api_key"])
    admin.add_note(vpn, "社外秘: 管理者パスワードは別途共有", private=True)
    admin.update_issue(vpn, status_id=IN_PROGRESS_STATUS_ID, assigned_to_id=member["id"])
    printer = admin.create_issue(project["id"], "プリンタで印刷できない")["id"]
    closed = admin.create_issue(project["id"], "メールが届かない")["id"]
    admin.update_issue(closed, status_id=CLOSED_STATUS_ID, notes="迷惑メールフォルダにあった")
    secret = admin.create_issue(project["id"], "人事異動に伴うアカウント削除", is_private=True)["id"]
    return Helpdesk(project, second_admin, member, vpn, printer, closed, secret)


@pytest.fixture
def desk(redmine_admin: RedmineAdmin, redmine_server: RedmineServer) -> Helpdesk:
    return helpdesk(redmine_admin, redmine_server)


def pull_desk(server_url: str, snap: Path, key: str, desk: Helpdesk, **options: Any) -> PullReport:
    settings = PullSettings(projects=(desk.project["identifier"],), policy=FAST, **options)
    return pull(server_url, snap, key, settings)


def issue_files(snap: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((snap / "issues").iterdir())}


def stored(snap: Path, issue_id: int) -> dict[str, Any]:
    return json.loads(snapshot.issue_path(snap, issue_id).read_text(encoding="utf-8"))


def test_first_pull_stores_visible_issues_verbatim_without_private_content(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, desk: Helpdesk
) -> None:
    report = pull_desk(redmine_server.url, tmp_path, desk.admin["api_key"], desk)

    assert report.ok and report.full
    assert sorted(int(name.removesuffix(".json")) for name in issue_files(tmp_path)) == desk.public_ids
    assert (report.listed, report.fetched, report.skipped_private) == (4, 3, 1)
    # Verbatim: what GET /issues/<id>.json?include=... returns, minus the private journal only.
    live = redmine_admin.get_issue(desk.vpn)
    kept = stored(tmp_path, desk.vpn)
    assert [j["notes"] for j in kept["issue"]["journals"] if j["notes"]] == ["ルーターのファームウェア更新で解消"]
    # Plus Redmine's note number of each journal, counted with the private one (#2) that is left out.
    assert [journal.pop("note_number") for journal in kept["issue"]["journals"]] == [1, 3]
    live["issue"]["journals"] = [j for j in live["issue"]["journals"] if not j["private_notes"]]
    assert kept == live
    assert "社外秘" not in snapshot.issue_path(tmp_path, desk.vpn).read_text(encoding="utf-8")
    assert stored(tmp_path, desk.closed)["issue"]["status"]["id"] == CLOSED_STATUS_ID

    lookups = snapshot.load_lookups(tmp_path)
    assert lookups["statuses"][str(CLOSED_STATUS_ID)]["is_closed"] is True
    assert lookups["statuses"][str(IN_PROGRESS_STATUS_ID)]["is_closed"] is False
    assert lookups["custom_fields"][str(redmine_server.custom_field_id)]["name"] == "影響範囲"
    assert lookups["users"][str(desk.member["id"])]["name"] == "次郎 佐藤"
    assert [v["name"] for v in lookups["versions"].values()] == ["2026年3月"]
    assert [c["name"] for c in lookups["categories"].values()] == ["ネットワーク"]
    assert lookups["projects"][str(desk.project["id"])]["identifier"] == desk.project["identifier"]
    for table in ("trackers", "priorities"):
        assert lookups[table], f"{table} are filled"

    state = snapshot.load_state(tmp_path)
    assert state["text_format"] == "textile"
    everything_listed = [redmine_admin.get_issue(i)["issue"] for i in [*desk.public_ids, desk.secret]]
    assert state["cursor"] == max(issue["updated_on"] for issue in everything_listed)
    by_purpose = report.requests_by_purpose
    assert (by_purpose["key check"], by_purpose["list"], by_purpose["issues"]) == (1, 1, 3), (
        "the key, one list page, then each issue once"
    )
    assert by_purpose["lookups"] >= 8, "eight tables (users and projects may take several pages)"
    assert report.requests == sum(by_purpose.values()) and report.retries == 0


def test_include_private_keeps_private_issues_and_notes(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    report = pull_desk(redmine_server.url, tmp_path, redmine_server.admin_key, desk, include_private=True)

    assert report.ok and report.skipped_private == 0
    assert stored(tmp_path, desk.secret)["issue"]["is_private"] is True
    notes = [j["notes"] for j in stored(tmp_path, desk.vpn)["issue"]["journals"]]
    assert "社外秘: 管理者パスワードは別途共有" in notes


def test_turning_include_private_on_refetches_what_was_filtered_out(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk)
    assert not snapshot.issue_path(tmp_path, desk.secret).exists()

    widened = pull_desk(redmine_server.url, tmp_path, key, desk, include_private=True)

    assert widened.full and widened.fetched == 4, "nothing changed in Redmine, yet every issue is fetched again"
    assert snapshot.issue_path(tmp_path, desk.secret).exists()
    assert any(j["private_notes"] for j in stored(tmp_path, desk.vpn)["issue"]["journals"])


def test_a_full_pull_of_one_project_leaves_other_projects_issues_alone(
    tmp_path: Path,
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    desk: Helpdesk,
    redmine_project: dict[str, Any],
) -> None:
    key = redmine_server.admin_key
    other_issue = redmine_admin.create_issue(redmine_project["id"], "共有フォルダの容量不足")["id"]
    pull_desk(redmine_server.url, tmp_path, key, desk)
    pull(
        redmine_server.url,
        tmp_path,
        key,
        PullSettings(projects=(redmine_project["identifier"],), full=True, policy=FAST),
    )
    assert snapshot.stored_issue_ids(tmp_path) == {*desk.public_ids, other_issue}

    redmine_admin.delete_issue(other_issue)
    report = pull(
        redmine_server.url,
        tmp_path,
        key,
        PullSettings(projects=(redmine_project["identifier"],), full=True, policy=FAST),
    )
    assert report.removed == 1
    assert snapshot.stored_issue_ids(tmp_path) == set(desk.public_ids)


def test_incremental_pulls_fetch_only_what_changed(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk)
    before = issue_files(tmp_path)

    idle = pull_desk(redmine_server.url, tmp_path, key, desk)
    assert (idle.full, idle.fetched, idle.requests) == (False, 0, 3), (
        "the key check, the custom field definitions (an administrator's key) and one list request, lookups cached"
    )
    assert issue_files(tmp_path) == before

    time.sleep(1.1)  # updated_on has one-second resolution
    redmine_admin.add_note(desk.printer, "トナー交換で解決")
    changed = pull_desk(redmine_server.url, tmp_path, key, desk)
    assert (changed.fetched, changed.requests) == (1, 4), "the key, the fields, the list page and the changed issue"
    assert stored(tmp_path, desk.printer)["issue"]["journals"][-1]["notes"] == "トナー交換で解決"
    assert snapshot.load_state(tmp_path)["cursor"] == stored(tmp_path, desk.printer)["issue"]["updated_on"]


def test_full_listing_removes_deleted_issues_and_private_ones_leave_at_once(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk, full_every=2)
    redmine_admin.delete_issue(desk.closed)
    redmine_admin.update_issue(desk.printer, is_private=True)

    incremental = pull_desk(redmine_server.url, tmp_path, key, desk, full_every=2)
    assert not incremental.full
    assert not snapshot.issue_path(tmp_path, desk.printer).exists(), "made private: removed on sight"
    assert snapshot.issue_path(tmp_path, desk.closed).exists(), "a deletion needs a full listing to be seen"

    automatic_full = pull_desk(redmine_server.url, tmp_path, key, desk, full_every=2)
    assert automatic_full.full and automatic_full.removed == 1
    assert sorted(snapshot.stored_issue_ids(tmp_path)) == [desk.vpn]


def test_nothing_is_removed_when_a_listing_page_fails(
    tmp_path: Path,
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    desk: Helpdesk,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(redmine_module, "PAGE_SIZE", 1)  # one issue a page: several pages for four issues
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk)
    cursor = snapshot.load_state(tmp_path)["cursor"]
    redmine_admin.delete_issue(desk.vpn)
    second_page = f"issue_id=%3E%3D{desk.printer + 1}"  # keyset paging: the page after the printer issue

    with FaultProxy(redmine_server.url, decide=on_path(Fault.HTTP_503, second_page)) as proxy:
        report = pull_desk(proxy.url, tmp_path, key, desk, full=True)

    assert report.full and not report.listing_complete and not report.ok
    assert report.removed == 0 and snapshot.issue_path(tmp_path, desk.vpn).exists()
    assert "503" in report.errors[0]
    assert snapshot.load_state(tmp_path)["cursor"] == cursor


def test_a_hand_edited_state_json_means_a_refresh_not_a_traceback(
    tmp_path: Path, redmine_server: RedmineServer, redmine_project: dict[str, Any], redmine_admin: RedmineAdmin
) -> None:
    issue = redmine_admin.create_issue(redmine_project["id"], "VPN接続が不安定になる")["id"]
    settings = PullSettings(projects=(redmine_project["identifier"],), policy=FAST)
    assert pull(redmine_server.url, tmp_path, redmine_server.admin_key, settings).ok
    state = snapshot.load_state(tmp_path)
    damaged = {"runs_since_full": None, "lookups_refreshed_at": "yesterday", "lookup_projects": ["helpdesk", None]}
    snapshot.write_state(tmp_path, {**state, **damaged})

    report = pull(redmine_server.url, tmp_path, redmine_server.admin_key, settings)

    assert report.ok and not report.full and report.lookups_refreshed  # refreshed as if never done
    repaired = snapshot.load_state(tmp_path)
    assert repaired["runs_since_full"] == 1 and repaired["lookup_projects"] == [redmine_project["id"]]
    assert snapshot.stored_issue_ids(tmp_path) == {issue}


def test_a_listing_answered_with_another_body_removes_nothing(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk)
    cursor = snapshot.load_state(tmp_path)["cursor"]
    # A JSON object with no listing in it (here the key's user; a proxy's or another application's page):
    # read as an empty listing, a full run removed every stored issue and said it went well.
    elsewhere = on_path(Fault.REDIRECT, "/issues.json")
    with FaultProxy(redmine_server.url, decide=elsewhere, redirect=lambda _: "/users/current.json") as proxy:
        report = pull_desk(proxy.url, tmp_path, key, desk, full=True)

    assert report.full and not report.listing_complete and not report.ok
    assert report.removed == 0 and sorted(snapshot.stored_issue_ids(tmp_path)) == desk.public_ids
    assert "unexpected response shape" in report.errors[0]
    assert snapshot.load_state(tmp_path)["cursor"] == cursor


@pytest.mark.parametrize(
    "fault", [Fault.HTTP_500, Fault.HTTP_503, Fault.RESET, Fault.TRUNCATE, Fault.STALL, Fault.TOO_MANY_REQUESTS]
)
def test_each_transient_fault_is_retried(
    fault: Fault, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    issue_id = redmine_admin.create_issue(redmine_project["id"], "ファイルサーバに接続できない")["id"]
    slept: list[float] = []
    policy = RetryPolicy(attempts=4, read_timeout_s=1.5)
    with FaultProxy(
        redmine_server.url,
        decide=on_path(fault, f"/issues/{issue_id}.json", first_attempts=1),
        stall_s=6,
        retry_after="2",
    ) as proxy:
        client = RedmineClient(proxy.url, redmine_server.admin_key, policy, sleep=slept.append)
        started = time.monotonic()
        document = client.issue(issue_id)
        elapsed = time.monotonic() - started

    assert document["issue"]["id"] == issue_id
    assert client.stats.retries >= 1 and client.stats.requests == client.stats.retries + 1
    if fault is Fault.TOO_MANY_REQUESTS:
        assert slept[0] == 2.0, "Retry-After is honoured"
    if fault is Fault.STALL:
        assert elapsed < 5, "the read timeout cut the stalled request short"


def test_twenty_percent_failing_requests_give_the_same_snapshot(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    reference = pull_desk(redmine_server.url, tmp_path / "direct", key, desk)
    with FaultProxy(redmine_server.url, decide=fail_fraction(0.2), stall_s=3, retry_after="0") as proxy:
        flaky = pull_desk(proxy.url, tmp_path / "flaky", key, desk, concurrency=4)
        injected = proxy.faults_injected

    assert reference.ok and flaky.ok, flaky.failed
    assert injected > 0 and flaky.retries >= injected
    assert issue_files(tmp_path / "flaky") == issue_files(tmp_path / "direct")
    stable = ("statuses", "trackers", "priorities", "versions", "categories")
    direct_lookups, flaky_lookups = (
        snapshot.load_lookups(tmp_path / "direct"),
        snapshot.load_lookups(tmp_path / "flaky"),
    )
    assert {t: flaky_lookups[t] for t in stable} == {t: direct_lookups[t] for t in stable}


def test_a_permanently_failing_issue_is_reported_and_the_rest_completes(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk)
    time.sleep(1.1)
    redmine_admin.add_note(desk.vpn, "再発した")
    time.sleep(1.1)  # the printer issue is now the newest: a careless cursor would jump past the vpn issue
    redmine_admin.add_note(desk.printer, "用紙切れだった")
    broken = on_path(Fault.HTTP_500, f"/issues/{desk.vpn}.json")

    with FaultProxy(redmine_server.url, decide=broken) as proxy:
        result = CliRunner().invoke(
            app,
            [
                "pull",
                "--url",
                proxy.url,
                "--snapshot",
                str(tmp_path),
                "--project",
                desk.project["identifier"],
                "--full",
                "--retries",
                "2",
                "--json",
            ],
            env={"REDMINE_API_KEY": key},
        )

    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["failed_ids"] == [desk.vpn] and "HTTP 500" in report["failed"][0]["reason"]
    assert report["removed"] == 0 and snapshot.issue_path(tmp_path, desk.vpn).exists()
    assert stored(tmp_path, desk.printer)["issue"]["journals"][-1]["notes"] == "用紙切れだった"
    # The cursor stayed below the failed issue, so an incremental run picks it up even without overlap.
    healed = pull_desk(redmine_server.url, tmp_path, key, desk, overlap_s=0)
    assert healed.ok and healed.fetched == 1
    assert stored(tmp_path, desk.vpn)["issue"]["journals"][-1]["notes"] == "再発した"


def test_the_api_key_never_appears_in_output_even_when_everything_fails(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    runner = CliRunner()
    outputs = []
    every_fault = fail_fraction(1.0, (Fault.HTTP_500, Fault.RESET, Fault.TRUNCATE, Fault.TOO_MANY_REQUESTS))

    def chaos(method: str, path: str, seen: int) -> Fault:  # listing works, every issue fetch fails
        return every_fault(method, path, seen) if path.startswith("/issues/") else Fault.NONE

    with FaultProxy(redmine_server.url, decide=chaos, retry_after="0") as proxy:
        for json_flag in ([], ["--json"]):
            result = runner.invoke(
                app,
                [
                    "pull",
                    "--url",
                    proxy.url,
                    "--snapshot",
                    str(tmp_path / "snap"),
                    "--api-key-file",
                    str(key_file),
                    "--project",
                    desk.project["identifier"],
                    "--retries",
                    "2",
                    *json_flag,
                ],
            )
            outputs.append(result.output)  # stdout and stderr together
            assert result.exit_code == 1
    unreachable = runner.invoke(
        app,
        ["pull", "--url", "http://127.0.0.1:9", "--snapshot", str(tmp_path / "third"), "--retries", "1"],
        env={"REDMINE_API_KEY": key},
    )
    outputs.append(unreachable.output)
    assert unreachable.exit_code == 2 and "cannot reach Redmine at 127.0.0.1:9" in unreachable.output
    assert "Connection refused" in unreachable.output and not (tmp_path / "third").exists()
    assert "failed issue ids" in outputs[0] and '"failed_ids"' in outputs[1], "the errors were printed"
    for output in outputs:
        assert key not in output
    assert not any(key in p.read_text() for p in (tmp_path).rglob("*.json"))


def test_a_mistyped_key_is_a_setup_error_and_changes_nothing(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk)
    before = issue_files(tmp_path)
    state_before = (tmp_path / snapshot.STATE_FILE).read_bytes()
    # Redmine treats an unknown key as anonymous: without the check a run would fetch the public issues
    # of every project and report success.
    for extra in ([], ["--full"]):
        mistyped = CliRunner().invoke(
            app,
            ["pull", "--url", redmine_server.url, "--snapshot", str(tmp_path), *extra],
            env={"REDMINE_API_KEY": key[:-1] + "x"},
        )
        assert mistyped.exit_code == 2 and "does not accept the API key" in mistyped.stderr
        assert mistyped.stderr.count("\n") == 1 and mistyped.stdout == ""
        assert key[:-1] not in mistyped.output
    assert issue_files(tmp_path) == before
    assert (tmp_path / snapshot.STATE_FILE).read_bytes() == state_before


def test_a_non_admin_key_degrades_forbidden_lookups_and_says_so_once(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    report = pull_desk(redmine_server.url, tmp_path, desk.member["api_key"], desk)

    assert report.ok
    forbidden_warnings = [w for w in report.warnings if "not readable" in w]
    assert len(forbidden_warnings) == 1 and "users" in forbidden_warnings[0]
    lookups = snapshot.load_lookups(tmp_path)
    assert lookups["users"][str(desk.member["id"])] == {"name": "次郎 佐藤"}, "name taken from the issues"
    assert lookups["custom_fields"][str(redmine_server.custom_field_id)] == {"name": "影響範囲"}
    assert sorted(snapshot.stored_issue_ids(tmp_path)) == desk.public_ids, "the private issue is not visible"
    assert "社外秘" not in snapshot.issue_path(tmp_path, desk.vpn).read_text(encoding="utf-8")


def test_text_format_is_recorded_for_a_new_snapshot_and_never_overwritten(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    pull_desk(redmine_server.url, tmp_path, key, desk, text_format="common_mark")
    assert snapshot.load_state(tmp_path)["text_format"] == "common_mark"
    again = pull_desk(redmine_server.url, tmp_path, key, desk, text_format="textile")
    assert snapshot.load_state(tmp_path)["text_format"] == "common_mark"
    assert any("text_format" in w for w in again.warnings)


def test_kill_9_mid_run_then_rerun_converges_without_refetching(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    key = redmine_server.admin_key
    ids = [redmine_admin.create_issue(redmine_project["id"], f"アカウントロック解除 {n}")["id"] for n in range(8)]
    crashed, reference = tmp_path / "crashed", tmp_path / "reference"
    slow_issue_fetches = on_path(Fault.SLOW, "/issues/")
    with FaultProxy(redmine_server.url, decide=slow_issue_fetches, slow_s=0.4) as proxy:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "anchorkit",
                "pull",
                "--url",
                proxy.url,
                "--snapshot",
                str(crashed),
                "--project",
                redmine_project["identifier"],
                "--concurrency",
                "1",
                "--json",
            ],
            env={**os.environ, "REDMINE_API_KEY": key},
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while len(snapshot.stored_issue_ids(crashed)) < 3 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    survivors = snapshot.stored_issue_ids(crashed)
    assert 3 <= len(survivors) < len(ids), "killed mid-run"
    assert not (crashed / "state.json").exists(), "the cursor was not advanced by the killed run"

    resumed = pull(
        redmine_server.url, crashed, key, PullSettings(projects=(redmine_project["identifier"],), policy=FAST)
    )
    pull(redmine_server.url, reference, key, PullSettings(projects=(redmine_project["identifier"],), policy=FAST))

    assert resumed.ok and resumed.unchanged == len(survivors)
    assert resumed.fetched == len(ids) - len(survivors), "nothing already stored was fetched again"
    assert issue_files(crashed) == issue_files(reference)
    assert not list(crashed.rglob(".*.tmp"))
    assert snapshot.load_state(crashed)["cursor"] == snapshot.load_state(reference)["cursor"]


def test_a_project_redmine_does_not_show_is_a_usage_error_that_writes_nothing(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, desk: Helpdesk
) -> None:
    key, host = redmine_server.admin_key, redmine_server.url.removeprefix("http://")
    other = redmine_admin.create_project()  # the member of the desk is no member here: Redmine answers 403

    def invoke(snap: Path, projects: list[str], api_key: str) -> Any:
        argv = ["pull", "--url", redmine_server.url, "--snapshot", str(snap), "--retries", "1"]
        return CliRunner().invoke(app, [*argv, *(f"--project={p}" for p in projects)], env={"REDMINE_API_KEY": api_key})

    mistyped = invoke(tmp_path / "new", ["helpdsek"], key)
    assert mistyped.exit_code == 2 and mistyped.stdout == ""
    assert mistyped.stderr == (
        f"error: --project helpdsek: Redmine at {host} has no such project, or this API key may not see its "
        "issues (HTTP 404)\n"
    )
    assert not (tmp_path / "new").exists(), "no snapshot folder holding only lookups.json and state.json"

    existing = tmp_path / "existing"
    assert pull_desk(redmine_server.url, existing, key, desk).ok
    before = {p.name: p.read_bytes() for p in existing.rglob("*") if p.is_file() and p.name != ".pull.lock"}
    # A good project listed first does not let the run go on: nothing is fetched, stored or moved.
    redmine_admin.add_note(desk.printer, "トナー交換で解決")
    for projects, api_key, status in (
        ([desk.project["identifier"], "helpdsek"], key, 404),
        ([desk.project["identifier"], other["identifier"]], desk.member["api_key"], 403),
    ):
        refused = invoke(existing, projects, api_key)
        assert refused.exit_code == 2, refused.output
        assert f"--project {projects[1]}: Redmine at {host} has no such project" in refused.stderr
        assert f"(HTTP {status})" in refused.stderr and api_key not in refused.output
        after = {p.name: p.read_bytes() for p in existing.rglob("*") if p.is_file() and p.name != ".pull.lock"}
        assert after == before


def test_an_issue_that_always_fails_is_fetched_again_alone_not_with_every_other_issue(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    broken = on_path(Fault.HTTP_500, f"/issues/{desk.vpn}.json")
    with FaultProxy(redmine_server.url, decide=broken) as proxy:
        first = pull_desk(proxy.url, tmp_path, key, desk)
        again = pull_desk(proxy.url, tmp_path, key, desk)
    assert first.failed_ids == again.failed_ids == [desk.vpn]
    assert not again.refetched and again.fetched == 0, "the other issues were stored by the first run"
    assert again.requests_by_purpose["issues"] == FAST.attempts, "the failed issue alone, with its retries"
    healed = pull_desk(redmine_server.url, tmp_path, key, desk)
    assert healed.ok and healed.written_ids == [desk.vpn] and not healed.refetched

    # A refetch in which a stored issue fails, changed or not: the refetch counts as done for the others, and
    # the next run fetches that one again although its updated_on did not change.
    with FaultProxy(redmine_server.url, decide=broken) as proxy:
        full = pull_desk(proxy.url, tmp_path, key, desk, full=True)
    assert full.refetched and full.failed_ids == [desk.vpn]
    assert snapshot.load_state(tmp_path)["refetch_pending"] == [desk.vpn]
    after = pull_desk(redmine_server.url, tmp_path, key, desk, refetch_every_s=3600)
    assert after.ok and not after.refetched and (after.fetched, after.requests_by_purpose["issues"]) == (1, 1)
    assert "refetch_pending" not in snapshot.load_state(tmp_path)


def replaced_body(change: Callable[[bytes], bytes]) -> Rewrite:
    return lambda reply: (reply[0], reply[1], change(reply[2]))


def with_journals_of_another_type(body: bytes) -> bytes:
    document = json.loads(body)
    document["issue"]["journals"] = "oops"
    return json.dumps(document).encode()


DEEP = b"[" * 100_000 + b"]" * 100_000
# Replies no Redmine sends, for one issue: that issue fails alone, named with what is wrong; its stored copy stays.
UNUSABLE_ISSUE_REPLIES = {
    "nested 100,000 deep": (lambda _: b'{"issue": ' + DEEP + b"}", "response refused: JSON nested too deeply"),
    "not UTF-8": (lambda body: body.replace("接続".encode(), b"\xff\xfe"), "response is not UTF-8 (invalid byte at"),
    "NaN": (lambda body: re.sub(rb'"done_ratio":\d+', b'"done_ratio":NaN', body), "NaN is not a JSON number"),
    "journals not a list": (with_journals_of_another_type, "ticket #{id}: 'journals' must be a list, not str"),
    "an HTML page": (lambda _: b"<html><body>Maintenance</body></html>", "response is not JSON (Expecting value"),
}


def test_a_reply_that_is_not_redmines_json_fails_its_issue_alone_and_keeps_the_stored_copy(
    tmp_path: Path, redmine_server: RedmineServer, desk: Helpdesk
) -> None:
    key = redmine_server.admin_key
    assert pull_desk(redmine_server.url, tmp_path, key, desk).ok
    before = issue_files(tmp_path)
    for name, (change, reason) in UNUSABLE_ISSUE_REPLIES.items():
        bad = on_path(Fault.REWRITE, f"/issues/{desk.vpn}.json")
        with FaultProxy(redmine_server.url, decide=bad, rewrite=replaced_body(change)) as proxy:
            report = pull_desk(proxy.url, tmp_path, key, desk, full=True)
        assert report.failed_ids == [desk.vpn], name
        assert report.failed[0].reason.startswith(f"GET /issues/{desk.vpn}.json: "), name
        assert reason.format(id=desk.vpn) in report.failed[0].reason, (name, report.failed[0].reason)
        assert issue_files(tmp_path) == before, name

    # JSON is UTF-8 (RFC 8259), whatever charset the header names; a byte order mark is skipped.
    for name, rewrite in {
        "latin-1 charset": lambda reply: (
            reply[0],
            [("Content-Type", "application/json; charset=iso-8859-1")],
            reply[2],
        ),
        "BOM": replaced_body(lambda body: b"\xef\xbb\xbf" + body),
    }.items():
        with FaultProxy(redmine_server.url, decide=on_path(Fault.REWRITE, "/issues/"), rewrite=rewrite) as proxy:
            report = pull_desk(proxy.url, tmp_path, key, desk, full=True)
        assert report.ok and report.written_ids == [], name
        assert issue_files(tmp_path) == before, name


@pytest.mark.parametrize(
    ("rewrite", "reason"),
    [
        (replaced_body(lambda _: b'{"issues": ' + DEEP + b"}"), "response refused: JSON nested too deeply"),
        (lambda _: (422, [("Content-Type", "text/html")], b"<html>bad</html>"), "HTTP 422 (response is not JSON"),
        (
            lambda _: (200, [("Content-Type", "application/json"), ("Content-Encoding", "gzip")], b"notgzip"),
            "corrupt compressed body",
        ),
    ],
    ids=["nested", "422 with an HTML body", "broken gzip"],
)
def test_a_listing_reply_that_is_not_redmines_json_fails_the_listing_in_one_line(
    tmp_path: Path, redmine_server: RedmineServer, redmine_project: dict[str, Any], rewrite: Rewrite, reason: str
) -> None:
    key = redmine_server.admin_key
    with FaultProxy(redmine_server.url, decide=on_path(Fault.REWRITE, "/issues.json"), rewrite=rewrite) as proxy:
        result = CliRunner().invoke(
            app,
            ["pull", "--url", proxy.url, "--snapshot", str(tmp_path), "--project", redmine_project["identifier"]],
            env={"REDMINE_API_KEY": key, "ANCHORKIT_RETRIES": "2"},
        )
    assert result.exit_code == 1, result.output
    failures = [line for line in result.stderr.splitlines() if line.startswith("failed: ")]
    listing = f"failed: listing of project {redmine_project['identifier']!r} failed: GET /issues.json: "
    assert len(failures) == 1 and failures[0].startswith(listing) and reason in failures[0], result.stderr
    assert "Traceback" not in result.output and key not in result.output


def test_a_key_check_reply_nested_too_deeply_is_a_setup_error_naming_the_host(
    tmp_path: Path, redmine_server: RedmineServer
) -> None:
    deep = replaced_body(lambda _: DEEP)
    with FaultProxy(redmine_server.url, decide=on_path(Fault.REWRITE, "/users/current.json"), rewrite=deep) as proxy:
        result = CliRunner().invoke(
            app,
            ["pull", "--url", proxy.url, "--snapshot", str(tmp_path / "snap"), "--retries", "1", "--json"],
            env={"REDMINE_API_KEY": redmine_server.admin_key},
        )
    host = proxy.url.removeprefix("http://")
    assert result.exit_code == 2 and result.stderr == (
        f"error: Redmine at {host} did not answer the key check: GET /users/current.json: response refused: JSON "
        "nested too deeply (more than 200 levels) after 1 attempt\n"
    )
    assert json.loads(result.stdout)["exit_code"] == 2 and not (tmp_path / "snap").exists()
