"""A real browser for the report pages: Debian's Chromium (``make browser-install``) driven by Playwright.

As a pytest plugin (registered in tests/conftest.py) it provides the module-scoped ``browser``
fixture: a headless Chromium in a fresh profile, with everything that would reach the network turned
off (the machine's network is closed; Playwright downloads no browser of its own). ``PageCheck``
opens a page in it and measures what a reader would see.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support import skip_or_fail

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREEN_WIDTH = 1280
# An A4 page (210 mm at 96 px per inch) less Chromium's default print margins (about 1 cm a side).
PAPER_WIDTH = 718

# Everything that hides or cuts text, measured in the page. An element scrolls or clips only when its
# overflow is not "visible"; text spills only when a text node's boxes leave the chunk they are in.
_MEASURE = """
(selector) => {
  const root = document.documentElement;
  const scrolling = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('svg')) continue;
    const style = getComputedStyle(el);
    if (style.overflowX !== 'visible' || style.overflowY !== 'visible') scrolling.push(el.tagName + '.' + el.className);
  }
  const chunks = [...document.querySelectorAll(selector)].map((el) => {
    const box = el.getBoundingClientRect();
    let spilled = 0;
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) {
        if (r.width && (r.left < box.left - 1 || r.right > box.right + 1)) spilled += 1;
      }
    }
    return {
      visible: el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}),
      scrollHeight: el.scrollHeight, clientHeight: el.clientHeight,
      scrollWidth: el.scrollWidth, clientWidth: el.clientWidth,
      right: box.right, height: box.height, spilled, text: el.innerText.length,
    };
  });
  return {pageWidth: root.scrollWidth, windowWidth: root.clientWidth, scrolling, chunks};
}
"""


@dataclass
class Layout:
    page_width: int
    window_width: int
    scrolling: list[str]
    chunks: list[dict[str, Any]]

    def problems(self) -> list[str]:
        """What a reader would miss: a page wider than its window, a box that scrolls, a cut chunk."""
        found = []
        if self.page_width > self.window_width:
            found.append(f"page is {self.page_width}px wide in a {self.window_width}px window")
        found += [f"{element} scrolls or clips its content" for element in self.scrolling]
        for index, chunk in enumerate(self.chunks):
            if not chunk["visible"] or not chunk["height"] or not chunk["text"]:
                found.append(f"chunk {index + 1} is not shown")
            if chunk["scrollHeight"] > chunk["clientHeight"] + 1 or chunk["scrollWidth"] > chunk["clientWidth"] + 1:
                found.append(f"chunk {index + 1} is cut: {chunk}")
            if chunk["spilled"]:
                found.append(f"chunk {index + 1}: {chunk['spilled']} lines of text run out of its box")
            if chunk["right"] > self.window_width:
                found.append(f"chunk {index + 1} ends at {chunk['right']}px, past the window")
        return found


class PageCheck:
    """One page open in the browser, at a width, on screen or as printed."""

    def __init__(self, page: Any) -> None:
        self.page = page

    def open(self, path: Path, width: int = SCREEN_WIDTH, media: str = "screen") -> PageCheck:
        self.page.set_viewport_size({"width": width, "height": 900})
        self.page.emulate_media(media=media)
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_load_state("load")
        return self

    def layout(self, selector: str = ".chunk") -> Layout:
        measured = self.page.evaluate(_MEASURE, selector)
        return Layout(measured["pageWidth"], measured["windowWidth"], measured["scrolling"], measured["chunks"])

    def screenshot(self, path: Path) -> Path:
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def fonts_of(self, selector: str) -> list[dict[str, Any]]:
        """The fonts Chromium drew the first matching element's own text with (DevTools' "Rendered Fonts")."""
        session = self.page.context.new_cdp_session(self.page)
        try:
            session.send("DOM.enable")
            session.send("CSS.enable")
            root = session.send("DOM.getDocument", {"depth": -1})["root"]["nodeId"]
            node = session.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
            assert node, f"no element matches {selector}"
            return session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        finally:
            session.detach()

    def japanese_width(self, selector: str) -> tuple[float, float]:
        """(width of the first four Japanese characters in a row in the element, their font size), in CSS px."""
        return tuple(
            self.page.evaluate(
                """(selector) => {
                  const walker = document.createTreeWalker(document.querySelector(selector), NodeFilter.SHOW_TEXT);
                  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    const found = /[\\u3040-\\u30ff\\u4e00-\\u9fff]{4}/.exec(node.textContent);
                    if (!found) continue;
                    const range = document.createRange();
                    range.setStart(node, found.index); range.setEnd(node, found.index + 4);
                    const size = parseFloat(getComputedStyle(node.parentElement).fontSize);
                    return [range.getBoundingClientRect().width, size];
                  }
                  return [0, 0];
                }""",
                selector,
            )
        )

    def after_content(self, selector: str) -> list[str]:
        """The ``::after`` content of every matching element (how the print style writes out link targets)."""
        return self.page.evaluate(
            "(s) => [...document.querySelectorAll(s)].map((el) => getComputedStyle(el, '::after').content)", selector
        )

    def pdf(self, path: Path) -> bytes:
        self.page.pdf(path=str(path), format="A4", print_background=True)
        return path.read_bytes()


@pytest.fixture(scope="module")
def browser() -> Iterator[PageCheck]:
    """Headless Chromium in a fresh profile, for one test module. Not longer: Playwright's sync API runs
    an event loop while it is open, and other tests call asyncio.run()."""
    if not CHROMIUM.is_file():
        skip_or_fail(f"{CHROMIUM} not found: run `make browser-install`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright is not installed: pip install -e '.[test]'")
    profile = tempfile.mkdtemp(prefix="anchorkit-chromium-")
    try:
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
            )
            try:
                yield PageCheck(context.new_page())
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
