"""Benchmark: `anchorkit upload` against `aws s3 sync` on the same SeaweedFS, same concurrency.

Corpus: N synthetic documents (~1.5 KB) + N sidecars (~1.5 KB), N = ANCHORKIT_BENCH_TICKETS
(default 10000; e.g. 1000 for a quick run). Phases, each run by both tools into its own prefix:

  (a) first upload into an empty prefix;
  (b) the folder regenerated (same bytes, new mtimes), synced again;
  (c) 1% of the tickets changed (document and sidecar rewritten, the rest untouched), synced again.

Printed per phase: wall time and PUT requests of both tools and the anchorkit/aws ratio. PUTs are
counted by anchorkit itself (botocore event hooks, retries included) and from aws's `upload:` lines.
Run: .venv/bin/python tests/benchmarks/bench_upload.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.s3_server import DUMMY_CREDENTIALS, S3Server, running_seaweedfs  # noqa: E402

TICKETS = int(os.environ.get("ANCHORKIT_BENCH_TICKETS", "10000"))
CONCURRENCY = int(os.environ.get("ANCHORKIT_BENCH_CONCURRENCY", "16"))
CHANGED_EVERY = 100  # 1% of the tickets
BIN = Path(sys.executable).parent


def document(ticket_id: int, revision: int) -> bytes:
    anchor = f"> チケット #{ticket_id}: VPN接続が不安定になる (rev {revision})"
    body = "\n".join(f"{anchor}\n作業記録 {line}: 接続を確認し、設定を更新した。" for line in range(14))
    return f"# チケット #{ticket_id}: VPN接続が不安定になる\n## 説明\n{body}\n".encode()


def sidecar(ticket_id: int, revision: int) -> bytes:
    attributes = {"ticket_id": ticket_id, "revision": revision, "status": "完了", "tracker": "障害"}
    attributes["summary"] = "利用者からの問い合わせ対応の記録。" * 24
    return json.dumps({"metadataAttributes": attributes}, ensure_ascii=False).encode()


def write_ticket(folder: Path, ticket_id: int, revision: int) -> None:
    (folder / f"{ticket_id}.md").write_bytes(document(ticket_id, revision))
    (folder / f"{ticket_id}.md.metadata.json").write_bytes(sidecar(ticket_id, revision))


def regenerate(folder: Path) -> None:
    """Write the corpus from scratch: same bytes as before, new files, new mtimes."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for ticket_id in range(1, TICKETS + 1):
        write_ticket(folder, ticket_id, revision=1)


def change_one_percent(folder: Path) -> None:
    """Rewrite only the changed tickets (as transform's write-if-changed does): fair to mtime-based aws."""
    for ticket_id in range(CHANGED_EVERY, TICKETS + 1, CHANGED_EVERY):
        write_ticket(folder, ticket_id, revision=2)


@dataclass
class Run:
    seconds: float
    puts: int


def tool_environment(work: Path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("AWS_")}
    env.update(
        AWS_ACCESS_KEY_ID=DUMMY_CREDENTIALS["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=DUMMY_CREDENTIALS["aws_secret_access_key"],
        AWS_DEFAULT_REGION="us-east-1",
        AWS_CONFIG_FILE=str(work / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(work / "aws-credentials"),
        PYTHONPATH=str(REPO),
    )
    return env


def configure_aws(env: dict[str, str]) -> None:
    """Same concurrency for aws as for anchorkit, in a throwaway config file."""
    subprocess.run(
        [str(BIN / "aws"), "configure", "set", "default.s3.max_concurrent_requests", str(CONCURRENCY)],
        env=env,
        check=True,
    )


def run_aws(server: S3Server, folder: Path, prefix: str, env: dict[str, str]) -> Run:
    command = [
        str(BIN / "aws"),
        "s3",
        "sync",
        str(folder),
        f"s3://{server.bucket}/{prefix}",
        "--endpoint-url",
        server.endpoint_url,
        "--no-progress",
    ]
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    seconds = time.monotonic() - started
    return Run(seconds, sum(1 for line in result.stdout.splitlines() if line.startswith("upload:")))


def run_anchorkit(server: S3Server, folder: Path, prefix: str, env: dict[str, str]) -> tuple[Run, dict[str, object]]:
    command = [
        sys.executable,
        "-m",
        "anchorkit",
        "upload",
        str(folder),
        f"s3://{server.bucket}/{prefix}",
        "--endpoint-url",
        server.endpoint_url,
        "--threads",
        str(CONCURRENCY),
        "--json",
    ]
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise SystemExit(f"anchorkit upload failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    report = json.loads(result.stdout)
    return Run(seconds, int(report["requests"].get("PutObject", 0))), report


def remote_matches_local(server: S3Server, folder: Path, prefix: str) -> bool:
    """Every local file is in S3 with its MD5 as ETag, and nothing else is."""
    import hashlib

    client = server.client()
    remote = {
        item["Key"][len(prefix) + 1 :]: item["ETag"].strip('"')
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=server.bucket, Prefix=prefix + "/")
        for item in page.get("Contents", [])
    }
    local = {path.name: hashlib.md5(path.read_bytes()).hexdigest() for path in folder.iterdir()}
    return remote == local


def main() -> None:
    print(f"corpus: {TICKETS} documents + {TICKETS} sidecars, concurrency {CONCURRENCY}")
    with tempfile.TemporaryDirectory(prefix="anchorkit-bench-") as tmp, running_seaweedfs("bench-upload") as server:
        work = Path(tmp)
        folder = work / "out"
        env = tool_environment(work)
        configure_aws(env)
        changed_objects = 2 * (TICKETS // CHANGED_EVERY)
        phases = [
            ("(a) first upload", regenerate, 2 * TICKETS),
            ("(b) regenerated, same bytes", regenerate, 0),
            ("(c) 1% of tickets changed", change_one_percent, changed_objects),
        ]
        print(f"{'phase':<30} {'aws s':>8} {'aws PUT':>8} {'anchorkit s':>12} {'anchorkit PUT':>14} {'time ratio':>10}")
        for name, prepare, expected_puts in phases:
            prepare(folder)
            aws = run_aws(server, folder, "aws", env)
            ours, report = run_anchorkit(server, folder, "anchorkit", env)
            exact = (
                ours.puts == expected_puts
                and report["failed"] == 0
                and remote_matches_local(server, folder, "anchorkit")
            )
            print(
                f"{name:<30} {aws.seconds:>8.2f} {aws.puts:>8} {ours.seconds:>12.2f} {ours.puts:>14} "
                f"{ours.seconds / aws.seconds:>9.2f}x  anchorkit uploaded exactly the expected {expected_puts}: {exact}"
            )


if __name__ == "__main__":
    main()
