"""Benchmark: every stage at two sizes of a service desk, side by side: does anything grow faster than the corpus?

    python tests/benchmarks/bench_scale.py     # BENCH_SCALE_TICKETS (default 2000,20000), BENCH_SCALE_S3=1

For each N a snapshot of N tickets (``support.scale_corpus``: one long ticket in five, the fixtures' short ones,
a 5 MB log journal, 800 journals, a 3 MB description) goes through the CLI, one stage at a time, each in a fresh
process: transform (then again, idle, and --check), chunk --jsonl (then --check), chunk --out, stats on the
output folder, on the JSON Lines and on the snapshot (stats has no --max-text-bytes: the three huge tickets
fail there), upload to a local folder (then again, idle) and of the chunk folder, and with
BENCH_SCALE_S3=1 upload to a SeaweedFS started here (then again, idle: it must PUT nothing). The huge tickets
pass with --max-text-bytes 10,000,000.

Per stage and N: wall and CPU seconds and the peak RSS of the process tree (``os.wait4``). The figures side by
side are CPU time per ticket and the peak RSS at the largest N against the smallest: linear work keeps the
first near 1x (below it while the three huge tickets weigh on the small corpus), and a stage that streams keeps
the second near 1x; one that holds the corpus grows with N (target: peak RSS under 2x for 10x the tickets).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.scale_corpus import MAX_TEXT_BYTES, write_scale_snapshot  # noqa: E402

SIZES = [int(n) for n in os.environ.get("BENCH_SCALE_TICKETS", "2000,20000").split(",")]
WITH_S3 = os.environ.get("BENCH_SCALE_S3") == "1"
RSS_TARGET = 2.0


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float
    peak_mb: float
    output: str


def run(arguments: list[str], environment: dict[str, str]) -> Run:
    """One anchorkit command in a fresh process: its time, CPU time and peak RSS (of it and its workers).

    Started through a small process of its own (``--measure``): a child's peak RSS counts the memory of the
    process that forked it, and this one holds the corpus' figures and SeaweedFS' client."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-scale-run-") as folder:
        usage, output = Path(folder) / "usage", Path(folder) / "output"
        command = [sys.executable, __file__, "--measure", str(usage), str(output), *arguments]
        subprocess.run(command, check=True, env=environment)
        returncode, cpu, peak_kb = json.loads(usage.read_text())
        text = output.read_text(encoding="utf-8", errors="replace")
    if returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(arguments)}: exit {returncode}\n{text[-2000:]}")
    return Run(time.monotonic() - started, cpu, peak_kb / 1024, text)


def measure(usage: Path, output: Path, arguments: list[str]) -> None:
    """Run anchorkit with ``arguments``, its stdout into ``output``; write its exit code, CPU seconds and peak
    RSS in KB (of it and the workers it waited for: ``os.wait4``) into ``usage``."""
    with output.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "anchorkit", *arguments], stdout=out, stderr=subprocess.DEVNULL
        )
        _, status, rusage = os.wait4(process.pid, 0)
    figures = [os.waitstatus_to_exitcode(status), rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss]
    usage.write_text(json.dumps(figures))


def stages(snapshot: Path, work: Path, s3_endpoint: str | None) -> list[tuple[str, list[str]]]:
    limit = ["--max-text-bytes", str(MAX_TEXT_BYTES)]
    out, jsonl, chunks = str(work / "out"), str(work / "chunks.jsonl"), str(work / "chunks")
    steps = [
        ("transform", ["transform", str(snapshot), "--out", out, "--sidecars", *limit]),
        ("transform, idle", ["transform", str(snapshot), "--out", out, "--sidecars", *limit]),
        ("transform --check", ["transform", str(snapshot), "--out", out, "--sidecars", "--check", *limit]),
        ("chunk --jsonl", ["chunk", str(snapshot), "--jsonl", jsonl, *limit]),
        ("chunk --jsonl --check", ["chunk", str(snapshot), "--jsonl", jsonl, "--check", *limit]),
        ("chunk --out", ["chunk", str(snapshot), "--out", chunks, *limit]),
        ("stats (output folder)", ["stats", out, "--lengths", "none"]),
        ("stats (JSON Lines)", ["stats", jsonl, "--lengths", "none"]),
        ("stats (snapshot)", ["stats", str(snapshot), "--lengths", "none"]),
        ("upload to a folder", ["upload", out, str(work / "published")]),
        ("upload to a folder, idle", ["upload", out, str(work / "published")]),
        ("upload of the chunk folder", ["upload", chunks, str(work / "published-chunks")]),
    ]
    if s3_endpoint is not None:
        destination = f"s3://anchorkit-tests/scale-{work.name}"
        s3 = ["upload", out, destination, "--endpoint-url", s3_endpoint, "--json"]
        steps += [("upload to S3", s3), ("upload to S3, idle", s3)]
    return steps


def main() -> None:
    results: dict[str, dict[int, Run]] = {}
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    with ExitStack() as stack:
        s3_endpoint = None
        if WITH_S3:
            from support.s3_server import DUMMY_CREDENTIALS, running_seaweedfs

            s3_endpoint = stack.enter_context(running_seaweedfs()).endpoint_url
            environment |= {
                "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS["aws_access_key_id"],
                "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS["aws_secret_access_key"],
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-scale-")))
        for tickets in SIZES:
            snapshot, work = folder / f"snapshot-{tickets}", folder / f"run-{tickets}"
            write_scale_snapshot(snapshot, tickets)
            work.mkdir()
            for name, arguments in stages(snapshot, work, s3_endpoint):
                measured = results.setdefault(name, {})[tickets] = run(arguments, environment)
                print(
                    f"{tickets:>7,} {name:<26} {measured.wall:7.1f} s wall {measured.cpu:7.1f} s CPU "
                    f"{measured.peak_mb:6.0f} MB",
                    flush=True,
                )
                if name == "upload to S3, idle":
                    requests = json.loads(measured.output)["requests"]
                    assert "PutObject" not in requests, f"an idle upload PUT objects: {requests}"
            shutil.rmtree(work)
            shutil.rmtree(snapshot)
    small, large = min(SIZES), max(SIZES)
    print(f"\n{large:,} against {small:,} tickets ({large / small:.0f}x):")
    print(f"{'stage':<26} {'CPU per ticket':>15} {'peak RSS':>10}")
    for name, by_size in results.items():
        per_ticket = (by_size[large].cpu / large) / (by_size[small].cpu / small)
        rss = by_size[large].peak_mb / by_size[small].peak_mb
        verdict = "" if rss < RSS_TARGET else f"  over the {RSS_TARGET:.0f}x target"
        print(f"{name:<26} {per_ticket:14.2f}x {rss:9.2f}x{verdict}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        measure(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4:])
    else:
        main()
