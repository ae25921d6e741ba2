"""The audit report as one self-contained HTML page (inline CSS and SVG; no script, font or image).

Built from the JSON report only, so the page shows exactly the figures ``--json`` prints: first the
verdict (the gates, passed or failed), the record an auditor files (when, which version, the input
folder's absolute path, how it was measured), the longest stretch without the ticket ID explained in
words, then the tables and charts. Every piece of text from the corpus (paths, messages) is escaped.
"""

from __future__ import annotations

from typing import Any

from anchorkit import pages
from anchorkit.audit import rendering
from anchorkit.audit.sources import MAX_DOCUMENT_BYTES
from anchorkit.pages import escape
from anchorkit.render.sidecar import MAX_FILE_BYTES as MAX_SIDECAR_BYTES

_CSS = """
svg .grid { stroke: #e3e3e3; } svg .axis { stroke: #888; }
.anchored { fill: #2b7bb9; } .stripped { fill: #c9c9c9; } .bar { fill: #2b7bb9; }
.overhead { fill: #e08a2c; } .bound { fill: #8a8a8a; }
.run { border-left: 4px solid #2b7bb9; padding: .3rem .8rem; background: #f2f7fb; }
"""
LIMIT_LABELS = {
    "documents_over_50mb": f"documents over {pages.format_bytes(MAX_DOCUMENT_BYTES)} (Bedrock's limit per file)",
    "sidecars_over_10kb": f"sidecars over {pages.format_bytes(MAX_SIDECAR_BYTES)} (Bedrock's limit per metadata file)",
    "sidecar_values_too_long": "sidecars with a value too long for Bedrock",
    "sidecars_invalid": "sidecars that are not a valid metadata file",
    "documents_without_anchor": "documents without any anchor",
    "anchors_in_code_blocks": "anchors inside code blocks (must be 0)",
    "duplicated_anchors": "documents with an anchor repeated back to back",
    "anchors_of_other_tickets": "documents with an anchor of another ticket",
}
"""How each limits check reads on the page, with its limit in the units people write (50 MB, 10 KB)."""


def format_percent(value: float | None) -> str:
    """How a percentage appears on the page and in the CLI (and how tests find it): ``96.69%``, or ``-``."""
    return "-" if value is None else f"{value:.2f}%"


def format_ratio(value: float | None) -> str:
    """Actual anchor tokens over the lower bound: ``1.18x``, or ``-`` when the bound is 0."""
    return "-" if value is None else f"{value:.2f}x"


def format_count(value: int | float | None) -> str:
    """Counts with the thousands separators the CLI prints: ``12,345``."""
    return "-" if value is None else f"{value:,}"


def render_html(report: dict[str, Any]) -> str:
    """The page: an audit record that stands alone (the verdict, when, what, how measured, the figures)."""
    if report["layout"] != "documents":
        return _chunk_layout_page(report)
    overhead = report["overhead"]
    parts = [
        "<h1>anchorkit stats: anchor overhead and chunk coverage</h1>",
        _verdict(report),
        *_record(report),
        *_longest_run(overhead["longest_anchorless_run"]),
        "<h2>Token overhead of the anchors</h2>",
        _table(
            ["tokens with anchors", "tokens without anchors", "anchor tokens", "overhead", "p50", "p90", "max"],
            [
                [
                    _num(format_count(overhead["tokens_with_anchors"])),
                    _num(format_count(overhead["tokens_without_anchors"])),
                    _num(format_count(overhead["anchor_tokens"])),
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
                [
                    _cell(f"#{t['ticket_id']}"),
                    _cell(t["relpath"]),
                    _num(format_count(t["tokens_with_anchors"])),
                    _num(format_count(t["tokens_without_anchors"])),
                    _num(format_percent(t["percent"])),
                ]
                for t in overhead["top"]
            ],
            "top",
        ),
        *_efficiency(report["efficiency"]),
        *_lengths(report["chunk_lengths"]),
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
                "longest run of chunks without the ID, tokens",
            ],
            [
                [
                    _cell(row["chunker"]),
                    _cell(row["level"]),
                    _num(format_count(row["anchored"]["chunks"])),
                    _num(format_percent(row["anchored"]["coverage_percent"])),
                    _num(format_percent(row["stripped"]["coverage_percent"])),
                    _num(format_percent(row["anchored"]["mentioning_other_percent"])),
                    _num(format_count(row["anchored"]["longest_unidentified_run_tokens"])),
                ]
                for row in report["chunking"]
            ],
            "coverage",
        ),
        _paragraph(
            "Longest run of chunks without the ID: the most tokens covered by consecutive chunks of one document "
            "none of which names its ticket (0: every chunk does).",
            "note",
        ),
    ]
    notes = dict.fromkeys((row["spec"], row["note"]) for row in report["chunking"] if row["note"])
    parts += [_paragraph(f"{spec}: {note}", "note") for spec, note in notes]
    parts += ["<h2>Limits and anchor hygiene</h2>", *_limits(report["limits"])]
    if report["errors"]:
        parts += [
            "<h2>Errors</h2>",
            "<ul>",
            *(f"<li>{escape(error['message'])}</li>" for error in report["errors"]),
            "</ul>",
        ]
    return pages.page("anchorkit stats", parts, _CSS)


