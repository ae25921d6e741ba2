"""Benchmark: exact cl100k_base counts with nothing outside the installed package, two ways.

    python tests/benchmarks/bench_tokenizers.py
    pip install bpe-openai && python tests/benchmarks/bench_tokenizers.py   # with the other candidate

BENCH_TOKENIZERS_TICKETS long tickets (default 200, ~9,000 tokens each: tests/support/long_tickets.py)
are transformed with the default options; then, on one core:

- tiktoken with the vocabulary anchorkit ships (``anchorkit/data/cl100k_base.tiktoken.gz``: what
  ``tokens.load_cl100k_base`` loads), against ``bpe-openai`` (a tiktoken-compatible wrapper of
  GitHub's Rust BPE crate whose wheel carries the vocabularies) when it is installed;
- counts: every document and every line of every document (the texts spacing anchors count),
  compared one by one;
- speed: encoding every document once, and counting every line, best of BENCH_TOKENIZERS_ROUNDS
  (default 3) rounds, the candidates alternating;
- start-up: a fresh interpreter that imports the candidate and loads cl100k_base, best of 5, and
  the installed size of each (its files and those of the packages it brings in).

docs/anchoring.md ("Counting tokens") has the figures and the choice they led to.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from support.long_tickets import write_long_snapshot  # noqa: E402

from anchorkit.render.transform import RenderedTicket, TransformOptions, iter_documents  # noqa: E402
from anchorkit.tokens import load_cl100k_base  # noqa: E402

TICKETS = int(os.environ.get("BENCH_TOKENIZERS_TICKETS", "200"))
ROUNDS = int(os.environ.get("BENCH_TOKENIZERS_ROUNDS", "3"))
LOADERS = {
    "tiktoken + shipped vocabulary": "from anchorkit.tokens import load_cl100k_base; load_cl100k_base()",
    "bpe-openai": "import bpe_openai; bpe_openai.get_encoding('cl100k_base')",
}
# What each candidate installs: its distributions (anchorkit's own vocabulary counted apart).
DISTRIBUTIONS = {"tiktoken + shipped vocabulary": ("tiktoken", "regex"), "bpe-openai": ("bpe-openai",)}
SHIPPED = REPO / "anchorkit" / "data" / "cl100k_base.tiktoken.gz"

Encoder = Callable[[str], list[int]]


def documents(count: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bench-tokenizers-") as tmp:
        write_long_snapshot(Path(tmp), count)
        rendered = iter_documents(Path(tmp), TransformOptions())
        return [result.markdown for result in rendered if isinstance(result, RenderedTicket)]


def bpe_openai_encoder() -> Encoder | None:
    try:
        import bpe_openai
    except ImportError:
        return None
    return bpe_openai.get_encoding("cl100k_base").encode_ordinary  # type: ignore[no-any-return]


def elapsed(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def start_up_seconds(code: str) -> float:
    """A fresh interpreter that runs ``code``, best of 5 (start-up of Python itself included)."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - started)
    return min(times)


def installed_bytes(names: Sequence[str]) -> int | None:
    total = 0
    for name in names:
        try:
            files = metadata.distribution(name).files or []
        except metadata.PackageNotFoundError:
            return None
        total += sum(path.stat().st_size for path in (file.locate() for file in files) if path.is_file())
    return total


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, the children too
    texts = documents(TICKETS)
    lines = [line + "\n" for text in texts for line in text.split("\n")]
    print(f"corpus: {len(texts)} long tickets transformed, {sum(map(len, texts)):,} characters, {len(lines):,} lines")
    encoders: dict[str, Encoder] = {"tiktoken + shipped vocabulary": load_cl100k_base()._encoding.encode_ordinary}
    other = bpe_openai_encoder()
    if other is None:
        print("bpe-openai: not installed (pip install bpe-openai to compare)")
    else:
        encoders["bpe-openai"] = other

    counts = {name: [len(encode(text)) for text in texts + lines] for name, encode in encoders.items()}
    reference = counts["tiktoken + shipped vocabulary"]
    print(f"tokens: {sum(reference[: len(texts)]):,} in the documents")
    for name, values in counts.items():
        differing = sum(a != b for a, b in zip(values, reference))
        print(f"  {name}: {differing} of {len(values):,} texts (documents and lines) counted differently")

    timings: dict[str, dict[str, list[float]]] = {name: {"documents": [], "lines": []} for name in encoders}
    for _ in range(ROUNDS):
        for name, encode in encoders.items():
            timings[name]["documents"].append(elapsed(lambda encode=encode: [encode(text) for text in texts]))
            timings[name]["lines"].append(elapsed(lambda encode=encode: [encode(line) for line in lines]))
    base = {kind: min(values) for kind, values in timings["tiktoken + shipped vocabulary"].items()}
    for name, kinds in timings.items():
        documents_s, lines_s = min(kinds["documents"]), min(kinds["lines"])
        print(
            f"  {name}: documents {documents_s:.3f} s ({base['documents'] / documents_s:.2f}x tiktoken's speed), "
            f"lines {lines_s:.3f} s ({base['lines'] / lines_s:.2f}x), best of {ROUNDS}, one core"
        )

    python_alone = start_up_seconds("pass")
    print(f"start-up (fresh interpreter, best of 5; Python alone {python_alone:.3f} s):")
    for name, code in LOADERS.items():
        if name in encoders:
            size = installed_bytes(DISTRIBUTIONS[name])
            shipped = SHIPPED.stat().st_size if name.startswith("tiktoken") else 0
            print(
                f"  {name}: import + load cl100k_base {start_up_seconds(code) - python_alone:.3f} s; "
                f"installed {((size or 0) + shipped) / 1e6:.1f} MB ({', '.join(DISTRIBUTIONS[name])}"
                f"{' + the 0.8 MB vocabulary' if shipped else ''})"
            )


if __name__ == "__main__":
    main()
