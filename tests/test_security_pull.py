"""What pull must never leak, against the real Redmine (a proxy in front of it for what Redmine itself
will not do, such as redirecting to another host): the API key, a private ticket's subject, the
password of a URL.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.faultproxy import Fault, FaultProxy, HeaderRecorder, on_path
from support.redmine_server import RedmineAdmin, RedmineServer
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.publish.state import LocalStateStore
from anchorkit.render.transform import TransformOptions, transform_snapshot
from anchorkit.source import preflight, snapshot
from anchorkit.source.pull import PullSettings, pull
from anchorkit.source.redmine import RetryPolicy
from anchorkit.sync import pull_with_state

pytestmark = pytest.mark.redmine

REPO = Path(__file__).resolve().parent.parent

FAST = RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_max_s=0.05, connect_timeout_s=2, read_timeout_s=10)


def pulling(project: dict[str, Any], **options: Any) -> PullSettings:
    return PullSettings(projects=(project["identifier"],), policy=FAST, **options)


def run_pull(url: str, snap: Path, key: str, project: dict[str, Any], *extra: str) -> Any:
    return CliRunner().invoke(
        app,
        ["pull", "--url", url, "--snapshot", str(snap), "--project", project["identifier"], "--retries", "1", *extra],
        env={"REDMINE_API_KEY": key},
    )


@pytest.mark.parametrize("redirected", ["/users/current.json", "/issues.json", "/issue_statuses.json"])
def test_a_redirect_to_another_host_is_refused_before_the_api_key_goes_there(
    tmp_path: Path,
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    redmine_project: dict[str, Any],
    redirected: str,
) -> None:
    redmine_admin.create_issue(redmine_project["id"], "VPN接続が不安定になる")
    key = redmine_server.admin_key
    with (
        HeaderRecorder() as elsewhere,
        FaultProxy(
            redmine_server.url, decide=on_path(Fault.REDIRECT, redirected), redirect=lambda path: elsewhere.url + path
        ) as proxy,
    ):
        result = run_pull(proxy.url, tmp_path / "snap", key, redmine_project)

    reached = [path for path, _headers in elsewhere.requests]  # (the headers would print the key)
    assert reached == [], "nothing at all, and above all not the key, reached the other host"
    assert result.exit_code == 2
    proxy_host = proxy.url.removeprefix("http://")
    assert result.stderr == (
        f"error: Redmine at {proxy_host} redirected {redirected} to another host, "
        f"{elsewhere.url.removeprefix('http://')}: refused, the API key is only sent to {proxy_host} "
        "(if Redmine has moved there, give that address as --url)\n"
    )
    assert "Traceback" not in result.output and key not in result.output


def test_a_redirect_within_the_same_server_is_followed(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    issue = redmine_admin.create_issue(redmine_project["id"], "プリンタで印刷できない")
    # Redmine moved from /old/ to the root of the same server: every request is redirected there once.
    moved = on_path(Fault.REDIRECT, "/old/")
    with FaultProxy(redmine_server.url, decide=moved, redirect=lambda path: path.removeprefix("/old")) as proxy:
        report = pull(proxy.url + "/old", tmp_path, redmine_server.admin_key, pulling(redmine_project))
        redirected = proxy.faults[Fault.REDIRECT]

    assert report.ok and snapshot.stored_issue_ids(tmp_path) == {issue["id"]}
    assert redirected >= 3, "the key check, the listing and the issue were all redirected, and followed"
    assert (
        json.loads(snapshot.issue_path(tmp_path, issue["id"]).read_text())["issue"]["subject"]
        == "プリンタで印刷できない"
    )


# --------------------------------------------------------------------------------------------------
# Item 2: a private subtask contributes its number, never its subject


def test_a_private_subtasks_subject_reaches_neither_the_snapshot_nor_the_document(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    project_id = redmine_project["id"]
    parent = redmine_admin.create_issue(project_id, "新入社員のPC準備")["id"]
    secret = redmine_admin.create_issue(
        project_id, "人事異動: 山田さんの退職手続き", is_private=True, parent_issue_id=parent
    )
    public = redmine_admin.create_issue(project_id, "プリンタ交換", parent_issue_id=parent)
    later = redmine_admin.create_issue(project_id, "来期の組織変更案", parent_issue_id=parent)
    member = redmine_admin.create_user()
    redmine_admin.add_member(project_id, member["id"], [redmine_server.reader_role_id])
    snap, out = tmp_path / "snap", tmp_path / "out"

    # Redmine shows the subject to both keys. The administrator's goes last, as in the incremental run below:
    # switching between it and another key changes the custom fields left out, so every issue is refetched.
    for key in (member["api_key"], redmine_server.admin_key):
        report = pull(redmine_server.url, snap, key, pulling(redmine_project, full=True))
        assert report.ok
        children = stored_children(snap, parent)
        assert {"id": secret["id"]} in children and "人事異動" not in json.dumps(children, ensure_ascii=False)
        assert {c["id"]: c.get("subject") for c in children}[public["id"]] == "プリンタ交換"
    document = transformed(snap, out, parent)
    assert f"- 子チケット: #{secret['id']}, #{public['id']} プリンタ交換, #{later['id']} 来期の組織変更案" in document
    assert "人事異動" not in document

    # A subtask made private after its parent was stored: the parent's updated_on does not change,
    # yet the next incremental pull takes the subject out of it.
    redmine_admin.update_issue(later["id"], is_private=True)
    report = pull(redmine_server.url, snap, redmine_server.admin_key, pulling(redmine_project))
    assert report.ok and not report.full and parent in report.written_ids
    assert {"id": later["id"]} in stored_children(snap, parent)
    assert "来期の組織変更案" not in transformed(snap, out, parent)


def test_a_private_parent_or_related_issue_contributes_its_number_only(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    """Redmine gives a parent and a relation as ids: nothing of a private one's text reaches the public
    issue's snapshot or document (with the admin key, which sees the private issue itself)."""
    project_id = redmine_project["id"]
    secret_parent = redmine_admin.create_issue(project_id, "役員会議資料の準備", is_private=True)["id"]
    child = redmine_admin.create_issue(project_id, "会議室のプロジェクタ不調", parent_issue_id=secret_parent)["id"]
    secret_related = redmine_admin.create_issue(project_id, "懲戒処分の記録", is_private=True)["id"]
    redmine_admin.request(
        "POST",
        f"/issues/{child}/relations.json",
        json={"relation": {"issue_to_id": secret_related, "relation_type": "relates"}},
    )
    snap, out = tmp_path / "snap", tmp_path / "out"

    report = pull(redmine_server.url, snap, redmine_server.admin_key, pulling(redmine_project, full=True))

    assert report.ok and snapshot.stored_issue_ids(snap) == {child}
    stored = json.loads(snapshot.issue_path(snap, child).read_text())["issue"]
    assert stored["parent"] == {"id": secret_parent}, "the parent is kept, as its number"
    assert any(secret_related in (r.get("issue_id"), r.get("issue_to_id")) for r in stored["relations"])
    document = transformed(snap, out, child)
    assert f"#{secret_parent}" in document and f"#{secret_related}" in document
    everything = "".join(
        path.read_text(encoding="utf-8") for path in [*snap.rglob("*.json"), *out.rglob("*")] if path.is_file()
    )
    assert "役員会議資料" not in everything and "懲戒処分" not in everything