def _chunk_layout_page(report: dict[str, Any]) -> str:
    """The page of chunks as they are: the verdict, the run, and the summary (chunk_layouts.summary_lines)."""
    from anchorkit.audit.chunk_layouts import summary_lines

    run = report.get("run") or {}
    rows = [
        ("generated", run.get("generated_at", "-")),
        ("anchorkit version", run.get("anchorkit_version", "-")),
        ("input", f"{report['source']['path']} ({report['source']['kind']}): {report['layout']}"),
        ("rendering", rendering.describe(report["rendering"])),
        ("tokenizer", report["tokenizer"]["note"]),
    ]
    parts = [
        f"<h1>anchorkit stats: {escape(report['layout'])} as they are</h1>",
        _verdict(report),
        pages.record("audit record", rows),
        *(_paragraph(line) for line in summary_lines(report)),
    ]
    if report["errors"]:
        parts += ["<h2>Errors</h2>", "<ul>", *(f"<li>{escape(e['message'])}</li>" for e in report["errors"]), "</ul>"]
    return pages.page("anchorkit stats", parts, _CSS)


def _failed(report: dict[str, Any]) -> bool:
    return bool(report["gates"]["failures"]) or bool(report["errors"])


def _verdict(report: dict[str, Any]) -> str:
    """Passed or failed, as the exit code says; without a gate, only unreadable documents fail."""
    gates = report["gates"]
    failures = [f"gate failed: {failure}" for failure in gates["failures"]]
    failures += [f"not read: {error['message']}" for error in report["errors"]]
    thresholds = _thresholds(gates)
    if _failed(report):
        return pages.verdict(False, f"FAILED (exit code 1): {'; '.join(thresholds) or 'documents not read'}", failures)
    if thresholds:
        return pages.verdict(True, f"Passed (exit code 0): {'; '.join(thresholds)}")
    return pages.verdict(None, "No gate set (exit code 0): --fail-under-coverage and --fail-over-overhead judge a run")


def _thresholds(gates: dict[str, Any]) -> list[str]:
    thresholds = [
        f"coverage >= {gates['fail_under_coverage']}%" if gates["fail_under_coverage"] is not None else "",
        f"overhead <= {gates['fail_over_overhead']}%" if gates["fail_over_overhead"] is not None else "",
    ]
    return [item for item in thresholds if item]


