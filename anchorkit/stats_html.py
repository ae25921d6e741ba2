"""The audit report as one self-contained HTML page (inline CSS and SVG; no script, font or image).

Built from the JSON report only, so the page shows exactly the figures ``--json`` prints.
Every piece of text from the corpus (paths, messages) is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 70em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #555; font-size: 0.9em; }
svg text { font-size: 11px; fill: #222; }
.anchored { fill: #2b7bb9; } .stripped { fill: #c9c9c9; } .bar { fill: #2b7bb9; }
"""


def format_percent(value: float | None) -> str:
    """How a percentage appears on the page (and how tests find it): ``96.69%``, or ``-``."""
    return "-" if value is None else f"{value:.2f}%"


def render_html(report: dict[str, Any]) -> str:
    overhead = report["overhead"]
    tokenizer = report["tokenizer"]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>anchorkit stats</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>anchorkit stats: anchor overhead and chunk coverage</h1>",
        _paragraph(
            f"Source: {report['source']['path']} ({report['source']['kind']}), {report['source']['documents']} documents. "
            f"Tokenizer: {tokenizer['name']}" + ("" if tokenizer["exact"] else " (approximation)") + "."
        ),
    ]
    if tokenizer["fallback_reason"]:
        parts.append(_paragraph(f"cl100k_base was not available: {tokenizer['fallback_reason']}", "note"))
    parts += [
        "<h2>Token overhead of the anchors</h2>",
        _table(
            ["tokens with anchors", "tokens without anchors", "anchor tokens", "overhead", "p50", "p90", "max"],
            [
                [
                    _num(overhead["tokens_with_anchors"]),
                    _num(overhead["tokens_without_anchors"]),
                    _num(overhead["anchor_tokens"]),
                    _num(format_percent(overhead["percent"])),
                    *(_num(format_percent(overhead["per_ticket_percent"][key])) for key in ("p50", "p90", "max")),
                ]
            ],
            "overhead",
        ),
        _histogram_svg(overhead["histogram"]),
        "<h2>Tickets with the largest overhead</h2>",
        _table(
            ["ticket", "document", "tokens with anchors", "tokens without anchors", "overhead"],
            [
                [_cell(f"#{t['ticket_id']}"), _cell(t["relpath"]), _num(t["tokens_with_anchors"]), _num(t["tokens_without_anchors"]), _num(format_percent(t["percent"]))]
                for t in overhead["top"]
            ],
            "top",
        ),
        "<h2>Chunk coverage: chunks that carry their own ticket ID</h2>",
        _coverage_svg(report["chunking"]),
        _table(
            [
                "chunker",
                "level",
                "chunks (anchored)",
                "coverage (anchored)",
                "coverage (without anchors)",
                "mentioning another ticket (anchored)",
                "longest unidentified run, tokens (anchored)",
                "longest unidentified run, tokens (without anchors)",
            ],
            [
                [
                    _cell(row["chunker"]),
                    _cell(row["level"]),
                    _num(row["anchored"]["chunks"]),
                    _num(format_percent(row["anchored"]["coverage_percent"])),
                    _num(format_percent(row["stripped"]["coverage_percent"])),
                    _num(format_percent(row["anchored"]["mentioning_other_percent"])),
                    _num(row["anchored"]["longest_unidentified_run_tokens"]),
                    _num(row["stripped"]["longest_unidentified_run_tokens"]),
                ]
                for row in report["chunking"]
            ],
            "coverage",
        ),
    ]
    notes = dict.fromkeys((row["spec"], row["note"]) for row in report["chunking"] if row["note"])
    parts += [_paragraph(f"{spec}: {note}", "note") for spec, note in notes]
    parts += [
        "<h2>Limits and anchor hygiene</h2>",
        _table(["check", "documents"], [[_cell(name.replace("_", " ")), _num(finding["count"])] for name, finding in report["limits"].items()], "limits"),
    ]
    if report["errors"]:
        parts += ["<h2>Errors</h2>", "<ul>", *(f"<li>{escape(error['message'])}</li>" for error in report["errors"]), "</ul>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _paragraph(text: str, css_class: str = "") -> str:
    return f'<p class="{css_class}">{escape(text)}</p>' if css_class else f"<p>{escape(text)}</p>"


def _cell(value: Any) -> str:
    return f"<td>{escape(str(value))}</td>"


def _num(value: Any) -> str:
    return f'<td class="num">{escape(str(value))}</td>'


def _table(headers: list[str], rows: list[list[str]], table_id: str) -> str:
    head = "".join(f"<th>{escape(header)}</th>" for header in headers)
    body = "".join(f"<tr>{''.join(row)}</tr>" for row in rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _histogram_svg(histogram: dict[str, Any]) -> str:
    bins = histogram["bins"]
    width, height, bar = 40 + 26 * len(bins), 180, 22
    top = max((b["count"] for b in bins), default=0) or 1
    shapes = []
    for index, b in enumerate(bins):
        x = 30 + index * 26
        h = round(120 * b["count"] / top)
        label = f"{b['from']}+" if b["to"] is None else f"{b['from']}"
        shapes.append(f'<rect class="bar" x="{x}" y="{140 - h}" width="{bar}" height="{h}"><title>{escape(_bin_title(b))}</title></rect>')
        shapes.append(f'<text x="{x + bar / 2}" y="{135 - h}" text-anchor="middle">{b["count"] or ""}</text>')
        shapes.append(f'<text x="{x + bar / 2}" y="155" text-anchor="middle">{escape(label)}</text>')
    caption = f"Tickets per overhead bin ({histogram['bin_width_percent']}% wide; label = bin start, %)"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{escape(caption)}">'
        f'{"".join(shapes)}<text x="30" y="175">{escape(caption)}</text></svg>'
    )


def _bin_title(b: dict[str, Any]) -> str:
    upper = "" if b["to"] is None else f"{b['to']}"
    return f"{b['from']}%–{upper}%: {b['count']} tickets" if upper else f">= {b['from']}%: {b['count']} tickets"


def _coverage_svg(rows: list[dict[str, Any]]) -> str:
    label_width, scale, row_height = 230, 4, 34
    height = 30 + row_height * len(rows)
    shapes = [
        '<rect class="anchored" x="10" y="5" width="12" height="12"/><text x="26" y="15">anchored</text>',
        '<rect class="stripped" x="100" y="5" width="12" height="12"/><text x="116" y="15">without anchors</text>',
    ]
    for index, row in enumerate(rows):
        y = 28 + index * row_height
        shapes.append(f'<text x="10" y="{y + 14}">{escape(row["chunker"] + " / " + row["level"])}</text>')
        for offset, side in ((0, "anchored"), (14, "stripped")):
            value = row[side]["coverage_percent"] or 0
            shapes.append(
                f'<rect class="{side}" x="{label_width}" y="{y + offset}" width="{value * scale:.1f}" height="12">'
                f"<title>{escape(format_percent(row[side]['coverage_percent']))}</title></rect>"
                f'<text x="{label_width + value * scale + 4:.1f}" y="{y + offset + 10}">{escape(format_percent(row[side]["coverage_percent"]))}</text>'
            )
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_width + 100 * scale + 70}" height="{height}" role="img" aria-label="coverage per chunker">{"".join(shapes)}</svg>'
