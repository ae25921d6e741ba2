"""sync --state stores a raw issue only when its bytes change, on the real Redmine and the real S3 server.

A refetch (`--full`, or the daily `--refetch-every`) fetches every issue again: the state must not PUT the
raw JSON of each again when it already holds those bytes, and must still PUT every copy that differs,
whatever the manifest says: after a run interrupted between its raw writes and its commit, after a copy
was deleted by hand, after a note was edited (which Redmine does not date). Raw PUTs are counted on the
S3 client itself, not taken from the report.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import DUMMY_CREDENTIALS, S3Server
from test_sync_plan import NEW, SCOPE, listing, published, rendered, state
from test_sync_state import (
    StatelessRunner,
    cli_environment,
    comparable,
    objects_under,
    seed_issues,
    work_in,
)
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.publish.state import LocalStateStore, S3StateStore
from anchorkit.publish.upload import LocalDirTarget, PublishSettings, S3Location
from anchorkit.render.transform import TransformOptions
from anchorkit.source import snapshot
from anchorkit.source.pull import PullSettings
from anchorkit.sync import StatelessSyncReport, run_sync
from anchorkit.sync.apply import without_unchanged_raw
from anchorkit.sync.manifest import PENDING
from anchorkit.sync.plan import DeletePolicy, Local, plan

runner = CliRunner()


class Interrupted(BaseException):
    """Stands in for a run stopped between two writes (a BaseException: nothing in the run catches it)."""


def raw_puts(client: Any, state_prefix: str, interrupt_after: int | None = None) -> list[int]:
    """The ids whose raw JSON ``client`` PUTs into the state from now on, in order; with
    ``interrupt_after``, the run stops right after that issue's copy was stored (before the commit)."""
    issues = f"{state_prefix}/issues/"
    stored: list[int] = []

    def record(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if params["Key"].startswith(issues):
            issue_id = int(params["Key"][len(issues) :].removesuffix(".json"))
            stored.append(issue_id)
            context["interrupt"] = issue_id == interrupt_after

    def interrupt(context: dict[str, Any], **_: Any) -> None:
        if context.get("interrupt"):
            raise Interrupted

    client.meta.events.register("before-parameter-build.s3.PutObject", record)
    client.meta.events.register("after-call.s3.PutObject", interrupt)
    return stored


def raw_copies(s3_server: S3Server, state_prefix: str) -> dict[str, bytes]:
    return {k: v for k, v in objects_under(s3_server, state_prefix).items() if k.startswith("issues/")}


def edit_first_note(admin: RedmineAdmin, issue_id: int, notes: str) -> None:
    """Edit a note: the raw JSON changes, its ``updated_on`` does not (Redmine does not date it)."""
    before = admin.get_issue(issue_id)["issue"]
    journal = next(j for j in before["journals"] if j.get("notes"))
    admin.request("PUT", f"/journals/{journal['id']}.json", json={"journal": {"notes": notes}})
    assert admin.get_issue(issue_id)["issue"]["updated_on"] == before["updated_on"]


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_refetch_with_nothing_changed_stores_no_raw_issue_and_every_copy_that_differs_is_stored(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, (vpn, printer, mail) = seed_issues(redmine_admin, 3)
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    client = s3_server.client()
    stored = raw_puts(client, sync.state)
    assert sync.sync(client=client).ok and sorted(stored) == [vpn, printer, mail]
    manifest = sync.manifest()

    stored.clear()
    refetch = sync.sync(full=True, client=client)
    assert refetch.ok and refetch.pulls[0].refetched and refetch.pulls[0].requests_by_purpose["issues"] == 3
    assert stored == []  # was 3: every fetched issue's copy PUT again
    assert refetch.state_issues_written == 0 and refetch.state_issues_unchanged == 3
    planned = refetch.to_json()["planned"]
    assert planned["store_issues"] == 0 and planned["unchanged_issues"] == 3
    assert refetch.uploaded == [] and sync.manifest()["tickets"] == manifest["tickets"]

    # The dry run says the same, and writes nothing.
    work_in(tmp_path, cli_environment(redmine_server, s3_server, tmp_path), monkeypatch)
    dest, state = f"s3://{s3_server.bucket}/{sync.docs}", f"s3://{s3_server.bucket}/{sync.state}/"
    command = ["sync", dest, "--state", state, "--url", redmine_server.url, "--project", project["identifier"]]
    dry = runner.invoke(app, [*command, "--sidecars", "--full", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["planned"]["store_issues"] == 0 and report["planned"]["unchanged_issues"] == 3
    assert "PutObject" not in report["s3_requests"] and report["s3_requests"]["ListObjectsV2"] == 2
    shown = runner.invoke(app, [*command, "--sidecars", "--full", "--dry-run"])
    assert "store 0 raw issues (3 fetched again unchanged, not rewritten), drop 0" in shown.stdout

    # A note edited (no new updated_on) and a note added (a new one): exactly those two copies are stored.
    edit_first_note(redmine_admin, printer, "対応履歴: ルーターを交換")
    time.sleep(1.1)  # Redmine's updated_on has one-second resolution
    redmine_admin.add_note(mail, "メールサーバーを再起動")
    changed = sync.sync(full=True, client=client)
    assert changed.ok and sorted(stored) == sorted([printer, mail]) and changed.state_issues_unchanged == 1
    copies = raw_copies(s3_server, sync.state)
    assert "ルーターを交換" in copies[f"issues/{printer}.json"].decode()
    assert "メールサーバーを再起動" in copies[f"issues/{mail}.json"].decode()

    # A copy deleted by hand is stored again, though the manifest still names its version.
    s3_server.client().delete_object(Bucket=s3_server.bucket, Key=f"{sync.state}/issues/{vpn}.json")
    stored.clear()
    assert sync.sync(full=True, client=client).ok and stored == [vpn]
    assert set(raw_copies(s3_server, sync.state)) == {f"issues/{i}.json" for i in (vpn, printer, mail)}


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_copies_a_run_stored_before_it_was_interrupted_are_judged_by_their_bytes_not_by_the_manifest(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, (_, printer, _) = seed_issues(redmine_admin, 3)
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    assert sync.sync().ok
    original = redmine_admin.get_issue(printer)["issue"]["journals"][0]["notes"]

    def interrupted_refetch() -> None:
        """A refetch stopped right after it stored the printer's new copy: the manifest still describes the
        copy before it (and the printer's documents, which the run overwrote first, as pending)."""
        client = s3_server.client()
        raw_puts(client, sync.state, interrupt_after=printer)
        manifest = sync.manifest()
        with pytest.raises(Interrupted):
            sync.sync(full=True, client=client)
        left = sync.manifest()["tickets"]
        assert left[str(printer)]["stored"] == manifest["tickets"][str(printer)]["stored"]
        assert left[str(printer)]["updated_on"] is None and left[str(printer)]["objects"][f"{printer}.md"] == PENDING
        assert {i: e for i, e in left.items() if i != str(printer)} == {
            i: e for i, e in manifest["tickets"].items() if i != str(printer)
        }

    def agrees_with_an_uninterrupted_state() -> None:
        reference = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
        assert reference.sync().ok
        assert raw_copies(s3_server, sync.state) == raw_copies(s3_server, reference.state)
        assert comparable(sync.manifest()) == comparable(reference.manifest())
        assert sync.documents() == reference.documents()  # the document the stopped run overwrote too

    # The copy stored before the stop holds the edited note; the note is edited back before the next run,
    # which fetches the bytes the manifest describes. They are not what the state holds: stored again.
    edit_first_note(redmine_admin, printer, "対応履歴: 一時的な書き換え")
    interrupted_refetch()
    assert "一時的な書き換え" in raw_copies(s3_server, sync.state)[f"issues/{printer}.json"].decode()
    edit_first_note(redmine_admin, printer, original)
    client = s3_server.client()
    stored = raw_puts(client, sync.state)
    assert sync.sync(full=True, client=client).ok and stored == [printer]
    agrees_with_an_uninterrupted_state()

    # The copy stored before the stop is what Redmine still gives: not stored again, and now recorded.
    edit_first_note(redmine_admin, printer, "対応履歴: BIOS更新で解決")
    interrupted_refetch()
    client = s3_server.client()
    stored = raw_puts(client, sync.state)
    resumed = sync.sync(full=True, client=client)
    assert resumed.ok and stored == [] and resumed.state_issues_unchanged == 3
    assert "BIOS更新で解決" in sync.documents()[f"{printer}.md"].decode()
    agrees_with_an_uninterrupted_state()


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_a_local_state_rewrites_only_the_raw_issue_files_whose_bytes_changed(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, tmp_path: Path
) -> None:
    project, ids = seed_issues(redmine_admin, 3)
    state_dir = tmp_path / "state"

    def sync() -> StatelessSyncReport:
        return run_sync(
            redmine_server.url,
            redmine_server.admin_key,
            LocalStateStore(state_dir),
            LocalDirTarget(tmp_path / "docs"),
            TransformOptions(),
            PullSettings(projects=(project["identifier"],), full=True),
            work_dir=Path(tempfile.mkdtemp(dir=tmp_path)),
            publishing=PublishSettings(delete=True, force=True),
        )

    def files() -> dict[int, int]:
        """Each copy's inode: a write replaces the file (temporary file and rename), so it changes."""
        return {i: (state_dir / "issues" / f"{i}.json").stat().st_ino for i in ids}

    assert sync().ok
    written = files()
    again = sync()
    assert again.ok and again.state_issues_written == 0 and files() == written
    edit_first_note(redmine_admin, ids[1], "対応履歴: ケーブルを交換")
    edited = sync()
    assert edited.ok and edited.state_issues_written == 1
    assert [i for i in ids if files()[i] != written[i]] == [ids[1]]
    assert "ケーブルを交換" in (state_dir / "issues" / f"{ids[1]}.json").read_text(encoding="utf-8")


def test_when_the_copies_cannot_be_listed_every_raw_issue_is_written_and_the_run_says_why(tmp_path: Path) -> None:
    client = boto3.client("s3", region_name="us-east-1", **DUMMY_CREDENTIALS)
    store = S3StateStore(client, S3Location("kb", "anchorkit-state/"))
    manifest = state(*((i, published(i, NEW)) for i in (7, 8, 9)))
    for issue_id in (7, 8, 9):
        snapshot.issue_path(tmp_path, issue_id).parent.mkdir(exist_ok=True)
        snapshot.issue_path(tmp_path, issue_id).write_bytes(b'{"issue":{}}')
    refetched = plan(
        manifest, listing(fetched={7, 8, 9}), Local(tuple(rendered(i) for i in (7, 8, 9))), DeletePolicy(), SCOPE
    )
    with Stubber(client) as stub:
        stub.add_client_error("list_objects_v2", service_error_code="AccessDenied", http_status_code=403)
        decided, warning = without_unchanged_raw(refetched, store, tmp_path, threads=1)
        stub.assert_no_pending_responses()
    assert decided.raw_writes == [7, 8, 9] and decided.raw_unchanged == frozenset()
    assert warning is not None and warning.startswith("s3://kb/anchorkit-state/: could not tell which raw issues")
    assert "AccessDenied" in warning and warning.endswith("the 3 fetched again are written")
