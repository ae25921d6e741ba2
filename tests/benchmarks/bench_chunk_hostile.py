"""Benchmark: anchorkit's own chunks on hostile tickets (tests/support/hostile_tickets.py), judged by what a
consumer reads (tests/support/chunk_judge.py): the five promises of ``anchorkit chunk``.

    python tests/benchmarks/bench_chunk_hostile.py
    # HOSTILE_TICKETS (default 600), HOSTILE_SEED (0), HOSTILE_LENGTHS ("64,300,512"),
    # HOSTILE_OVERLAPS ("0,16,150,256": those under half of N), HOSTILE_LANGS ("ja,en"),
    # HOSTILE_MODES ("snapshot,folder,lambda")

Three ways in, each judged alike:

- ``snapshot``: ``chunk_source`` on the snapshot (what ``anchorkit chunk SNAPSHOT --jsonl`` runs), with every
  overlap;
- ``folder``: ``anchorkit transform --sidecars --chunk-tokens N`` first, then ``chunk_source`` on its folder
  (the documents' anchors stripped again: another code path); its chunks are also compared with the
  snapshot's (they should be the same bytes);
- ``lambda``: the Bedrock Lambda's chunk mode (``runner.run`` on an in-memory store), each document whole with
  its sidecar's attributes as file metadata, no overlap (the Lambda has none).

Prints, for each way, language, N and overlap: tickets, chunks, failures, and for each promise the chunks (or
tickets, for ``count``) that break it, with the first few examples.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.bedrock import MemoryStore  # noqa: E402
from support.chunk_judge import PROMISES, Ticket, judge, sections_of  # noqa: E402
from support.hostile_tickets import REDMINE_URL, write_hostile_snapshot  # noqa: E402

from anchorkit.anchors import ANCHOR_PATTERN, strip_anchors  # noqa: E402
from anchorkit.bedrock.runner import Settings, run  # noqa: E402
from anchorkit.chunk.pipeline import ChunkOptions, chunk_source  # noqa: E402
from anchorkit.chunk.sources import TicketDocument, iter_source  # noqa: E402
from anchorkit.render.document import RenderOptions, history_journals  # noqa: E402
from anchorkit.render.transform import (  # noqa: E402
    RenderedTicket,
    TransformOptions,
    iter_documents,
    resolve_render_options,
    transform_snapshot,
)
from anchorkit.source.snapshot import load_lookups  # noqa: E402
from anchorkit.tokens import load_cl100k_base  # noqa: E402

TICKETS = int(os.environ.get("HOSTILE_TICKETS", "600"))
SEED = int(os.environ.get("HOSTILE_SEED", "0"))
LENGTHS = [int(n) for n in os.environ.get("HOSTILE_LENGTHS", "64,300,512").split(",")]
OVERLAPS = [int(n) for n in os.environ.get("HOSTILE_OVERLAPS", "0,16,150,256").split(",")]
LANGS = os.environ.get("HOSTILE_LANGS", "ja,en").split(",")
MODES = os.environ.get("HOSTILE_MODES", "snapshot,folder,lambda").split(",")
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "3"))


def tickets_of(snapshot: Path, lang: str) -> dict[int, Ticket]:
    """What the judge knows of each ticket: its transform document (no spacing anchors, subjects whole in
    the anchors) without anchors, title and anchor lines, and where its sections and journals are."""
    options = TransformOptions(render=RenderOptions(chunk_tokens=0, anchor_subject_chars=0, lang=lang))
    documents = {r.ticket_id: r.markdown for r in iter_documents(snapshot, options) if isinstance(r, RenderedTicket)}
    render_options = resolve_render_options(snapshot, options)
    redmine_url = json.loads((snapshot / "state.json").read_text(encoding="utf-8")).get("redmine_url", REDMINE_URL)
    lookups = load_lookups(snapshot)
    known = {}
    for item in iter_source(snapshot, TransformOptions(render=RenderOptions(lang=lang))):
        if not isinstance(item, TicketDocument):
            continue
        markdown = documents[item.ticket_id]
        content = strip_anchors(markdown)
        outline = item.document
        assert not isinstance(outline, str) and outline.content == content, item.ticket_id
        issue = json.loads((snapshot / "issues" / f"{item.ticket_id}.json").read_text(encoding="utf-8"))["issue"]
        journals = history_journals(issue, lookups, render_options)
        notes = [j["note_number"] for j in journals] if journals else None
        anchor = next(m[0] for m in ANCHOR_PATTERN.finditer(markdown) if int(m["id"]) == item.ticket_id)
        sections, journal_offsets = sections_of(outline.headings)
        known[item.ticket_id] = Ticket(
            item.ticket_id,
            content,
            markdown.split("\n", 1)[0],
            anchor.rstrip("\r"),
            f"{redmine_url}/issues/{item.ticket_id}",
            sections,
            journal_offsets,
            notes,
        )
    return known


def records_by_ticket(lines: bytes) -> dict[int, list[dict[str, Any]]]:
    found: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines.splitlines():
        record = json.loads(line)
        found[record["ticket_id"]].append(record)
    return found


def lambda_records(folder: Path, limit: int) -> tuple[dict[int, list[dict[str, Any]]], int]:
    """The Lambda's chunk mode over the documents of a transform folder (sidecars as file metadata)."""
    objects, files = {}, []
    for path in sorted(folder.glob("*.md")):
        ticket_id = int(path.stem)
        key = f"job/{ticket_id}/batch_1.json"
        batch = {"fileContents": [{"contentBody": path.read_text(encoding="utf-8"), "contentType": "TEXT"}]}
        objects[key] = json.dumps(batch, ensure_ascii=False).encode()
        sidecar = json.loads(path.with_name(path.name + ".metadata.json").read_text(encoding="utf-8"))
        files.append(
            {
                "originalFileLocation": {"type": "S3", "s3_location": {"uri": f"s3://kb/{ticket_id}.md"}},
                "fileMetadata": sidecar["metadataAttributes"],
                "contentBatches": [{"key": key}],
            }
        )
    store = MemoryStore(objects)
    settings = Settings.from_environment({"ANCHORKIT_CHUNK_TOKENS": str(limit), "ANCHORKIT_BEDROCK_MODE": "chunk"})
    logging.getLogger("anchorkit.bedrock").setLevel(logging.CRITICAL)
    answer = run({"version": "1.0", "bucketName": "b", "inputFiles": files}, settings, store)
    found: dict[int, list[dict[str, Any]]] = {}
    failed = 0
    for file, output in zip(files, answer["outputFiles"], strict=True):
        ticket_id = int(file["originalFileLocation"]["s3_location"]["uri"].rsplit("/", 1)[1][:-3])
        key = output["contentBatches"][0]["key"]
        if key == file["contentBatches"][0]["key"]:
            failed += 1
            continue
        items = json.loads(store.objects[key])["fileContents"]
        found[ticket_id] = [{"text": i["contentBody"], "metadata": i["contentMetadata"]} for i in items]
    return found, failed


