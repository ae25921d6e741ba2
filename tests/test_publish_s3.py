"""upload against a real S3 server (SeaweedFS on 127.0.0.1), with injected faults where needed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.faultproxy import Fault, FaultProxy, on_path
from support.folders import tree, write_ticket
from support.s3_server import S3Server
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.publish import aws
from anchorkit.publish import upload as publishing
from anchorkit.publish.aws import AwsSettings, S3Location
from anchorkit.publish.upload import PublishSettings

pytestmark = [pytest.mark.usefixtures("aws_environment"), pytest.mark.s3, pytest.mark.timeout(180)]
REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()


def s3_target(endpoint_url: str, bucket: str, prefix: str, **settings: Any) -> publishing.S3Target:
    client = aws.make_s3_client(
        aws.make_session(AwsSettings()), endpoint_url=endpoint_url, threads=publishing.DEFAULT_THREADS, **settings
    )
    return publishing.S3Target(client, S3Location(bucket, prefix + "/"))


class RequestLog:
    """Counts the HTTP requests a client sends (retries included), independently of anchorkit's own count."""

    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        client.meta.events.register("before-send.s3", self.record)

    def record(self, event_name: str, **_: Any) -> None:
        with self.lock:
            self.counts[event_name.rsplit(".", 1)[-1]] += 1


def remote_tree(server: S3Server, prefix: str) -> dict[str, bytes]:
    client = server.client()
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=server.bucket, Prefix=prefix + "/")
        for item in page.get("Contents", [])
    ]
    return {
        key[len(prefix) + 1 :]: client.get_object(Bucket=server.bucket, Key=key)["Body"].read() for key in sorted(keys)
    }


def upload(folder: Path, target: publishing.Target, **settings: Any) -> publishing.PublishReport:
    objects, failures = publishing.scan_folder(folder)
    return publishing.publish(objects, target, settings=PublishSettings(**settings), local_failures=failures)


def test_rerun_after_success_sends_no_put_and_no_delete_even_with_new_mtimes(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 26):
        write_ticket(out, ticket_id)
    target = s3_target(s3_server.endpoint_url, s3_server.bucket, s3_prefix)
    first = upload(out, target, delete=True)
    assert first.ok and len(first.uploaded) == 50
    assert remote_tree(s3_server, s3_prefix) == tree(out)

    for path in out.iterdir():  # regenerate: same bytes, new modification times
        path.write_bytes(path.read_bytes())
        os.utime(path, (time.time() + 60, time.time() + 60))
    log = RequestLog(target.client)
    second = upload(out, target, delete=True)
    assert second.ok and len(second.plan.skips) == 50
    assert log.counts["PutObject"] == 0 and log.counts["DeleteObject"] == 0
    assert log.counts["ListObjectsV2"] == 1
    assert second.requests == dict(log.counts)


def test_objects_carry_content_type_and_the_stored_checksum(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    write_ticket(tmp_path / "out", 42)
    upload(tmp_path / "out", s3_target(s3_server.endpoint_url, s3_server.bucket, s3_prefix))
    client = s3_server.client()
    document = client.head_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}/42.md")
    sidecar = client.head_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}/42.md.metadata.json")
    assert document["ContentType"] == "text/markdown; charset=utf-8"
    assert sidecar["ContentType"] == "application/json"
    expected = publishing.Checksums.of((tmp_path / "out" / "42.md").read_bytes()).sha256
    assert document["Metadata"]["anchorkit-sha256"] == expected


def test_only_the_changed_objects_are_uploaded(s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 11):
        write_ticket(out, ticket_id)
    target = s3_target(s3_server.endpoint_url, s3_server.bucket, s3_prefix)
    upload(out, target)
    write_ticket(out, 3, body="更新された本文")  # same length would still be caught by the MD5
    write_ticket(out, 11)
    log = RequestLog(target.client)
    report = upload(out, target)
    assert sorted(report.uploaded) == ["11.md", "11.md.metadata.json", "3.md", "3.md.metadata.json"]
    assert log.counts["PutObject"] == 4
    assert remote_tree(s3_server, s3_prefix) == tree(out)


def test_a_same_size_change_is_detected_by_content(s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out).mkdir()
    (out / "1.md").write_bytes(b"status: open  ")
    target = s3_target(s3_server.endpoint_url, s3_server.bucket, s3_prefix)
    upload(out, target)
    (out / "1.md").write_bytes(b"status: closed")
    report = upload(out, target)
    assert report.uploaded == ["1.md"]
    assert remote_tree(s3_server, s3_prefix) == {"1.md": b"status: closed"}


