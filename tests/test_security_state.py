"""The S3 state of `sync --state` on the real S3 server: a live run keeps its short lease renewed, so
that a dead run holds the state for minutes, not an hour (the way out a stopped run is told is tested
in test_security_sync); a corrupt manifest or lease is no traceback.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.s3_server import S3Server
from test_sync_state import cli_environment, objects_under
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.publish.state import S3StateStore, StateConflict
from anchorkit.publish.upload import S3Location

runner = CliRunner()


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
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    env = cli_environment(None, s3_server, tmp_path)
    state, client = f"s3://{s3_server.bucket}/{s3_prefix}-state/", s3_server.client()
    deep = ("[" * 100_000 + "]" * 100_000).encode()

    client.put_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}-state/lease.json", Body=deep)
    shown = runner.invoke(app, ["state", "show", state, "--json"], env=env)
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["lease"]["status"] == "stale", "an unreadable lease protects nothing"

    client.put_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}-state/manifest.json", Body=deep)
    shown = runner.invoke(app, ["state", "show", state], env=env)
    assert shown.exit_code == 2
    assert shown.stderr == (
        f"error: {state}manifest.json: the state manifest is not valid JSON (JSON nested too deeply (more than "
        "200 levels))\n"
    )
