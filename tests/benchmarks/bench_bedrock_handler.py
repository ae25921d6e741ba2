"""Benchmark: the Bedrock handler on 1,000 chunks of long tickets, beside the documents' own transform.

    python tests/benchmarks/bench_bedrock_handler.py   # BENCH_BEDROCK_CHUNKS (default 1,000), BENCH_BEDROCK_REPEAT (5)

Long tickets (``tests/support/long_tickets.py``) are transformed with the defaults, cut as Bedrock's
fixed-size strategy cuts them (300 cl100k tokens, 20 % overlap) until there are BENCH_BEDROCK_CHUNKS
chunks, and written as batch files of the documented shape (100 chunks a batch, the tickets' sidecar
attributes as file metadata). Then, side by side in one run (best of BENCH_BEDROCK_REPEAT):

- the handler's own work, S3 excluded: ``runner.run`` over the event with the batches in memory
  (reading and writing batch JSON, finding tickets, anchoring, the audit line);
- the whole handler against SeaweedFS on 127.0.0.1 (GET and PUT of every batch);
- ``transform`` of the same tickets (one process, cl100k placement, sidecars): what producing the
  documents costs.

Target (issue 23): the handler's own work under the transform's time (ratio < 1).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.bedrock import (  # noqa: E402
    NATIVE_CHUNKERS,
    VOCABULARY,
    documented_batch,
    in_batches,
    native_chunks,
    rendered,
    sidecar_attributes,
)
from support.long_tickets import write_long_snapshot  # noqa: E402
from support.s3_server import running_seaweedfs  # noqa: E402

from anchorkit import tokens  # noqa: E402
from anchorkit.bedrock.audit import count_batches, read_audit_lines  # noqa: E402
from anchorkit.bedrock.runner import S3Store, Settings, run  # noqa: E402
from anchorkit.render.transform import TransformOptions, transform_snapshot  # noqa: E402

CHUNKS = int(os.environ.get("BENCH_BEDROCK_CHUNKS", "1000"))
REPEAT = int(os.environ.get("BENCH_BEDROCK_REPEAT", "5"))
BATCH_SIZE = 100
TICKETS_PER_ROUND = 10


class MemoryStore:
    """Batches in a dict: the handler's work without S3's."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get(self, bucket: str, key: str) -> bytes:
        return self.objects[key]

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.objects[key] = body


class _AuditLines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def best(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    if not VOCABULARY.is_file():
        print(f"cl100k_base vocabulary not found at {VOCABULARY}", file=sys.stderr)
        return 2
    tokenizer = tokens.load_cl100k_base(VOCABULARY)
    with tempfile.TemporaryDirectory(prefix="bench-bedrock-") as folder:
        snapshot = Path(folder) / "snapshot"
        objects: dict[str, bytes] = {}
        files, total = [], 0
        while total < CHUNKS:  # as many long tickets as 1,000 chunks take
            first_id = 50001 + len(files)
            write_long_snapshot(snapshot, TICKETS_PER_ROUND, first_id=first_id)
            for doc in rendered(snapshot):
                if doc.ticket_id < first_id or total >= CHUNKS:
                    continue
                texts = native_chunks(doc.markdown, NATIVE_CHUNKERS["fixed"], tokenizer)[: CHUNKS - total]
                total += len(texts)
                keys = []
                for number, batch in enumerate(in_batches(texts, BATCH_SIZE), start=1):
                    keys.append(f"kb/job/{doc.ticket_id}/batch_{number}.json")
                    objects[keys[-1]] = json.dumps(documented_batch(batch), ensure_ascii=False).encode("utf-8")
                files.append(
                    {
                        "originalFileLocation": {
                            "type": "S3",
                            "s3_location": {"uri": f"s3://kb/tickets/{doc.relpath}"},
                        },
                        "fileMetadata": sidecar_attributes(doc),
                        "contentBatches": [{"key": key} for key in keys],
                    }
                )
        used = {int(f["originalFileLocation"]["s3_location"]["uri"].rsplit("/", 1)[1][:-3]) for f in files}
        for path in (snapshot / "issues").glob("*.json"):
            if int(path.stem) not in used:
                path.unlink()
        event = {"version": "1.0", "bucketName": "bench", "inputFiles": files}
        settings = Settings.from_environment({"ANCHORKIT_REDMINE_URL": "https://redmine.example.co.jp"})

        pure = best(REPEAT, lambda: run(event, settings, MemoryStore(dict(objects))))
        options = TransformOptions(sidecars=True, tokenizer=tokens.CL100K_BASE, tiktoken_file=VOCABULARY)
        out = Path(folder) / "out"

        def transform() -> None:
            if out.exists():
                for path in out.iterdir():
                    path.unlink()
            transform_snapshot(snapshot, out, options, jobs=1)

        documents = best(REPEAT, transform)
        with running_seaweedfs("bench-bedrock") as server:
            client = server.client()
            for key, body in objects.items():
                client.put_object(Bucket=server.bucket, Key=key, Body=body)
            s3_event = {**event, "bucketName": server.bucket}
            whole = best(max(REPEAT // 2, 1), lambda: run(s3_event, settings, S3Store(client)))
        store = MemoryStore(dict(objects))
        lines = _AuditLines()
        logging.getLogger("anchorkit.bedrock").addHandler(lines)
        logging.getLogger("anchorkit.bedrock").setLevel(logging.INFO)
        answer = run(event, settings, store)
        counts, _ = read_audit_lines(lines.messages)
        written = [store.objects[b["key"]] for f in answer["outputFiles"] for b in f["contentBatches"]]
        assert count_batches(written).coverage == 1.0

    ratio = pure / documents
    print(
        f"{total} chunks of {len(files)} long tickets (fixed 300 / 20 %), "
        f"{sum(len(f['contentBatches']) for f in files)} batch files"
    )
    print(f"  handler, S3 excluded:      {pure * 1000:8.1f} ms  ({pure / total * 1e6:6.1f} µs a chunk)")
    print(f"  handler against SeaweedFS: {whole * 1000:8.1f} ms")
    print(f"  transform of the tickets:  {documents * 1000:8.1f} ms")
    print(
        f"  chunks that held a complete anchor: {counts.already_anchored}, anchored by the handler: {counts.anchored}"
    )
    print(f"  handler / transform: {ratio:.3f}  (target < 1: {'met' if ratio < 1 else 'MISSED'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