def _longest_run(run: dict[str, Any]) -> list[str]:
    """One figure for "how long can a chunk go without its ticket ID", in words."""
    anchored, stripped = run["anchored"], run["stripped"]

    def where(side: dict[str, Any]) -> str:
        return f" (ticket #{side['ticket_id']})" if side["ticket_id"] is not None else ""

    return [
        "<h2>Longest stretch without the ticket ID</h2>",
        '<div class="run" id="longest-run">'
        + _paragraph(
            f"{format_count(anchored['tokens'])} tokens{where(anchored)} with the anchors; "
            f"{format_count(stripped['tokens'])} tokens{where(stripped)} without them."
        )
        + _paragraph(
            "The most tokens in a row, in any one document, with no line that names its ticket (an anchor or the "
            "title line). A chunk that lies entirely inside such a stretch cannot say which ticket it is from, "
            "whatever chunker cut it: the shorter, the better.",
            "note",
        )
        + "</div>",
    ]


def _limits(limits: dict[str, Any]) -> list[str]:
    rows = [
        [_cell(LIMIT_LABELS.get(name, name.replace("_", " "))), _num(format_count(finding["count"]))]
        for name, finding in limits.items()
    ]
    listed = [
        f"<li>{escape(LIMIT_LABELS.get(name, name))}: "
        + ", ".join(escape(_limit_item(item)) for item in finding["items"])
        + (" …" if finding["count"] > len(finding["items"]) else "")
        + "</li>"
        for name, finding in limits.items()
        if finding["items"]
    ]
    return [_table(["check", "documents"], rows, "limits"), *(["<ul>", *listed, "</ul>"] if listed else [])]


def _limit_item(item: dict[str, Any]) -> str:
    size = f" ({pages.format_bytes(item['bytes'])})" if isinstance(item.get("bytes"), int) else ""
    return f"{item.get('relpath', '?')}{size}"


def _record(report: dict[str, Any]) -> list[str]:
    """What an auditor files with the figures: when, which version, what input, which options, the verdict."""
    run = report.get("run") or {}
    source, tokenizer, gates = report["source"], report["tokenizer"], report["gates"]
    rows = [
        ("generated", run.get("generated_at", "-")),
        ("anchorkit version", run.get("anchorkit_version", "-")),
        ("input", f"{source['path']} ({source['kind']}), {pages.plural(source['documents'], 'document')}"),
        ("rendering", rendering.describe(report["rendering"])),
        ("chunkers", ", ".join(row["spec"] for row in _unique_chunkers(report["chunking"])) or "-"),
        ("tokenizer", tokenizer["note"]),
    ]
    if tokenizer["approx_error_percent"]:
        error = tokenizer["approx_error_percent"]
        rows.append(
            (
                "approx vs cl100k_base here",
                f"{error['total']:+.2f}% in total, {error['mean_absolute']:.2f}% per document on average",
            )
        )
    thresholds = _thresholds(gates)
    verdict = "FAILED (exit code 1)" if _failed(report) else "passed (exit code 0)"
    rows.append(("gates", (", ".join(thresholds) + ": " if thresholds else "none set: ") + verdict))
    return [pages.record("audit record", rows)]


def _unique_chunkers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list({row["spec"]: row for row in rows}.values())


def _efficiency(efficiency: dict[str, Any]) -> list[str]:
    ratios = efficiency["per_ticket_ratio"]
    explanation = (
        f"A whole anchor in every window of {efficiency['chunk_tokens']:,} tokens needs, for a ticket of T tokens "
        "(without anchors) "
        "and anchors of A tokens, about (T - N) / (N - 2A) anchors besides the title. The bound is that many anchors "
        "at each ticket's own anchor cost."
    )
    return [
        f"<h2>Anchors against the lower bound ({efficiency['chunk_tokens']:,}-token chunks)</h2>",
        _paragraph(explanation, "note"),
        _table(
            [
                "anchors",
                "anchor tokens",
                "overhead",
                "bound: anchors",
                "bound: tokens",
                "bound: overhead",
                "x bound",
                "per ticket p50",
                "p90",
                "max",
            ],
            [
                [
                    _num(format_count(efficiency["anchors"])),
                    _num(format_count(efficiency["anchor_tokens"])),
                    _num(format_percent(efficiency["overhead_percent"])),
                    _num(format_count(efficiency["bound_anchors"])),
                    _num(format_count(efficiency["bound_tokens"])),
                    _num(format_percent(efficiency["bound_overhead_percent"])),
                    _num(format_ratio(efficiency["ratio_to_bound"])),
                    *(_num(format_ratio(ratios[key])) for key in ("p50", "p90", "max")),
                ]
            ],
            "efficiency",
        ),
        "<h3>Tickets with the most anchor tokens above the bound</h3>",
        _table(
            [
                "ticket",
                "document",
                "tokens without anchors",
                "anchors",
                "anchor tokens",
                "bound: anchors",
                "bound: tokens",
                "x bound",
                "above the bound, tokens",  # the order of the rows
            ],
            [
                [
                    _cell(f"#{t['ticket_id']}"),
                    _cell(t["relpath"]),
                    _num(format_count(t["tokens_without_anchors"])),
                    _num(format_count(t["anchors"])),
                    _num(format_count(t["anchor_tokens"])),
                    _num(format_count(t["bound_anchors"])),
                    _num(format_count(t["bound_tokens"])),
                    _num(format_ratio(t["ratio_to_bound"])),
                    _num(format_count(t["anchor_tokens"] - (t["bound_tokens"] or 0))),
                ]
                for t in efficiency["top"]
            ],
            "efficiency-top",
        ),
    ]