class Tally:
    def __init__(self) -> None:
        self.tickets = self.chunks = self.failed = self.lower = 0
        self.broken: Counter[str] = Counter()
        self.tickets_broken: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)
        self.exposed = 0
        self.overlap_over = 0

    def add(self, known: dict[int, Ticket], found: dict[int, list[dict[str, Any]]], tokenizer: Any, n: int, o: int):
        for ticket_id, ticket in known.items():
            records = found.get(ticket_id)
            if records is None:
                continue
            verdict = judge(ticket, records, tokenizer, n, o)
            self.tickets += 1
            self.chunks += verdict.chunks
            self.lower += verdict.lower_bound
            self.exposed += len(verdict.exposed)
            self.overlap_over += verdict.overlap_over
            for promise, whys in verdict.broken.items():
                self.broken[promise] += len(whys)
                self.tickets_broken[promise] += 1
                if len(self.examples[promise]) < EXAMPLES:
                    self.examples[promise].append(f"#{ticket_id} {whys[0]}")
            if verdict.exposed and len(self.examples["exposed"]) < EXAMPLES:
                self.examples["exposed"].append(f"#{ticket_id} {verdict.exposed[0]}")

    def report(self, name: str) -> None:
        figures = ", ".join(f"{p} {self.broken[p]} ({self.tickets_broken[p]} tickets)" for p in PROMISES)
        ratio = self.chunks / max(self.lower, 1)
        print(
            f"{name}: {self.tickets} tickets, {self.chunks} chunks ({ratio:.3f}x the lower bound), failed "
            f"{self.failed}; broken: {figures}; exposed {self.exposed}; overlap over {self.overlap_over}",
            flush=True,
        )
        for promise, examples in self.examples.items():
            for example in examples:
                print(f"    {promise}: {example[:300]}")


