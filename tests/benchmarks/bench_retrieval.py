"""Benchmark: does anchoring help a retriever find the right ticket and cite it, and at what token cost?

    python tests/benchmarks/bench_retrieval.py            # 160 tickets, ~430 questions (a few minutes)
    python tests/benchmarks/bench_retrieval.py --quick    # 60 tickets, ~160 questions
    python tests/benchmarks/bench_retrieval.py --json results.json --keep /tmp/corpus

Needs ``pip install -e '.[retrieval]'`` (``make bench`` installs it); counts with the cl100k_base vocabulary
anchorkit ships (or ``ANCHORKIT_TIKTOKEN_FILE``'s). Runs offline: the models
ship inside their packages, and the run refuses every connection that is not to this machine.

The corpus (``tests/support/retrieval_corpus.py``) is a service desk's snapshot: near-duplicate tickets
on twenty recurring topics, long ones with pasted logs, tables and 10-40 journals, short ones, Textile
and CommonMark, some English; each question names a fact found in one ticket only (a host, an error
code, a vendor case or change number; or, with no identifier at all, the topic at a site that has no
other ticket on it), a fifth of them deep in the journal history.

Layouts, all made by anchorkit's CLI in a subprocess (the same questions and retrievers for each):

- no anchors: ``--chunk-tokens 0`` documents with their anchors taken out (the title line stays);
- contract anchors only: ``--chunk-tokens 0`` (an anchor after each section and journal heading);
- today's default: ``--chunk-tokens 300``, spacing anchors carrying the subject;
- new default: spacing anchors in the short ID-only form (``--spacing-anchors short``);
- chunks: ``anchorkit chunk SNAPSHOT --chunk-tokens 300 --jsonl FILE``, used as they come.

Document layouts are cut by fixed windows of 300 cl100k tokens sharing 20% (Bedrock's default) and by
LangChain's ``RecursiveCharacterTextSplitter`` 1,000/200 characters. Retrievers: BM25 over Japanese
morphemes (fugashi + unidic-lite, bm25s), a static embedding model whose weights are in its wheel
(WordLlama l2_supercat, 256 dimensions), and their reciprocal rank fusion. Measures: recall@5 (a top-5
chunk is of the right ticket), attributable@5 (a top-5 chunk of the right ticket names it: a complete
anchor, a short anchor or the title line), MRR@10, the same attributable@5 on the deep questions only,
and the cost: chunks and cl100k tokens indexed; then recall@5 and attributable@5 by kind of question
under the fixed windows, and the noise margin of the number of questions.
"""

from __future__ import annotations

import os

# Before any Hugging Face library is imported: nothing may be fetched from a hub.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import argparse
import json
import logging
import socket
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.retrieval_corpus import DEEP_JOURNALS, Question, write_retrieval_snapshot  # noqa: E402
from support.retrieval_metrics import (  # noqa: E402
    Scores,
    fixed_windows,
    named_tickets,
    noise_margin,
    reciprocal_rank_fusion,
    score,
    short_anchor_count,
    strip_heading_anchors,
)

from anchorkit.tokens import CL100K_BASE, choose_tokenizer  # noqa: E402

ANCHORKIT = [sys.executable, "-m", "anchorkit"]
TOP_K, MRR_DEPTH, FUSION_DEPTH = 5, 10, 100
# The option that asks transform for the short ID-only spacing anchors ("short"), or for today's ones
# with the subject ("full") once the short form is the default: the name and values the anchoring work
# is building (RenderOptions.spacing_anchors); change them here if they land otherwise.
SPACING_OPTION = "--spacing-anchors"


@dataclass(frozen=True)
class Chunk:
    ticket_id: int
    text: str


@dataclass(frozen=True)
class Layout:
    """A way of writing the tickets for a knowledge base, made by anchorkit's CLI.

    ``attempts``: the command lines (after ``anchorkit``; ``{snapshot}``, ``{out}`` filled in) tried in
    order; the first that runs and whose output has the ``spacing`` form (``subject`` or ``id``; None:
    no check) is the layout. ``chunks``: the command writes chunks (JSONL), not documents.
    """

    name: str
    attempts: tuple[tuple[str, ...], ...]
    spacing: str | None = None
    strip: bool = False
    chunks: bool = False


