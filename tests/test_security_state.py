"""The S3 lease of `sync --state` on the real S3 server: a run stopped by it learns the way out, and a
live run keeps a short lease renewed, so that a dead run holds the state for minutes, not an hour.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from test_sync_state import cli_environment, objects_under, seed_issues
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.errors import EXIT_LOCKED
from anchorkit.publish.state import S3StateStore, StateConflict
from anchorkit.publish.upload import S3Location

runner = CliRunner()


@pytest.mark.redmine
@pytest.mark.s3
def test_a_run_stopped_by_a_lease_is_told_the_commands_that_free_the_state_and_they_do(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, ids = seed_issues(redmine_admin, 1)
    docs, state = f"s3://{s3_server.bucket}/{s3_prefix}-docs", f"s3://{s3_server.bucket}/{s3_prefix}-state/"
    # The lease of a runner that was lost an instant after it took it.
    now = time.time()
    lease = {"owner": "ci-runner-7:4242:abc", "taken_at": now, "expires_at": now + 280}
    s3_server.client().put_object(
        Bucket=s3_server.bucket, Key=f"{s3_prefix}-state/lease.json", Body=json.dumps(lease).encode()
    )
    monkeypatch.chdir(tmp_path)
    for name, value in cli_environment(redmine_server, s3_server, tmp_path).items():
        monkeypatch.setenv(name, value)
    sync = ["sync", docs, "--state", state, "--url", redmine_server.url, "--project", project["identifier"]]

    stopped = runner.invoke(app, sync)
    assert stopped.exit_code == EXIT_LOCKED
    way_out = re.findall(r"`anchorkit ([^`]+)`", stopped.stderr)
    assert way_out == [f"state show {state}", f"state break-lease {state} --holder ci-runner-7:4242:abc"]
    # Doing what the message says frees the state, and the next run publishes.
    for command in way_out:
        done = runner.invoke(app, shlex.split(command))
        assert done.exit_code == 0, done.stderr
    assert runner.invoke(app, sync).exit_code == 0
    assert set(objects_under(s3_server, f"{s3_prefix}-docs")) == {f"{ids[0]}.md"}


@pytest.mark.s3
@pytest.mark.timeout(60)
def test_a_live_run_renews_its_short_lease_so_no_other_run_takes_the_state_from_it(
    s3_server: S3Server, s3_prefix: str
) -> None:
    location = S3Location(s3_server.bucket, f"{s3_prefix}-state/")
    working = S3StateStore(s3_server.client(), location, lease_seconds=1.0)
    with working.session():
        assert working.read_manifest() is None
        working.begin_writes()
        time.sleep(2.5)  # a long upload: more than twice the lease
        other = S3StateStore(s3_server.client(), location, lease_seconds=1.0)
        with other.session():
            other.read_manifest()
            with pytest.raises(StateConflict, match="is writing"):
                other.begin_writes()
        working.begin_writes()
        working.commit({"tickets": {}})
    assert set(objects_under(s3_server, f"{s3_prefix}-state")) == {"manifest.json"}, "the lease was released"


@pytest.mark.s3
def test_a_deeply_nested_manifest_or_lease_in_s3_is_no_traceback(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, value in cli_environment(None, s3_server, tmp_path).items():
        monkeypatch.setenv(name, value)
    state, client = f"s3://{s3_server.bucket}/{s3_prefix}-state/", s3_server.client()
    deep = ("[" * 100_000 + "]" * 100_000).encode()

    client.put_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}-state/lease.json", Body=deep)
    shown = runner.invoke(app, ["state", "show", state, "--json"])
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["lease"]["status"] == "stale", "an unreadable lease protects nothing"

    client.put_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}-state/manifest.json", Body=deep)
    shown = runner.invoke(app, ["state", "show", state])
    assert shown.exit_code == 2
    assert shown.stderr == (
        f"error: {state}manifest.json: the state manifest is not valid JSON (JSON nested too deeply (more than "
        "200 levels))\n"
    )
