"""What pull must never leak, against the real Redmine (a proxy in front of it for what Redmine itself
will not do, such as redirecting to another host): the API key, a private ticket's subject, the
password of a URL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.faultproxy import Fault, FaultProxy, HeaderRecorder, on_path
from support.redmine_server import RedmineAdmin, RedmineServer
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.source import snapshot
from anchorkit.source.pull import pull
from anchorkit.source.redmine import RetryPolicy

pytestmark = pytest.mark.redmine

FAST = RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_max_s=0.05, connect_timeout_s=2, read_timeout_s=10)


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
        report = pull(
            proxy.url + "/old", tmp_path, redmine_server.admin_key, projects=[redmine_project["identifier"]], policy=FAST
        )
        redirected = proxy.faults[Fault.REDIRECT]

    assert report.ok and snapshot.stored_issue_ids(tmp_path) == {issue["id"]}
    assert redirected >= 3, "the key check, the listing and the issue were all redirected, and followed"
    assert json.loads(snapshot.issue_path(tmp_path, issue["id"]).read_text())["issue"]["subject"] == "プリンタで印刷できない"
