"""Benchmark: pull against the real Redmine, and against the naive python-redmine loop.

    python tests/benchmarks/bench_pull.py

Seeds BENCH_PULL_ISSUES issues (default 1,000) with BENCH_PULL_JOURNALS journals each (default 3) into a
fresh project through ActiveRecord (``rails runner``; REST would take minutes), with ``updated_on`` spread
over the past, as in a real tracker. Then reports:

- full pull: wall time, HTTP requests (= list pages + issues + lookups), client CPU ms per ticket;
- a no-change incremental pull (target <= 2 requests once lookups are cached);
- an incremental pull after 1% of the issues changed (target: list pages + exactly the changed issues);
- the naive loop ``for i in redmine.issue.all(): redmine.issue.get(i.id, include=['journals'])`` (scoped
  to the same project, closed issues included) on the same server, and the ratio.

The naive loop and the full pull alternate BENCH_PULL_ROUNDS times (default 2) and the best run of each
is compared: on a shared machine one burst of load elsewhere can triple a single run.

Uses the Redmine at $ANCHORKIT_REDMINE_URL, else starts one (scripts/redmine-server.sh) and stops it after.
"""

from __future__ import annotations

import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import requests
from redminelib import Redmine

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support.redmine_server import RedmineAdmin, running_redmine

from anchorkit.source.pull import PullSettings, pull
from anchorkit.source.redmine import PAGE_SIZE

ISSUES = int(os.environ.get("BENCH_PULL_ISSUES", "1000"))
JOURNALS = int(os.environ.get("BENCH_PULL_JOURNALS", "3"))
CHANGED_SHARE = 0.01
FULL_ROUNDS = int(os.environ.get("BENCH_PULL_ROUNDS", "2"))

# Bulk insert: no callbacks, so the nested-set columns of root issues are filled by hand (lft 1, rgt 2,
# root_id = id). Timestamps end two days ago so the incremental overlap window holds none of them.
SEED_RUBY = """
project = Project.find_by!(identifier: ENV.fetch("BENCH_PROJECT"))
count, journals = ENV.fetch("BENCH_ISSUES").to_i, ENV.fetch("BENCH_JOURNALS").to_i
author = User.find_by_login("admin")
statuses = IssueStatus.order(:id).pluck(:id)
priority = IssuePriority.order(:id).first
tracker = project.trackers.first || Tracker.first
start = Time.now.utc - 2 * 86_400 - count * 3_600
issues = (0...count).map do |n|
  created = start + n * 3_600
  {project_id: project.id, tracker_id: tracker.id, status_id: statuses[n % statuses.size],
   priority_id: priority.id, author_id: author.id, subject: "VPN接続が不安定になる (#{n})",
   description: "在宅勤務中にVPNが切れる。" * 20, created_on: created, updated_on: created + journals * 600,
   lft: 1, rgt: 2, is_private: false, done_ratio: 0, lock_version: 0}
end
Issue.insert_all(issues)
Issue.where(project_id: project.id, root_id: nil).update_all("root_id = id")
journal_rows = Issue.where(project_id: project.id).pluck(:id, :created_on).flat_map do |id, created|
  (1..journals).map do |j|
    row = {journalized_id: id, journalized_type: "Issue", user_id: author.id, private_notes: false,
           notes: "対応履歴 #{j}: ルーターのファームウェア更新で解消。" * 5, created_on: created + j * 600}
    row[:updated_on] = row[:created_on] if Journal.column_names.include?("updated_on")
    row
  end
end
journal_rows.each_slice(5_000) { |slice| Journal.insert_all(slice) }
puts Issue.where(project_id: project.id).count
"""


def seed(admin: RedmineAdmin, identifier: str, issues: int = ISSUES, journals: int = JOURNALS) -> int:
    """Insert ``issues`` issues with ``journals`` journals each into the project; returns its issue count."""
    os.environ.update(BENCH_PROJECT=identifier, BENCH_ISSUES=str(issues), BENCH_JOURNALS=str(journals))
    return int(admin.rails_runner(SEED_RUBY).strip().splitlines()[-1])