def put_multipart(server: S3Server, key: str, data: bytes, metadata: dict[str, str]) -> str:
    client = server.client()
    upload_id = client.create_multipart_upload(Bucket=server.bucket, Key=key, Metadata=metadata)["UploadId"]
    part = client.upload_part(Bucket=server.bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=data)
    client.complete_multipart_upload(
        Bucket=server.bucket,
        Key=key,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]},
    )
    etag: str = client.head_object(Bucket=server.bucket, Key=key)["ETag"]
    return etag


def test_multipart_objects_are_compared_by_the_stored_checksum(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    write_ticket(out, 1, sidecar=False)
    write_ticket(out, 2, sidecar=False)
    one, two = (out / "1.md").read_bytes(), (out / "2.md").read_bytes()
    etag = put_multipart(s3_server, f"{s3_prefix}/1.md", one, {"anchorkit-sha256": publishing.Checksums.of(one).sha256})
    assert etag.strip('"').endswith("-1"), "the server must give a multipart ETag for this test to mean anything"
    put_multipart(s3_server, f"{s3_prefix}/2.md", two, {})  # uploaded by another tool: no stored checksum

    log_target = s3_target(s3_server.endpoint_url, s3_server.bucket, s3_prefix)
    log = RequestLog(log_target.client)
    report = upload(out, log_target)
    assert [o.key for o in report.plan.skips] == ["1.md"]
    assert report.uploaded == ["2.md"]
    assert log.counts["HeadObject"] == 2 and log.counts["PutObject"] == 1


def test_nothing_outside_the_prefix_is_listed_or_deleted(s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    client = s3_server.client()
    outside = [f"{s3_prefix}-sibling/1.md", f"{s3_prefix}", f"{s3_prefix}x/1.md", f"other/{s3_prefix}/1.md"]
    for key in [*outside, f"{s3_prefix}/stale.md", f"{s3_prefix}/nested/stale.md"]:
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"x")
    (tmp_path / "empty").mkdir()
    result = runner.invoke(
        app,
        [
            "upload",
            str(tmp_path / "empty"),
            f"s3://{s3_server.bucket}/{s3_prefix}",
            "--delete",
            "--force",
            "--endpoint-url",
            s3_server.endpoint_url,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["deleted"] == 2
    assert remote_tree(s3_server, s3_prefix) == {}
    for key in outside:
        assert client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"x"


def test_dry_run_and_refused_deletes_change_nothing_on_s3(s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 6):
        write_ticket(out, ticket_id)
    destination = f"s3://{s3_server.bucket}/{s3_prefix}"
    base = ["upload", str(out), destination, "--endpoint-url", s3_server.endpoint_url]
    dry = runner.invoke(app, [*base, "--dry-run", "--json"])
    assert dry.exit_code == 0 and json.loads(dry.stdout)["planned"]["upload"] == 10
    assert remote_tree(s3_server, s3_prefix) == {}

    assert runner.invoke(app, base).exit_code == 0
    for ticket_id in (1, 2):
        (out / f"{ticket_id}.md").unlink()
        (out / f"{ticket_id}.md.metadata.json").unlink()
    refused = runner.invoke(app, [*base, "--delete", "--json"])  # 4 of 10 > default 10%
    assert refused.exit_code == 1 and json.loads(refused.stdout)["refused"]
    assert len(remote_tree(s3_server, s3_prefix)) == 10
    allowed = runner.invoke(app, [*base, "--delete", "--max-delete", "40%", "--json"])
    assert allowed.exit_code == 0 and json.loads(allowed.stdout)["deleted"] == 4
    assert remote_tree(s3_server, s3_prefix) == tree(out)


def test_a_symlinked_folder_in_the_source_fails_by_name_and_its_published_objects_stay(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    out, moved = tmp_path / "out", tmp_path / "elsewhere"
    for project, ticket_id in (("ops", 1), ("ops", 2), ("it", 3), ("it", 4)):
        write_ticket(out / project, ticket_id)
    base = ["upload", str(out), f"s3://{s3_server.bucket}/{s3_prefix}", "--endpoint-url", s3_server.endpoint_url]
    assert runner.invoke(app, base).exit_code == 0
    published = remote_tree(s3_server, s3_prefix)
    (out / "ops").rename(moved)
    (out / "ops").symlink_to(moved, target_is_directory=True)
    write_ticket(moved, 5)  # new behind the link: not published either
    for name in ("4.md", "4.md.metadata.json"):
        (out / "it" / name).unlink()

    result = runner.invoke(app, [*base, "--delete", "--max-delete", "100%", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    reason = "a symbolic link to a folder (not followed: nothing in it is published, nor deleted as stale)"
    assert report["failures"] == [{"key": "ops/", "error": f"{out / 'ops'}: {reason}"}]
    assert report["planned_keys"]["delete"] == ["it/4.md", "it/4.md.metadata.json"]
    assert remote_tree(s3_server, s3_prefix) == {k: v for k, v in published.items() if not k.startswith("it/4.")}

    human = runner.invoke(app, [*base, "--delete", "--max-delete", "100%"])
    assert human.exit_code == 1
    assert f"failed: ops/: {out / 'ops'}: a symbolic link to a folder" in " ".join(human.stderr.split())


class OrderLog:
    """When each S3 request of a client started (sent) and finished (answered), by object key."""

    def __init__(self, client: Any) -> None:
        self.events: list[tuple[str, str, str]] = []  # (what, operation, key)
        self.lock = threading.Lock()
        client.meta.events.register("before-parameter-build.s3", self.remember_key)
        client.meta.events.register("before-send.s3", self.started)
        client.meta.events.register("after-call.s3", self.finished)

    def remember_key(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["order_log_key"] = params.get("Key", "")

    def started(self, event_name: str, request: Any, **_: Any) -> None:
        self.record("started", event_name, request.context.get("order_log_key", ""))

    def finished(self, event_name: str, context: dict[str, Any], **_: Any) -> None:
        self.record("finished", event_name, context.get("order_log_key", ""))

    def record(self, what: str, event_name: str, key: str) -> None:
        with self.lock:
            self.events.append((what, event_name.rsplit(".", 1)[-1], key))

    def position(self, what: str, operation: str, key: str) -> int:
        return self.events.index((what, operation, key))


def test_sidecars_land_before_documents_and_documents_go_before_sidecars(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 21):
        write_ticket(out, ticket_id)
    target = s3_target(s3_server.endpoint_url, s3_server.bucket, s3_prefix)
    log = OrderLog(target.client)
    upload(out, target, threads=8)
    for ticket_id in range(1, 21):
        document, sidecar = f"{s3_prefix}/{ticket_id}.md", f"{s3_prefix}/{ticket_id}.md.metadata.json"
        assert log.position("finished", "PutObject", sidecar) < log.position("started", "PutObject", document)

    for path in out.iterdir():
        path.unlink()
    upload(out, target, threads=8, delete=True, force=True)
    for ticket_id in range(1, 21):
        document, sidecar = f"{s3_prefix}/{ticket_id}.md", f"{s3_prefix}/{ticket_id}.md.metadata.json"
        assert log.position("finished", "DeleteObject", document) < log.position("started", "DeleteObject", sidecar)


def first_attempt_faults(faults: dict[tuple[str, str], Fault]) -> Any:
    """A proxy decision: `faults[(method, key suffix)]` on the first attempt of a matching request."""

    def decide(method: str, path: str, seen: int) -> Fault:
        plain_path = path.split("?", 1)[0]
        for (fault_method, suffix), fault in faults.items():
            if method == fault_method and plain_path.endswith(suffix) and seen == 0:
                return fault
        return Fault.NONE

    return decide


def test_throttling_server_errors_and_resets_are_retried(s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 11):
        write_ticket(out, ticket_id, body="長い本文 " * 200)
    faults = {
        ("PUT", "/1.md"): Fault.HTTP_503,
        ("PUT", "/2.md.metadata.json"): Fault.HTTP_500,
        ("PUT", "/3.md"): Fault.RESET,
        ("PUT", "/4.md.metadata.json"): Fault.RESET,
        ("GET", f"/{s3_server.bucket}"): Fault.HTTP_503,  # the listing too
    }
    with FaultProxy(s3_server.endpoint_url, decide=first_attempt_faults(faults)) as proxy:
        report = upload(out, s3_target(proxy.url, s3_server.bucket, s3_prefix, max_attempts=5))
        assert proxy.faults_injected == 5
    assert report.ok, report.failures
    assert remote_tree(s3_server, s3_prefix) == tree(out)
    assert report.requests["PutObject"] == 20 + 4  # every fault cost exactly one retry


def test_a_persistent_failure_is_listed_and_the_rest_stays(s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 6):
        write_ticket(out, ticket_id)
    destination = f"s3://{s3_server.bucket}/{s3_prefix}"
    sidecar_fails = on_path(Fault.HTTP_500, "/3.md.metadata.json")
    with FaultProxy(s3_server.endpoint_url, decide=sidecar_fails) as proxy:
        failed = runner.invoke(
            app, ["upload", str(out), destination, "--endpoint-url", proxy.url, "--max-attempts", "2", "--json"]
        )
        sidecar_attempts = sum(n for request, n in proxy.seen.items() if request.endswith("/3.md.metadata.json"))
    assert failed.exit_code == 1
    assert sidecar_attempts == 2  # --max-attempts counts the first attempt
    report = json.loads(failed.stdout)
    errors = {failure["key"]: failure["error"] for failure in report["failures"]}
    assert sorted(errors) == ["3.md", "3.md.metadata.json"]
    assert "InternalServerError" in errors["3.md.metadata.json"] or "500" in errors["3.md.metadata.json"]
    assert errors["3.md"].startswith("not attempted")
    assert report["uploaded"] == 8
    assert "3.md" not in remote_tree(s3_server, s3_prefix)  # no document without its sidecar

    rerun = runner.invoke(app, ["upload", str(out), destination, "--endpoint-url", s3_server.endpoint_url, "--json"])
    assert rerun.exit_code == 0
    assert json.loads(rerun.stdout)["uploaded"] == 2
    assert remote_tree(s3_server, s3_prefix) == tree(out)


def test_kill_9_mid_upload_then_rerun_ends_identical_to_an_uninterrupted_run(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    for ticket_id in range(1, 151):
        write_ticket(out, ticket_id)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    slow_puts = lambda method, path, seen: Fault.SLOW if method == "PUT" else Fault.NONE  # noqa: E731
    with FaultProxy(s3_server.endpoint_url, decide=slow_puts, slow_s=0.02) as slow_proxy:
        command = [
            sys.executable,
            "-m",
            "anchorkit",
            "upload",
            str(out),
            f"s3://{s3_server.bucket}/{s3_prefix}",
            "--endpoint-url",
            slow_proxy.url,
            "--threads",
            "2",
            "--json",
        ]
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while slow_proxy.faults[Fault.SLOW] < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
    partial = remote_tree(s3_server, s3_prefix)
    assert 0 < len(partial) < 300, "the kill must land mid-upload"

    rerun = subprocess.run(
        [*command[:6], "--endpoint-url", s3_server.endpoint_url, "--json"], env=env, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["uploaded"] == 300 - len(partial)

    clean_target = s3_target(s3_server.endpoint_url, s3_server.bucket, f"{s3_prefix}-clean")
    assert upload(out, clean_target).ok
    client = s3_server.client()

    def described(prefix: str) -> dict[str, tuple[bytes, str, dict[str, str]]]:
        return {
            key: (data, *head_of(client, s3_server.bucket, f"{prefix}/{key}"))
            for key, data in remote_tree(s3_server, prefix).items()
        }

    assert described(s3_prefix) == described(f"{s3_prefix}-clean")

    again = subprocess.run(rerun.args, env=env, capture_output=True, text=True)
    requests = json.loads(again.stdout)["requests"]
    assert "PutObject" not in requests and "DeleteObject" not in requests


def head_of(client: Any, bucket: str, key: str) -> tuple[str, dict[str, str]]:
    head = client.head_object(Bucket=bucket, Key=key)
    return head["ContentType"], head["Metadata"]


def test_a_missing_bucket_is_a_setup_error_in_one_line_and_nothing_is_written(
    s3_server: S3Server, tmp_path: Path
) -> None:
    write_ticket(tmp_path / "out", 1)
    missing_bucket = runner.invoke(
        app,
        [
            "upload",
            str(tmp_path / "out"),
            "s3://no-such-bucket-here/docs",
            "--endpoint-url",
            s3_server.endpoint_url,
            "--json",
        ],
    )
    assert missing_bucket.exit_code == 2
    assert missing_bucket.stderr.count("\n") == 1 and "NoSuchBucket" in missing_bucket.stderr
    answer = json.loads(missing_bucket.stdout)
    assert answer["ok"] is False and answer["exit_code"] == 2 and "no-such-bucket-here" in answer["error"]