def main() -> None:
    tokenizer = load_cl100k_base()
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        for lang in LANGS:
            snapshot = scratch / f"snapshot-{lang}"
            label = "チケット" if lang == "ja" else "Ticket"
            started = time.perf_counter()
            write_hostile_snapshot(snapshot, TICKETS, seed=SEED, label=label)
            size = sum(p.stat().st_size for p in (snapshot / "issues").iterdir())
            known = tickets_of(snapshot, lang)
            contents = sorted(len(t.content) for t in known.values())
            print(
                f"{lang}: {TICKETS} hostile tickets, {size / 1e6:.1f} MB of issue JSON; content chars median "
                f"{contents[len(contents) // 2]:,}, max {contents[-1]:,} ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
            for n in LENGTHS:
                snapshot_lines = None
                for overlap in [o for o in OVERLAPS if o * 2 <= n and n - o >= 48]:
                    if "snapshot" not in MODES:
                        break
                    out = scratch / f"{lang}-{n}-{overlap}.jsonl"
                    options = ChunkOptions(TransformOptions(render=RenderOptions(lang=lang)), n, overlap)
                    started = time.perf_counter()
                    chunk_report = chunk_source(snapshot, jsonl=out, options=options, jobs=0)
                    seconds = time.perf_counter() - started
                    lines = out.read_bytes()
                    if not overlap:
                        snapshot_lines = lines
                    tally = Tally()
                    tally.failed = len(chunk_report.failed)
                    for failure in chunk_report.failed[:EXAMPLES]:
                        tally.examples["failed"].append(str(failure.message)[:200])
                    tally.add(known, records_by_ticket(lines), tokenizer, n, overlap)
                    tally.report(f"  snapshot {lang} N={n} overlap={overlap} ({seconds:.1f} s)")
                if "folder" in MODES or "lambda" in MODES:
                    folder = scratch / f"docs-{lang}-{n}"
                    transform_options = TransformOptions(
                        render=RenderOptions(chunk_tokens=n, lang=lang), sidecars=True, tokenizer="cl100k_base"
                    )
                    transform_snapshot(snapshot, folder, transform_options, jobs=0)
                if "folder" in MODES:
                    out = scratch / f"folder-{lang}-{n}.jsonl"
                    chunk_report = chunk_source(folder, jsonl=out, options=ChunkOptions(chunk_tokens=n), jobs=0)
                    lines = out.read_bytes()
                    tally = Tally()
                    tally.failed = len(chunk_report.failed)
                    tally.add(known, records_by_ticket(lines), tokenizer, n, 0)
                    same = (
                        "" if snapshot_lines is None else f", same bytes as the snapshot's: {lines == snapshot_lines}"
                    )
                    tally.report(f"  folder {lang} N={n}{same}")
                    if snapshot_lines is not None and lines != snapshot_lines:
                        a, b = records_by_ticket(snapshot_lines), records_by_ticket(lines)
                        differ = [t for t in a if a[t] != b.get(t)]
                        print(f"    {len(differ)} tickets differ, e.g. {differ[:5]}")
                if "lambda" in MODES:
                    found, failed = lambda_records(folder, n)
                    tally = Tally()
                    tally.failed = failed
                    tally.add(known, found, tokenizer, n, 0)
                    tally.report(f"  lambda {lang} N={n}")


if __name__ == "__main__":
    main()
