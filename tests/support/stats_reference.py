"""Fixed audit inputs and the reports the audit made of them: speed-ups of ``anchorkit stats`` must
not change a figure.

``tests/data/stats_reference.json.gz`` holds documents as ``iter_snapshot`` yields them (with sidecars
and the renditions of the chunk-length table) for the fixtures and for long tickets, and the report
of each under every chunker, with cl100k_base and with approx. The inputs are data, not regenerated
from transform (whose documents change with the anchor format); the reports are regenerated only
when a change to the report is meant:

    python tests/support/stats_reference.py            # rewrite the reports from the stored inputs
    python tests/support/stats_reference.py --inputs   # also render the inputs again
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from anchorkit import audit as stats  # noqa: E402
from anchorkit import tokens  # noqa: E402
from anchorkit.audit import chunkers as chunking  # noqa: E402
from anchorkit.render.transform import TransformOptions  # noqa: E402
from support.long_tickets import write_long_snapshot  # noqa: E402

REFERENCE = REPO / "tests" / "data" / "stats_reference.json.gz"
CORPORA = ("fixtures", "long")
OTHER_LENGTHS = (256, 512, 1024)  # the chunk-length table's rows besides the default 300


def render_inputs() -> dict[str, list[dict[str, Any]]]:
    """The fixtures and 8 long tickets, transformed as ``stats SNAPSHOT`` does (cl100k_base)."""
    with tempfile.TemporaryDirectory(prefix="stats-reference-") as tmp:
        long = Path(tmp)
        write_long_snapshot(long, 8, seed=3)
        snapshots = {"fixtures": REPO / "fixtures", "long": long}
        return {
            corpus: [
                {
                    "ticket_id": item.ticket_id,
                    "relpath": item.relpath,
                    "markdown": item.markdown,
                    "sidecar": item.sidecar.decode("utf-8") if item.sidecar is not None else None,
                    "renditions": [list(rendition) for rendition in item.renditions],
                }
                for item in stats.iter_snapshot(snapshot, TransformOptions(sidecars=True), OTHER_LENGTHS)
                if isinstance(item, stats.SourceDocument)
            ]
            for corpus, snapshot in snapshots.items()
        }


def documents(raw: list[dict[str, Any]]) -> list[stats.SourceDocument]:
    return [
        stats.SourceDocument(
            item["ticket_id"],
            item["relpath"],
            item["markdown"],
            item["sidecar"].encode("utf-8") if item["sidecar"] is not None else None,
            tuple((length, text) for length, text in item["renditions"]),
        )
        for item in raw
    ]


def report(corpus: str, raw: list[dict[str, Any]], tokenizer: str) -> dict[str, Any]:
    """The audit of the stored documents, under every chunker (LangChain's included)."""
    chunkers = [chunking.CHUNKERS[name]() for name in chunking.CHUNKERS]
    source = {"path": corpus, "kind": "snapshot", "transform": None}
    return stats.audit(documents(raw), tokens.choose_tokenizer(tokenizer), chunkers, source, jobs=1)


def load() -> dict[str, Any]:
    return json.loads(gzip.decompress(REFERENCE.read_bytes()))


def main() -> None:
    inputs = render_inputs() if "--inputs" in sys.argv else load()["inputs"]
    reports = {
        f"{corpus}/{tokenizer}": report(corpus, inputs[corpus], tokenizer)
        for corpus in CORPORA
        for tokenizer in tokens.TOKENIZER_CHOICES
    }
    data = json.dumps({"inputs": inputs, "reports": reports}, ensure_ascii=False, sort_keys=True)
    REFERENCE.write_bytes(gzip.compress(data.encode("utf-8"), 9, mtime=0))
    print(f"{REFERENCE}: {len(reports)} reports, {REFERENCE.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