TRANSFORM = ("transform", "{snapshot}", "--out", "{out}")
LAYOUTS = (
    Layout("no anchors", ((*TRANSFORM, "--chunk-tokens", "0"),), strip=True),
    Layout("contract anchors only", ((*TRANSFORM, "--chunk-tokens", "0"),)),
    Layout(
        "today's default (300)",
        ((*TRANSFORM, "--chunk-tokens", "300"), (*TRANSFORM, "--chunk-tokens", "300", SPACING_OPTION, "full")),
        spacing="subject",
    ),
    Layout(
        "new default (300, ID-only spacing)",
        ((*TRANSFORM, "--chunk-tokens", "300"), (*TRANSFORM, "--chunk-tokens", "300", SPACING_OPTION, "short")),
        spacing="id",
    ),
    Layout(
        "chunks (anchorkit chunk 300)",
        (("chunk", "{snapshot}", "--chunk-tokens", "300", "--jsonl", "{out}"),),
        chunks=True,
    ),
)


class LayoutUnavailable(Exception):
    """This anchorkit cannot make the layout (yet); the message says why."""


def _cli_error(stderr: str) -> str:
    """The message of a usage error as the CLI boxes it (its text lines, without the frame)."""
    lines = [line.strip("│╭╮╰╯─ ") for line in stderr.splitlines()]
    return " ".join(line for line in lines if line and not line.startswith(("Usage:", "Try ", "Error")))


def make_layout(layout: Layout, snapshot: Path, work: Path, env: dict[str, str]) -> tuple[list[Chunk], bool]:
    """The layout's units (documents, or chunks if ``layout.chunks``); True if they are chunks already."""
    reasons = []
    for number, attempt in enumerate(layout.attempts):
        out = work / f"{layout.name.split()[0]}-{number}{'.jsonl' if layout.chunks else ''}"
        command = [part.format(snapshot=snapshot, out=out) for part in attempt]
        done = subprocess.run([*ANCHORKIT, *command], capture_output=True, text=True, env=env, cwd=work)
        shown = "anchorkit " + " ".join(attempt).format(snapshot="SNAPSHOT", out="OUT")
        if done.returncode == 2:
            reasons.append(f"`{shown}`: {_cli_error(done.stderr) or 'exit 2'}")
            continue
        if done.returncode != 0:
            raise SystemExit(f"{shown} failed (exit {done.returncode}):\n{done.stderr}")
        if layout.chunks:
            return [_chunk_from_json(line) for line in out.read_text(encoding="utf-8").splitlines() if line], True
        units = [Chunk(int(path.stem), path.read_text(encoding="utf-8")) for path in sorted(out.glob("*.md"))]
        short = sum(short_anchor_count(unit.text) for unit in units)
        if layout.spacing == "subject" and short:
            reasons.append(f"`{shown}` writes {short} short ID-only anchors, not spacing anchors with the subject")
            continue
        if layout.spacing == "id" and not short:
            reasons.append(f"`{shown}` writes no short ID-only anchor")
            continue
        if layout.strip:
            units = [Chunk(unit.ticket_id, strip_heading_anchors(unit.text)) for unit in units]
            left = [unit.ticket_id for unit in units if named_tickets(unit.text) - {unit.ticket_id} or _anchors(unit)]
            if left:
                raise SystemExit(f"anchors left after stripping in #{left[0]}: the strip no longer matches transform")
        return units, False
    raise LayoutUnavailable("; ".join(reasons))


def _anchors(unit: Chunk) -> bool:
    """Whether a document still holds an anchor line (anything naming a ticket but its title)."""
    return any(named_tickets(line) for line in unit.text.split("\n")[1:] if line.startswith(">"))


def _chunk_from_json(line: str) -> Chunk:
    record = json.loads(line)
    return Chunk(int(record["ticket_id"]), record["text"])


