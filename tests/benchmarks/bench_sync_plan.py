"""Benchmark: what deciding a `sync --state` run costs on a large state, against the floor of parsing it.

    python tests/benchmarks/bench_sync_plan.py

Builds a manifest of BENCH_PLAN_TICKETS tickets (default 10,000; two objects each, as with sidecars)
and measures, best of BENCH_PLAN_ROUNDS, side by side in one run:

- floor: ``json.loads`` of the manifest's bytes (what any run pays to read its state);
- idle: reading it into the typed manifest and planning a run where nothing changed (the decision an
  idle scheduled run makes: no write at all);
- 1% changed: the same with 1% of the tickets rendered anew (uploads planned, the next manifest built).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

from anchorkit.sync.manifest import Manifest, Scope
from anchorkit.sync.plan import DeletePolicy, Listing, Local, Rendered, plan

TICKETS = int(os.environ.get("BENCH_PLAN_TICKETS", "10000"))
ROUNDS = int(os.environ.get("BENCH_PLAN_ROUNDS", "15"))
OLD, NEW = "2026-03-01T00:00:00Z", "2026-03-15T09:30:00Z"


def manifest_bytes() -> bytes:
    scope = Scope.of("https://redmine.example.com", ["ops"], False, "s3://kb-docs/tickets/")
    tickets = {
        str(i): {
            "updated_on": OLD,
            "stored": OLD,
            "project_id": 1,
            "objects": {f"{i}.md": f"{i:064x}", f"{i}.md.metadata.json": f"{i + 1:064x}"},
        }
        for i in range(1, TICKETS + 1)
    }
    raw = {
        "format": 1,
        "fingerprint": "fp",
        "pull": {"cursor": OLD, "runs_since_full": 3},
        "lookups": {"users": {"3": "佐藤 次郎"}},
        "tickets": tickets,
        "scope": scope.to_json(),
    }
    return json.dumps(raw).encode("utf-8")


def best_of(works: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Best time of each, the rounds interleaved so that a busy moment of the machine hits them all."""
    best = dict.fromkeys(works, float("inf"))
    for _ in range(ROUNDS):
        for name, work in works.items():
            started = time.perf_counter()
            work()
            best[name] = min(best[name], time.perf_counter() - started)
    return best


def main() -> None:
    data = manifest_bytes()
    changed = range(1, TICKETS + 1, 100)

    def decide(rendered: tuple[Rendered, ...]) -> object:
        manifest = Manifest.from_json(json.loads(data), "bench")
        manifest.stamps()  # what pull is given
        listing = Listing(
            fetched=frozenset(r.ticket_id for r in rendered),
            pull_state={"cursor": NEW},
            lookups=manifest.lookups,
            fingerprint="fp",
        )
        decided = plan(manifest, listing, Local(rendered), DeletePolicy(), manifest.scope or Scope("x"))
        return decided.idle

    rendered = tuple(Rendered(i, NEW, 1, {f"{i}.md": b"# new", f"{i}.md.metadata.json": b"{}"}) for i in changed)
    times = best_of({"floor": lambda: json.loads(data), "idle": lambda: decide(()), "some": lambda: decide(rendered)})
    floor, idle, some = times["floor"], times["idle"], times["some"]
    print(f"{TICKETS:,} tickets, manifest {len(data) / 1e6:.1f} MB, best of {ROUNDS}:")
    print(f"  floor (json.loads)      {floor * 1000:7.1f} ms")
    print(f"  idle run decided        {idle * 1000:7.1f} ms  ({idle / floor:.2f}x the floor)")
    print(f"  1% changed, planned     {some * 1000:7.1f} ms  ({some / floor:.2f}x the floor)")


if __name__ == "__main__":
    main()