def _lengths(lengths: dict[str, Any]) -> list[str]:
    if not lengths["rows"]:
        return []
    return [
        "<h2>Choosing --chunk-tokens: coverage and cost at other chunk lengths</h2>",
        _paragraph(
            f"Fixed windows of each length sharing {lengths['overlap_percent']}% (Bedrock's fixed-size chunking); "
            f"documents {lengths['documents']}. The longest stretch without the ID is the figure explained above, "
            "for documents made for that length.",
            "note",
        ),
        _lengths_svg(lengths["rows"]),
        _table(
            [
                "chunk tokens",
                "windows",
                "coverage",
                "anchor tokens",
                "overhead",
                "bound: overhead",
                "x bound",
                "longest stretch without the ID, tokens",
            ],
            [
                [
                    _num(format_count(row["chunk_tokens"])),
                    _num(format_count(row["windows"])),
                    _num(format_percent(row["coverage_percent"])),
                    _num(format_count(row["anchor_tokens"])),
                    _num(format_percent(row["overhead_percent"])),
                    _num(format_percent(row["bound_overhead_percent"])),
                    _num(format_ratio(row["ratio_to_bound"])),
                    _num(format_count(row["longest_anchorless_run"]["tokens"])),
                ]
                for row in lengths["rows"]
            ],
            "lengths",
        ),
    ]


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
        shapes.append(
            f'<rect class="bar" x="{x}" y="{140 - h}" width="{bar}" '
            f'height="{h}"><title>{escape(_bin_title(b))}</title></rect>'
        )
        shapes.append(f'<text x="{x + bar / 2}" y="{135 - h}" text-anchor="middle">{b["count"] or ""}</text>')
        shapes.append(f'<text x="{x + bar / 2}" y="155" text-anchor="middle">{escape(label)}</text>')
    caption = f"Tickets per overhead bin ({histogram['bin_width_percent']}% wide; label = bin start, %)"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" style="max-width: '
        f'{width}px" role="img" aria-label="{escape(caption)}">'
        f'{"".join(shapes)}<text x="30" y="175">{escape(caption)}</text></svg>'
    )


def _bin_title(b: dict[str, Any]) -> str:
    upper = "" if b["to"] is None else f"{b['to']}"
    tickets = pages.plural(b["count"], "ticket")
    return f"{b['from']}%–{upper}%: {tickets}" if upper else f">= {b['from']}%: {tickets}"


