"""What the reports share (stats, verify, eval): counts in words (``plural``), and one self-contained page a
person can file.

No script, font, image or style sheet from anywhere else: the CSS is inline and charts are inline
SVG, so the page shows the same on a machine with no network, and nothing in it can run or load.
Every value that comes from data (tickets, answers, paths) goes through ``escape``; only
``http``/``https`` URLs become links. Nothing is hidden: no box scrolls, long lines wrap, and the
print style sheet drops the width limit so that paper shows what the screen shows.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from datetime import UTC, datetime

from anchorkit import __version__


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 request``, ``2 requests``, ``1,000 requests``; ``nouns`` where adding an s is wrong (``retries``)."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


# Japanese text needs a CJK font: named before the generic family, so a Latin system-ui font does
# not leave it to the browser's fallback (which may pick a Chinese face for kanji).
_FONTS = 'system-ui,"Noto Sans CJK JP","Hiragino Sans","Yu Gothic","Meiryo","Noto Sans JP",sans-serif'
_MONO = 'ui-monospace,"DejaVu Sans Mono","Noto Sans Mono CJK JP","Noto Sans CJK JP",monospace'
BASE_CSS = f"""
body{{font-family:{_FONTS};max-width:72rem;margin:1.5rem auto;padding:0 1rem;line-height:1.6;color:#1d1d1f;
overflow-wrap:break-word}}
h1{{font-size:1.45rem;margin:.2rem 0 .8rem}}h2{{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}}
h3{{font-size:1.05rem;margin-bottom:.3rem}}
table{{border-collapse:collapse;margin:.5rem 0;max-width:100%}}
th,td{{border:1px solid #ccc;padding:.25rem .6rem;text-align:left;vertical-align:top}}
td.num{{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}}
table.record th{{white-space:nowrap;background:#f6f6f6}}
.note{{color:#555;font-size:.9rem}}
code,pre{{font-family:{_MONO};font-size:.88em}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:.5rem}}
pre,code,td.text{{overflow-wrap:anywhere}}
svg{{max-width:100%;height:auto}}svg text{{font-size:11px;fill:#222}}
.verdict{{border:2px solid #888;border-radius:.4rem;padding:.6rem 1rem;margin:1rem 0;background:#f4f4f4}}
.verdict .headline{{font-size:1.2rem;font-weight:700}}
.verdict.passed{{border-color:#1a7f37;background:#e9f7ee}}.verdict.passed .headline{{color:#1a7f37}}
.verdict.failed{{border-color:#b00020;background:#fdecee}}.verdict.failed .headline{{color:#b00020}}
.verdict ul{{margin:.3rem 0 0;padding-left:1.2rem}}
@media print{{
body{{max-width:none;margin:0;padding:0;font-size:10.5pt}}
h2,h3{{break-after:avoid}}tr,.verdict,figure{{break-inside:avoid}}
table{{font-size:8.5pt}}th,td{{padding:.15rem .3rem;overflow-wrap:anywhere}}
a{{color:inherit}}a[href^="http"]::after{{content:" <" attr(href) ">";font-size:.85em;color:#444}}
*{{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
}}
"""


def escape(value: object) -> str:
    """Text from data, safe in element content and in quoted attributes."""
    return html.escape(str(value), quote=True)


def is_web_url(url: str | None) -> bool:
    return bool(url) and str(url).lower().startswith(("https://", "http://"))


def link(url: str | None, text: str | None = None) -> str:
    """A link for an ``http(s)`` URL; anything else (``s3://``, ``javascript:``) shown as code, not linked."""
    if url and is_web_url(url):
        return f'<a href="{escape(url)}">{escape(text or url)}</a>'
    return f"<code>{escape(url or '(none)')}</code>"


def generated_now() -> str:
    """When a page was made: ISO 8601 in UTC, to the second (what ``stats --json`` writes as ``run.generated_at``)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def format_bytes(count: int) -> str:
    """Sizes as people write them: ``512 B``, ``10 KB``, ``50 MB``, ``1.5 GB`` (1 KB = 1,024 bytes, as
    Bedrock counts its limits)."""
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" or value == int(value) else f"{value:,.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def verdict(passed: bool | None, headline: str, details: Iterable[str] = (), element_id: str = "verdict") -> str:
    """The banner at the top of a page (or of one answer on it): passed (green), failed (red) or
    nothing to judge (grey)."""
    state = "neutral" if passed is None else "passed" if passed else "failed"
    items = "".join(f"<li>{escape(detail)}</li>" for detail in details)
    return (
        f'<div class="verdict {state}" id="{escape(element_id)}"><div class="headline">{escape(headline)}</div>'
        + (f"<ul>{items}</ul>" if items else "")
        + "</div>"
    )


def record(title: str, rows: Iterable[tuple[str, str]]) -> str:
    """The record a person files with the figures (when, which version, what input, which settings)."""
    body = "".join(f"<tr><th>{escape(name)}</th><td>{escape(value)}</td></tr>" for name, value in rows)
    head = f'<thead><tr><th colspan="2">{escape(title)}</th></tr></thead>'
    return f'<table class="record" id="record">{head}<tbody>{body}</tbody></table>'


def provenance(generated_at: str | None = None) -> list[tuple[str, str]]:
    """The first rows of every record: when the page was generated and by which anchorkit."""
    return [("generated", generated_at or generated_now()), ("anchorkit version", __version__)]


def page(title: str, body: Iterable[str], css: str = "", lang: str = "en") -> str:
    """The whole document (UTF-8 when written)."""
    return (
        f'<!DOCTYPE html>\n<html lang="{escape(lang)}">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>{BASE_CSS}{css}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
