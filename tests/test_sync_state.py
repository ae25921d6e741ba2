"""sync --state and pull --state: a stateless runner (empty disk every run) against the real Redmine and
the real S3 server.

Every sync here starts from a fresh temporary folder: all it knows comes from the state beside the
destination. Covered: incremental runs (what is fetched, rendered, uploaded, and what is not), a
changed output fingerprint, two syncs at once, kill -9 at random points, the refusals, and
`pull --state` sharing the state (what it stores, sync publishes).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.folders import tree
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import DUMMY_CREDENTIALS, S3Server
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.errors import EXIT_LOCKED
from anchorkit.publish.state import LocalStateStore, S3StateStore, StateConflict
from anchorkit.publish.upload import LocalDirTarget, PublishSettings, S3Location, S3Target
from anchorkit.render.document import RenderOptions
from anchorkit.render.transform import TransformOptions
from anchorkit.source import preflight
from anchorkit.source.pull import PullSettings
from anchorkit.sync import (
    StatelessSyncReport,
    StatePullReport,
    pull_with_state,
    run_sync,
)
from anchorkit.sync.manifest import PENDING

runner = CliRunner()
KILLED_SYNC = Path(__file__).resolve().parent / "support" / "killed_sync.py"


def objects_under(s3_server: S3Server, prefix: str) -> dict[str, bytes]:
    """Every object under `prefix/` (key relative to it) with its bytes."""
    client = s3_server.client()
    found: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=s3_server.bucket, Prefix=f"{prefix}/"):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=s3_server.bucket, Key=item["Key"])["Body"].read()
            found[item["Key"][len(prefix) + 1 :]] = body
    return found


def manifest_of(s3_server: S3Server, state_prefix: str) -> dict[str, Any]:
    body = s3_server.client().get_object(Bucket=s3_server.bucket, Key=f"{state_prefix}/manifest.json")["Body"]
    return json.loads(body.read())


def comparable(manifest: dict[str, Any]) -> dict[str, Any]:
    """What two runs over the same Redmine must agree on (the lookups' refresh time is a clock reading)."""
    return {
        "tickets": manifest["tickets"],
        "fingerprint": manifest["fingerprint"],
        "cursor": manifest["pull"]["cursor"],
    }


class StatelessRunner:
    """Runs the library sync the way a scheduled job would: a fresh empty work folder every time."""

    def __init__(self, redmine: RedmineServer, s3: S3Server, project: str, scratch: Path) -> None:
        self.redmine, self.s3, self.project, self.scratch = redmine, s3, project, scratch
        self.docs = f"docs-{os.urandom(4).hex()}"
        self.state = f"anchorkit-state-{os.urandom(4).hex()}"

    def empty_folder(self) -> Path:
        return Path(tempfile.mkdtemp(dir=self.scratch)) / "snapshot"

    def sync(self, label: str | None = None, full: bool = False, client: Any = None) -> StatelessSyncReport:
        client = client or self.s3.client()
        store = S3StateStore(client, S3Location(self.s3.bucket, f"{self.state}/"))
        target = S3Target(client, S3Location(self.s3.bucket, f"{self.docs}/"))
        options = TransformOptions(render=RenderOptions(labels={"ticket": label} if label else {}), sidecars=True)
        return run_sync(
            self.redmine.url,
            self.redmine.admin_key,
            store,
            target,
            options,
            PullSettings(projects=(self.project,), full=full),
            work_dir=self.empty_folder(),
            publishing=PublishSettings(delete=True, force=True),
        )

    def pull(self, full: bool = False, snapshot_dir: Path | None = None, **options: Any) -> StatePullReport:
        """`pull --state` with the same state, into an empty folder unless told otherwise."""
        store = S3StateStore(self.s3.client(), S3Location(self.s3.bucket, f"{self.state}/"))
        return pull_with_state(
            self.redmine.url,
            self.redmine.admin_key,
            store,
            snapshot_dir or self.empty_folder(),
            PullSettings(projects=(self.project,), full=full, **options),
        )

    def manifest(self) -> dict[str, Any]:
        return manifest_of(self.s3, self.state)

    def documents(self) -> dict[str, bytes]:
        return objects_under(self.s3, self.docs)


def seed_issues(
    admin: RedmineAdmin, count: int, name: str = "社内ITサービスデスク"
) -> tuple[dict[str, Any], list[int]]:
    project = admin.create_project(name=name)
    ids = []
    for n in range(count):
        issue = admin.create_issue(
            project["id"], f"VPN接続が不安定になる ({n})", description="在宅勤務中にVPNが切れる。"
        )
        admin.add_note(issue["id"], f"対応履歴 {n}: ルーターを再起動")
        ids.append(issue["id"])
    return project, ids


# --------------------------------------------------------------------------------------------------
# Refusals and the local lock (no server needed)


def test_a_state_inside_the_documents_prefix_is_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REDMINE_API_KEY", "not-used")
    result = runner.invoke(
        app, ["sync", "s3://kb-docs/tickets", "--state", "s3://kb-docs/tickets/state/", "--url", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 2
    assert "overlaps the documents' prefix s3://kb-docs/tickets/" in result.stderr
    beside = runner.invoke(
        app,
        ["sync", str(tmp_path / "docs"), "--state", str(tmp_path / "docs" / "state"), "--url", "http://127.0.0.1:9"],
    )
    assert beside.exit_code == 2
    assert "overlaps the documents' folder" in beside.stderr


def test_a_local_state_admits_one_sync_at_a_time(tmp_path: Path) -> None:
    first, second = LocalStateStore(tmp_path / "state"), LocalStateStore(tmp_path / "state")
    with first.session(), pytest.raises(StateConflict, match="another sync is running on this state"), second.session():
        pass
    with second.session():  # released once the first run ended
        assert second.read_manifest() is None


def test_a_local_state_names_the_run_holding_its_lock_and_is_free_once_it_ended(tmp_path: Path) -> None:
    store = LocalStateStore(tmp_path / "state")
    with store.session():
        held = LocalStateStore(tmp_path / "state").lease_status()
        assert held is not None and held.alive and held.status(time.time()) == "active"
        assert held.holder.split(":")[1] == str(os.getpid())
        busy = f"another sync is running on this state \\({held.holder}\\)"
        with pytest.raises(StateConflict, match=busy), LocalStateStore(tmp_path / "state").session():
            pass
    assert store.lease_status() is None


# --------------------------------------------------------------------------------------------------
# Incremental runs from an empty disk


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_each_run_from_an_empty_disk_fetches_renders_and_uploads_only_what_changed(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, (vpn, printer, mail) = seed_issues(redmine_admin, 3)
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)

    first = sync.sync()
    assert first.ok and first.state_written
    assert sorted(first.uploaded) == sorted(f"{i}.md{s}" for i in (vpn, printer, mail) for s in ("", ".metadata.json"))
    assert first.state_issues_written == 3
    manifest = manifest_of(s3_server, sync.state)
    for issue_id in (vpn, printer, mail):
        for key, sha in manifest["tickets"][str(issue_id)]["objects"].items():
            assert hashlib.sha256(sync.documents()[key]).hexdigest() == sha  # the state describes S3 exactly
    etag_before = s3_server.client().head_object(Bucket=s3_server.bucket, Key=f"{sync.state}/manifest.json")["ETag"]

    idle = sync.sync()
    assert idle.ok and not idle.state_written and idle.rendered == 0
    assert idle.pulls[0].requests <= 3  # the key check, the custom fields (an administrator's key), one page
    assert "PutObject" not in idle.s3_requests and "DeleteObject" not in idle.s3_requests
    etag_after = s3_server.client().head_object(Bucket=s3_server.bucket, Key=f"{sync.state}/manifest.json")["ETag"]
    assert etag_after == etag_before

    time.sleep(1.1)  # Redmine's updated_on has one-second resolution: the change must be a later second
    redmine_admin.add_note(printer, "トナー交換で解消")
    changed = sync.sync()
    assert changed.pulls[0].requests_by_purpose.get("issues") == 1
    assert changed.rendered == 1 and changed.state_issues_written == 1
    assert changed.uploaded == [f"{printer}.md", f"{printer}.md.metadata.json"]  # the sidecar holds updated_on
    assert "トナー交換で解消" in sync.documents()[f"{printer}.md"].decode()

    redmine_admin.delete_issue(mail)
    removed = sync.sync(full=True)
    assert removed.ok and removed.deleted == [f"{mail}.md", f"{mail}.md.metadata.json"]
    assert set(sync.documents()) == {f"{i}.md{s}" for i in (vpn, printer) for s in ("", ".metadata.json")}
    assert set(objects_under(s3_server, sync.state)) == {
        "manifest.json",
        f"issues/{vpn}.json",
        f"issues/{printer}.json",
    }

    relabelled = sync.sync(label="Ticket")  # a new fingerprint: everything again, from the stored issues
    assert relabelled.regenerated_all and relabelled.rendered == 2
    assert relabelled.regenerated_because == "the anchorkit version or the output options changed"
    assert relabelled.pulls[0].requests_by_purpose.get("issues", 0) == 0
    assert sorted(relabelled.uploaded) == [f"{vpn}.md", f"{printer}.md"]
    assert f"> Ticket #{vpn}: VPN接続が不安定になる (0)" in sync.documents()[f"{vpn}.md"].decode()


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_a_local_state_folder_and_a_local_destination_work_the_same_way(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, tmp_path: Path
) -> None:
    project, (vpn, printer) = seed_issues(redmine_admin, 2)
    state_dir, docs_dir = tmp_path / "state", tmp_path / "docs"

    def sync(full: bool) -> StatelessSyncReport:
        return run_sync(
            redmine_server.url,
            redmine_server.admin_key,
            LocalStateStore(state_dir),
            LocalDirTarget(docs_dir),
            TransformOptions(sidecars=False),
            PullSettings(projects=(project["identifier"],), full=full),
            work_dir=Path(tempfile.mkdtemp(dir=tmp_path)),
            publishing=PublishSettings(delete=True, force=True),
        )

    first = sync(full=False)
    assert first.ok and sorted(first.uploaded) == sorted([f"{vpn}.md", f"{printer}.md"])
    manifest_bytes = (state_dir / "manifest.json").read_bytes()
    redmine_admin.delete_issue(printer)
    second = sync(full=True)  # a full listing notices the deletion
    assert second.deleted == [f"{printer}.md"] and second.state_written
    assert sorted(p.name for p in docs_dir.iterdir()) == [f"{vpn}.md"]
    assert sorted(p.name for p in (state_dir / "issues").iterdir()) == [f"{vpn}.json"]
    assert (state_dir / "manifest.json").read_bytes() != manifest_bytes
    idle = sync(full=False)
    assert idle.ok and not idle.state_written and not idle.uploaded


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_failed_upload_is_not_claimed_by_the_state_and_the_next_run_publishes_it(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, (vpn, printer) = seed_issues(redmine_admin, 2)
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    failing = s3_server.client(retries={"max_attempts": 1})

    def refuse_printer_document(params: dict[str, Any], **_: Any) -> None:
        if params["Key"] == f"{sync.docs}/{printer}.md":  # a fault S3 will not produce on demand
            raise ConnectionError("connection reset by peer (injected)")

    failing.meta.events.register("before-parameter-build.s3.PutObject", refuse_printer_document)
    broken = sync.sync(client=failing)
    assert not broken.ok and [f.key for f in broken.failures] == [f"{printer}.md"]
    entry = manifest_of(s3_server, sync.state)["tickets"][str(printer)]
    # Not claimed: recorded as pending, no checksum (a write that failed may still have stored the object).
    assert entry["updated_on"] is None and entry["objects"][f"{printer}.md"] == PENDING
    assert f"{printer}.md" not in sync.documents()

    repaired = sync.sync()
    assert repaired.ok and repaired.uploaded == [f"{printer}.md"]
    # The raw JSON was stored although the upload failed: the unfinished ticket comes from the state.
    assert repaired.pulls[0].requests_by_purpose.get("issues", 0) == 0 and repaired.rendered == 1
    assert set(sync.documents()) == {f"{i}.md{s}" for i in (vpn, printer) for s in ("", ".metadata.json")}


# --------------------------------------------------------------------------------------------------
# Two syncs at once


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_of_two_syncs_started_together_exactly_one_wins_and_the_result_is_a_single_sync(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, _ = seed_issues(redmine_admin, 4)
    shared = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    start = threading.Barrier(2)
    outcomes: list[StatelessSyncReport | StateConflict] = []

    def one_sync() -> None:
        start.wait()
        try:
            outcomes.append(shared.sync())
        except StateConflict as conflict:
            outcomes.append(conflict)

    threads = [threading.Thread(target=one_sync) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [o for o in outcomes if isinstance(o, StatelessSyncReport)]
    losers = [o for o in outcomes if isinstance(o, StateConflict)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert winners[0].ok and winners[0].state_written
    single = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    single.sync()
    assert shared.documents() == single.documents()
    assert comparable(manifest_of(s3_server, shared.state)) == comparable(manifest_of(s3_server, single.state))
    assert "lease.json" not in objects_under(s3_server, shared.state)  # the winner released it


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_sync_that_finds_a_live_lease_stops_with_its_own_exit_code_and_writes_nothing(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, _ = seed_issues(redmine_admin, 1)
    docs, held_state = f"{s3_prefix}-docs", f"{s3_prefix}-state"
    client = s3_server.client()
    lease = {"owner": "ci-runner-7:abc", "expires_at": time.time() + 600}
    client.put_object(Bucket=s3_server.bucket, Key=f"{held_state}/lease.json", Body=json.dumps(lease).encode())
    work_in(tmp_path, cli_environment(redmine_server, s3_server, tmp_path), monkeypatch)

    result = runner.invoke(
        app,
        [
            "sync",
            f"s3://{s3_server.bucket}/{docs}",
            "--state",
            f"s3://{s3_server.bucket}/{held_state}/",
            "--url",
            redmine_server.url,
            "--project",
            project["identifier"],
        ],
    )
    assert result.exit_code == EXIT_LOCKED
    assert "another sync (ci-runner-7:abc) is writing" in result.stderr
    assert objects_under(s3_server, docs) == {}
    assert set(objects_under(s3_server, held_state)) == {"lease.json"}


# --------------------------------------------------------------------------------------------------
# kill -9 at random points


def cli_environment(redmine_server: RedmineServer | None, s3_server: S3Server, folder: Path) -> dict[str, str]:
    return {
        **({"REDMINE_API_KEY": redmine_server.admin_key} if redmine_server else {}),
        "ANCHORKIT_ENDPOINT_URL": s3_server.endpoint_url,
        "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(folder / "no-aws-config"),
    }


def work_in(folder: Path, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the CLI from ``folder`` with ``environment`` (cli_environment's), as a scheduled job would."""
    monkeypatch.chdir(folder)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)


class CliSync:
    """`anchorkit sync --state` in a child process started in a fresh empty folder (so it can be killed)."""

    LEASE_SECONDS = 1.0

    def __init__(self, redmine: RedmineServer, s3: S3Server, project: str, scratch: Path) -> None:
        self.scratch = scratch
        self.writes = 0  # PutObject + DeleteObject of the last complete run
        self.docs = f"crash-docs-{os.urandom(4).hex()}"
        self.state = f"crash-state-{os.urandom(4).hex()}"
        self.env = {**os.environ, **cli_environment(redmine, s3, scratch)}
        self.env.pop("ANCHORKIT_CONFIG", None)
        self.args = [
            sys.executable,
            str(KILLED_SYNC),
            "sync",
            f"s3://{s3.bucket}/{self.docs}",
            "--state",
            f"s3://{s3.bucket}/{self.state}/",
            "--url",
            redmine.url,
            "--project",
            project,
            "--sidecars",
            "--delete",
            "--force",
            "--lease-seconds",
            str(self.LEASE_SECONDS),
            "--json",
        ]

    def start(self, label: str | None, kill: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        cwd = tempfile.mkdtemp(dir=self.scratch)
        extra = ["--label", label] if label else []
        return subprocess.Popen(
            [*self.args, *extra],
            cwd=cwd,
            env={**self.env, **(kill or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, label: str | None) -> None:
        process = self.start(label)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr.decode()[-2000:]
        requests = json.loads(stdout)["s3_requests"]
        self.writes = requests.get("PutObject", 0) + requests.get("DeleteObject", 0)


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(600)
def test_a_sync_killed_at_a_random_point_converges_on_the_next_run_from_an_empty_disk(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, _ = seed_issues(redmine_admin, 5)
    ident = project["identifier"]
    # What an uninterrupted run leaves behind, for the default labels and after switching to "Ticket".
    references: dict[str | None, CliSync] = {}
    for label in (None, "Ticket"):
        references[label] = CliSync(redmine_server, s3_server, ident, tmp_path)
        references[label].run(label)
    regenerating = CliSync(redmine_server, s3_server, ident, tmp_path)
    regenerating.run(None)
    regenerating.run("Ticket")
    writes = {None: references[None].writes, "Ticket": regenerating.writes}
    rng = random.Random(20261130)
    for trial in range(10):
        crash = CliSync(redmine_server, s3_server, ident, tmp_path)
        # Odd trials crash a run that regenerates everything over an existing state, even ones a first run.
        label = "Ticket" if trial % 2 else None
        if label:
            crash.run(None)
        # A random write of the run (documents, sidecars, raw issues, lease, manifest), before or after it.
        kill = {
            "ANCHORKIT_KILL_AT_WRITE": str(rng.randint(1, writes[label])),
            "ANCHORKIT_KILL_WHEN": rng.choice(["before", "after"]),
        }
        process = crash.start(label, kill)
        process.communicate(timeout=120)
        assert process.returncode == -signal.SIGKILL, f"trial {trial}: {kill} did not kill the run"
        time.sleep(CliSync.LEASE_SECONDS + 0.2)  # the dead run's lease expires
        crash.run(label)
        reference = references[label]
        assert objects_under(s3_server, crash.docs) == objects_under(s3_server, reference.docs), f"trial {trial}"
        assert comparable(manifest_of(s3_server, crash.state)) == comparable(manifest_of(s3_server, reference.state))
        crash_state = objects_under(s3_server, crash.state)
        assert {k: v for k, v in crash_state.items() if k.startswith("issues/")} == {
            k: v for k, v in objects_under(s3_server, reference.state).items() if k.startswith("issues/")
        }
        if "lease.json" in crash_state:  # killed just before releasing it: the next run had nothing to write
            assert json.loads(crash_state["lease.json"])["expires_at"] < time.time()


# --------------------------------------------------------------------------------------------------
# pull --state: the same state, shared with sync --state


def snapshot_contents(snapshot_dir: Path) -> dict[str, Any]:
    """What two pulls of the same Redmine must agree on: every issue file's bytes, the lookups, and the
    cursor (the rest of state.json counts runs and reads the clock)."""
    return {
        "issues": {path.name: path.read_bytes() for path in sorted((snapshot_dir / "issues").glob("*.json"))},
        "lookups": json.loads((snapshot_dir / "lookups.json").read_text(encoding="utf-8")),
        "cursor": json.loads((snapshot_dir / "state.json").read_text(encoding="utf-8"))["cursor"],
    }


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_pull_with_an_s3_state_gives_the_plain_pull_snapshot_and_an_idle_run_on_an_empty_disk_writes_nothing(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project, ids = seed_issues(redmine_admin, 3)
    work_in(tmp_path, cli_environment(redmine_server, s3_server, tmp_path), monkeypatch)
    common = ["--url", redmine_server.url, "--project", project["identifier"], "--json"]
    with_state = ["--state", f"s3://{s3_server.bucket}/{s3_prefix}-state/", "--endpoint-url", s3_server.endpoint_url]

    plain = runner.invoke(app, ["pull", "--snapshot", str(tmp_path / "plain"), *common])
    assert plain.exit_code == 0, plain.stderr
    first = runner.invoke(app, ["pull", "--snapshot", str(tmp_path / "first"), *with_state, *common])
    assert first.exit_code == 0, first.stderr
    first_report = json.loads(first.stdout)
    assert first_report["state_written"] and first_report["state_issues_written"] == 3
    assert snapshot_contents(tmp_path / "first") == snapshot_contents(tmp_path / "plain")
    manifest = manifest_of(s3_server, f"{s3_prefix}-state")
    assert set(objects_under(s3_server, f"{s3_prefix}-state")) == {"manifest.json", *(f"issues/{i}.json" for i in ids)}
    for issue_id in ids:  # stored, nothing published yet
        entry = manifest["tickets"][str(issue_id)]
        assert entry["updated_on"] is None and entry["objects"] == {} and entry["stored"]

    second = runner.invoke(app, ["pull", "--snapshot", str(tmp_path / "second"), *with_state, *common])
    assert second.exit_code == 0, second.stderr
    idle = json.loads(second.stdout)
    assert not idle["state_written"] and idle["restored"] == 3
    assert "PutObject" not in idle["s3_requests"] and "DeleteObject" not in idle["s3_requests"]
    # What an idle run asks Redmine: the key check, the custom field definitions (an administrator's key) and
    # one listing page (a retry would repeat one of them).
    assert set(idle["pull"]["requests_by_purpose"]) == {"key check", "custom fields", "list"}
    assert snapshot_contents(tmp_path / "second") == snapshot_contents(tmp_path / "first")
    out = tmp_path / "out"
    transformed = runner.invoke(app, ["transform", str(tmp_path / "second"), "--out", str(out)])
    assert transformed.exit_code == 0, transformed.stderr
    assert sorted(path.name for path in out.glob("*.md")) == sorted(f"{i}.md" for i in ids)


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_sync_with_state_publishes_the_documents_and_sidecars_the_ordinary_sync_and_transform_write(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sidecars of sync --state once lacked the ``url`` of the issue the others give."""
    project, ids = seed_issues(redmine_admin, 2)
    work_in(tmp_path, cli_environment(redmine_server, s3_server, tmp_path), monkeypatch)
    common = ["--url", redmine_server.url, "--project", project["identifier"], "--sidecars", "--json"]
    docs = f"s3://{s3_server.bucket}/{s3_prefix}-docs/"
    with_state = runner.invoke(app, ["sync", docs, "--state", f"s3://{s3_server.bucket}/{s3_prefix}-state/", *common])
    assert with_state.exit_code == 0, with_state.stderr
    folders = ["--snapshot", "snap", "--out", "out", "--dry-run"]  # (--out is written all the same)
    ordinary = runner.invoke(app, ["sync", str(tmp_path / "published"), *folders, *common])
    assert ordinary.exit_code == 0, ordinary.stderr
    assert runner.invoke(app, ["transform", "snap", "--out", "transformed", "--sidecars"]).exit_code == 0
    published = objects_under(s3_server, f"{s3_prefix}-docs")
    assert published == tree(Path("out")) == tree(Path("transformed"))
    for issue_id in ids:
        sidecar = json.loads(published[f"{issue_id}.md.metadata.json"])
        assert sidecar["metadataAttributes"]["url"] == f"{redmine_server.url.rstrip('/')}/issues/{issue_id}"


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_what_a_pull_with_the_state_stored_the_next_sync_publishes_and_what_it_found_gone_sync_deletes(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, (vpn, printer, mail) = seed_issues(redmine_admin, 3)
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    assert sync.sync().ok

    time.sleep(1.1)  # Redmine's updated_on has one-second resolution: the change must be a later second
    redmine_admin.add_note(printer, "トナー交換で解消")
    laptop = redmine_admin.create_issue(project["id"], "ノートPCが起動しない")["id"]
    pulled = sync.pull()
    assert pulled.ok and pulled.state_written and pulled.state_issues_written == 2
    assert pulled.pull_report is not None and pulled.pull_report.cursor == sync.manifest()["pull"]["cursor"]
    tickets = sync.manifest()["tickets"]
    assert tickets[str(printer)]["stored"] > tickets[str(printer)]["updated_on"]  # stored, not yet published
    assert tickets[str(laptop)] == {
        "updated_on": None,
        "objects": {},
        "project_id": project["id"],
        "stored": tickets[str(laptop)]["stored"],
    }
    assert "トナー交換で解消" not in sync.documents()[f"{printer}.md"].decode()  # pull publishes nothing

    # The cursor has moved past both: only the state tells this sync (on an empty disk) to publish them.
    published = sync.sync()
    assert published.ok and not published.regenerated_all
    assert published.uploaded == sorted(f"{i}.md{s}" for i in (printer, laptop) for s in ("", ".metadata.json"))
    assert published.pulls[0].requests_by_purpose.get("issues", 0) == 0  # rendered from the stored raw JSON
    assert "トナー交換で解消" in sync.documents()[f"{printer}.md"].decode()
    assert all(entry["stored"] == entry["updated_on"] for entry in sync.manifest()["tickets"].values())
    assert not sync.sync().state_written  # nothing left to publish

    redmine_admin.delete_issue(mail)
    found_gone = sync.pull(full=True)
    assert found_gone.ok and found_gone.pull_report is not None and found_gone.pull_report.removed_ids == [mail]
    assert found_gone.state_issues_deleted == 1 and f"issues/{mail}.json" not in objects_under(s3_server, sync.state)
    assert sync.manifest()["tickets"][str(mail)]["gone"] is True
    assert f"{mail}.md" in sync.documents()  # still published until a sync deletes it

    deleting = sync.sync()  # incremental: only the state knows the issue is gone
    assert deleting.ok and deleting.deleted == [f"{mail}.md", f"{mail}.md.metadata.json"]
    assert str(mail) not in sync.manifest()["tickets"]
    assert set(sync.documents()) == {f"{i}.md{s}" for i in (vpn, printer, laptop) for s in ("", ".metadata.json")}


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_names_refreshed_by_a_pull_with_the_state_make_the_next_sync_regenerate_the_documents(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project = redmine_admin.create_project(name="社内ITサービスデスク")

    def create_category(name: str) -> int:
        created = redmine_admin.request(
            "POST", f"/projects/{project['id']}/issue_categories.json", json={"issue_category": {"name": name}}
        )
        return int(created["issue_category"]["id"])

    hardware, network = create_category("ハードウェア"), create_category("ネットワーク")
    issue = redmine_admin.create_issue(project["id"], "VPN接続が不安定になる", category_id=hardware)["id"]
    redmine_admin.update_issue(issue, category_id=network)  # a journal names both categories from the lookups
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    assert sync.sync().ok
    assert "ハードウェア → ネットワーク" in sync.documents()[f"{issue}.md"].decode()

    redmine_admin.request(
        "PUT", f"/issue_categories/{network}.json", json={"issue_category": {"name": "ネットワーク機器"}}
    )
    pulled = sync.pull(lookups_max_age_s=0)  # the lookups are refreshed; no issue changed
    assert pulled.ok and pulled.state_written and pulled.state_issues_written == 0
    manifest = sync.manifest()
    assert manifest["source_lookups"]["categories"][str(network)]["name"] == "ネットワーク機器"
    assert manifest["lookups"]["categories"][str(network)]["name"] == "ネットワーク"  # what is published

    regenerated = sync.sync()
    assert regenerated.ok and regenerated.regenerated_all and f"{issue}.md" in regenerated.uploaded
    assert regenerated.regenerated_because == "names changed in the lookups (categories)"  # the label is as it was
    assert "ハードウェア → ネットワーク機器" in sync.documents()[f"{issue}.md"].decode()
    manifest = sync.manifest()
    assert "source_lookups" not in manifest  # the published names are the pulled ones again
    assert manifest["lookups"]["categories"][str(network)]["name"] == "ネットワーク機器"


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_raw_issue_missing_from_the_state_is_fetched_again_by_a_full_listing(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, s3_server: S3Server, tmp_path: Path
) -> None:
    project, (vpn, printer) = seed_issues(redmine_admin, 2)
    sync = StatelessRunner(redmine_server, s3_server, project["identifier"], tmp_path)
    assert sync.pull().ok
    s3_server.client().delete_object(Bucket=s3_server.bucket, Key=f"{sync.state}/issues/{printer}.json")

    snapshot_dir = sync.empty_folder()
    repaired = sync.pull(snapshot_dir=snapshot_dir)
    assert repaired.ok and repaired.restored == 1
    assert repaired.pull_report is not None and repaired.pull_report.full  # the cursor would have hidden it
    assert repaired.pull_report.requests_by_purpose.get("issues") == 1 and repaired.state_issues_written == 1
    assert sorted(path.name for path in (snapshot_dir / "issues").iterdir()) == sorted(
        [f"{vpn}.json", f"{printer}.json"]
    )
    assert f"issues/{printer}.json" in objects_under(s3_server, sync.state)


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_pull_with_a_local_state_folder_holds_its_lock_and_feeds_a_local_sync(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, (vpn, printer) = seed_issues(redmine_admin, 2)
    state_dir = tmp_path / "state"
    monkeypatch.setenv("REDMINE_API_KEY", redmine_server.admin_key)
    command = ["pull", "--url", redmine_server.url, "--project", project["identifier"], "--state", str(state_dir)]

    with LocalStateStore(state_dir).session():  # a sync is running on this state
        refused = runner.invoke(app, [*command, "--snapshot", str(tmp_path / "refused")])
    assert refused.exit_code == EXIT_LOCKED
    assert "another sync is running on this state" in refused.stderr
    assert not (state_dir / "manifest.json").exists()

    inside = runner.invoke(app, [*command, "--snapshot", str(state_dir / "snapshot")])
    assert inside.exit_code == 2 and "overlaps the snapshot folder" in inside.stderr

    seen_while_pulling: list[str] = []

    def try_to_take_the_state(done: int, total: int) -> None:
        try:
            with LocalStateStore(state_dir).session():
                seen_while_pulling.append("free")
        except StateConflict:
            seen_while_pulling.append("held")

    pulled = pull_with_state(
        redmine_server.url,
        redmine_server.admin_key,
        LocalStateStore(state_dir),
        tmp_path / "snapshot",
        PullSettings(projects=(project["identifier"],)),
        progress=try_to_take_the_state,
    )
    assert pulled.ok and pulled.state_written and seen_while_pulling and set(seen_while_pulling) == {"held"}
    assert sorted(p.name for p in (state_dir / "issues").iterdir()) == sorted([f"{vpn}.json", f"{printer}.json"])

    docs_dir = tmp_path / "docs"
    synced = run_sync(
        redmine_server.url,
        redmine_server.admin_key,
        LocalStateStore(state_dir),
        LocalDirTarget(docs_dir),
        TransformOptions(sidecars=False),
        PullSettings(projects=(project["identifier"],)),
        work_dir=tmp_path / "work",
        publishing=PublishSettings(delete=True, force=True),
    )
    assert synced.ok and sorted(synced.uploaded) == sorted([f"{vpn}.md", f"{printer}.md"])
    assert synced.pulls[0].requests_by_purpose.get("issues", 0) == 0  # published from what pull stored


@pytest.mark.redmine
@pytest.mark.timeout(300)
def test_a_manifest_from_before_stored_versions_is_read_as_storing_the_published_ones(
    redmine_server: RedmineServer, redmine_admin: RedmineAdmin, tmp_path: Path
) -> None:
    project, (vpn, printer) = seed_issues(redmine_admin, 2)
    state_dir, arguments = tmp_path / "state", PullSettings(projects=(project["identifier"],))

    def sync() -> StatelessSyncReport:
        return run_sync(
            redmine_server.url,
            redmine_server.admin_key,
            LocalStateStore(state_dir),
            LocalDirTarget(tmp_path / "docs"),
            TransformOptions(),
            arguments,
            work_dir=Path(tempfile.mkdtemp(dir=tmp_path)),
            publishing=PublishSettings(delete=True, force=True),
        )

    assert sync().ok
    manifest = json.loads((state_dir / "manifest.json").read_text(encoding="utf-8"))
    for entry in manifest["tickets"].values():
        del entry["stored"]  # what an older anchorkit wrote
    (state_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    old_bytes = (state_dir / "manifest.json").read_bytes()

    idle = sync()
    assert idle.ok and idle.rendered == 0 and not idle.state_written
    pulled = pull_with_state(
        redmine_server.url, redmine_server.admin_key, LocalStateStore(state_dir), tmp_path / "snapshot", arguments
    )
    assert pulled.ok and pulled.restored == 2 and not pulled.state_written
    assert pulled.pull_report is not None and pulled.pull_report.requests_by_purpose.get("issues", 0) == 0
    assert (state_dir / "manifest.json").read_bytes() == old_bytes
    assert sorted(p.name for p in (tmp_path / "snapshot" / "issues").iterdir()) == sorted(
        [f"{vpn}.json", f"{printer}.json"]
    )


def test_pull_with_state_takes_the_snapshot_lock_before_it_touches_the_snapshot(tmp_path: Path) -> None:
    snapshot_dir = tmp_path / "snapshot"
    (snapshot_dir / "issues").mkdir(parents=True)
    stray = snapshot_dir / "issues" / "41.json"  # not in the (empty) state: preparing the snapshot would remove it
    stray.write_text('{"issue": {"id": 41, "subject": "s", "updated_on": "2026-01-01T00:00:00Z"}}', encoding="utf-8")
    holder = subprocess.Popen(  # a plain `pull` running on this snapshot, in another process
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; h = open(sys.argv[1], 'w'); fcntl.flock(h, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(60)",
            str(snapshot_dir / preflight.LOCK_FILE),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(preflight.PullError, match="another pull is running on this snapshot"):
            pull_with_state("http://127.0.0.1:9", "key", LocalStateStore(tmp_path / "state"), snapshot_dir)
    finally:
        holder.kill()
        holder.wait()
    assert stray.exists() and not (snapshot_dir / "state.json").exists()
    assert not (tmp_path / "state" / "manifest.json").exists()
