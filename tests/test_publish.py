"""upload to a local folder, and the plan/guard/ordering rules that S3 shares (no server needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from support.folders import tree, write_ticket
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.errors import UsageError
from anchorkit.publish import aws
from anchorkit.publish import upload as publishing
from anchorkit.publish.aws import InvalidKey, S3Location
from anchorkit.publish.upload import (
    Checksums,
    DeleteLimit,
    LocalDirTarget,
    LocalObject,
    Plan,
    PublishError,
    PublishSettings,
    RemoteObject,
)

runner = CliRunner()


def remote(key: str, data: bytes, etag: str | None = None) -> RemoteObject:
    checksums = Checksums.of(data)
    return RemoteObject(key, checksums.size, etag or checksums.md5)


def local(key: str, data: bytes) -> LocalObject:
    return LocalObject(key, Checksums.of(data), data)


# -- keys and destinations -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["../etc/passwd", "a/../../b", "/abs.md", "a//b.md", "./a.md", "a\\b.md", "tab\there.md", "nul\x00.md", "del\x7f"],
)
def test_keys_that_could_escape_the_prefix_or_confuse_a_consumer_are_refused(key: str) -> None:
    with pytest.raises(InvalidKey):
        aws.validate_key(key)


def test_ordinary_keys_including_japanese_and_nested_ones_are_accepted() -> None:
    for key in ["12345.md", "helpdesk/12345.md.metadata.json", "資料/チケット 1.md", "a..b.md"]:
        aws.validate_key(key)


def test_s3_destinations_are_normalised_to_a_prefix_ending_in_a_slash() -> None:
    assert aws.parse_location("s3://kb-docs/tickets") == S3Location("kb-docs", "tickets/")
    assert aws.parse_location("s3://kb-docs/tickets/") == S3Location("kb-docs", "tickets/")
    assert aws.parse_location("s3://kb-docs") == S3Location("kb-docs", "")
    assert aws.parse_location("published") == Path("published")


@pytest.mark.parametrize("destination", ["s3://kb/../x", "s3://ab/docs", "s3:///docs"])
def test_bad_s3_destinations_are_usage_errors(destination: str) -> None:
    with pytest.raises(UsageError):
        aws.parse_location(destination)


@pytest.mark.parametrize("bucket", ["Bad_Bucket!", "UPPER", "a..b", "192.168.1.1", "-ab", "ab-", "a" * 64])
def test_a_bucket_name_s3_would_refuse_is_a_usage_error_before_anything_is_contacted(
    bucket: str, tmp_path: Path
) -> None:
    write_ticket(tmp_path / "out", 1)
    result = runner.invoke(
        app, ["upload", str(tmp_path / "out"), f"s3://{bucket}/x", "--endpoint-url", "http://127.0.0.1:9"]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: destination 's3://{bucket}/x': bucket name '{bucket}' is not valid (3 to 63 " + (
        "lowercase letters, digits, dots and hyphens, beginning and ending with a letter or digit)\n"
    )


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        ("http://user:PASSWDLEAK@127.0.0.1:9", "'http://127.0.0.1:9': holds a user name or password"),
        ("ftp://user:PASSWDLEAK@x", "'ftp://x': expected http://host[:port] or https://host[:port]"),
        ("ftp://x", "'ftp://x': expected http://host[:port]"),
        ("127.0.0.1:9", "'127.0.0.1:9': expected http://host[:port]"),
        ("http://x:port", "'http://x:port': expected http://host[:port]"),
    ],
)
def test_an_endpoint_url_with_a_password_or_another_scheme_is_a_usage_error_that_never_echoes_the_password(
    endpoint: str, said: str, tmp_path: Path
) -> None:
    write_ticket(tmp_path / "out", 1)
    for command in (["upload", str(tmp_path / "out"), "s3://kb-docs/x"], ["state", "show", "s3://kb-docs/state"]):
        result = runner.invoke(app, [*command, "--endpoint-url", endpoint, "--json", "-v"])
        assert result.exit_code == 2, result.output
        assert f"--endpoint-url {said}" in json.loads(result.stdout)["error"]
        assert "PASSWDLEAK" not in result.output


def test_a_password_in_a_url_of_an_s3_error_is_not_shown() -> None:
    from botocore.exceptions import EndpointConnectionError

    error = EndpointConnectionError(endpoint_url="http://user:PASSWDLEAK@proxy:3128/kb-docs")
    assert (
        aws.describe_error(error)
        == 'EndpointConnectionError: Could not connect to the endpoint URL: "http://proxy:3128/kb-docs"'
    )


def test_content_types_for_documents_and_sidecars() -> None:
    assert publishing.content_type_for("1.md") == "text/markdown; charset=utf-8"
    assert publishing.content_type_for("1.md.metadata.json") == "application/json"


# -- the plan -------------------------------------------------------------------------------------


def test_plan_compares_by_content_not_by_time_or_name() -> None:
    plan = publishing.diff(
        [local("same.md", b"same"), local("changed.md", b"new!"), local("new.md", b"n")],
        [remote("same.md", b"same"), remote("changed.md", b"old!"), remote("gone.md", b"g")],
        {},
        delete=True,
    )
    assert [o.key for o in plan.skips] == ["same.md"]
    assert [o.key for o in plan.uploads] == ["changed.md", "new.md"]
    assert [o.key for o in plan.deletes] == ["gone.md"]


def test_a_multipart_etag_is_decided_by_the_checksum_stored_at_upload() -> None:
    data = b"document bytes"
    multipart = remote("doc.md", data, etag="0123456789abcdef0123456789abcdef-2")
    assert publishing.needs_stored_checksum(local("doc.md", data), multipart)
    same = publishing.diff([local("doc.md", data)], [multipart], {"doc.md": Checksums.of(data).sha256}, delete=False)
    assert [o.key for o in same.skips] == ["doc.md"]
    unknown = publishing.diff([local("doc.md", data)], [multipart], {"doc.md": None}, delete=False)
    assert [o.key for o in unknown.uploads] == ["doc.md"]


def test_stale_objects_are_only_deleted_when_asked_for() -> None:
    plan = publishing.diff([], [remote("gone.md", b"g")], {}, delete=False)
    assert [o.key for o in plan.stale] == ["gone.md"]
    assert plan.deletes == []


def test_a_local_file_that_could_not_be_read_is_never_deleted_remotely() -> None:
    plan = publishing.diff([], [remote("12.md", b"x")], {}, delete=True, protected_keys=["12.md"])
    assert plan.deletes == []


def test_a_folder_that_was_not_read_keeps_everything_under_it_but_a_withdrawn_tickets_objects() -> None:
    remotes = [remote(key, b"x") for key in ("ops/1.md", "ops/2.md", "ops/12/12-000.md", "ops.md", "it/3.md")]
    chunks = [local("ops/12.md", b"d")]  # ticket 12 now a document: its chunks would be superseded
    plan = publishing.diff(chunks, remotes, {}, delete=True, protected_keys=["ops/"], withdrawn_ids={2})
    assert [o.key for o in plan.withdrawn] == ["ops/2.md"]
    assert [o.key for o in plan.stale] == ["it/3.md", "ops.md"]
    assert plan.superseded == []


def test_an_unreadable_file_keeps_its_object_unless_its_ticket_was_withdrawn() -> None:
    # A private ticket whose local file could not be read must still be unpublished, not kept for good.
    remotes = [remote(key, b"x") for key in ("5.md", "5.md.metadata.json", "6.md", "7.md")]
    plan = publishing.diff([], remotes, {}, delete=True, protected_keys=["5.md", "6.md"], withdrawn_ids={5})
    assert [o.key for o in plan.withdrawn] == ["5.md", "5.md.metadata.json"]
    assert [o.key for o in plan.stale] == ["7.md"]


def test_sidecars_are_written_before_and_deleted_after_their_documents() -> None:
    plan = Plan(
        uploads=[local("1.md", b"d"), local("1.md.metadata.json", b"{}")],
        stale=[remote("2.md", b"d"), remote("2.md.metadata.json", b"{}")],
        delete=True,
    )
    groups = {tuple((op.action, op.key) for op in group) for group in publishing.ordered_groups(plan)}
    assert groups == {
        (("upload", "1.md.metadata.json"), ("upload", "1.md")),
        (("delete", "2.md"), ("delete", "2.md.metadata.json")),
    }


def test_when_a_sidecar_upload_fails_its_document_is_not_written() -> None:
    class SidecarsFail(LocalDirTarget):
        def put(self, key: str, data: bytes, checksums: Checksums) -> None:
            if key.endswith(publishing.SIDECAR_SUFFIX):
                raise OSError("disk full")
            super().put(key, data, checksums)

    target = SidecarsFail(Path("/nonexistent-never-written"))
    group = [
        publishing.Operation("upload", "1.md.metadata.json", local("1.md.metadata.json", b"{}")),
        publishing.Operation("upload", "1.md", local("1.md", b"d")),
    ]
    results = publishing.run_group(target, group)
    assert [(r.operation.key, r.error is None) for r in results] == [("1.md.metadata.json", False), ("1.md", False)]
    assert "not attempted" in (results[1].error or "")


# -- the delete guard -----------------------------------------------------------------------------


def test_max_delete_accepts_counts_and_percentages() -> None:
    assert publishing.parse_max_delete("25") == DeleteLimit(count=25)
    assert publishing.parse_max_delete("10%") == DeleteLimit(percent=10.0)
    for bad in ["-1", "ten", "150%"]:
        with pytest.raises(PublishError):
            publishing.parse_max_delete(bad)


def test_deletes_beyond_the_limit_are_refused_unless_forced() -> None:
    plan = Plan(stale=[remote(f"{i}.md", b"x") for i in range(3)], delete=True, remote_count=20)
    assert publishing.delete_refusal(plan, DeleteLimit(percent=15), force=False) is None  # 3 <= 3.0
    assert "refusing to delete 3 of 20" in (publishing.delete_refusal(plan, DeleteLimit(count=2), force=False) or "")
    assert publishing.delete_refusal(plan, DeleteLimit(count=2), force=True) is None


# -- local-folder destination ---------------------------------------------------------------------


def test_local_folder_upload_copies_then_skips_then_deletes_only_with_delete(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", tmp_path / "published"
    for ticket_id in (1, 2, 3):
        write_ticket(out / "helpdesk", ticket_id)
    first = runner.invoke(app, ["upload", str(out), str(dest), "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["uploaded"] == 6
    assert tree(dest) == tree(out)

    os.utime(out / "helpdesk" / "1.md", (1, 1))  # a new mtime alone changes nothing
    second = json.loads(runner.invoke(app, ["upload", str(out), str(dest), "--json"]).stdout)
    assert (second["uploaded"], second["skipped"]) == (0, 6)

    (out / "helpdesk" / "3.md").unlink()
    (out / "helpdesk" / "3.md.metadata.json").unlink()
    kept = json.loads(runner.invoke(app, ["upload", str(out), str(dest), "--json"]).stdout)
    assert kept["deleted"] == 0 and (dest / "helpdesk" / "3.md").exists()
    deleted = runner.invoke(app, ["upload", str(out), str(dest), "--delete", "--max-delete", "2", "--json"])
    assert deleted.exit_code == 0, deleted.output
    assert tree(dest) == tree(out)


def test_local_folder_delete_guard_refuses_to_empty_the_destination(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", tmp_path / "published"
    for ticket_id in range(1, 11):
        write_ticket(out, ticket_id)
    assert runner.invoke(app, ["upload", str(out), str(dest)]).exit_code == 0
    for path in out.iterdir():
        path.unlink()  # a bad run produced an empty folder
    refused = runner.invoke(app, ["upload", str(out), str(dest), "--delete", "--json"])
    assert refused.exit_code == 1
    assert "refusing to delete 20 of 20" in json.loads(refused.stdout)["refused"]
    assert len(tree(dest)) == 20
    forced = runner.invoke(app, ["upload", str(out), str(dest), "--delete", "--force"])
    assert forced.exit_code == 0 and tree(dest) == {}


# `anchorkit upload` killed (kill -9) as its first file is renamed into place: its temporary file stays.
KILLED_AT_RENAME = """
import os, signal, sys
from anchorkit.cli import app
os.replace = lambda source, target: os.kill(os.getpid(), signal.SIGKILL)
sys.argv[0] = "anchorkit"
app()
"""


def test_the_temporary_files_of_a_killed_upload_are_removed_by_the_next_run_and_no_other_hidden_file(
    tmp_path: Path,
) -> None:
    out, dest = tmp_path / "out", tmp_path / "published"
    write_ticket(out / "ops", 12)
    write_ticket(out, 13)
    command = ["upload", str(out), str(dest)]
    killed = subprocess.Popen([sys.executable, "-c", KILLED_AT_RENAME, *command], stderr=subprocess.PIPE)
    _, stderr = killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL, stderr.decode()
    leftovers = set(dest.rglob(".*.tmp"))
    assert leftovers and all(path.name.endswith(f".{killed.pid}.tmp") for path in leftovers)
    # Hidden files that are not a dead run's: someone's, a live writer's (ours), one under mkstemp's random
    # name (which anyone's file could have), one in a hidden folder.
    others = [dest / ".notes.tmp", dest / f".13.md.{os.getpid()}.tmp", dest / ".13.md.k2x9_q7a.tmp"]
    others.append(dest / ".cache" / ".13.md.1.tmp")
    for path in others:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")

    assert runner.invoke(app, [*command, "--dry-run"]).exit_code == 0
    assert leftovers <= set(dest.rglob(".*.tmp")), "a dry run removes nothing"
    done = runner.invoke(app, command)
    assert done.exit_code == 0, done.output
    assert {path for path in dest.rglob(".*") if path.is_file()} == set(others)
    assert {key: data for key, data in tree(dest).items() if not key.startswith(".")} == tree(out)


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", tmp_path / "published"
    write_ticket(out, 7)
    result = runner.invoke(app, ["upload", str(out), str(dest), "--dry-run"])
    assert result.exit_code == 0
    assert "upload 2" in result.stdout and "upload 7.md" in result.stdout
    assert not dest.exists()


def test_bad_file_names_are_reported_and_the_rest_is_published(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", tmp_path / "published"
    write_ticket(out, 1)
    (out / "bad\nname.md").write_text("x")
    result = runner.invoke(app, ["upload", str(out), str(dest), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["uploaded"] == 2
    assert [f["key"] for f in report["failures"]] == ["bad\nname.md"]
    assert "control character" in report["failures"][0]["error"]


def test_a_symlinked_file_in_the_source_is_not_followed_and_fails_alone(tmp_path: Path) -> None:
    out, dest, secret = tmp_path / "out", tmp_path / "published", tmp_path / "secret.txt"
    write_ticket(out, 1)
    secret.write_text("password")
    (out / "99999.md").symlink_to(secret)
    os.mkfifo(out / "99998.md")  # read, it would wait for a writer forever
    result = runner.invoke(app, ["upload", str(out), str(dest), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["uploaded"] == 2
    errors = {failure["key"]: failure["error"] for failure in report["failures"]}
    assert errors == {
        "99998.md": f"{out / '99998.md'}: not a regular file",
        "99999.md": f"{out / '99999.md'}: a symbolic link (not followed)",
    }
    assert sorted(path.name for path in dest.iterdir()) == ["1.md", "1.md.metadata.json"]


def test_a_symlink_swapped_in_after_the_scan_is_not_followed(tmp_path: Path) -> None:
    out, secret = tmp_path / "out", tmp_path / "secret.txt"
    write_ticket(out, 1)
    secret.write_text("password")
    objects, failures = publishing.scan_folder(out)
    assert failures == [] and objects[0].key == "1.md"
    (out / "1.md").unlink()
    (out / "1.md").symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        objects[0].read()


def test_a_file_name_that_is_not_utf8_fails_alone_with_a_printable_message(tmp_path: Path) -> None:
    out, dest = tmp_path / "out", tmp_path / "published"
    write_ticket(out, 1)
    (out / os.fsdecode(b"bad\xff.md")).write_text("x")
    for dry_run in (["--dry-run"], []):
        result = runner.invoke(app, ["upload", str(out), str(dest), "--json", *dry_run])
        assert result.exit_code == 1, result.output
        [failure] = json.loads(result.stdout)["failures"]
        assert failure == {
            "key": "bad\\xff.md",
            "error": f"{out}/bad\\xff.md: key bad\\xff.md is not UTF-8 (a name in another encoding)",
        }
    assert sorted(path.name for path in dest.iterdir()) == ["1.md", "1.md.metadata.json"]


def test_a_destination_inside_the_source_folder_is_a_usage_error(tmp_path: Path) -> None:
    write_ticket(tmp_path / "out", 1)
    result = runner.invoke(app, ["upload", str(tmp_path / "out"), str(tmp_path / "out" / "published")])
    assert result.exit_code == 2
    assert "overlaps" in result.stderr


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    write_ticket(tmp_path / "out", 1)
    base = ["upload", str(tmp_path / "out"), str(tmp_path / "dest")]
    assert runner.invoke(app, [*base, "--max-delete", "lots"]).exit_code == 2
    assert runner.invoke(app, [*base, "--start-ingestion", "only-kb"]).exit_code == 2
    assert runner.invoke(app, [*base, "--retry-mode", "legacy"]).exit_code == 2
    assert not (tmp_path / "dest").exists()
    (tmp_path / "dest").write_text("a file, not a folder")
    assert runner.invoke(app, base).exit_code == 2


def test_publishing_in_memory_content_writes_the_same_bytes(tmp_path: Path) -> None:
    objects = publishing.objects_from_bytes({"1.md": b"# one\n", "1.md.metadata.json": b"{}"})
    report = publishing.publish(objects, LocalDirTarget(tmp_path), settings=PublishSettings())
    assert report.ok and sorted(report.uploaded) == ["1.md", "1.md.metadata.json"]
    assert tree(tmp_path) == {"1.md": b"# one\n", "1.md.metadata.json": b"{}"}


# -- Bedrock ingestion (no AWS account reachable here: botocore's Stubber checks the request) -----


def bedrock_agent_client() -> object:
    return boto3.client(
        "bedrock-agent", region_name="ap-northeast-1", aws_access_key_id="test", aws_secret_access_key="test"
    )


def test_start_ingestion_sends_the_knowledge_base_and_data_source_and_reports_the_job() -> None:
    client = bedrock_agent_client()
    with Stubber(client) as stub:
        stub.add_response(
            "start_ingestion_job",
            {
                "ingestionJob": {
                    "knowledgeBaseId": "KB12345678",
                    "dataSourceId": "DS12345678",
                    "ingestionJobId": "JOB1234567",
                    "status": "STARTING",
                    "startedAt": "2026-01-01T00:00:00Z",
                    "updatedAt": "2026-01-01T00:00:00Z",
                }
            },
            {"knowledgeBaseId": "KB12345678", "dataSourceId": "DS12345678", "description": "anchorkit upload"},
        )
        kb, ds = aws.parse_ingestion_target("KB12345678:DS12345678")
        report = publishing.PublishReport("s3://kb/docs/", Plan(), dry_run=False)
        publishing.ingest_after(report, lambda: client, kb, ds)
        stub.assert_no_pending_responses()
    assert report.ingestion_job == {"ingestion_job_id": "JOB1234567", "status": "STARTING"}
    assert report.ok


def test_ingestion_is_not_started_after_a_failed_upload_and_a_start_failure_is_reported() -> None:
    client = bedrock_agent_client()
    failed = publishing.PublishReport("s3://kb/docs/", Plan(failures=[publishing.Failure("1.md", "boom")]), False)
    with Stubber(client) as stub:  # no response queued: any call would raise
        publishing.ingest_after(failed, lambda: client, "KB", "DS")
    assert failed.ingestion_job is None

    report = publishing.PublishReport("s3://kb/docs/", Plan(), dry_run=False)
    with Stubber(client) as stub:
        stub.add_client_error("start_ingestion_job", service_error_code="ConflictException", http_status_code=409)
        publishing.ingest_after(report, lambda: client, "KB", "DS")
    assert not report.ok
    assert "ConflictException" in (report.ingestion_error or "")


def test_an_ingestion_that_cannot_start_fails_the_run_but_keeps_the_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    write_ticket(tmp_path / "out", 1)
    result = runner.invoke(
        app, ["upload", str(tmp_path / "out"), str(tmp_path / "dest"), "--start-ingestion", "KB:DS", "--json"]
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["uploaded"] == 2 and tree(tmp_path / "dest") == tree(tmp_path / "out")
    assert [failure["key"] for failure in report["failures"]] == ["--start-ingestion"]
    assert "region" in report["failures"][0]["error"].lower()


def test_a_symlink_inside_the_destination_cannot_lead_writes_outside_it(tmp_path: Path) -> None:
    outside, dest = tmp_path / "outside", tmp_path / "published"
    outside.mkdir()
    dest.mkdir()
    (dest / "helpdesk").symlink_to(outside, target_is_directory=True)
    write_ticket(tmp_path / "out" / "helpdesk", 1)
    result = runner.invoke(app, ["upload", str(tmp_path / "out"), str(dest), "--json"])
    assert result.exit_code == 1
    assert "symbolic link" in json.loads(result.stdout)["failures"][0]["error"]
    assert list(outside.iterdir()) == []


def test_a_stored_checksum_that_cannot_be_read_means_upload_again(tmp_path: Path) -> None:
    class MultipartLike(LocalDirTarget):
        """Reports a non-MD5 ETag, and fails to read the stored checksum."""

        def list_objects(self) -> Iterator[RemoteObject]:
            for obj in super().list_objects():
                yield RemoteObject(obj.key, obj.size, "0" * 32 + "-3")

        def stored_sha256(self, key: str) -> str | None:
            raise OSError("HEAD failed")

    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "1.md").write_bytes(b"same")
    plan = publishing.build_plan([local("1.md", b"same")], MultipartLike(tmp_path / "dest"), delete=False)
    assert [o.key for o in plan.uploads] == ["1.md"] and plan.failures == []