def test_a_snapshot_stored_before_subtasks_were_checked_is_fetched_again_once(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    parent = redmine_admin.create_issue(redmine_project["id"], "新入社員のPC準備")["id"]
    secret = redmine_admin.create_issue(
        redmine_project["id"], "人事異動: 山田さんの退職手続き", is_private=True, parent_issue_id=parent
    )
    key, settings = redmine_server.admin_key, pulling(redmine_project)
    pull(redmine_server.url, tmp_path, key, settings)
    # What an earlier anchorkit stored: the subtask's subject, and no mark that subtasks were checked.
    document = json.loads(snapshot.issue_path(tmp_path, parent).read_text())
    document["issue"]["children"] = [{"id": secret["id"], "subject": "人事異動: 山田さんの退職手続き"}]
    snapshot.issue_path(tmp_path, parent).write_text(json.dumps(document, ensure_ascii=False))
    state = snapshot.load_state(tmp_path)
    del state["private_subtasks_checked"]
    snapshot.write_state(tmp_path, state)

    upgraded = pull(redmine_server.url, tmp_path, key, settings)
    assert upgraded.ok and upgraded.written_ids == [parent]
    assert any("fetched again, once" in warning for warning in upgraded.warnings)
    assert stored_children(tmp_path, parent) == [{"id": secret["id"]}]
    settled = pull(redmine_server.url, tmp_path, key, settings)
    assert settled.ok and settled.fetched == 0 and settled.warnings == []


def stored_children(snap: Path, issue_id: int) -> list[dict[str, Any]]:
    return list(json.loads(snapshot.issue_path(snap, issue_id).read_text())["issue"].get("children", []))


def transformed(snap: Path, out: Path, issue_id: int) -> str:
    report = transform_snapshot(snap, out, TransformOptions())
    assert not report.failed
    return (out / f"{issue_id}.md").read_text(encoding="utf-8")


def test_a_lookup_answered_with_another_body_is_a_warning_not_a_traceback(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    redmine_admin.create_issue(redmine_project["id"], "VPN接続が不安定になる")
    # Within the server, so followed: but what comes back is a user, not the statuses.
    elsewhere = on_path(Fault.REDIRECT, "/issue_statuses.json")
    with FaultProxy(redmine_server.url, decide=elsewhere, redirect=lambda _: "/users/current.json") as proxy:
        result = run_pull(proxy.url, tmp_path, redmine_server.admin_key, redmine_project, "--json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == ["lookups: could not read statuses; kept the previous names"]


# --------------------------------------------------------------------------------------------------
# A note made private (or edited) after it was pulled: Redmine changes no updated_on for it


def test_a_note_made_private_after_it_was_pulled_leaves_the_snapshot_with_full_or_the_periodic_refetch(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    key, project = redmine_server.admin_key, redmine_project
    issue = redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")["id"]
    redmine_admin.add_note(issue, "社外秘: 顧客の管理者パスワードは P@ss-1234")
    redmine_admin.add_note(issue, "再起動で解決")
    first, second = (journal["id"] for journal in redmine_admin.get_issue(issue)["issue"]["journals"])
    snap = tmp_path / "snap"
    assert pull(redmine_server.url, snap, key, pulling(project)).ok
    assert "P@ss-1234" in stored_text(snap, issue)

    updated_on = redmine_admin.get_issue(issue)["issue"]["updated_on"]
    redmine_admin.request("PUT", f"/journals/{first}.json", json={"journal": {"private_notes": True}})
    redmine_admin.request("PUT", f"/journals/{second}.json", json={"journal": {"notes": "BIOS更新で解決"}})
    assert redmine_admin.get_issue(issue)["issue"]["updated_on"] == updated_on, "Redmine dates neither change"

    # The limitation: an incremental run lists nothing changed, so the stored copy keeps both.
    incremental = pull(redmine_server.url, snap, key, pulling(project))
    assert incremental.ok and not incremental.refetched and incremental.fetched == 0
    assert "P@ss-1234" in stored_text(snap, issue) and "再起動で解決" in stored_text(snap, issue)

    full = run_pull(redmine_server.url, snap, key, project, "--full", "--json")
    assert full.exit_code == 0, full.output
    assert json.loads(full.stdout)["refetched"] is True and json.loads(full.stdout)["written_ids"] == [issue]
    assert "P@ss-1234" not in stored_text(snap, issue) and "BIOS更新で解決" in stored_text(snap, issue)
    assert "P@ss-1234" not in transformed(snap, tmp_path / "out", issue)

    # Without --full: the run after --refetch-every has passed since the last refetch fetches every issue again.
    redmine_admin.request("PUT", f"/journals/{second}.json", json={"journal": {"private_notes": True}})
    within = pull(redmine_server.url, snap, key, pulling(project, refetch_every_s=3600))
    assert not within.refetched and "BIOS更新で解決" in stored_text(snap, issue)
    time.sleep(1.1)
    periodic = pull(redmine_server.url, snap, key, pulling(project, refetch_every_s=1))
    assert periodic.ok and periodic.refetched and periodic.written_ids == [issue]
    assert [j for j in json.loads(stored_text(snap, issue))["issue"]["journals"] if j["notes"]] == []
    after = pull(redmine_server.url, snap, key, pulling(project, refetch_every_s=3600))
    assert not after.refetched and after.fetched == 0
    assert after.requests_by_purpose == {"key check": 1, "custom fields": 1, "list": 1}


def stored_text(snap: Path, issue_id: int) -> str:
    return snapshot.issue_path(snap, issue_id).read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# Custom fields only some roles may see (visible: false): an administrator's key is shown their values

RESTRICTED_FIELD = "社内限定: 契約金額"


def restricted_field_for(admin: RedmineAdmin, project_id: int) -> int:
    """A custom field only administrators and a role no test user holds may see, enabled in this project.
    Made once per database: a new restricted field changes what every pull of an administrator's key
    leaves out."""
    ruby = f"""
    role = Role.find_by(name: "anchorkit contract managers") || Role.create!(
      name: "anchorkit contract managers", permissions: [:view_issues])
    field = IssueCustomField.find_by(name: {RESTRICTED_FIELD!r}) || IssueCustomField.create!(
      name: {RESTRICTED_FIELD!r}, field_format: "string", is_for_all: false, visible: false,
      role_ids: [role.id], tracker_ids: Tracker.pluck(:id))
    field.projects << Project.find({project_id}) unless field.project_ids.include?({project_id})
    puts field.id
    """
    return int(admin.rails_runner(ruby).split()[-1])


def test_values_of_custom_fields_only_some_roles_may_see_are_left_out_and_unreadable_definitions_stop_the_run(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    key, project = redmine_server.admin_key, redmine_project
    restricted = restricted_field_for(redmine_admin, project["id"])
    public = redmine_server.custom_field_id
    issue = redmine_admin.create_issue(
        project["id"],
        "保守契約の更新",
        custom_fields=[{"id": public, "value": "全社"}, {"id": restricted, "value": "1200万円"}],
    )["id"]
    redmine_admin.update_issue(issue, custom_fields=[{"id": restricted, "value": "1500万円"}], notes="更新しました")
    member = redmine_admin.create_user()
    redmine_admin.add_member(project["id"], member["id"], [redmine_server.reader_role_id])
    snap, everything = tmp_path / "snap", tmp_path / "everything"

    # Redmine shows the administrator the values, in the issue and in the journal that changed them.
    kept = pull(redmine_server.url, everything, key, pulling(project, include_private=True))
    assert kept.ok and "1200万円" in stored_text(everything, issue) and "1500万円" in stored_text(everything, issue)
    # Kept with --include-private, and recorded: a document made without it leaves them out all the same.
    assert restricted in snapshot.load_state(everything)["restricted_custom_fields"]
    assert "万円" not in transformed(everything, tmp_path / "everything-out", issue)

    report = pull(redmine_server.url, snap, key, pulling(project))
    assert report.ok and report.requests_by_purpose["custom fields"] == 1
    stored = json.loads(stored_text(snap, issue))["issue"]
    assert [(f["id"], f["value"]) for f in stored["custom_fields"]] == [(public, "全社")]
    assert [j["notes"] for j in stored["journals"]] == ["更新しました"], "the journal stays, without the change"
    assert "万円" not in stored_text(snap, issue) and "万円" not in transformed(snap, tmp_path / "out", issue)
    # Nor the field's name: lookups.json names the fields the stored issues use (with --include-private, this one).
    assert str(restricted) in snapshot.load_lookups(everything)["custom_fields"]
    assert str(restricted) not in snapshot.load_lookups(snap)["custom_fields"]
    assert snapshot.load_state(snap)["restricted_custom_fields"] == sorted(
        f["id"] for f in redmine_admin.request("GET", "/custom_fields.json")["custom_fields"] if not f["visible"]
    )

    # A member's key is not shown them by Redmine, and may not read the definitions: none are asked for.
    as_member = pull(redmine_server.url, tmp_path / "member", member["api_key"], pulling(project))
    assert as_member.ok and "custom fields" not in as_member.requests_by_purpose
    assert "万円" not in stored_text(tmp_path / "member", issue)

    # What an earlier anchorkit stored: the values, and no record of the fields left out. Fetched again, once.
    snapshot.issue_path(snap, issue).write_bytes(snapshot.issue_path(everything, issue).read_bytes())
    state = snapshot.load_state(snap)
    del state["restricted_custom_fields"]
    snapshot.write_state(snap, state)
    upgraded = pull(redmine_server.url, snap, key, pulling(project))
    assert upgraded.ok and upgraded.refetched and upgraded.written_ids == [issue]
    assert any("restricted to some roles" in warning for warning in upgraded.warnings)
    assert "万円" not in stored_text(snap, issue)
    settled = pull(redmine_server.url, snap, key, pulling(project))
    assert settled.ok and not settled.refetched and settled.warnings == []

    # Definitions that cannot be read stop the run before anything is written: no value slips through.
    before = {p.name: p.read_bytes() for p in snap.rglob("*.json")}
    with FaultProxy(redmine_server.url, decide=on_path(Fault.HTTP_500, "/custom_fields.json")) as proxy:
        refused = run_pull(proxy.url, snap, key, project, "--full")
        fresh = run_pull(proxy.url, tmp_path / "new", key, project)
    for result in (refused, fresh):
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.startswith("error: cannot read the custom field definitions from Redmine at ")
        assert "nothing was pulled" in result.stderr and key not in result.output
    assert {p.name: p.read_bytes() for p in snap.rglob("*.json")} == before
    assert not (tmp_path / "new").exists()


# --------------------------------------------------------------------------------------------------
# --include-private switched: stored issues never hold private content the state does not allow

PRIVATE_NOTE = "社外秘メモ"


def holding_private_notes(snap: Path) -> list[int]:
    return sorted(i for i in snapshot.stored_issue_ids(snap) if PRIVATE_NOTE in stored_text(snap, i))


def killed_pull(url: str, snap: Path, key: str, project: dict[str, Any], *extra: str) -> None:
    """A pull in a process of its own, killed (SIGKILL) once it has stored an issue with a private note."""
    with FaultProxy(url, decide=on_path(Fault.SLOW, "/issues/"), slow_s=0.4) as proxy:
        argv = ["pull", "--url", proxy.url, "--snapshot", str(snap), "--project", project["identifier"], *extra]
        child = subprocess.Popen(
            [sys.executable, "-m", "anchorkit", *argv, "--concurrency", "1"],
            env={**os.environ, "REDMINE_API_KEY": key},
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not holding_private_notes(snap) and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()


@pytest.mark.parametrize("before", ["no earlier run", "a default run"])
def test_an_include_private_run_killed_midway_leaves_no_private_note_to_the_next_default_run(
    tmp_path: Path,
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    redmine_project: dict[str, Any],
    before: str,
) -> None:
    key, project, snap = redmine_server.admin_key, redmine_project, tmp_path / "snap"
    ids = [redmine_admin.create_issue(project["id"], f"アカウントロック解除 {n}")["id"] for n in range(6)]
    for issue in ids:
        redmine_admin.add_note(issue, f"{PRIVATE_NOTE} {issue}", private=True)
    if before == "a default run":
        assert pull(redmine_server.url, snap, key, pulling(project)).ok and not holding_private_notes(snap)

    killed_pull(redmine_server.url, snap, key, project, "--include-private")
    assert 0 < len(holding_private_notes(snap)) < len(ids), "killed mid-run, after storing private notes"
    assert snapshot.load_state(snap)["include_private"] is True, "said before the first issue was written"

    after = pull(redmine_server.url, snap, key, pulling(project))
    assert after.ok and after.refetched and holding_private_notes(snap) == []
    assert snapshot.load_state(snap)["include_private"] is False


def test_a_default_run_records_include_private_off_only_once_every_issue_was_fetched_again(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    key, project = redmine_server.admin_key, redmine_project
    noted = redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")["id"]
    redmine_admin.add_note(noted, f"{PRIVATE_NOTE}: 管理者パスワード", private=True)
    plain = redmine_admin.create_issue(project["id"], "プリンタで印刷できない")["id"]
    assert pull(redmine_server.url, tmp_path, key, pulling(project, include_private=True)).ok
    assert holding_private_notes(tmp_path) == [noted]

    # The listing fails, then one issue does: the refetch is not complete, the state still says private content
    # may be stored, and the next run fetches every issue again.
    for failing in ("/issues.json", f"/issues/{noted}.json"):
        with FaultProxy(redmine_server.url, decide=on_path(Fault.HTTP_500, failing)) as proxy:
            report = pull(proxy.url, tmp_path, key, pulling(project))
        assert not report.ok and report.refetched, failing
        assert snapshot.load_state(tmp_path)["include_private"] is True, failing
    assert holding_private_notes(tmp_path) == [noted] and report.failed_ids == [noted]

    done = pull(redmine_server.url, tmp_path, key, pulling(project))
    assert done.ok and done.refetched and sorted(done.written_ids) == [noted]
    assert holding_private_notes(tmp_path) == [] and snapshot.load_state(tmp_path)["include_private"] is False
    assert snapshot.stored_issue_ids(tmp_path) == {noted, plain}


# --------------------------------------------------------------------------------------------------
# An issue a key that is not an administrator's no longer sees: deleted, or made private?


def test_an_issue_that_vanishes_from_a_members_listing_is_withdrawn_not_taken_for_deleted(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    project = redmine_project
    member = redmine_admin.create_user()
    redmine_admin.add_member(project["id"], member["id"], [redmine_server.reader_role_id])
    hidden = redmine_admin.create_issue(project["id"], "人事異動に伴うアカウント変更")["id"]
    kept = redmine_admin.create_issue(project["id"], "プリンタで印刷できない")["id"]
    assert pull(redmine_server.url, tmp_path, member["api_key"], pulling(project)).ok

    redmine_admin.update_issue(hidden, is_private=True)  # the member's role sees no private issue of others'
    full = pull(redmine_server.url, tmp_path, member["api_key"], pulling(project, full=True))

    assert full.ok and full.removed_ids == full.withdrawn_ids == [hidden]
    assert snapshot.stored_issue_ids(tmp_path) == {kept}
    assert snapshot.withdrawn_in(snapshot.load_state(tmp_path)) == {hidden}, "unpublished by the next sync"


# --------------------------------------------------------------------------------------------------
# Who may read the snapshot: with --include-private its files are their owner's alone


def file_modes(snap: Path) -> dict[str, int]:
    """The mode of every file of a snapshot (but the lock file, which holds nothing), by its relative path."""
    found = {str(p.relative_to(snap)): stat.S_IMODE(p.stat().st_mode) for p in snap.rglob("*") if p.is_file()}
    return {name: mode for name, mode in found.items() if name != preflight.LOCK_FILE}


def umask_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def test_an_include_private_snapshot_is_readable_by_its_owner_alone_and_a_default_run_writes_the_umasks_mode(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    key, project = redmine_server.admin_key, redmine_project
    noted = redmine_admin.create_issue(project["id"], "VPN接続が不安定になる")["id"]
    redmine_admin.add_note(noted, f"{PRIVATE_NOTE}: 管理者パスワード", private=True)
    redmine_admin.create_issue(project["id"], "プリンタで印刷できない")
    secret = redmine_admin.create_issue(project["id"], "人事異動に伴うアカウント削除", is_private=True)["id"]

    fresh = tmp_path / "fresh" / "snap"
    assert pull(redmine_server.url, fresh, key, pulling(project, include_private=True)).ok
    modes = file_modes(fresh)
    assert {"state.json", "lookups.json", f"issues/{secret}.json", f"issues/{noted}.json"} <= set(modes)
    assert set(modes.values()) == {0o600}
    folders = [tmp_path / "fresh", fresh, fresh / snapshot.ISSUES_DIR]
    assert {stat.S_IMODE(folder.stat().st_mode) for folder in folders} == {0o700}, "the folders made for them"

    # A snapshot pulled without it first: every file is its owner's once the run with it has fetched them again,
    # the files whose bytes did not change included.
    snap = tmp_path / "snap"
    assert pull(redmine_server.url, snap, key, pulling(project)).ok
    assert set(file_modes(snap).values()) == {umask_mode()}
    widened = pull(redmine_server.url, snap, key, pulling(project, include_private=True))
    assert widened.ok and widened.refetched and set(file_modes(snap).values()) == {0o600}

    # Without it again: the private content goes, what the run rewrites gets the umask's mode, what it leaves as
    # it is keeps 0600.
    narrowed = pull(redmine_server.url, snap, key, pulling(project))
    assert narrowed.ok and narrowed.written_ids == [noted] and narrowed.removed_ids == [secret]
    modes = file_modes(snap)
    assert (modes[f"issues/{noted}.json"], modes["state.json"]) == (umask_mode(), umask_mode())
    assert set(modes.values()) <= {0o600, umask_mode()} and holding_private_notes(snap) == []


def test_a_snapshot_restored_from_a_sync_state_with_include_private_is_its_owners_alone(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    issue = redmine_admin.create_issue(redmine_project["id"], "VPN接続が不安定になる")["id"]
    redmine_admin.add_note(issue, f"{PRIVATE_NOTE}: 管理者パスワード", private=True)
    store = LocalStateStore(tmp_path / "state")
    settings = pulling(redmine_project, include_private=True)
    assert pull_with_state(redmine_server.url, redmine_server.admin_key, store, tmp_path / "first", settings).ok

    restored = tmp_path / "runner" / "snap"  # another runner's empty disk: the raw issues come from the state
    report = pull_with_state(redmine_server.url, redmine_server.admin_key, store, restored, settings)
    assert report.ok and report.restored == 1 and holding_private_notes(restored) == [issue]
    assert set(file_modes(restored).values()) == {0o600}
    assert (
        stat.S_IMODE(restored.stat().st_mode) == stat.S_IMODE((restored / snapshot.ISSUES_DIR).stat().st_mode) == 0o700
    )


def test_a_local_sync_state_and_destination_of_an_include_private_sync_are_their_owners_alone(
    tmp_path: Path, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, redmine_project: dict[str, Any]
) -> None:
    issue = redmine_admin.create_issue(redmine_project["id"], "VPN接続が不安定になる")["id"]
    redmine_admin.add_note(issue, f"{PRIVATE_NOTE}: 管理者パスワード", private=True)
    state, docs = tmp_path / "jobs" / "state", tmp_path / "published" / "docs"
    project = ["--project", redmine_project["identifier"], "--url", redmine_server.url, "--include-private"]
    environment = {"REDMINE_API_KEY": redmine_server.admin_key}

    synced = CliRunner().invoke(app, ["sync", str(docs), "--state", str(state), *project], env=environment)
    assert synced.exit_code == 0, synced.output
    assert PRIVATE_NOTE in (state / "issues" / f"{issue}.json").read_text(encoding="utf-8")
    assert PRIVATE_NOTE in (docs / f"{issue}.md").read_text(encoding="utf-8")
    for folder in (state, docs):  # (the lock file holds the run's host and process id alone)
        written = {name: mode for name, mode in file_modes(folder).items() if name != ".sync.lock"}
        assert written and set(written.values()) == {0o600}, written
    assert {stat.S_IMODE(p.stat().st_mode) for p in (state, state / "issues", state.parent, docs, docs.parent)} == {
        0o700
    }

    # pull --state writes the raw issues it fetches into the state the same way.
    time.sleep(1.1)  # (a new updated_on: Redmine's are to the second)
    redmine_admin.add_note(issue, f"{PRIVATE_NOTE}: 二つ目", private=True)
    (state / "issues" / f"{issue}.json").chmod(0o644)
    pulled = CliRunner().invoke(
        app, ["pull", "--snapshot", str(tmp_path / "snap"), "--state", str(state), *project], env=environment
    )
    assert pulled.exit_code == 0, pulled.output
    assert "二つ目" in (state / "issues" / f"{issue}.json").read_text(encoding="utf-8")
    assert stat.S_IMODE((state / "issues" / f"{issue}.json").stat().st_mode) == 0o600
