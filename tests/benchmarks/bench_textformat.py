"""Benchmark: the cost of Textile → Markdown conversion, alone and inside `transform`.

1. anchorkit's converter on the texts of N all-Textile synthetic tickets (bench_transform's
   generator, Textile tickets only): microseconds per KB and per 1.5 KB ticket text.
2. Its share of `transform`: the same snapshot transformed in-process with the real converter
   and with conversion replaced by the identity (Markdown passed through). Budget (issue 3):
   conversion adds at most 50% to transform's time on an all-Textile corpus.
3. The peers it was chosen against, on a sample of the same texts, if installed
   (`pip install textile markdownify html2text pypandoc-binary`): textile→HTML + markdownify,
   textile→HTML + html2text, pandoc (one batched call for the whole sample).

    python tests/benchmarks/bench_textformat.py
    BENCH_TEXTFORMAT_TICKETS=20000 BENCH_TEXTFORMAT_PEER_SAMPLE=500 python tests/benchmarks/bench_textformat.py
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from unittest import mock

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR), str(BENCH_DIR.parents[1])]

from bench_transform import synthetic_issue  # noqa: E402

from anchorkit.render import document  # noqa: E402
from anchorkit.render.textformat import to_markdown  # noqa: E402
from anchorkit.render.transform import TransformOptions, transform_snapshot  # noqa: E402

TICKETS = int(os.environ.get("BENCH_TEXTFORMAT_TICKETS", "4000"))
PEER_SAMPLE = int(os.environ.get("BENCH_TEXTFORMAT_PEER_SAMPLE", "200"))
REPEATS = 3


def textile_issues(count: int) -> list[dict[str, object]]:
    """bench_transform's synthetic tickets with even ids: those carry Textile markup."""
    rng = random.Random(count)
    return [synthetic_issue(ticket_id, rng) for ticket_id in range(100_000, 100_000 + 2 * count, 2)]


def ticket_texts(issues: list[dict[str, object]]) -> list[str]:
    texts: list[str] = []
    for wrapper in issues:
        issue = wrapper["issue"]
        assert isinstance(issue, dict)
        texts.append(issue["description"])
        texts += [journal["notes"] for journal in issue["journals"] if journal["notes"]]
    return texts


def best_cpu_seconds(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        run()
        best = min(best, time.process_time() - started)
    return best


def write_snapshot(root: Path, issues: list[dict[str, object]]) -> Path:
    (root / "issues").mkdir(parents=True)
    for wrapper in issues:
        issue = wrapper["issue"]
        assert isinstance(issue, dict)
        (root / "issues" / f"{issue['id']}.json").write_text(json.dumps(wrapper, ensure_ascii=False), encoding="utf-8")
    lookups = {
        "statuses": {"2": {"name": "対応中"}},
        "projects": {"1": {"name": "社内ITサービスデスク", "identifier": "helpdesk"}},
    }
    (root / "lookups.json").write_text(json.dumps(lookups, ensure_ascii=False), encoding="utf-8")
    (root / "state.json").write_text(json.dumps({"text_format": "textile"}), encoding="utf-8")
    return root


def transform_seconds(snapshot: Path, scratch: Path, convert: Callable[[str, str], str]) -> float:
    runs = iter(range(1000))

    def run() -> None:
        out = scratch / f"out-{next(runs)}"  # a fresh output folder: every document is written
        with mock.patch.object(document, "to_markdown", convert):
            report = transform_snapshot(snapshot, out, TransformOptions(sidecars=True))
        assert not report.failed, report.failed

    return best_cpu_seconds(run)


def peers(texts: list[str]) -> dict[str, Callable[[list[str]], object]]:
    candidates: dict[str, Callable[[list[str]], object]] = {}
    try:
        import textile

        try:
            import markdownify

            candidates["textile + markdownify"] = lambda batch: [
                markdownify.markdownify(textile.textile(t)) for t in batch
            ]
        except ImportError:
            print("  (markdownify not installed)")
        try:
            import html2text

            converter = html2text.HTML2Text()
            candidates["textile + html2text"] = lambda batch: [converter.handle(textile.textile(t)) for t in batch]
        except ImportError:
            print("  (html2text not installed)")
    except ImportError:
        print("  (textile not installed: pip install textile markdownify html2text)")
    try:
        import pypandoc

        pypandoc.get_pandoc_version()
        separator = "\n\np. ANCHORKIT-SPLIT\n\n"
        candidates["pandoc (one batched call)"] = lambda batch: pypandoc.convert_text(
            separator.join(batch), "gfm", format="textile"
        )
    except (ImportError, OSError):
        print("  (pandoc not available: pip install pypandoc-binary)")
    return candidates


def main() -> None:
    issues = textile_issues(TICKETS)
    texts = ticket_texts(issues)
    kilobytes = sum(len(text.encode()) for text in texts) / 1024
    per_ticket_kb = kilobytes / len(issues)

    ours = best_cpu_seconds(lambda: [to_markdown(text, "textile") for text in texts])
    ours_per_kb = ours / kilobytes * 1e6
    print(
        f"texts: {len(texts):,} from {len(issues):,} Textile tickets, {kilobytes:,.0f} KB ({per_ticket_kb:.2f} KB per "
        "ticket)"
    )
    print(
        f"anchorkit to_markdown: {ours_per_kb:.1f} µs/KB, {ours_per_kb * 1.5:.0f} µs per 1.5 KB, "
        f"{len(texts) / ours:,.0f} texts/s"
    )

    scratch_root = Path(os.environ.get("BENCH_TMPDIR", BENCH_DIR.parents[1] / "build"))
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-textformat-", dir=scratch_root) as tmp:
        snapshot = write_snapshot(Path(tmp) / "snapshot", issues)
        with_conversion = transform_seconds(snapshot, Path(tmp), to_markdown)
        passthrough = transform_seconds(snapshot, Path(tmp), lambda text, fmt: text)
    added = with_conversion / passthrough - 1
    print(
        f"transform, all Textile: {len(issues) / with_conversion:,.0f} tickets/s with conversion, "
        f"{len(issues) / passthrough:,.0f} tickets/s with text passed through: conversion adds {added:.0%} "
        f"(budget 50%: {'ok' if added <= 0.5 else 'OVER'})"
    )

    sample = texts[:PEER_SAMPLE]
    sample_kb = sum(len(text.encode()) for text in sample) / 1024
    for name, convert in peers(sample).items():
        seconds = min(_wall(partial(convert, sample)) for _ in range(2))
        per_kb = seconds / sample_kb * 1e6
        print(f"peer {name}: {per_kb:,.0f} µs/KB = {per_kb / ours_per_kb:,.0f}x anchorkit")


def _wall(run: Callable[[], object]) -> float:
    # Wall time: pandoc works in a child process, whose CPU time process_time() would not see.
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