def _coverage_svg(rows: list[dict[str, Any]]) -> str:
    """Bars on a 0-100% axis; the viewBox leaves room for a "100.00%" label, and the SVG scales to the page."""
    label_width, scale, row_height, label_room = 230, 4, 34, 70
    axis_top = 28
    height = axis_top + row_height * len(rows) + 30
    width = label_width + 100 * scale + label_room
    shapes = [
        '<rect class="anchored" x="10" y="5" width="12" height="12"/><text x="26" y="15">anchored</text>',
        '<rect class="stripped" x="100" y="5" width="12" height="12"/><text x="116" y="15">without anchors</text>',
    ]
    axis_y = axis_top + row_height * len(rows)
    for tick in range(0, 101, 20):
        x = label_width + tick * scale
        shapes.append(f'<line class="grid" x1="{x}" y1="{axis_top - 4}" x2="{x}" y2="{axis_y}"/>')
        shapes.append(f'<text x="{x}" y="{axis_y + 14}" text-anchor="middle">{tick}%</text>')
    shapes.append(
        f'<line class="axis" x1="{label_width}" y1="{axis_y}" x2="{label_width + 100 * scale}" y2="{axis_y}"/>'
    )
    for index, row in enumerate(rows):
        y = axis_top + index * row_height
        shapes.append(f'<text x="10" y="{y + 14}">{escape(row["chunker"] + " / " + row["level"])}</text>')
        for offset, side in ((0, "anchored"), (14, "stripped")):
            value = row[side]["coverage_percent"] or 0
            shown = escape(format_percent(row[side]["coverage_percent"]))
            shapes.append(
                f'<rect class="{side}" x="{label_width}" y="{y + offset}" width="{value * scale:.1f}" '
                f'height="12"><title>{shown}</title></rect>'
                f'<text x="{label_width + value * scale + 4:.1f}" y="{y + offset + 10}">{shown}</text>'
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" style="max-width: '
        f'{width}px" '
        f'role="img" aria-label="coverage per chunker, 0 to 100%">{"".join(shapes)}</svg>'
    )


def _lengths_svg(rows: list[dict[str, Any]]) -> str:
    """The chunk-length table as grouped bars on a 0-100% axis: coverage, the anchors' overhead and
    the lower bound's overhead at each length (the table below has the same figures)."""
    series = [
        ("coverage_percent", "anchored", "coverage"),
        ("overhead_percent", "overhead", "overhead"),
        ("bound_overhead_percent", "bound", "bound: overhead"),
    ]
    left, plot_height, bar, gap = 44, 160, 26, 34
    top = 34
    group = bar * len(series) + gap
    width = left + group * len(rows) + 10
    height = top + plot_height + 40
    base = top + plot_height
    shapes = []
    for index, (_, css, label) in enumerate(series):
        key_x = left + index * 130
        shapes.append(f'<rect class="{css}" x="{key_x}" y="6" width="12" height="12"/>')
        shapes.append(f'<text x="{key_x + 16}" y="16">{label}</text>')
    for tick in range(0, 101, 20):
        y = base - tick * plot_height / 100
        shapes.append(f'<line class="grid" x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}"/>')
        shapes.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}%</text>')
    shapes.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{width - 10}" y2="{base}"/>')
    for column, row in enumerate(rows):
        x0 = left + column * group + gap / 2
        for index, (key, css, label) in enumerate(series):
            value = min(row[key] or 0, 100)
            h = value * plot_height / 100
            x = x0 + index * bar
            shown = escape(format_percent(row[key]))
            shapes.append(
                f'<rect class="{css}" x="{x:.1f}" y="{base - h:.1f}" width="{bar - 3}" height="{h:.1f}">'
                f"<title>{escape(label)} at {row['chunk_tokens']:,} tokens: {shown}</title></rect>"
                f'<text x="{x + (bar - 3) / 2:.1f}" y="{base - h - 3:.1f}" text-anchor="middle" '
                f'style="font-size:9px">{"-" if row[key] is None else f"{row[key]:.0f}%"}</text>'
            )
        shapes.append(
            f'<text x="{x0 + bar * len(series) / 2:.1f}" y="{base + 16}" text-anchor="middle">'
            f"{row['chunk_tokens']:,} tokens</text>"
        )
    return (
        f'<figure><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'style="max-width: {width}px" role="img" aria-label="coverage and overhead per chunk length" '
        'id="lengths-chart">'
        f"{''.join(shapes)}</svg></figure>"
    )
