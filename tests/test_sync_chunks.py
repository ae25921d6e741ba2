"""`sync --chunks` against the real Redmine and the real S3 server (SeaweedFS): pull → chunk → publish, with
local folders and with --state. What is published is the chunk folder `anchorkit chunk --out` writes
(`<id>/<id>-NNN.md` + sidecars), by content; a ticket that shrank loses its extra chunks, a private one
all of them; the delete guard counts chunks; a change of layout replaces the objects under the guard."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from support.folders import tree
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from test_sync_scope import Job as ScheduledJob
from test_sync_state import manifest_of, objects_under
from typer.testing import CliRunner

from anchorkit.anchors import identified_ticket_ids
from anchorkit.cli import app
from anchorkit.publish.keys import CHUNKS, ticket_key
from anchorkit.render.sidecar import SIDECAR_SUFFIX, read_sidecar
from anchorkit.sync import apply

runner = CliRunner()
TOKENS = "120"  # short chunks, so that a ticket of a few paragraphs makes several
LONG = "\n\n".join(f"手順{n}: ルーターの設定を確認し、ファームウェアを更新してから再接続を試した。" for n in range(24))


class Job(ScheduledJob):
    """A scheduled `sync --chunks` (folders, or --state) and what it left in S3."""

    def run(self, *args: str) -> tuple[int, dict[str, Any] | None, str]:
        result = runner.invoke(app, ["sync", self.docs, "--url", self.redmine.url, "--json", *args])
        return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None, result.stderr

    def published(self) -> dict[str, bytes]:
        return objects_under(self.s3, self.docs_prefix)

    def manifest(self) -> dict[str, Any]:
        return manifest_of(self.s3, self.state_prefix)

    def chunk_names(self, ticket_id: int) -> list[str]:
        return sorted(k for k in self.published() if k.startswith(f"{ticket_id}/") and k.endswith(".md"))

    def assert_shrunk(self, ticket_id: int, before: list[str]) -> None:
        """The ticket has fewer chunks than ``before``, numbered from 000 without a gap."""
        after = self.chunk_names(ticket_id)
        assert 0 < len(after) < len(before)
        assert after == [f"{ticket_id}/{ticket_id}-{n:03d}.md" for n in range(len(after))]


@pytest.fixture
def job(
    redmine_server: RedmineServer, s3_server: S3Server, s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Job:
    return Job(redmine_server, s3_server, s3_prefix, tmp_path, monkeypatch)


def seed(admin: RedmineAdmin) -> tuple[dict[str, Any], int, int, int]:
    project = admin.create_project(name="社内ITサービスデスク")
    long = admin.create_issue(project["id"], "VPN接続が不安定になる", description=LONG)["id"]
    admin.add_note(long, "対応履歴: ルーターを再起動したら解消した。")
    private = admin.create_issue(project["id"], "プリンタが印刷しない", description=LONG[: len(LONG) // 2])["id"]
    short = admin.create_issue(project["id"], "パスワードを忘れた", description="再発行を依頼。")["id"]
    return project, long, private, short


def assert_published_chunks(published: dict[str, bytes], ticket_ids: set[int], redmine: str) -> None:
    """Every object a chunk of one of these tickets or its sidecar; each chunk names its ticket and has its
    sidecar, which links to the ticket."""
    assert published
    found = {key: ticket_key(key) for key in published}
    assert all(f is not None and f.layout == CHUNKS for f in found.values()), sorted(published)
    assert {f.ticket_id for f in found.values() if f is not None} == ticket_ids
    for key, data in published.items():
        if key.endswith(SIDECAR_SUFFIX):
            continue
        ticket_id = int(key.split("/")[0])
        assert identified_ticket_ids(data.decode("utf-8").split("\n", 1)[0]) == {ticket_id}
        sidecar = read_sidecar(published[key + SIDECAR_SUFFIX])
        assert sidecar["ticket_id"] == ticket_id and sidecar["url"].startswith(f"{redmine}/issues/{ticket_id}")


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_the_ordinary_sync_publishes_chunks_by_content_and_keeps_s3_in_step_with_the_tickets(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, long, private, short = seed(redmine_admin)
    out = job.tmp_path / "out"
    base = ["--project", project["identifier"], "--snapshot", str(job.tmp_path / "snap"), "--out", str(out)]
    base += ["--chunks", "--chunk-tokens", TOKENS]

    status, first, stderr = job.run(*base)
    assert status == 0, stderr
    assert first is not None and first["transform"]["chunks"] >= 8
    published = job.published()
    assert published == tree(out)
    assert first["upload"]["uploaded"] == len(published) == 2 * first["transform"]["chunks"]
    assert_published_chunks(published, {long, private, short}, job.redmine.url)
    assert len(job.chunk_names(long)) >= 4

    status, second, stderr = job.run(*base)
    assert status == 0, stderr
    assert second is not None and "PutObject" not in second["upload"]["requests"]
    assert (second["upload"]["uploaded"], second["upload"]["deleted"]) == (0, 0)

    # Shorter: its extra chunks go, without --delete, counted by the guard (too many for 10% here).
    before, long_before = job.published(), job.chunk_names(long)
    redmine_admin.update_issue(long, description="再接続で解消。")
    status, refused, stderr = job.run(*base)
    assert status == 1 and refused is not None
    assert "chunks or chunk sidecars" in refused["upload"]["refused"], refused["upload"]["refused"]
    assert job.published() == before
    dry_status, dry, _ = job.run(*base, "--max-delete", "100%", "--dry-run")
    assert dry_status == 0 and dry is not None and dry["upload"]["planned"]["superseded"] > 0
    assert job.published() == before
    status, shrunk, stderr = job.run(*base, "--max-delete", "100%")
    assert status == 0, stderr
    assert shrunk is not None and shrunk["upload"]["deleted"] == shrunk["upload"]["planned"]["superseded"] > 0
    assert job.published() == tree(out)
    job.assert_shrunk(long, long_before)

    # Private now: every chunk of it goes, without --delete and outside the guard.
    redmine_admin.update_issue(private, is_private=True)
    status, _, stderr = job.run(*base, "--max-delete", "0")
    assert status == 0, stderr
    assert job.chunk_names(private) == [] and job.published() == tree(out)
    assert_published_chunks(job.published(), {long, short}, job.redmine.url)


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_symlinked_ticket_folder_in_out_fails_by_name_and_its_published_chunks_stay(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, long, _private, short = seed(redmine_admin)
    out, moved = job.tmp_path / "out", job.tmp_path / "elsewhere"
    base = ["--project", project["identifier"], "--snapshot", str(job.tmp_path / "snap"), "--out", str(out)]
    base += ["--chunks", "--chunk-tokens", TOKENS, "--delete", "--max-delete", "100%"]
    status, _, stderr = job.run(*base)
    assert status == 0, stderr
    published = job.published()
    (out / str(short)).rename(moved)
    (out / str(short)).symlink_to(moved, target_is_directory=True)
    time.sleep(1.1)  # a new updated_on (Redmine's are to the second): else the stored copy passes for this version
    redmine_admin.update_issue(long, description="再接続で解消。")  # the rest of the run goes on

    status, report, _ = job.run(*base)
    assert status == 1 and report is not None
    assert [failure["key"] for failure in report["upload"]["failures"]] == [f"{short}/"]
    assert "a symbolic link to a folder (not followed" in report["upload"]["failures"][0]["error"]
    assert not any(key.startswith(f"{short}/") for key in report["upload"]["planned_keys"]["delete"])
    after = job.published()
    assert {k: v for k, v in after.items() if k.startswith(f"{short}/")} == {
        k: v for k, v in published.items() if k.startswith(f"{short}/")
    }
    assert {k: v for k, v in after.items() if not k.startswith(f"{short}/")} == tree(out)
    assert job.chunk_names(long) != [k for k in published if k.startswith(f"{long}/") and k.endswith(".md")]


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_sync_with_state_publishes_chunks_and_records_the_layout(job: Job, redmine_admin: RedmineAdmin) -> None:
    project, long, private, short = seed(redmine_admin)
    base = ["--state", job.state, "--project", project["identifier"], "--chunks", "--chunk-tokens", TOKENS]

    status, first, stderr = job.run(*base)
    assert status == 0, stderr
    published = job.published()
    assert first is not None and first["uploaded"] == len(published)
    assert_published_chunks(published, {long, private, short}, job.redmine.url)
    manifest = job.manifest()
    assert manifest["layout"] == "chunks"
    assert {k for entry in manifest["tickets"].values() for k in entry["objects"]} == set(published)

    # The same chunks as the ordinary sync writes into --out.
    out = job.tmp_path / "out"
    folders = ["--snapshot", str(job.tmp_path / "snap"), "--out", str(out), "--dry-run"]
    assert job.run("--project", project["identifier"], "--chunks", "--chunk-tokens", TOKENS, *folders)[0] == 0
    assert tree(out) == published

    status, second, stderr = job.run(*base)
    assert status == 0, stderr
    assert second is not None and second["uploaded"] == 0 and not second["state_written"]
    assert "PutObject" not in second["s3_requests"]

    before, before_manifest, long_before = job.published(), job.manifest(), job.chunk_names(long)
    redmine_admin.update_issue(long, description="再接続で解消。")
    status, refused, stderr = job.run(*base)
    assert status == 1 and refused is not None and "chunks or chunk sidecars" in refused["refused"]
    status, dry, stderr = job.run(*base, "--force", "--dry-run")
    assert status == 0 and dry is not None and dry["planned"]["delete"] > 0
    assert job.published() == before and job.manifest() == before_manifest
    status, shrunk, stderr = job.run(*base, "--force")
    assert status == 0, stderr
    job.assert_shrunk(long, long_before)
    kept = {key for key in job.published() if key.startswith(f"{long}/")}
    assert shrunk is not None and shrunk["deleted"] == 2 * len(long_before) - len(kept)
    assert set(job.manifest()["tickets"][str(long)]["objects"]) == kept

    redmine_admin.update_issue(private, is_private=True)
    status, withdrawn, stderr = job.run(*base, "--max-delete", "0")
    assert status == 0, stderr
    assert withdrawn is not None and withdrawn["withdrawn"] == [private]
    assert job.chunk_names(private) == []
    assert_published_chunks(job.published(), {long, short}, job.redmine.url)


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
def test_a_state_switched_between_documents_and_chunks_replaces_every_object_under_the_guard(
    job: Job, redmine_admin: RedmineAdmin
) -> None:
    project, long, private, short = seed(redmine_admin)
    base = ["--state", job.state, "--project", project["identifier"], "--sidecars"]
    assert job.run(*base)[0] == 0
    documents = job.published()
    assert set(documents) == {f"{i}.md{s}" for i in (long, private, short) for s in ("", SIDECAR_SUFFIX)}

    chunked = [*base, "--chunks", "--chunk-tokens", TOKENS]
    status, refused, stderr = job.run(*chunked)
    assert status == 1 and refused is not None
    assert refused["refused"].startswith("refusing to delete 6 of 6 objects")
    assert "publishes chunks where the state has documents" in refused["refused"]
    assert job.published() == documents and "layout" not in job.manifest()

    status, _, stderr = job.run(*chunked, "--force")
    assert status == 0, stderr
    assert_published_chunks(job.published(), {long, private, short}, job.redmine.url)
    assert job.manifest()["layout"] == "chunks"

    status, _, stderr = job.run(*base, "--max-delete", "100%")
    assert status == 0, stderr
    assert job.published() == documents and "layout" not in job.manifest()


def test_an_out_folder_holding_the_other_layout_is_refused_before_anything_runs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "12.md").write_text("# チケット #12: 件名\n", encoding="utf-8")
    command = ["sync", str(tmp_path / "published"), "--url", "http://127.0.0.1:9", "--snapshot", str(tmp_path / "s")]
    refused = runner.invoke(app, [*command, "--out", str(out), "--chunks"])
    assert refused.exit_code == 2
    assert f"--out {out} holds documents (e.g. 12.md) and this sync (--chunks) writes chunks" in refused.stderr
    chunks = tmp_path / "chunks"
    (chunks / "12").mkdir(parents=True)
    (chunks / "12" / "12-000.md").write_text("# チケット #12: 件名\n", encoding="utf-8")
    refused = runner.invoke(app, [*command, "--out", str(chunks)])
    assert refused.exit_code == 2
    assert "holds chunks (e.g. 12/12-000.md) and this sync (no --chunks) writes documents" in refused.stderr
    assert not (tmp_path / "s").exists() and not (tmp_path / "published").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--chunk-tokens", "0"], "--chunk-tokens must be at least 32 to chunk, not 0"),
        (["--chunk-tokens", "10"], "--chunk-tokens must be at least 32 to chunk, not 10"),  # as `chunk` says
        (["--chunk-tokens", "100", "--chunk-overlap", "51"], "--chunk-overlap must be between 0 and half of"),
        (["--chunk-tokens", "32", "--chunk-overlap", "16"], "--chunk-tokens 32 with --chunk-overlap 16 leaves 7"),
        (["--chunk-tokens", "32", "--label", "L" * 41], "--label may be at most 40 characters, not 41"),
    ],
)
def test_chunk_options_that_cannot_chunk_are_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], message: str
) -> None:
    command = ["sync", str(tmp_path / "published"), "--url", "http://127.0.0.1:9", "--snapshot", str(tmp_path / "s")]
    refused = runner.invoke(app, [*command, "--out", str(tmp_path / "out"), "--chunks", *options])
    assert refused.exit_code == 2 and message in refused.stderr
    assert not (tmp_path / "s").exists() and not (tmp_path / "out").exists()
    # Without --chunks, --chunk-tokens 0 is transform's "anchors after headings only": not refused for that.
    monkeypatch.delenv("REDMINE_API_KEY", raising=False)  # so that the run stops at the key, after the settings
    plain = runner.invoke(app, [*command, "--out", str(tmp_path / "o"), "--chunk-tokens", "0"])
    assert plain.exit_code == 2 and "no Redmine API key" in plain.stderr


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
@pytest.mark.parametrize("then", ["made private", "shrunk"])
def test_chunks_a_run_killed_before_its_commit_wrote_are_known_to_the_state_and_removed_with_their_ticket(
    job: Job, redmine_admin: RedmineAdmin, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    project, long, private, short = seed(redmine_admin)
    base = ["--state", job.state, "--project", project["identifier"], "--chunks", "--chunk-tokens", TOKENS]
    assert job.run(*base)[0] == 0
    before = job.chunk_names(short)

    # The ticket grows into more chunks; the run uploads them and dies before its commit (kill -9, a timeout).
    redmine_admin.update_issue(short, description=LONG)
    with monkeypatch.context() as dying:
        dying.setattr(apply, "commit", _die)
        status, _, _ = job.run(*base)
    assert status != 0
    grown = job.chunk_names(short)
    assert len(grown) > len(before)
    recorded = {key for entry in job.manifest()["tickets"].values() for key in entry["objects"]}
    assert set(job.published()) <= recorded  # no published object the state does not know of

    if then == "made private":
        redmine_admin.update_issue(short, is_private=True)
    else:
        redmine_admin.update_issue(short, description="再発行を依頼。")
    status, _, stderr = job.run(*base, "--force")
    assert status == 0, stderr
    if then == "made private":
        assert job.chunk_names(short) == []
    else:
        job.assert_shrunk(short, grown)  # (numbered from 000 without a gap: no chunk of the dead run left over)
    recorded = {key for entry in job.manifest()["tickets"].values() for key in entry["objects"]}
    assert set(job.published()) == recorded
    assert_published_chunks(
        job.published(), {long, private} | ({short} if then == "shrunk" else set()), job.redmine.url
    )


def _die(store: object, manifest: object) -> None:
    raise RuntimeError("killed before the commit")
