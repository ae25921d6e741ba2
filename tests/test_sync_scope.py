"""The state's scope, `--rescope`, `sync --state --dry-run`, `state show` and `state break-lease`, on the
real Redmine and the real S3 server, through the CLI as a scheduled job runs it.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.folders import tree
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from test_sync_state import (
    KILLED_SYNC,
    cli_environment,
    manifest_of,
    objects_under,
    seed_issues,
)
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.cli import output as cli
from anchorkit.publish.state import S3StateStore
from anchorkit.publish.upload import PublishSettings, S3Location, S3Target
from anchorkit.render.transform import TransformOptions
from anchorkit.source.pull import PullSettings
from anchorkit.sync import run_sync

runner = CliRunner()


class Job:
    """`anchorkit sync --state` / `pull --state` / `state ...` with the environment of a scheduled job."""

    def __init__(
        self, redmine: RedmineServer, s3: S3Server, prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.redmine, self.s3, self.tmp_path = redmine, s3, tmp_path
        self.docs, self.state = f"s3://{s3.bucket}/{prefix}-docs", f"s3://{s3.bucket}/{prefix}-state/"
        self.docs_prefix, self.state_prefix = f"{prefix}-docs", f"{prefix}-state"
        monkeypatch.chdir(tmp_path)
        for name, value in cli_environment(redmine, s3, tmp_path).items():
            monkeypatch.setenv(name, value)

    def sync(self, *args: str, docs: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
        result = runner.invoke(
            app, ["sync", docs or self.docs, "--state", self.state, "--url", self.redmine.url, "--json", *args]
        )
        return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr

    def pull(self, *args: str) -> tuple[int, str]:
        folder = tempfile.mkdtemp(dir=self.tmp_path)
        result = runner.invoke(
            app,
            [
                "pull",
                "--snapshot",
                folder,
                "--state",
                self.state,
                "--url",
                self.redmine.url,
                "--endpoint-url",
                self.s3.endpoint_url,
                "--json",
                *args,
            ],
        )
        return result.exit_code, result.stderr

    def show(self) -> dict[str, Any]:
        result = runner.invoke(app, ["state", "show", self.state, "--json"])
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)

    def documents(self) -> set[str]:
        return set(objects_under(self.s3, self.docs_prefix))


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_run_with_another_scope_is_refused_naming_the_states_scope_and_rescope_prunes_what_fell_outside(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ops, ops_ids = seed_issues(redmine_admin, 2, "運用チーム")
    sales, sales_ids = seed_issues(redmine_admin, 2, "営業支援")
    job = Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)
    both = ["--project", ops["identifier"], "--project", sales["identifier"]]
    status, report, stderr = job.sync(*both, "--delete")
    assert status == 0, stderr
    assert job.documents() == {f"{i}.md" for i in ops_ids + sales_ids}
    before = manifest_of(s3_server, job.state_prefix)

    # A pull of every project into this state would store other projects' tickets: refused.
    status, stderr = job.pull()
    assert status == 2
    assert (
        f"holds {redmine_server.url}, projects {', '.join(sorted([ops['identifier'], sales['identifier']]))}" in stderr
    )
    assert "this run asks for every project" in stderr
    # A corrected destination would publish nothing there: refused, naming it.
    status, _, stderr = job.sync(*both, docs=f"{job.docs}-v2")
    assert status == 2 and f"destination {job.docs}-v2/" in stderr
    status, _, stderr = job.sync("--project", ops["identifier"], "--include-private")
    assert status == 2 and "--include-private" in stderr
    assert manifest_of(s3_server, job.state_prefix) == before  # nothing written by the refused runs

    # Narrowing the scope on purpose: the other project's documents and raw issues are removed.
    status, report, stderr = job.sync("--project", ops["identifier"], "--rescope", "--delete", "--force")
    assert status == 0, stderr
    assert report is not None and report["deleted"] == 2
    assert job.documents() == {f"{i}.md" for i in ops_ids}
    state_objects = set(objects_under(s3_server, job.state_prefix))
    assert state_objects == {"manifest.json", *(f"issues/{i}.json" for i in ops_ids)}
    shown = job.show()
    assert shown["scope"]["projects"] == [ops["identifier"]] and shown["counts"]["tickets"] == 2
    # The new scope is the state's now: a run with it is idle.
    status, report, stderr = job.sync("--project", ops["identifier"], "--delete")
    assert status == 0 and report is not None and not report["state_written"]
    assert "PutObject" not in report["s3_requests"]


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_rescope_to_a_corrected_destination_publishes_everything_there(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, ids = seed_issues(redmine_admin, 2)
    job = Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)
    assert job.sync("--project", project["identifier"])[0] == 0
    status, report, stderr = job.sync("--project", project["identifier"], "--rescope", docs=f"{job.docs}-v2")
    assert status == 0, stderr
    assert report is not None and report["uploaded"] == 2
    assert set(objects_under(s3_server, f"{job.docs_prefix}-v2")) == {f"{i}.md" for i in ids}
    assert job.show()["scope"]["destination"] == f"{job.docs}-v2/"


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_dry_run_prints_the_plan_and_writes_nothing_then_the_real_run_does_exactly_that(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, ids = seed_issues(redmine_admin, 3)
    job = Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)
    scope = ["--project", project["identifier"], "--sidecars"]

    status, report, stderr = job.sync(*scope, "--dry-run")
    assert status == 0, stderr
    assert report is not None and report["dry_run"]
    assert report["planned"]["upload"] == 6 and report["planned"]["store_issues"] == 3
    assert report["planned"]["state_rewritten"] and report["planned"]["cursor"]["from"] is None
    assert not {"PutObject", "DeleteObject"} & set(report["s3_requests"])
    assert job.documents() == set() and objects_under(s3_server, job.state_prefix) == {}

    assert job.sync(*scope)[0] == 0
    redmine_admin.add_note(ids[0], "再発したため再調査")
    human = runner.invoke(
        app, ["sync", job.docs, "--state", job.state, "--url", redmine_server.url, *scope, "--dry-run"]
    )
    assert human.exit_code == 0, human.stderr
    assert "(dry run, nothing written)" in human.stdout and "upload 2 " in human.stdout
    assert f"  upload {ids[0]}.md" in human.stdout
    manifest = manifest_of(s3_server, job.state_prefix)
    status, report, _ = job.sync(*scope, "--dry-run")
    assert report is not None and not {"PutObject", "DeleteObject"} & set(report["s3_requests"])
    assert manifest_of(s3_server, job.state_prefix) == manifest
    planned = report["planned"]
    status, report, stderr = job.sync(*scope)
    assert status == 0, stderr
    assert report is not None and report["uploaded"] == planned["upload"] == 2
    assert manifest_of(s3_server, job.state_prefix)["pull"]["cursor"] == planned["cursor"]["to"]


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_run_killed_holding_the_lease_shows_as_stale_and_breaking_it_lets_the_next_run_finish(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, ids = seed_issues(redmine_admin, 3)
    job = Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)
    scope = ["--project", project["identifier"]]
    # kill -9 right after the run took its (five-minute, renewed while the run lives) lease: its first write.
    killed = subprocess.run(
        [sys.executable, str(KILLED_SYNC), "sync", job.docs, "--state", job.state, "--url", redmine_server.url, *scope],
        env={
            **os.environ,
            **cli_environment(redmine_server, s3_server, tmp_path),
            "ANCHORKIT_KILL_AT_WRITE": "1",
            "ANCHORKIT_KILL_WHEN": "after",
        },
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL

    status, _, stderr = job.sync(*scope)
    assert status == 3
    lease = job.show()["lease"]
    assert f"another sync ({lease['holder']}) is writing" in stderr
    assert lease["status"] == "stale" and lease["alive"] is False  # its process is gone
    assert 180 < lease["expires_in_seconds"] <= 300 and lease["age_seconds"] < 120  # free by itself in minutes

    wrong = runner.invoke(app, ["state", "break-lease", job.state, "--holder", "ci-runner-7:1:abc", "--json"])
    assert wrong.exit_code == 2 and f"held by {lease['holder']}, not ci-runner-7:1:abc" in wrong.stderr
    assert json.loads(wrong.stdout) == {
        "ok": False,
        "error": wrong.stderr.strip().removeprefix("error: "),
        "exit_code": 2,
    }
    broken = runner.invoke(app, ["state", "break-lease", job.state, "--holder", lease["holder"]])
    assert broken.exit_code == 0, broken.stderr
    assert f"broke the lease of {lease['holder']}" in broken.stdout
    assert job.show()["lease"]["status"] == "stale"

    status, _report, stderr = job.sync(*scope)
    assert status == 0, stderr
    assert job.documents() == {f"{i}.md" for i in ids}
    assert job.show()["lease"] is None  # released by the run that finished
    again = runner.invoke(app, ["state", "break-lease", job.state, "--holder", lease["holder"]])
    assert again.exit_code == 2 and "no lease is held" in again.stderr


@pytest.mark.s3
@pytest.mark.timeout(120)
def test_state_show_tells_a_live_lease_on_another_host_from_an_expired_one(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, value in cli_environment(None, s3_server, tmp_path).items():
        monkeypatch.setenv(name, value)
    client, key = s3_server.client(), f"{s3_prefix}-state/lease.json"
    state = f"s3://{s3_server.bucket}/{s3_prefix}-state/"
    now = time.time()
    client.put_object(
        Bucket=s3_server.bucket,
        Key=key,
        Body=json.dumps({"owner": "ci-runner-7:4242:abc", "taken_at": now - 60, "expires_at": now + 600}).encode(),
    )
    held = runner.invoke(app, ["state", "show", state])
    assert held.exit_code == 0, held.stderr
    assert "lease: held, held by ci-runner-7:4242:abc since" in held.stdout
    client.put_object(
        Bucket=s3_server.bucket,
        Key=key,
        Body=json.dumps({"owner": "ci-runner-7:4242:abc", "taken_at": now - 4000, "expires_at": now - 400}).encode(),
    )
    shown = json.loads(runner.invoke(app, ["state", "show", state, "--json"]).stdout)
    assert shown["lease"]["status"] == "stale" and shown["lease"]["expires_in_seconds"] < 0
    assert shown["exists"] is False and shown["scope"] is None


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_sync_with_the_state_shows_progress_per_stage_on_a_terminal_and_nothing_in_a_log(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, ids = seed_issues(redmine_admin, 3)
    job = Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)
    client = s3_server.client()
    seen: list[tuple[str, int, int]] = []
    report = run_sync(
        redmine_server.url,
        redmine_server.admin_key,
        S3StateStore(client, S3Location(s3_server.bucket, f"{job.state_prefix}/")),
        S3Target(client, S3Location(s3_server.bucket, f"{job.docs_prefix}/")),
        TransformOptions(),
        PullSettings(projects=(project["identifier"],)),
        PublishSettings(delete=True),
        work_dir=tmp_path / "work",
        progress=lambda stage, done, total: seen.append((stage, done, total)),
    )
    assert report.ok
    assert {("pulling", 3, 3), ("rendering", 3, 3), ("uploading", 3, 3)} <= set(seen)

    redmine_admin.add_note(ids[0], "再発したため再調査")
    logged = runner.invoke(
        app, ["sync", job.docs, "--state", job.state, "--url", redmine_server.url, "--project", project["identifier"]]
    )
    assert logged.exit_code == 0 and logged.stderr == ""  # CliRunner's stderr is no terminal: a CI log
    terminal = io.StringIO()
    monkeypatch.delenv("CI", raising=False)  # a terminal outside CI (in CI no bar is drawn)
    monkeypatch.setattr(cli, "err_console", Console(file=terminal, force_terminal=True, width=100))
    time.sleep(1.1)  # a new updated_on (Redmine's are to the second): else the stored copy passes for this version
    redmine_admin.add_note(ids[1], "再発したため再調査")
    shown = runner.invoke(
        app, ["sync", job.docs, "--state", job.state, "--url", redmine_server.url, "--project", project["identifier"]]
    )
    assert shown.exit_code == 0, shown.stderr
    drawn = terminal.getvalue()
    assert "rendering" in drawn and "uploading" in drawn and "1/1" in drawn


# --------------------------------------------------------------------------------------------------
# A local destination and a local state: absolute paths in the scope, and a dry run that writes nothing


@pytest.fixture
def local_project(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], list[int]]:
    """A project of two issues, and the Redmine URL and key in the environment (local_sync gives neither)."""
    monkeypatch.setenv("REDMINE_URL", redmine_server.url)
    monkeypatch.setenv("REDMINE_API_KEY", redmine_server.admin_key)
    return seed_issues(redmine_admin, 2)


def local_sync(cwd: Path, dest: str, state: str, project: str, *args: str) -> tuple[int, str]:
    """`anchorkit sync DEST --state STATE` run from ``cwd``, as a job started in that folder would."""
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = runner.invoke(app, ["sync", dest, "--state", state, "--project", project, *args])
    finally:
        os.chdir(previous)
    return result.exit_code, result.stderr


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_a_local_destination_is_the_same_place_from_any_folder_and_the_state_records_it_absolute(
    local_project: tuple[dict[str, Any], list[int]], tmp_path: Path
) -> None:
    project, ids = local_project
    jobs, other = tmp_path / "jobs", tmp_path / "jobs" / "other"
    other.mkdir(parents=True)
    state, published = str(jobs / "state"), {f"{i}.md" for i in ids}

    assert local_sync(jobs, "docs", "state", project["identifier"]) == (0, "")
    assert set(os.listdir(jobs / "docs")) == published
    manifest = json.loads((jobs / "state" / "manifest.json").read_text())
    assert manifest["scope"]["destination"] == str(jobs / "docs")
    # The same words from another folder name another place: refused (it used to publish nothing there).
    status, stderr = local_sync(other, "docs", state, project["identifier"])
    assert status == 2 and f"this run asks for destination {other / 'docs'}" in stderr
    assert not (other / "docs").exists()
    # The same place written otherwise is the state's (it used to be refused).
    assert local_sync(other, str(jobs / "docs"), state, project["identifier"]) == (0, "")
    assert local_sync(jobs, "./docs/", "state", project["identifier"]) == (0, "")

    # A state an earlier anchorkit wrote holds the path as typed: refused, saying why and what to do.
    manifest["scope"]["destination"] = "docs"
    (jobs / "state" / "manifest.json").write_text(json.dumps(manifest))
    status, stderr = local_sync(jobs, "docs", "state", project["identifier"])
    assert status == 2 and "the state's docs is relative to the folder an earlier anchorkit ran in" in stderr
    assert local_sync(jobs, "docs", "state", project["identifier"], "--rescope")[0] == 0
    manifest = json.loads((jobs / "state" / "manifest.json").read_text())
    assert manifest["scope"]["destination"] == str(jobs / "docs")
    assert set(os.listdir(jobs / "docs")) == published


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_a_dry_run_with_a_local_state_writes_nothing_not_even_a_lock_file(
    local_project: tuple[dict[str, Any], list[int]], redmine_admin: RedmineAdmin, tmp_path: Path
) -> None:
    project, ids = local_project
    state = tmp_path / "state"

    assert local_sync(tmp_path, "docs", "state", project["identifier"], "--dry-run") == (0, "")
    assert sorted(os.listdir(tmp_path)) == []  # neither the state folder nor the destination

    assert local_sync(tmp_path, "docs", "state", project["identifier"]) == (0, "")
    (state / ".sync.lock").unlink()  # the lock file a run leaves: a dry run must not make it again
    before = tree(state)
    redmine_admin.add_note(ids[0], "再発したため再調査")
    assert local_sync(tmp_path, "docs", "state", project["identifier"], "--dry-run") == (0, "")
    assert tree(state) == before and not (state / ".sync.lock").exists()
