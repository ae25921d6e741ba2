"""Benchmark: does every chunk name its ticket, on long tickets, under the chunkers people use?

    python tests/benchmarks/bench_coverage.py      # BENCH_COVERAGE_TICKETS (default 200), seed BENCH_COVERAGE_SEED,
                                                   # BENCH_COVERAGE_PLACEMENT=approx: anchors placed counting
                                                   # approx tokens (--tokenizer approx)
                                                   # BENCH_COVERAGE_STRESS=0: no lines longer than a chunk

Generates a snapshot of long tickets (``tests/support/long_tickets.py``: pasted logs, tables, long
lists and paragraphs, many custom fields, 30+ journals, long subjects, Textile and CommonMark),
renders it with ``--chunk-tokens 0`` (structural anchors only), 300 (the default) and 512, and cuts
every document with:

- anchorkit's own Bedrock-like chunkers re-implemented here on cl100k tokens: fixed windows of N
  tokens sharing 20%, hierarchical children of N tokens (parents of max(1,500, 3N), 60 shared),
  heading sections cut into N-token windows;
- LangChain: ``RecursiveCharacterTextSplitter`` 1,000/200 characters and ``MarkdownHeaderTextSplitter``
  (#, ##, ###; headings leave the text) then the same recursive splitter (sizes x N/300 at N = 512);
- third-party splitters as a user would configure them at N tokens (overlap N/5 where they take one):
  LlamaIndex ``SentenceSplitter`` and ``TokenTextSplitter``, chonkie ``TokenChunker`` and
  ``RecursiveChunker``, semantic-text-splitter ``MarkdownSplitter`` and ``TextSplitter``; each on
  cl100k tokens given to it (no model or vocabulary download; missing packages are listed as skipped:
  ``pip install -e '.[coverage]'``).

The judge is independent of ``anchorkit stats``: a chunk identifies its ticket only if one of its
lines is a complete anchor line or the title line of that ticket, as the document has it (leading and
trailing spaces aside: splitters trim lines or add hard breaks).
It prints coverage per chunker and chunk length against the targets (>= 99% for anchorkit's
chunkers and LangChain, >= 98% for the others), examples of blind chunks when a target is missed,
and the anchors' token overhead against the lower bound (from ``anchorkit stats``; target <= 1.25x).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.long_tickets import write_long_snapshot  # noqa: E402

from anchorkit import audit as stats  # noqa: E402
from anchorkit import tokens  # noqa: E402
from anchorkit.render.document import RenderOptions  # noqa: E402
from anchorkit.render.transform import RenderedTicket, TransformOptions, iter_documents  # noqa: E402

TICKETS = int(os.environ.get("BENCH_COVERAGE_TICKETS", "200"))
# How transform counts tokens when it places anchors: cl100k_base (the default), or approx to see
# the placement --tokenizer approx makes (the approximation's margin).
PLACEMENT_TOKENIZER = os.environ.get("BENCH_COVERAGE_PLACEMENT", tokens.CL100K_BASE)
# 0: leave out the shapes no placement may cut (one line longer than a chunk: minified JSON, base64).
STRESS = os.environ.get("BENCH_COVERAGE_STRESS", "1") != "0"
SEED = int(os.environ.get("BENCH_COVERAGE_SEED", "0"))
CHUNK_LENGTHS = (300, 512)
REFERENCE = 0  # structural anchors only, for comparison
OWN_TARGET, OTHER_TARGET, BOUND_TARGET = 99.0, 98.0, 1.25
EXAMPLES = 3

Splitter = Callable[[str], list[str]]


@dataclass
class Document:
    ticket_id: int
    markdown: str
    genuine: frozenset[str]  # the complete anchor and title lines naming this ticket


def genuine_lines(markdown: str, ticket_id: int) -> frozenset[str]:
    # A line of the anchor or title shape for this id: forged ones in ticket text are escaped (\#), so
    # every such line in a document is one anchorkit wrote.
    shape = re.compile(rf"[>#] [^#\\\n]{{1,40}}? #{ticket_id}:(?: .*)?")
    return frozenset(line.strip() for line in markdown.split("\n") if shape.fullmatch(line))


def identifies(chunk: str, document: Document) -> bool:
    # Splitters may trim a line or add a hard-break "  " to it (MarkdownHeaderTextSplitter): the line is still whole.
    return any(line.strip() in document.genuine for line in chunk.split("\n"))


def render(snapshot: Path, chunk_tokens: int, tokenizer: str) -> list[Document]:
    options = TransformOptions(render=RenderOptions(chunk_tokens=chunk_tokens), tokenizer=tokenizer)
    rendered = [result for result in iter_documents(snapshot, options) if isinstance(result, RenderedTicket)]
    return [
        Document(result.ticket_id, result.markdown, genuine_lines(result.markdown, result.ticket_id))
        for result in rendered
    ]


# ---------------------------------------------------------------------------------------------
# The chunkers


def token_windows(
    encoding, size: int, overlap: int, sections: Callable[[str], list[str]] = lambda text: [text]
) -> Splitter:  # type: ignore[no-untyped-def]
    """Windows of ``size`` cl100k tokens sharing ``overlap``, within each section; decoded to text."""

    def split(text: str) -> list[str]:
        chunks = []
        for section in sections(text):
            ids = encoding.encode_ordinary(section)
            step = size - overlap
            for start in range(0, max(len(ids) - overlap, 1), step):
                chunks.append(encoding.decode_bytes(ids[start : start + size]).decode("utf-8", "ignore"))
        return chunks

    return split


def hierarchical_children(encoding, child: int) -> Splitter:  # type: ignore[no-untyped-def]
    parent, overlap = max(1500, 3 * child), 60

    def split(text: str) -> list[str]:
        ids = encoding.encode_ordinary(text)
        chunks = []
        for parent_start in range(0, max(len(ids) - overlap, 1), parent - overlap):
            parent_ids = ids[parent_start : parent_start + parent]
            for start in range(0, max(len(parent_ids) - overlap, 1), child - overlap):
                chunks.append(encoding.decode_bytes(parent_ids[start : start + child]).decode("utf-8", "ignore"))
        return chunks

    return split


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def heading_sections(text: str) -> list[str]:
    """The text cut before every ATX heading line outside fenced code (the judge's own simple scan)."""
    sections: list[list[str]] = [[]]
    fence: str | None = None
    for line in text.split("\n"):
        marker = _FENCE.match(line)
        if fence is None and marker:
            fence = marker[1][0] * len(marker[1])
        elif fence is not None and marker and marker[1].startswith(fence):
            fence = None
        elif fence is None and re.match(r"#{1,6} ", line) and sections[-1]:
            sections.append([])
        sections[-1].append(line)
    return ["\n".join(section) + "\n" for section in sections]


def splitters(encoding, size: int) -> tuple[dict[str, Splitter], dict[str, Splitter], list[str]]:  # type: ignore[no-untyped-def]
    """(anchorkit's and LangChain's, third-party, skipped with the reason) for chunks of ``size`` tokens."""
    own: dict[str, Splitter] = {
        f"fixed {size}/20%": token_windows(encoding, size, size // 5),
        f"hierarchical child {size}": hierarchical_children(encoding, size),
        f"heading, sections cut at {size}": token_windows(encoding, size, 0, heading_sections),
    }
    others: dict[str, Splitter] = {}
    skipped: list[str] = []
    count = lambda text: len(encoding.encode_ordinary(text))  # noqa: E731
    characters, character_overlap = 1000 * size // 300, 200 * size // 300
    try:
        from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

        recursive = RecursiveCharacterTextSplitter(chunk_size=characters, chunk_overlap=character_overlap)
        headers = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3")])
        own[f"LangChain recursive {characters}/{character_overlap} chars"] = recursive.split_text
        own[f"LangChain markdown headers -> {characters}/{character_overlap}"] = lambda text: [
            chunk for section in headers.split_text(text) for chunk in recursive.split_text(section.page_content)
        ]
    except ImportError:
        skipped.append("LangChain (pip install langchain-text-splitters)")
    try:
        from llama_index.core.node_parser import SentenceSplitter, TokenTextSplitter

        sentence = SentenceSplitter(chunk_size=size, chunk_overlap=size // 5, tokenizer=encoding.encode_ordinary)
        token = TokenTextSplitter(chunk_size=size, chunk_overlap=size // 5, tokenizer=encoding.encode_ordinary)
        others[f"LlamaIndex SentenceSplitter {size}/{size // 5}"] = sentence.split_text
        others[f"LlamaIndex TokenTextSplitter {size}/{size // 5}"] = token.split_text
    except ImportError:
        skipped.append("LlamaIndex (pip install llama-index-core)")
    try:
        from chonkie import RecursiveChunker, TokenChunker

        token_chunker = TokenChunker(tokenizer=encoding, chunk_size=size, chunk_overlap=size // 5)
        recursive_chunker = RecursiveChunker(tokenizer=encoding, chunk_size=size)
        others[f"chonkie TokenChunker {size}/{size // 5}"] = lambda text: [
            chunk.text for chunk in token_chunker.chunk(text)
        ]
        others[f"chonkie RecursiveChunker {size}"] = lambda text: [
            chunk.text for chunk in recursive_chunker.chunk(text)
        ]
    except ImportError:
        skipped.append("chonkie (pip install chonkie)")
    try:
        from semantic_text_splitter import MarkdownSplitter, TextSplitter

        markdown = MarkdownSplitter.from_callback(count, size)
        plain = TextSplitter.from_callback(count, size)
        others[f"semantic-text-splitter Markdown {size}"] = markdown.chunks
        others[f"semantic-text-splitter Text {size}"] = plain.chunks
    except ImportError:
        skipped.append("semantic-text-splitter (pip install semantic-text-splitter)")
    return own, others, skipped


# ---------------------------------------------------------------------------------------------
# Measuring


@dataclass
class Coverage:
    chunks: int = 0
    identified: int = 0
    seconds: float = 0.0
    blind: list[tuple[int, str]] | None = None

    @property
    def percent(self) -> float:
        return self.identified * 100 / self.chunks if self.chunks else 0.0


def measure(documents: list[Document], split: Splitter) -> Coverage:
    coverage = Coverage(blind=[])
    started = time.perf_counter()
    for document in documents:
        for chunk in split(document.markdown):
            if not chunk.strip():
                continue
            coverage.chunks += 1
            if identifies(chunk, document):
                coverage.identified += 1
            elif len(coverage.blind) < EXAMPLES:  # type: ignore[arg-type]
                coverage.blind.append((document.ticket_id, chunk))  # type: ignore[union-attr]
    coverage.seconds = time.perf_counter() - started
    return coverage


def efficiency(documents: list[Document], tokenizer: tokens.Tokenizer, chunk_tokens: int) -> dict:
    """anchorkit stats' figures for the documents: overhead beside the lower bound."""
    items = [stats.SourceDocument(d.ticket_id, f"{d.ticket_id}.md", d.markdown, None) for d in documents]
    report = stats.audit(
        items, tokenizer, [], {"path": "bench", "kind": "output"}, jobs=1, lengths=stats.Lengths(chunk_tokens, ())
    )
    return report["efficiency"]


def main() -> None:
    cl100k = tokens.load_cl100k_base()
    encoding = cl100k._encoding  # the same cl100k the audit counts with
    missed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-coverage-") as tmp:
        snapshot = Path(tmp)
        write_long_snapshot(snapshot, TICKETS, SEED, stress=STRESS)
        structural = render(snapshot, REFERENCE, PLACEMENT_TOKENIZER)
        structural_tokens = sum(len(encoding.encode_ordinary(d.markdown)) for d in structural)
        print(
            f"corpus: {len(structural)} long tickets (seed {SEED}), {structural_tokens:,} cl100k tokens with "
            "--chunk-tokens 0 "
            f"= {structural_tokens // max(len(structural), 1):,} per ticket; anchors placed counting "
            f"{PLACEMENT_TOKENIZER} tokens; "
            f"{'with' if STRESS else 'without'} lines longer than a chunk"
        )
        for size in CHUNK_LENGTHS:
            documents = render(snapshot, size, PLACEMENT_TOKENIZER)
            own, others, skipped = splitters(encoding, size)
            anchored_tokens = sum(len(encoding.encode_ordinary(d.markdown)) for d in documents)
            print(f"\n== chunk length {size} tokens (coverage: --chunk-tokens {size} | --chunk-tokens 0)")
            for group, target in ((own, OWN_TARGET), (others, OTHER_TARGET)):
                for name, split in group.items():
                    placed = measure(documents, split)
                    # The structural-only comparison for anchorkit's and LangChain's (the slow third-party ones once).
                    plain = f"{measure(structural, split).percent:6.2f}%" if group is own else "     -"
                    verdict = "met" if placed.percent >= target else "MISSED"
                    print(
                        f"  {name:<48} {placed.chunks:>7,} chunks  {placed.percent:6.2f}% | {plain}"
                        f"  (target >= {target:.0f}%: {verdict}; {placed.seconds:.1f} s)"
                    )
                    if placed.percent < target:
                        missed.append(f"{name} at {size}: {placed.percent:.2f}%")
                        for ticket_id, chunk in placed.blind or []:
                            print(
                                f"      blind chunk of #{ticket_id} ({len(encoding.encode_ordinary(chunk))} tokens): "
                                f"{chunk[:160]!r} ... {chunk[-80:]!r}"
                            )
            for reason in skipped:
                print(f"  skipped: {reason}")
            figures = efficiency(documents, cl100k, size)
            ratio = figures["ratio_to_bound"]
            verdict = "met" if ratio is not None and ratio <= BOUND_TARGET else "MISSED"
            print(
                f"  overhead: {figures['anchor_tokens']:,} anchor tokens in {figures['anchors']:,} anchors "
                f"({figures['overhead_percent']}%), "
                f"lower bound {figures['bound_tokens']:,} ({figures['bound_overhead_percent']}%) = {ratio}x the bound "
                f"(target <= {BOUND_TARGET}x: {verdict}); per ticket p50 {figures['per_ticket_ratio']['p50']}x, max "
                f"{figures['per_ticket_ratio']['max']}x"
            )
            print(
                f"  tokens against --chunk-tokens 0 (anchors, extra fences and table headers): {anchored_tokens:,} vs "
                f"{structural_tokens:,} "
                f"= +{(anchored_tokens - structural_tokens) * 100 / structural_tokens:.2f}%"
            )
            if verdict == "MISSED":
                missed.append(f"overhead at {size}: {ratio}x the bound")
    print("\nall targets met" if not missed else "\ntargets missed: " + "; ".join(missed))


if __name__ == "__main__":
    main()