# -- chunkers and retrievers -------------------------------------------------------------------


def load_cl100k() -> Any:
    """The cl100k_base anchorkit counts with: its shipped vocabulary (or ANCHORKIT_TIKTOKEN_FILE's), the
    one the CLI runs below use, never tiktoken's download."""
    return choose_tokenizer(CL100K_BASE)._encoding  # type: ignore[attr-defined]


def chunkers(encoding: Any) -> dict[str, Callable[[str], list[str]]]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    recursive = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    return {
        "fixed 300/20%": lambda text: fixed_windows(text, encoding, 300, 60),
        "LangChain 1000/200": recursive.split_text,
    }


class Morphemes:
    """Japanese (and English) text as the words BM25 counts: fugashi + unidic-lite, NFKC, lower case,
    without punctuation, particles and auxiliary verbs."""

    _DROPPED = frozenset({"補助記号", "空白", "助詞", "助動詞"})

    def __init__(self) -> None:
        import fugashi

        self._tagger = fugashi.Tagger()

    def __call__(self, text: str) -> list[str]:
        normal = unicodedata.normalize("NFKC", text).lower()
        return [word.surface for word in self._tagger(normal) if word.feature.pos1 not in self._DROPPED]


def bm25_rankings(corpus: list[list[str]], queries: list[list[str]]) -> list[list[int]]:
    import bm25s
    import numpy as np

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # it sets DEBUG for itself
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    rankings = []
    for query in queries:
        known = [word for word in query if word in index.vocab_dict]
        scores = index.get_scores(known) if known else np.zeros(len(corpus))
        rankings.append(_top(scores, FUSION_DEPTH))
    return rankings


def _top(scores: Any, depth: int) -> list[int]:
    import numpy as np

    depth = min(depth, len(scores))
    best = np.argpartition(-scores, depth - 1)[:depth]
    return [int(i) for i in best[np.lexsort((best, -scores[best]))]]


class Embedder:
    """WordLlama l2_supercat (256 dimensions): weights and tokenizer from inside its package, downloads off."""

    def __init__(self) -> None:
        import wordllama

        # The package holds both files; naming its folder as the cache makes the loader find the tokenizer
        # there too (it looks for it under another folder name), and disable_download makes a miss an error.
        self.model = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)

    def __call__(self, texts: Sequence[str]) -> Any:
        return self.model.embed(list(texts), norm=True)


def dense_rankings(chunk_vectors: Any, query_vectors: Any) -> list[list[int]]:
    similarities = query_vectors @ chunk_vectors.T
    return [_top(row, FUSION_DEPTH) for row in similarities]


def refuse_network() -> None:
    """Make any connection that is not to this machine fail loudly: the run proves it is offline."""
    real_getaddrinfo = socket.getaddrinfo

    def local_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost", "127.0.0.1", "::1"):
            raise OSError(f"bench_retrieval is offline: a connection to {host!r} was attempted")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.getaddrinfo = local_only


# -- the run -----------------------------------------------------------------------------------


@dataclass
class Row:
    layout: str
    chunker: str
    retriever: str
    recall: float
    attributable: float
    mrr: float
    attributable_deep: float
    chunks: int
    tokens: int
    naming: float  # share of the chunks that name their own ticket
    by_kind: dict[str, Scores]  # the scores of each kind of question


@dataclass
class Run:
    questions: int
    deep_questions: int
    tickets: int
    version: str
    kinds: dict[str, int]  # questions of each kind
    rows: list[Row] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)