def naive_pull(url: str, key: str, identifier: str) -> tuple[float, int]:
    """The loop from the issue, counting its HTTP requests through a response hook."""
    redmine = Redmine(url, key=key)
    sent = 0

    def count(response: requests.Response, *args: object, **kwargs: object) -> None:
        nonlocal sent
        sent += 1

    redmine.engine.session.hooks["response"].append(count)
    started = time.perf_counter()
    for issue in redmine.issue.filter(project_id=identifier, status_id="*"):
        redmine.issue.get(issue.id, include=["journals"])
    return time.perf_counter() - started, sent


def main() -> None:
    with running_redmine() as server, tempfile.TemporaryDirectory(prefix="bench-pull-") as scratch:
        admin = RedmineAdmin(server)
        project = admin.create_project(name="ベンチマーク")
        ident, key = project["identifier"], server.admin_key
        seed_started = time.perf_counter()
        seeded = seed(admin, ident)
        print(f"seeded {seeded} issues x {JOURNALS} journals in {time.perf_counter() - seed_started:.1f} s")
        # The server (one thin process) dominates and this machine is shared: alternate the naive loop and
        # our full pull twice and compare the better run of each, so a burst of load elsewhere does not
        # decide the ratio.
        naive_runs, full_runs = [], []
        for attempt in range(FULL_ROUNDS):
            naive_runs.append(naive_pull(server.url, key, ident))
            snap = Path(scratch) / f"snapshot-{attempt}"
            cpu_started = time.process_time()
            report = pull(server.url, snap, key, PullSettings(projects=(ident,)))
            full_runs.append((report, (time.process_time() - cpu_started) * 1000 / max(report.fetched, 1)))
        full, cpu_ms_per_ticket = min(full_runs, key=lambda run: run[0].seconds)
        naive_seconds, naive_requests = min(naive_runs)
        pages = math.ceil(seeded / PAGE_SIZE)
        by_purpose = full.requests_by_purpose
        print(
            f"full pull: {full.fetched} issues in {full.seconds:.2f} s ({full.fetched / full.seconds:.0f} issues/s), "
            f"{full.requests} requests = {by_purpose.get('list', 0)} list pages (expected {pages}) + "
            f"{by_purpose.get('issues', 0)} issues + {by_purpose.get('lookups', 0)} lookups; "
            f"client CPU {cpu_ms_per_ticket:.2f} ms/ticket (target <= 2; runs: "
            f"{', '.join(f'{r.seconds:.1f} s / {c:.2f} ms' for r, c in full_runs)})"
        )
        print(
            f"naive python-redmine loop: {naive_seconds:.2f} s, {naive_requests} requests "
            f"(runs: {', '.join(f'{t:.1f} s' for t, _ in naive_runs)}); "
            f"ratio naive/anchorkit full pull = {naive_seconds / full.seconds:.2f}"
        )
        idle = pull(server.url, snap, key, PullSettings(projects=(ident,)))
        print(f"no-change incremental pull: {idle.requests} requests (target <= 3: an admin key), {idle.seconds:.2f} s")

        changed_ids = random.Random(7).sample(
            sorted(int(p.stem) for p in (snap / "issues").glob("*.json")), max(1, int(seeded * CHANGED_SHARE))
        )
        for issue_id in changed_ids:
            admin.add_note(issue_id, "再発したため再調査")
        changed = pull(server.url, snap, key, PullSettings(projects=(ident,)))
        print(
            f"after {len(changed_ids)} changed: {changed.requests} requests "
            f"({changed.requests_by_purpose}), fetched {changed.fetched} (target: list pages + exactly "
            f"{len(changed_ids)}), {changed.seconds:.2f} s"
        )

        print(f"ratio naive/anchorkit no-change run = {naive_seconds / idle.seconds:.0f}")
        if not (full.ok and idle.ok and changed.ok):
            raise SystemExit("a pull reported failures")


if __name__ == "__main__":
    main()
