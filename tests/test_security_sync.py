"""What `sync --state` must never publish or keep, on the real Redmine and the real S3 server: a password
of the Redmine URL, a ticket that became private, the raw tickets of a killed run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from test_sync_chunks import TOKENS
from test_sync_chunks import Job as ChunksJob
from test_sync_chunks import seed as seed_long_and_short
from test_sync_scope import Job as ScheduledJob
from test_sync_state import KILLED_SYNC, cli_environment, objects_under, seed_issues
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.errors import EXIT_LOCKED

pytestmark = [pytest.mark.redmine, pytest.mark.s3]

runner = CliRunner()
PASSWORD = "S3cret-Pa55"


class Job(ScheduledJob):
    """The scheduled job of test_sync_scope, run against any Redmine URL, with what it left in S3."""

    def sync_at(self, url: str, *args: str) -> Any:
        return runner.invoke(app, ["sync", self.docs, "--state", self.state, "--url", url, *args])

    def show_as_printed(self, *args: str) -> Any:
        return runner.invoke(app, ["state", "show", self.state, *args])

    def everything_stored(self) -> bytes:
        """Every object of the documents and of the state, one after the other."""
        objects = {**objects_under(self.s3, self.docs_prefix), **objects_under(self.s3, self.state_prefix)}
        return b"\n".join(objects.values())

    def put_manifest(self, manifest: dict[str, Any]) -> None:
        key = f"{self.state_prefix}/manifest.json"
        self.s3.client().put_object(Bucket=self.s3.bucket, Key=key, Body=json.dumps(manifest).encode())

    def manifest(self) -> dict[str, Any]:
        key = f"{self.state_prefix}/manifest.json"
        return json.loads(self.s3.client().get_object(Bucket=self.s3.bucket, Key=key)["Body"].read())


@pytest.fixture
def chunks_job(
    redmine_server: RedmineServer,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> ChunksJob:
    return ChunksJob(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)


@pytest.fixture
def job(
    redmine_server: RedmineServer,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Job:
    return Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)


def test_a_password_in_the_redmine_url_is_never_stored_printed_or_published(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, ids = seed_issues(redmine_admin, 1)
    other, _ = seed_issues(redmine_admin, 1, "営業支援")
    # A proxy in front of Redmine that wants a user and password: the URL carries them.
    with_password = job.redmine.url.replace("http://", f"http://ops:{PASSWORD}@")
    plain = job.redmine.url

    first = job.sync_at(with_password, "--project", project["identifier"], "--json")
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["scope"].startswith(f"{plain}, projects {project['identifier']}")
    shown, shown_json = job.show_as_printed(), job.show_as_printed("--json")
    assert f"scope: {plain}, projects" in shown.stdout and json.loads(shown_json.stdout)["scope"]["redmine"] == plain
    mismatch = job.sync_at(with_password, "--project", other["identifier"])
    assert mismatch.exit_code == 2 and f"holds {plain}, projects {project['identifier']}" in mismatch.stderr
    for result in (first, shown, shown_json, mismatch):
        assert PASSWORD not in result.output
    assert PASSWORD.encode() not in job.everything_stored()

    # A state an earlier version wrote with the password in it: read as the same scope, and the
    # password is gone from S3 with the next commit.
    manifest = job.manifest()
    manifest["scope"]["redmine"] = with_password
    job.put_manifest(manifest)
    redmine_admin.add_note(ids[0], "再発した")
    again = job.sync_at(plain, "--project", project["identifier"])
    assert again.exit_code == 0, again.stderr
    assert job.manifest()["scope"]["redmine"] == plain
    assert PASSWORD.encode() not in job.everything_stored()


# --------------------------------------------------------------------------------------------------
# Item 9: a ticket withdrawn from publication (private now, moved out of the projects) is removed at once


def test_a_ticket_made_private_or_moved_out_is_unpublished_without_delete_and_a_deleted_one_waits_for_it(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, (private, deleted, moved, via_pull, kept) = seed_issues(redmine_admin, 5)
    elsewhere = redmine_admin.create_project(name="営業支援")
    scope = ["--project", project["identifier"], "--sidecars", "--json"]

    def documents() -> set[str]:
        return set(objects_under(job.s3, job.docs_prefix))

    def published(*ids: int) -> set[str]:
        return {name for i in ids for name in (f"{i}.md", f"{i}.md.metadata.json")}

    assert job.sync_at(job.redmine.url, *scope).exit_code == 0
    assert documents() == published(private, deleted, moved, via_pull, kept)

    # Made private: gone from S3 on the next run, without --delete, even with a delete limit of 0.
    redmine_admin.update_issue(private, is_private=True)
    run = job.sync_at(job.redmine.url, *scope, "--max-delete", "0")
    assert run.exit_code == 0, run.stderr
    assert documents() == published(deleted, moved, via_pull, kept)
    assert json.loads(run.stdout)["withdrawn"] == [private]
    assert f"issues/{private}.json" not in objects_under(job.s3, job.state_prefix)

    # Deleted in Redmine: a stale document, removed only with --delete; moved to a project outside the
    # scope: withdrawn, removed at once. (Both are seen by a full listing.)
    redmine_admin.delete_issue(deleted)
    redmine_admin.update_issue(moved, project_id=elsewhere["id"])
    run = job.sync_at(job.redmine.url, *scope, "--full")
    assert run.exit_code == 0, run.stderr
    assert documents() == published(deleted, via_pull, kept)
    assert json.loads(run.stdout)["withdrawn"] == [moved]

    # Made private and seen by a `pull --state`: the next sync unpublishes it, still without --delete.
    redmine_admin.update_issue(via_pull, is_private=True)
    folder = job.tmp_path / "pulled"
    pulled = runner.invoke(
        app,
        ["pull", "--snapshot", str(folder), "--state", job.state, "--url", job.redmine.url, *scope[:2]],
    )
    assert pulled.exit_code == 0, pulled.stderr
    run = job.sync_at(job.redmine.url, *scope)
    assert run.exit_code == 0, run.stderr
    assert documents() == published(deleted, kept)
    assert json.loads(run.stdout)["withdrawn"] == [via_pull]

    run = job.sync_at(job.redmine.url, *scope, "--delete", "--force")  # 2 of 4 objects: over the guard
    assert run.exit_code == 0, (run.stderr, run.stdout)
    assert documents() == published(kept)


def test_the_ordinary_sync_unpublishes_a_ticket_made_private_without_delete(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, (private, kept) = seed_issues(redmine_admin, 2)
    folders = ["--snapshot", str(job.tmp_path / "snap"), "--out", str(job.tmp_path / "out")]

    def sync() -> Any:
        return runner.invoke(
            app, ["sync", job.docs, "--url", job.redmine.url, "--project", project["identifier"], *folders]
        )

    assert sync().exit_code == 0
    redmine_admin.update_issue(private, is_private=True)
    run = sync()
    assert run.exit_code == 0, run.stderr
    assert set(objects_under(job.s3, job.docs_prefix)) == {f"{kept}.md"}


def test_a_ticket_a_pull_of_its_own_withdrew_is_unpublished_by_the_next_ordinary_sync(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, (private, kept) = seed_issues(redmine_admin, 2)
    snap = job.tmp_path / "snap"
    scope = ["--url", job.redmine.url, "--project", project["identifier"]]
    sync = ["sync", job.docs, *scope, "--snapshot", str(snap), "--out", str(job.tmp_path / "out"), "--json"]
    assert runner.invoke(app, sync).exit_code == 0
    redmine_admin.update_issue(private, is_private=True)
    # The operator pulls by hand first: the issue leaves the snapshot, and the snapshot says it was withdrawn.
    pulled = runner.invoke(app, ["pull", "--snapshot", str(snap), *scope])
    assert pulled.exit_code == 0, pulled.stderr
    assert json.loads((snap / "state.json").read_text())["withdrawn_unpublished"] == [private]
    run = runner.invoke(app, sync)
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)["withdrawn"] == [private]
    assert set(objects_under(job.s3, job.docs_prefix)) == {f"{kept}.md"}
    assert "withdrawn_unpublished" not in json.loads((snap / "state.json").read_text())


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["folders", "state"])
def test_a_ticket_made_private_while_the_delete_guard_refuses_is_unpublished_by_the_next_run_it_allows(
    mode: str, chunks_job: ChunksJob, redmine_admin: RedmineAdmin, tmp_path: Path
) -> None:
    job = chunks_job
    project, long, private, _ = seed_long_and_short(redmine_admin)
    snap = tmp_path / "snap"
    where = ["--state", job.state] if mode == "state" else ["--snapshot", str(snap), "--out", str(tmp_path / "out")]
    base = [*where, "--project", project["identifier"], "--chunks", "--chunk-tokens", TOKENS]

    def refusal(report: dict[str, Any]) -> str:
        return str(report["refused"] if mode == "state" else report["upload"]["refused"])

    assert job.run(*base)[0] == 0
    private_keys = {key for key in job.published() if key.startswith(f"{private}/")}
    long_before = job.chunk_names(long)
    assert private_keys

    # The long ticket shrinks (its extra chunks are more than --max-delete allows) and another one is made
    # private: the run is refused, changes nothing, and says what it leaves published.
    redmine_admin.update_issue(long, description="再接続で解消。")
    redmine_admin.update_issue(private, is_private=True)
    status, refused, _ = job.run(*base)
    assert status == 1 and refused is not None
    assert f"the {len(private_keys)} objects of #{private}, withdrawn from publication" in refusal(refused)
    assert private_keys <= set(job.published())
    # Neither a second refused run nor a dry run forgets it (the ordinary sync's pull no longer lists it).
    status, refused, _ = job.run(*base)
    assert status == 1 and refused is not None and f"#{private}, withdrawn" in refusal(refused)
    status, dry, _ = job.run(*base, "--force", "--dry-run")
    assert status == 0 and dry is not None
    planned = dry["planned"] if mode == "state" else dry["upload"]
    assert private_keys <= set(planned["planned_keys"]["delete"])

    status, forced, stderr = job.run(*base, "--force")
    assert status == 0, stderr
    assert forced is not None and forced["withdrawn"] == [private]
    assert not {key for key in job.published() if key.startswith(f"{private}/")}
    job.assert_shrunk(long, long_before)
    # Done with: the next run has no withdrawn ticket left to remove, and the snapshot no longer lists it.
    status, after, _ = job.run(*base)
    assert status == 0 and after is not None and after["withdrawn"] == []
    if mode == "folders":
        assert "withdrawn_unpublished" not in json.loads((snap / "state.json").read_text())


# --------------------------------------------------------------------------------------------------
# Item 12: the work folder of a sync killed with -9 does not stay behind with raw tickets in it


def test_the_work_folder_a_killed_sync_left_is_removed_by_the_next_run_and_was_private_to_its_owner(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    from anchorkit.sync.scratch import scratch_folder  # (here: the other tests of this file run on any version)

    project, _ = seed_issues(redmine_admin, 2)
    temporary = job.tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, **cli_environment(job.redmine, job.s3, job.tmp_path), "TMPDIR": str(temporary)}
    sync = [sys.executable, str(KILLED_SYNC), "sync", job.docs, "--state", job.state, "--url", job.redmine.url]
    sync += ["--project", project["identifier"]]
    # Folders that are not leftovers: a live run's, and one of an older anchorkit from an hour ago.
    with scratch_folder(temporary) as live:
        recent = temporary / "anchorkit-sync-olderversion"
        recent.mkdir()
        os.utime(recent, (time.time() - 3600,) * 2)
        ancient = temporary / "anchorkit-sync-fromlastweek"
        ancient.mkdir()
        os.utime(ancient, (time.time() - 7 * 24 * 3600,) * 2)

        killed = subprocess.run(
            [*sync, "--lease-seconds", "1"],
            env={**env, "ANCHORKIT_KILL_AT_WRITE": "1"},
            cwd=job.tmp_path,
            capture_output=True,
            timeout=120,
        )
        assert killed.returncode == -signal.SIGKILL
        time.sleep(1.5)  # its lease runs out
        (leftover,) = set(temporary.glob("anchorkit-sync-*")) - {live, recent, ancient}
        assert list(leftover.rglob("issues/*.json")), "the killed run had raw tickets there"
        assert stat.S_IMODE(leftover.stat().st_mode) == 0o700, "readable by its owner only"

        finished = subprocess.run(sync, env=env, cwd=job.tmp_path, capture_output=True, timeout=120)
        assert finished.returncode == 0, finished.stderr.decode()[-2000:]
        assert set(temporary.glob("anchorkit-sync-*")) == {live, recent}
    assert set(temporary.glob("anchorkit-sync-*")) == {recent}


# --------------------------------------------------------------------------------------------------
# Item 2: a private subtask's subject is published nowhere: documents, raw issues of the state


def leaked_subject(stored: bytes, marker: str) -> bool:
    return marker.encode() in stored or "退職手続き".encode() in stored


def test_a_private_subtasks_subject_is_neither_published_nor_kept_in_the_state(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project = redmine_admin.create_project(name="人事")
    parent = redmine_admin.create_issue(project["id"], "新入社員のPC準備")["id"]
    # Looked for in everything stored: the subject's words, and a mark no other data of the Redmine holds
    # (its users are in the stored lookups, and one may well be called 退職).
    marker = uuid.uuid4().hex
    subject = f"山田さんの退職手続き {marker}"
    secret = redmine_admin.create_issue(project["id"], subject, is_private=True, parent_issue_id=parent)
    scope = ["--project", project["identifier"], "--sidecars"]

    assert job.sync_at(job.redmine.url, *scope).exit_code == 0
    document = objects_under(job.s3, job.docs_prefix)[f"{parent}.md"].decode()
    assert f"- 子チケット: #{secret['id']}\n" in document
    assert not leaked_subject(job.everything_stored(), marker)

    # A state an earlier anchorkit filled: the subject in the raw issue and in the document, and no
    # mark that subtasks were checked. The next run fetches everything again, once, and cleans both.
    raw_key = f"{job.state_prefix}/issues/{parent}.json"
    raw = json.loads(job.s3.client().get_object(Bucket=job.s3.bucket, Key=raw_key)["Body"].read())
    raw["issue"]["children"] = [{"id": secret["id"], "subject": subject}]
    job.s3.client().put_object(Bucket=job.s3.bucket, Key=raw_key, Body=json.dumps(raw, ensure_ascii=False).encode())
    leaked = document.replace(f"#{secret['id']}\n", f"#{secret['id']} {subject}\n")
    job.s3.client().put_object(Bucket=job.s3.bucket, Key=f"{job.docs_prefix}/{parent}.md", Body=leaked.encode())
    manifest = job.manifest()
    del manifest["pull"]["private_subtasks_checked"]
    manifest["tickets"][str(parent)]["objects"][f"{parent}.md"] = hashlib.sha256(leaked.encode()).hexdigest()
    job.put_manifest(manifest)

    upgraded = job.sync_at(job.redmine.url, *scope)
    assert upgraded.exit_code == 0, upgraded.stderr
    assert not leaked_subject(job.everything_stored(), marker)
    assert objects_under(job.s3, job.docs_prefix)[f"{parent}.md"].decode() == document


# --------------------------------------------------------------------------------------------------
# Item 13: a run stopped by a lease is told the way out


def test_a_run_stopped_by_a_lease_is_told_the_commands_that_free_the_state_and_they_do(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, ids = seed_issues(redmine_admin, 1)
    # The lease of a runner that was lost an instant after it took it.
    now = time.time()
    lease = {"owner": "ci-runner-7:4242:abc", "taken_at": now, "expires_at": now + 280}
    job.s3.client().put_object(
        Bucket=job.s3.bucket, Key=f"{job.state_prefix}/lease.json", Body=json.dumps(lease).encode()
    )

    stopped = job.sync_at(job.redmine.url, "--project", project["identifier"])
    assert stopped.exit_code == EXIT_LOCKED
    way_out = re.findall(r"`anchorkit ([^`]+)`", stopped.stderr)
    assert way_out == [f"state show {job.state}", f"state break-lease {job.state} --holder ci-runner-7:4242:abc"]
    # Doing what the message says frees the state, and the next run publishes.
    for command in way_out:
        done = runner.invoke(app, shlex.split(command))
        assert done.exit_code == 0, done.stderr
    assert job.sync_at(job.redmine.url, "--project", project["identifier"]).exit_code == 0
    assert set(objects_under(job.s3, job.docs_prefix)) == {f"{ids[0]}.md"}


# --------------------------------------------------------------------------------------------------
# A note made private after it was published: Redmine dates nothing, sync --full takes it out


@pytest.mark.parametrize("stateless", [True, False], ids=["sync --state", "sync"])
def test_a_note_made_private_after_it_was_published_is_taken_out_by_sync_full(
    job: Job, redmine_admin: RedmineAdmin, stateless: bool
) -> None:
    project, (issue,) = seed_issues(redmine_admin, 1)
    redmine_admin.add_note(issue, "社外秘: 取引先の担当者は山田様 090-1234-5678")
    journal = redmine_admin.get_issue(issue)["issue"]["journals"][-1]["id"]
    where = ["--state", job.state] if stateless else ["--snapshot", str(job.tmp_path / "snap")]
    folders = [] if stateless else ["--out", str(job.tmp_path / "out")]

    def sync(*extra: str) -> Any:
        argv = ["sync", job.docs, *where, "--url", job.redmine.url, "--project", project["identifier"], *folders]
        result = runner.invoke(app, [*argv, *extra])
        assert result.exit_code == 0, result.stderr
        return result

    def published() -> bytes:
        return job.everything_stored() if stateless else objects_under(job.s3, job.docs_prefix)[f"{issue}.md"]

    sync()
    assert b"090-1234-5678" in published()
    redmine_admin.request("PUT", f"/journals/{journal}.json", json={"journal": {"private_notes": True}})
    sync()  # incremental: Redmine changed no updated_on, nothing is listed
    assert b"090-1234-5678" in published()
    sync("--full")
    assert b"090-1234-5678" not in published()