class Clock:
    """Seconds spent in each stage, added up over the run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


@dataclass
class Retrievers:
    encoding: Any
    morphemes: Morphemes
    embed: Embedder
    questions: list[Question]
    clock: Clock
    query_words: list[list[str]] = field(init=False)
    query_vectors: Any = field(init=False)

    def __post_init__(self) -> None:
        with self.clock.stage("queries"):
            self.query_words = [self.morphemes(q.text) for q in self.questions]
            self.query_vectors = self.embed([q.text for q in self.questions])

    def measure(self, layout: str, chunker: str, chunks: list[Chunk]) -> list[Row]:
        """The three retrievers over one index: a row each."""
        texts = [chunk.text for chunk in chunks]
        tickets_of = [chunk.ticket_id for chunk in chunks]
        names = [named_tickets(text) for text in texts]
        tokens = sum(map(len, self.encoding.encode_ordinary_batch(texts)))
        naming = sum(ticket in named for ticket, named in zip(tickets_of, names)) / len(chunks)
        with self.clock.stage("BM25"):
            lexical = bm25_rankings([self.morphemes(text) for text in texts], self.query_words)
        with self.clock.stage("dense"):
            dense = dense_rankings(self.embed(texts), self.query_vectors)
        hybrid = [reciprocal_rank_fusion(pair)[:FUSION_DEPTH] for pair in zip(lexical, dense)]
        answers = [q.ticket_id for q in self.questions]

        every = range(len(self.questions))
        deep = [i for i in every if self.questions[i].deep]
        kinds = sorted({q.kind for q in self.questions})
        of_kind = {kind: [i for i in every if self.questions[i].kind == kind] for kind in kinds}

        def on(rankings: list[list[int]], chosen: Sequence[int]) -> Scores:
            return score(
                [rankings[i] for i in chosen], [answers[i] for i in chosen], tickets_of, names, TOP_K, MRR_DEPTH
            )

        rows = []
        for retriever, rankings in (("BM25", lexical), ("WordLlama", dense), ("hybrid (RRF)", hybrid)):
            overall = on(rankings, every)
            rows.append(
                Row(
                    layout=layout,
                    chunker=chunker,
                    retriever=retriever,
                    recall=overall.recall,
                    attributable=overall.attributable,
                    mrr=overall.mrr,
                    attributable_deep=on(rankings, deep).attributable,
                    chunks=len(chunks),
                    tokens=tokens,
                    naming=naming,
                    by_kind={kind: on(rankings, chosen) for kind, chosen in of_kind.items()},
                )
            )
        return rows


def _indexes(units: list[Chunk], ready: bool, cut: dict[str, Callable[[str], list[str]]]) -> dict[str, list[Chunk]]:
    if ready:
        return {"as it comes": units}
    return {name: [Chunk(u.ticket_id, piece) for u in units for piece in split(u.text)] for name, split in cut.items()}


def run(tickets: int, seed: int, keep: Path | None) -> Run:
    refuse_network()
    started = time.perf_counter()
    clock = Clock()
    with clock.stage("load models"):
        encoding = load_cl100k()
        cut = chunkers(encoding)
        morphemes, embed = Morphemes(), Embedder()
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as scratch:
        work = keep or Path(scratch)
        snapshot = work / "snapshot"
        corpus = write_retrieval_snapshot(snapshot, tickets, seed)
        questions = corpus.questions
        env = {**os.environ, "ANCHORKIT_TOKENIZER": CL100K_BASE}
        version = subprocess.run([*ANCHORKIT, "--version"], capture_output=True, text=True, env=env, check=True)
        result = Run(
            questions=len(questions),
            deep_questions=sum(q.deep for q in questions),
            tickets=len(corpus.ticket_ids) - len(corpus.private_ticket_ids),
            version=version.stdout.strip(),
            kinds=dict(sorted(Counter(q.kind for q in questions).items())),
        )
        retrievers = Retrievers(encoding, morphemes, embed, questions, clock)
        for layout in LAYOUTS:
            try:
                with clock.stage("anchorkit"):
                    units, ready = make_layout(layout, snapshot, work, env)
            except LayoutUnavailable as why:
                result.skipped[layout.name] = str(why)
                continue
            with clock.stage("chunking"):
                indexes = _indexes(units, ready, cut)
            for chunker, chunks in indexes.items():
                result.rows += retrievers.measure(layout.name, chunker, chunks)
    result.seconds = {**clock.seconds, "total": time.perf_counter() - started}
    indexed = {(row.layout, row.chunker): row for row in result.rows}.values()
    result.models["chunks embedded"] = sum(row.chunks for row in indexed)
    result.models["tokens embedded"] = sum(row.tokens for row in indexed)
    result.models.update(_install_sizes())
    return result


def _install_sizes() -> dict[str, str]:
    """Disk size of each retrieval package as installed (its folder in site-packages)."""
    import importlib

    sizes = {}
    for module in ("wordllama", "fugashi", "unidic_lite", "bm25s", "tokenizers"):
        folder = Path(importlib.import_module(module).__file__ or "").parent
        total = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
        sizes[f"{module} installed"] = f"{total / 1e6:.1f} MB"
    return sizes


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%"


def table(result: Run) -> str:
    head = ("layout", "chunker", "retriever", "recall@5", "attributable@5", "MRR@10", "attributable@5, deep",
            "chunks", "tokens indexed", "chunks naming their ticket")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result.rows:
        cells = (row.layout, row.chunker, row.retriever, _percent(row.recall), _percent(row.attributable),
                 f"{row.mrr:.3f}", _percent(row.attributable_deep), f"{row.chunks:,}", f"{row.tokens:,}",
                 _percent(row.naming))  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def kind_table(result: Run, chunker: str = "fixed 300/20%") -> str:
    """recall@5 and attributable@5 of each kind of question, under one chunker."""
    head = ["layout", "retriever", *(f"{kind} ({count})" for kind, count in result.kinds.items())]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result.rows:
        if row.chunker == chunker or row.chunker == "as it comes":
            cells = [f"{100 * s.recall:.0f} · {100 * s.attributable:.0f}" for s in row.by_kind.values()]
            lines.append("| " + " | ".join([row.layout, row.retriever, *cells]) + " |")
    return "\n".join(lines)


def margins(result: Run) -> str:
    def at(n: int) -> str:
        return ", ".join(f"±{100 * noise_margin(p, n):.1f} points at {100 * p:.0f}%" for p in (0.5, 0.8, 0.95))

    return (
        f"Noise: with N = {result.questions} questions a difference under 2·sqrt(p(1-p)/N) is noise: "
        f"{at(result.questions)}; for the {result.deep_questions} deep questions (key fact in journal "
        f"{DEEP_JOURNALS} or later): {at(result.deep_questions)}."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="60 tickets instead of 160")
    parser.add_argument("--tickets", type=int, help="how many tickets to generate (default 160, 60 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the results to this JSON file")
    parser.add_argument("--keep", type=Path, help="write the snapshot and the layouts here (kept)")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)  # first, so that the libraries' own basicConfig calls do nothing
    tickets = options.tickets or (60 if options.quick else 160)
    if options.keep:
        options.keep.mkdir(parents=True, exist_ok=True)
    result = run(tickets, options.seed, options.keep)
    print(f"## Retrieval: {result.tickets} tickets, {result.questions} questions ({result.deep_questions} deep)")
    print(f"\nseed {options.seed}; {result.version}\n")
    print(table(result))
    print("\nBy kind of question (number of questions), recall@5 · attributable@5 in %, fixed 300/20% windows:\n")
    print(kind_table(result))
    print()
    print(margins(result))
    for name, why in result.skipped.items():
        print(f"- skipped {name}: {why}")
    print("- seconds: " + ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in result.seconds.items()))
    print(
        "- models: "
        + ", ".join(
            f"{key} {value:,}" if isinstance(value, int) else f"{key} {value}" for key, value in result.models.items()
        )
    )
    if options.json:
        options.json.write_text(json.dumps(_as_json(result), ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


def _as_json(result: Run) -> dict[str, Any]:
    return {
        "tickets": result.tickets,
        "questions": result.questions,
        "deep_questions": result.deep_questions,
        "noise_margin_at_50_percent": noise_margin(0.5, result.questions),
        "question_kinds": result.kinds,
        "rows": [asdict(row) for row in result.rows],
        "skipped": result.skipped,
        "seconds": result.seconds,
        "models": result.models,
    }


if __name__ == "__main__":
    sys.exit(main())
