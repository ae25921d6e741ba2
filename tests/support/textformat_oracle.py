"""The text-format fidelity oracle: Redmine renders the corpus, anchorkit converts it, both are
reduced to normalised blocks (support.html_blocks) and compared per construct.

Used by tests/test_textformat_oracle.py (real Redmine) and runnable by hand to print the report:
``.venv/bin/python tests/support/textformat_oracle.py`` (needs Debian's redmine installed).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make "support" and "anchorkit" importable
    sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2])]

from anchorkit.render.textformat import to_markdown
from support.html_blocks import Block, compare_blocks, html_blocks, markdown_blocks

CORPUS_DIR = Path(__file__).resolve().parents[1] / "data" / "textformat_corpus"
RENDER_SCRIPT = Path(__file__).resolve().parent / "redmine_render.rb"
SNIPPET_HEADER = "@@@@ "
BEGIN_MARKER = "---ANCHORKIT-ORACLE-BEGIN---"
END_MARKER = "---ANCHORKIT-ORACLE-END---"


@dataclass(frozen=True)
class Snippet:
    fmt: str
    name: str
    construct: str
    text: str

    @property
    def key(self) -> str:
        return f"{self.fmt}:{self.name}"


def load_corpus(corpus_dir: Path = CORPUS_DIR) -> list[Snippet]:
    """Snippets of ``<fmt>.txt``: each starts with ``@@@@ <name> <construct>``."""
    snippets: list[Snippet] = []
    for path in sorted(corpus_dir.glob("*.txt")):
        fmt = path.stem
        header: list[str] | None = None
        lines: list[str] = []
        for line in [*path.read_text(encoding="utf-8").split("\n"), SNIPPET_HEADER + "end end"]:
            if not line.startswith(SNIPPET_HEADER):
                lines.append(line)
                continue
            if header is not None:
                text = "\n".join(lines).rstrip("\n")
                snippets.append(Snippet(fmt, header[0], header[1], text))
            header = line[len(SNIPPET_HEADER) :].split()
            lines = []
    return snippets


def render_with_redmine(snippets: list[Snippet], rails_runner: Callable[[str], str]) -> dict[str, str]:
    """HTML for each snippet as Redmine shows it (ApplicationHelper#textilizable), one Rails boot."""
    payload = [{"id": s.key, "format": s.fmt, "text": s.text} for s in snippets]
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8", delete=False) as handle:
        json.dump(payload, handle, ensure_ascii=False)
        input_path = handle.name
    try:
        output = rails_runner(f"ARGV.replace([{json.dumps(input_path)}]); load {json.dumps(str(RENDER_SCRIPT))}")
    finally:
        Path(input_path).unlink(missing_ok=True)
    body = output.split(BEGIN_MARKER, 1)[1].split(END_MARKER, 1)[0]
    rendered: dict[str, str] = json.loads(body)
    return rendered


@dataclass
class ConstructScore:
    matched: int = 0
    total: int = 0

    @property
    def ratio(self) -> float:
        return self.matched / self.total if self.total else 1.0


@dataclass
class OracleReport:
    by_construct: dict[str, ConstructScore] = field(default_factory=lambda: defaultdict(ConstructScore))
    differences: list[tuple[Snippet, Block | None, Block | None]] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return sum(score.matched for score in self.by_construct.values())

    @property
    def total(self) -> int:
        return sum(score.total for score in self.by_construct.values())

    @property
    def ratio(self) -> float:
        return self.matched / self.total if self.total else 1.0

    def format(self) -> str:
        lines = [f"oracle agreement: {self.matched}/{self.total} blocks = {self.ratio:.1%}"]
        for construct, score in sorted(self.by_construct.items()):
            lines.append(f"  {construct:<14} {score.matched:>4}/{score.total:<4} {score.ratio:.0%}")
        for snippet, expected, actual in self.differences:
            lines.append(f"  DIFF {snippet.key}: redmine={expected} anchorkit={actual}")
        return "\n".join(lines)


def compare_corpus(
    snippets: list[Snippet], redmine_html: dict[str, str], convert: Callable[[str, str], str] = to_markdown
) -> OracleReport:
    report = OracleReport()
    for snippet in snippets:
        expected = html_blocks(redmine_html[snippet.key])
        actual = markdown_blocks(convert(snippet.text, snippet.fmt))
        comparison = compare_blocks(expected, actual)
        score = report.by_construct[f"{snippet.fmt[:2]}/{snippet.construct}"]
        score.matched += comparison.matched
        score.total += comparison.total
        report.differences += [(snippet, left, right) for left, right in comparison.differences()]
    return report


def peer_converters() -> dict[str, Callable[[str, str], str]]:
    """The alternatives the converter was chosen against (Textile only; installed by hand)."""
    import markdownify
    import pypandoc
    import textile

    return {
        "textile+markdownify": lambda text, fmt: markdownify.markdownify(textile.textile(text)),
        "pandoc": lambda text, fmt: pypandoc.convert_text(text, "gfm", format="textile"),
    }


if __name__ == "__main__":
    from support.redmine_server import rails_runner

    corpus = load_corpus()
    peer = sys.argv[2] if len(sys.argv) > 2 else None  # "textile+markdownify" or "pandoc"
    if peer:
        corpus = [snippet for snippet in corpus if snippet.fmt == "textile"]
    cache = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if cache and cache.exists():
        html_by_key = json.loads(cache.read_text(encoding="utf-8"))
    else:
        html_by_key = render_with_redmine(corpus, rails_runner)
        if cache:
            cache.write_text(json.dumps(html_by_key, ensure_ascii=False), encoding="utf-8")
    converter = peer_converters()[peer] if peer else to_markdown
    print(compare_corpus(corpus, html_by_key, converter).format())
