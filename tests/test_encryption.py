"""Confidential data at rest: --sse / --sse-kms-key-id encrypt every object anchorkit writes (documents,
sidecars, the sync state), and unchanged objects are still recognised when their ETag is not an MD5
(SSE-KMS). The headers are checked with botocore's Stubber (SeaweedFS has no KMS); SSE-S3 (AES256)
end to end on SeaweedFS. Also: a key file others can read is warned about."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import ANY, Stubber
from support.folders import write_ticket
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.errors import UsageError
from anchorkit.publish import aws
from anchorkit.publish import upload as publishing
from anchorkit.publish.aws import AwsSettings, S3Location
from anchorkit.publish.state import S3StateStore
from anchorkit.publish.upload import Checksums, LocalObject

runner = CliRunner()
KMS = AwsSettings(region="us-east-1", sse="aws:kms", sse_kms_key_id="alias/tickets")

pytestmark = pytest.mark.usefixtures("aws_environment")


def kms_client() -> Any:
    return aws.make_s3_client(aws.make_session(KMS), threads=4)


def put_parameters(key: str, data: bytes) -> dict[str, Any]:
    checksums = Checksums.of(data)
    return {
        "Bucket": "kb",
        "Key": key,
        "Body": ANY,
        "ContentType": publishing.content_type_for(key),
        "ContentMD5": base64.b64encode(bytes.fromhex(checksums.md5)).decode(),
        "Metadata": {publishing.CHECKSUM_METADATA_KEY: checksums.sha256},
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "alias/tickets",
    }


def test_documents_are_written_with_the_kms_headers_and_kms_etags_still_count_as_unchanged() -> None:
    unchanged, changed = b"# unchanged\n", b"# changed\n"
    local = [
        LocalObject("1.md", Checksums.of(unchanged), unchanged),
        LocalObject("2.md", Checksums.of(changed), changed),
    ]
    client = kms_client()
    kms_etag = '"' + "f" * 32 + '"'  # an SSE-KMS ETag is not the MD5 of the bytes
    with Stubber(client) as stub:
        stub.add_response(
            "list_objects_v2",
            {
                "Contents": [
                    {"Key": "docs/1.md", "Size": len(unchanged), "ETag": kms_etag},
                    {"Key": "docs/2.md", "Size": len(changed), "ETag": kms_etag},
                ],
                "IsTruncated": False,
            },
            {"Bucket": "kb", "Prefix": "docs/"},
        )
        for key, data in (("1.md", unchanged), ("2.md", b"# chang3d\n")):  # 2.md: same size, other bytes
            stub.add_response(
                "head_object",
                {"Metadata": {publishing.CHECKSUM_METADATA_KEY: hashlib.sha256(data).hexdigest()}},
                {"Bucket": "kb", "Key": f"docs/{key}"},
            )
        stub.add_response("put_object", {"ETag": kms_etag}, {**put_parameters("2.md", changed), "Key": "docs/2.md"})
        report = publishing.publish(
            local,
            publishing.S3Target(client, S3Location("kb", "docs/")),
            settings=publishing.PublishSettings(threads=1),
        )
        stub.assert_no_pending_responses()
    assert report.ok and report.uploaded == ["2.md"] and [obj.key for obj in report.plan.skips] == ["1.md"]


def test_the_sync_state_is_written_with_the_same_encryption() -> None:
    client = kms_client()
    store = S3StateStore(client, S3Location("kb", "anchorkit-state/"))
    with Stubber(client) as stub:
        # With the checksums a later run recognises an unchanged raw issue by (its ETag is no MD5 here).
        expected = {**put_parameters("anchorkit-state/issues/7.json", b"{}"), "ContentType": "application/json"}
        stub.add_response("put_object", {"ETag": '"e"'}, expected)
        store.put_issue(7, b"{}")
        stub.assert_no_pending_responses()


def test_raw_issues_under_kms_are_told_unchanged_by_one_listing_and_a_head_where_the_sizes_agree(
    tmp_path: Path,
) -> None:
    client = kms_client()
    store = S3StateStore(client, S3Location("kb", "anchorkit-state/"))
    kms_etag = '"' + "f" * 32 + '"'  # not the MD5 of the bytes
    same, edited, longer, new = b'{"issue":{"id":1}}', b'{"issue":{"id":2}}', b'{"issue":{"id":3,"x":1}}', b"{}"
    copies = {}
    for issue_id, data in ((1, same), (2, edited), (3, longer), (4, new)):
        copies[issue_id] = tmp_path / f"{issue_id}.json"
        copies[issue_id].write_bytes(data)
    with Stubber(client) as stub:
        stub.add_response(
            "list_objects_v2",
            {
                "Contents": [
                    {"Key": "anchorkit-state/issues/1.json", "Size": len(same), "ETag": kms_etag},
                    {"Key": "anchorkit-state/issues/2.json", "Size": len(edited), "ETag": kms_etag},
                    {"Key": "anchorkit-state/issues/3.json", "Size": 5, "ETag": kms_etag},  # other size: no HEAD
                ],
                "IsTruncated": False,
            },
            {"Bucket": "kb", "Prefix": "anchorkit-state/issues/"},
        )
        stored = {1: same, 2: b'{"issue":{"id":9}}'}  # 2: same size, other bytes
        for issue_id, data in stored.items():
            stub.add_response(
                "head_object",
                {"Metadata": {publishing.CHECKSUM_METADATA_KEY: hashlib.sha256(data).hexdigest()}},
                {"Bucket": "kb", "Key": f"anchorkit-state/issues/{issue_id}.json"},
            )
        assert store.unchanged_issues(copies, threads=1) == {1}
        stub.assert_no_pending_responses()  # one listing and two HEADs: never a GET of a copy


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (AwsSettings(sse_kms_key_id="alias/tickets"), "--sse-kms-key-id needs --sse aws:kms"),
        (
            AwsSettings(sse="AES256", sse_kms_key_id="alias/tickets"),
            "--sse-kms-key-id needs --sse aws:kms, not --sse AES256",
        ),
        (AwsSettings(sse="aes"), "--sse 'aes': expected AES256 or aws:kms"),
    ],
)
def test_inconsistent_encryption_options_are_usage_errors(settings: AwsSettings, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        aws.make_session(settings)


def test_an_unknown_sse_algorithm_is_refused_by_the_command_line(tmp_path: Path) -> None:
    write_ticket(tmp_path / "out", 1)
    result = runner.invoke(app, ["upload", str(tmp_path / "out"), "s3://kb/docs", "--sse", "aes"])
    flat = " ".join(result.stderr.replace("│", " ").split())  # rich wraps the message in a box
    assert result.exit_code == 2 and "'aes' is not one of 'AES256', 'aws:kms'" in flat


@pytest.mark.s3
def test_an_upload_with_sse_s3_encrypts_documents_and_sidecars_and_reuploads_nothing(
    s3_server: S3Server, s3_prefix: str, tmp_path: Path
) -> None:
    for ticket_id in (1, 2):
        write_ticket(tmp_path / "out", ticket_id)
    argv = [
        "upload",
        str(tmp_path / "out"),
        f"s3://{s3_server.bucket}/{s3_prefix}",
        "--endpoint-url",
        s3_server.endpoint_url,
        "--sse",
        "AES256",
        "--json",
    ]
    first, second = (json.loads(runner.invoke(app, argv).stdout) for _ in range(2))

    assert first["ok"] and first["uploaded"] == 4
    client = s3_server.client()
    for key in ("1.md", "1.md.metadata.json", "2.md", "2.md.metadata.json"):
        assert client.head_object(Bucket=s3_server.bucket, Key=f"{s3_prefix}/{key}")["ServerSideEncryption"] == "AES256"
    assert second["ok"] and second["uploaded"] == 0 and "PutObject" not in second["requests"]


@pytest.mark.s3
@pytest.mark.redmine
def test_a_stateless_sync_with_sse_encrypts_the_state_too(
    s3_server: S3Server, s3_prefix: str, redmine_server: RedmineServer, redmine_admin: RedmineAdmin, tmp_path: Path
) -> None:
    project = redmine_admin.create_project()
    redmine_admin.create_issue(project["id"], "VPN接続が不安定になる", description="在宅勤務中にVPNが切れる。")
    result = runner.invoke(
        app,
        [
            "sync",
            f"s3://{s3_server.bucket}/{s3_prefix}/docs",
            "--state",
            f"s3://{s3_server.bucket}/{s3_prefix}/state",
            "--url",
            redmine_server.url,
            "--project",
            project["identifier"],
            "--endpoint-url",
            s3_server.endpoint_url,
            "--sse",
            "AES256",
            "--json",
        ],
        env={"REDMINE_API_KEY": redmine_server.admin_key},
    )
    assert result.exit_code == 0, result.output
    client = s3_server.client()
    keys = [item["Key"] for item in client.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{s3_prefix}/")["Contents"]]
    assert any(key.endswith("/state/manifest.json") for key in keys) and any("/state/issues/" in key for key in keys)
    assert any(key.startswith(f"{s3_prefix}/docs/") for key in keys)
    for key in keys:
        assert client.head_object(Bucket=s3_server.bucket, Key=key).get("ServerSideEncryption") == "AES256", key


def test_an_api_key_file_other_users_can_read_is_warned_about_without_showing_the_key(tmp_path: Path) -> None:
    key_file = tmp_path / "redmine.key"
    key_file.write_text("0123456789abcdef\n")
    key_file.chmod(0o644)
    argv = [
        "pull",
        "--url",
        "http://127.0.0.1:9",
        "--snapshot",
        str(tmp_path / "snap"),
        "--retries",
        "1",
        "--api-key-file",
        str(key_file),
    ]
    shared = runner.invoke(app, argv)
    key_file.chmod(0o600)
    private = runner.invoke(app, argv)

    assert f"warning: {key_file} is readable by other users (mode 0644); chmod 600 {key_file}" in shared.stderr
    assert "readable by other users" not in private.stderr
    assert "0123456789abcdef" not in shared.output + private.output


def test_an_api_key_file_that_is_a_folder_is_said_to_be_one_without_a_warning_first(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o755)  # readable by others, as folders usually are: no "chmod 600" advice for it
    folder.chmod(0o755)
    argv = ["pull", "--url", "http://127.0.0.1:9", "--snapshot", str(tmp_path / "snap"), "--api-key-file", str(folder)]

    result = runner.invoke(app, argv)

    assert result.exit_code == 2
    assert result.stderr == f"error: --api-key-file {folder} is a folder, not a file holding the API key\n"
    assert not (tmp_path / "snap").exists()
