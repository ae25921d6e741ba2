"""Benchmark: `sync --state` on a stateless runner (every run on an empty disk), real Redmine + SeaweedFS.

    python tests/benchmarks/bench_stateless_sync.py

Seeds BENCH_STATELESS_ISSUES issues (default 10,000; scale down for a quick look) with
BENCH_STATELESS_JOURNALS journals each (default 2) through ActiveRecord (bench_pull's seeding), then runs
`anchorkit.sync.run_sync` with the state in S3, each time from a fresh empty folder:

1. the first sync (everything fetched, rendered, uploaded; the state written);
2. a second sync with nothing changed (target: <= 2 Redmine requests, 0 PUTs, state not rewritten);
   then the same with ``--full`` (the daily ``--refetch-every`` run): every issue fetched again, and no raw
   issue JSON written again (target: PUTs = lease + manifest; one listing of the state's copies per 1,000);
3. a sync after 1% of the issues got a note (target: the listing + exactly those issues; PUTs = their
   documents and sidecars + their raw issue JSON + lease + manifest);
4. another 1% changed, fetched by `pull --state` into an empty folder (which first restores every raw
   issue from the state: a complete snapshot costs one GET per ticket), then `sync --state` on another
   empty disk, which publishes what the pull stored without fetching it again.

Reports Redmine requests, S3 requests per operation (botocore event hooks) and wall time for each.
BENCH_STATELESS_LAYOUTS (default ``documents``; ``documents,chunks`` for both) runs steps 1-3 for each
layout side by side, each with its own state and prefix (chunks: `sync --state --chunks`, 300 tokens),
and prints the chunk layout's objects, PUTs and time against the documents'.
Uses the Redmine at $ANCHORKIT_REDMINE_URL, else starts one (and stops it after); always starts SeaweedFS.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_pull import seed
from support.redmine_server import RedmineAdmin, running_redmine
from support.s3_server import running_seaweedfs

from anchorkit.publish.state import S3StateStore
from anchorkit.publish.upload import PublishSettings, S3Location, S3Target
from anchorkit.render.document import RenderOptions
from anchorkit.render.transform import TransformOptions
from anchorkit.source.pull import PullSettings
from anchorkit.sync import StatelessSyncReport, StatePullReport, pull_with_state, run_sync
from anchorkit.sync.chunking import ChunkLayout

ISSUES = int(os.environ.get("BENCH_STATELESS_ISSUES", "10000"))
JOURNALS = int(os.environ.get("BENCH_STATELESS_JOURNALS", "2"))
CHANGED_SHARE = 0.01
LAYOUTS = os.environ.get("BENCH_STATELESS_LAYOUTS", "documents").split(",")
THREADS = 16


def describe(name: str, report: StatelessSyncReport) -> None:
    pulled = report.pulls[0]
    s3 = report.s3_requests
    print(
        f"{name}: {report.seconds:.2f} s wall; Redmine {sum(p.requests for p in report.pulls)} requests "
        f"({pulled.requests_by_purpose}); fetched {sum(p.fetched for p in report.pulls)}, rendered {report.rendered}; "
        f"S3 PUT {s3.get('PutObject', 0)} (documents+sidecars {len(report.uploaded)}, raw issues "
        f"{report.state_issues_written}, {report.state_issues_unchanged} unchanged not rewritten, state "
        f"{'rewritten' if report.state_written else 'not rewritten'}), GET {s3.get('GetObject', 0)}, "
        f"HEAD {s3.get('HeadObject', 0)}, DELETE {s3.get('DeleteObject', 0)}, LIST {s3.get('ListObjectsV2', 0)}; "
        f"{'ok' if report.ok else 'FAILED'}"
    )


def describe_pull(name: str, report: StatePullReport) -> None:
    assert report.pull_report is not None
    s3 = report.s3_requests
    print(
        f"{name}: {report.seconds:.2f} s wall; Redmine {report.pull_report.requests} requests "
        f"({report.pull_report.requests_by_purpose}); restored {report.restored} raw issues from the state; "
        f"S3 GET {s3.get('GetObject', 0)}, PUT {s3.get('PutObject', 0)} (raw issues {report.state_issues_written}, "
        f"state {'rewritten' if report.state_written else 'not rewritten'}); {'ok' if report.ok else 'FAILED'}"
    )


def main() -> None:
    with (
        running_redmine() as server,
        running_seaweedfs("bench-stateless") as s3,
        tempfile.TemporaryDirectory(prefix="bench-stateless-") as scratch,
    ):
        admin = RedmineAdmin(server)
        project = admin.create_project(name="ベンチマーク")
        started = time.perf_counter()
        seeded = seed(admin, project["identifier"], ISSUES, JOURNALS)
        print(f"seeded {seeded} issues x {JOURNALS} journals in {time.perf_counter() - started:.1f} s")
        client = s3.client(max_pool_connections=THREADS)
        options = TransformOptions(render=RenderOptions(), sidecars=True)
        runs = 0

        def sync_from_empty_disk(layout: str = "documents", full: bool = False) -> StatelessSyncReport:
            nonlocal runs
            runs += 1
            where = "" if layout == "documents" else f"{layout}-"
            store = S3StateStore(client, S3Location(s3.bucket, f"{where}anchorkit-state/"))
            target = S3Target(client, S3Location(s3.bucket, f"{where}tickets/"))
            return run_sync(
                server.url,
                server.admin_key,
                store,
                target,
                options,
                PullSettings(projects=(project["identifier"],), full=full),
                work_dir=Path(scratch) / f"run-{runs}",
                publishing=PublishSettings(delete=True, threads=THREADS),
                chunks=ChunkLayout() if layout == "chunks" else None,
            )

        def each_layout(name: str, full: bool = False) -> None:
            reports = {layout: sync_from_empty_disk(layout, full) for layout in LAYOUTS}
            for layout, report in reports.items():
                describe(f"{name} [{layout}]" if len(LAYOUTS) > 1 else name, report)
            if {"documents", "chunks"} <= set(reports):
                documents, chunks = reports["documents"], reports["chunks"]
                puts = [r.s3_requests.get("PutObject", 0) for r in (chunks, documents)]
                print(
                    f"  chunks / documents: objects uploaded {len(chunks.uploaded)} / {len(documents.uploaded)}, "
                    f"PUT {puts[0]} / {puts[1]}, wall {chunks.seconds / max(documents.seconds, 1e-9):.2f}x"
                )

        each_layout("first sync (empty state)")
        each_layout("second sync, nothing changed, empty disk")
        each_layout("refetch (--full), nothing changed, empty disk", full=True)
        state_of_first = "anchorkit-state/" if LAYOUTS[0] == "documents" else f"{LAYOUTS[0]}-anchorkit-state/"
        manifest = client.get_object(Bucket=s3.bucket, Key=f"{state_of_first}manifest.json")["Body"].read()
        issue_ids = sorted(int(key) for key in json.loads(manifest)["tickets"])
        changed = random.Random(7).sample(issue_ids, max(1, int(len(issue_ids) * CHANGED_SHARE)))
        for issue_id in changed:
            note_with_retries(admin, issue_id)
        each_layout(f"after {len(changed)} changed ({CHANGED_SHARE:.0%}), empty disk")
        changed = random.Random(8).sample(issue_ids, len(changed))
        for issue_id in changed:
            note_with_retries(admin, issue_id)
        pulled = pull_with_state(
            server.url,
            server.admin_key,
            S3StateStore(client, S3Location(s3.bucket, "anchorkit-state/")),
            Path(scratch) / "pull-state",
            PullSettings(projects=(project["identifier"],)),
            threads=THREADS,
        )
        describe_pull(f"pull --state after {len(changed)} more changed, empty folder", pulled)
        describe("then sync --state, empty disk", sync_from_empty_disk())


def note_with_retries(admin: RedmineAdmin, issue_id: int, attempts: int = 3) -> None:
    """Add a note; Redmine's SQLite answers 500 now and then when another process writes at the same time."""
    for attempt in range(attempts):
        try:
            admin.add_note(issue_id, "再発したため再調査")
            return
        except AssertionError:
            if attempt == attempts - 1:
                raise
            time.sleep(1)


if __name__ == "__main__":
    main()
