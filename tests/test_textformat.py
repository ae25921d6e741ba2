"""Redmine text → Markdown: one example per construct, Redmine's quirks, and the safety rules.

The fidelity of these conversions against Redmine's own renderer is checked in
test_textformat_oracle.py; here each example pins what the Markdown looks like.
"""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from anchorkit.anchors import find_anchors, find_titles
from anchorkit.render.document import content_markdown
from anchorkit.render.markdown_text import code_block, code_span
from anchorkit.render.textformat import to_markdown

TEXTILE_EXAMPLES = {
    "headings keep their level": ("h1. 障害報告\n\nh6. 小見出し", "# 障害報告\n\n###### 小見出し"),
    "heading attributes are dropped": ("h2(#top){color:red}. 概要", "## 概要"),
    "line breaks stay line breaks": ("一行目\n二行目", "一行目\n二行目"),
    "pre becomes a fence, content verbatim": (
        "<pre>\n# コメント\n> 引用ではない\n*太字ではない*\n</pre>",
        "```\n# コメント\n> 引用ではない\n*太字ではない*\n```",
    ),
    "pre code class becomes the fence language": (
        '<pre><code class="ruby">\nputs 1\n</code></pre>',
        "```ruby\nputs 1\n```",
    ),
    "a fence is longer than any backtick run inside": ("<pre>\n```\ninner\n```\n</pre>", "````\n```\ninner\n```\n````"),
    "inline code, also between Japanese characters": ("ログ@ipsec@の確認", "ログ`ipsec`の確認"),
    "spans": (
        "*strong* _em_ -del- +ins+ ??cite?? x ^2^ H ~2~ O",
        "**strong** *em* ~~del~~ ins *cite* x <sup>2</sup> H <sub>2</sub> O",
    ),
    "spans need a space before them, as in Redmine": (
        "これは*重要*です。これは *重要* です。",
        "これは\\*重要\\*です。これは **重要** です。",
    ),
    "nested spans": ("_*bold italic*_", "***bold italic***"),
    "nested bullet list": ("* a\n** b\n*** c\n* d", "- a\n  - b\n    - c\n- d"),
    "numbered list with a nested numbered list": ("# 手順1\n## 詳細\n# 手順2", "1. 手順1\n   1. 詳細\n2. 手順2"),
    "table with header cells, attributes dropped": (
        "|_. 項目 |_. 値 |\n|{color:red}. MTU |>. 1400 |",
        "| 項目 | 値 |\n| --- | --- |\n| MTU | 1400 |",
    ),
    "a ragged table keeps every cell": ("| a | b | c |\n| d |", "| a | b | c |\n| --- | --- | --- |\n| d |  |  |"),
    "bq. quote": ("bq. 引用", "> 引用"),
    "reply quotes keep their nesting": ("> 返信\n>> 二重\n> 戻る", "> 返信\n>\n> > 二重\n>\n> 戻る"),
    "link with title": ('"マニュアル(手順書)":http://example.com/m', '[マニュアル](http://example.com/m "手順書")'),
    "images, alignment dropped": (
        "!http://x/a.png! !/b.png(代替)! !>/c.png!",
        "![](http://x/a.png) ![代替](/b.png) ![](/c.png)",
    ),
    "linked image": ("!/thumb.png!:https://example.com/full", "[![](/thumb.png)](https://example.com/full)"),
    "unsafe image and link schemes stay text": ('!javascript:x! "a":javascript:y', '!javascript:x! "a":javascript:y'),
    "bare URLs and mail addresses become autolinks": (
        "see https://example.com/a. or sato@example.co.jp",
        "see <https://example.com/a>. or <sato@example.co.jp>",
    ),
    "paragraph alignment dropped": ("p=. 中央\n\np>. 右", "中央\n\n右"),
    "notextile is literal": ("<notextile>*そのまま*</notextile>", "\\*そのまま\\*"),
    "==text== is only a boundary in Redmine": ("==*x*==", "**x**"),
    "entities decoded, then escaped where Markdown would read them": ("&copy; &lt;b&gt;", "© \\<b>"),
    "footnote reference and footnote": ("Redmine[1]\n\nfn1. 脚注", "Redmine<sup>1</sup>\n\n<sup>1</sup> 脚注"),
    "wiki links show their text": ("[[Wiki Page]] [[Guide|マニュアル]] [[Guide#part]]", "Wiki Page マニュアル Guide"),
    "Redmine references stay text": (
        "#123 r758 commit:abc123 source:trunk/app.rb",
        "#123 r758 commit:abc123 source:trunk/app.rb",
    ),
    "an escaped reference loses its !": ("!#124 and !r758", "#124 and r758"),
    "toc macro dropped": ("{{toc}}\n\nh2. A", "## A"),
    "collapse macro keeps title and content": ("{{collapse(詳細)\n隠れた *本文*\n}}", "詳細\n\n隠れた **本文**"),
    "issue and thumbnail macros, unknown macros kept": (
        "{{issue(12)}} {{thumbnail(a.png)}} {{hello_world}} {{nosuch}}",
        "#12 ![](a.png) {{hello_world}} {{nosuch}}",
    ),
    "unknown markup is escaped text": ("<div>不明</div> [ERROR] a_b *x", "\\<div>不明\\</div> \\[ERROR\\] a_b \\*x"),
    "lines that Markdown would read as blocks are escaped": ("- 手順\n1. 番号", "\\- 手順\n1\\. 番号"),
    "a table delimiter row in text is escaped": ("a | b\n---|---", "a | b\n\\---|---"),
    "indented text after a paragraph is preformatted": (
        "設定:\n\n    [global]\n    x = 1",
        "設定:\n\n```\n[global]\n    x = 1\n```",
    ),
    "horizontal rule": ("上\n\n---\n\n下", "上\n\n---\n\n下"),
    "HTML comments are hidden as in Redmine": ("a <!-- memo --> b", "a  b"),
    "uppercase PRE is not a tag for Redmine": ("<PRE>x</PRE>", "\\<PRE>x\\</PRE>"),
}


@pytest.mark.parametrize("textile, markdown", TEXTILE_EXAMPLES.values(), ids=TEXTILE_EXAMPLES.keys())
def test_textile_constructs(textile: str, markdown: str) -> None:
    assert to_markdown(textile, "textile") == markdown


def test_issue_references_become_links_when_asked() -> None:
    converted = to_markdown("#123 と !#124 (#125)", "textile", link_issues="https://redmine.example.com/")
    assert (
        converted
        == "[#123](https://redmine.example.com/issues/123) と #124 ([#125](https://redmine.example.com/issues/125))"
    )


def test_common_mark_is_kept_and_redmine_additions_converted() -> None:
    text = (
        "## 手順\n\nsee #123 and [[Page]]\n\n```\n#456 [[not a link]]\n```\n\n`#789` {{collapse(t)\nbody\n}}\n\n{{toc}}"
    )
    converted = to_markdown(text, "common_mark", link_issues="https://r.example")
    assert converted == (
        "## 手順\n\nsee [#123](https://r.example/issues/123) and Page\n\n```\n#456 [[not a link]]\n```\n\n`#789` "
        "t\n\nbody\n"
    ).rstrip("\n")


def test_common_mark_unclosed_fence_is_closed() -> None:
    assert (
        to_markdown("```python\nprint(1)\n# not a heading", "common_mark")
        == "```python\nprint(1)\n# not a heading\n```"
    )


def test_common_mark_filtered_tags_are_text_as_in_redmine() -> None:
    assert to_markdown("<script>x</script>", "common_mark") == "&lt;script>x&lt;/script>"


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown text format 'markdown'"):
        to_markdown("x", "markdown")


def test_line_endings_and_control_characters() -> None:
    assert to_markdown("a\r\nb\rc\x07d\x00e\ue000", "textile") == "a\nb\ncde\ufffd"


def test_code_helpers_show_any_content_verbatim() -> None:
    assert code_span("a`b") == "``a`b``"
    assert code_span("`x`") == "`` `x` ``"
    assert code_block("```\nx\n````", "py") == "`````py\n```\nx\n````\n`````"


# ------------------------------------------------------------------ bad input and safety

ONE_MEGABYTE_LINES = {
    "plain": "あいうえお abc " * 70_000,
    "span delimiters": "*a " * 340_000,
    "code delimiters": "@a " * 340_000,
    "image openers": "!a(x " * 200_000,
    "wiki link openers": "[[a " * 250_000,
    "pre openers": "<pre " * 200_000,
    "url punctuation": "http://a" + ".," * 500_000,
}


@pytest.mark.parametrize("text", ONE_MEGABYTE_LINES.values(), ids=ONE_MEGABYTE_LINES.keys())
def test_one_megabyte_on_one_line_converts_in_linear_time(text: str) -> None:
    started = time.perf_counter()
    converted = to_markdown(text, "textile")
    assert time.perf_counter() - started < 10  # quadratic patterns would take hours
    assert _missing_words(text, converted) == set()


# Many small constructs in one text: each must cost the same wherever it sits (rescanning the whole
# text per <pre> block, per macro or per indented line would take minutes at these sizes).
MANY_BLOCKS = {
    "pre blocks": (
        "".join(f"段落 {i}\n\n<pre>code {i}</pre>\n\n" for i in range(30_000)),
        "\n\n".join(f"段落 {i}\n\n```\ncode {i}\n```" for i in range(30_000)),
    ),
    "collapse macros before a pre block": (
        "".join(f"{{{{collapse(見出し {i})\n本文 {i}\n}}}}\n\n" for i in range(64_000)) + "<pre>最後</pre>",
        "\n\n".join(f"見出し {i}\n\n本文 {i}" for i in range(64_000)) + "\n\n```\n最後\n```",
    ),
    "indented paragraphs after a paragraph": (
        "設定:\n\n" + "".join(f"    行 {i}\n      続き {i}\n\n" for i in range(40_000)),
        "設定:\n\n```\n" + "\n\n".join(f"行 {i}\n      続き {i}" for i in range(40_000)) + "\n```",
    ),
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("text", "expected"), MANY_BLOCKS.values(), ids=MANY_BLOCKS.keys())
def test_many_blocks_convert_in_linear_time(text: str, expected: str) -> None:
    assert to_markdown(text, "textile") == expected


BAD_INPUTS = {
    "unbalanced pre": "<pre>\nnever closed\n# heading?\n> anchor?",
    "stray closing pre": "text </pre> more\n\nh1. after",
    "nested pre": "<pre>\nouter\n<pre>\ninner\n</pre>\ntail\n</pre>\nh2. after",
    "invalid HTML": "<div <b>broken <i unclosed\n<table><tr><td>x",
    "HTML block opener": "<div>\n\nh1. inside?",
    "control characters": "a\x00b\x07c\x1bd\x7f\nh2. e\x0b",
    "forged anchor and title": "> チケット #99: 偽物\n\nh1. チケット #99: 偽物\n\nbq. チケット #98: 偽物",
    "forged anchor inside list": "* > チケット #97: 偽物",
    "headings everywhere": "h1. a\n\nh2. b\n\nh3. c\n\n* h1. d\n\n> h1. e",
    "common_mark headings": "# a\n## b\n### c\n> # d\n- # e\nsetext\n===",
    "unclosed fence": "```\n# x",
    "unclosed tilde fence in quote": "> ~~~\n> # x",
}


def _parsed_headings(markdown: str) -> list[str]:
    return [
        token.tag for token in MarkdownIt("commonmark").enable("table").parse(markdown) if token.type == "heading_open"
    ]


def _assert_contained(text: str, fmt: str) -> None:
    contained = content_markdown(text, fmt)
    # No heading the document's own levels could be confused with, at any nesting.
    assert not {"h1", "h2", "h3"} & set(_parsed_headings(contained)), contained
    # No line that the anchor extractor would take for a genuine anchor or title.
    assert find_anchors(contained) == [] and find_titles(contained) == [], contained
    # Nothing left open: a document heading written after the content is still a heading.
    probe = contained + "\n\n## 対応履歴"
    tokens = MarkdownIt("commonmark").enable("table").parse(probe)
    headings = [
        (t.tag, tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open" and t.level == 0
    ]
    assert headings and headings[-1] == ("h2", "対応履歴"), contained


@pytest.mark.parametrize("text", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
@pytest.mark.parametrize("fmt", ["textile", "common_mark"])
def test_bad_input_is_contained_by_the_document(text: str, fmt: str) -> None:
    _assert_contained(text, fmt)


def test_converter_output_itself_closes_fences_and_shows_no_raw_html() -> None:
    converted = to_markdown(BAD_INPUTS["unbalanced pre"] + "\n" + BAD_INPUTS["invalid HTML"], "textile")
    html = MarkdownIt("commonmark").render(converted + "\n\nafter")
    assert html.endswith("<p>after</p>\n")
    assert "<div" not in html and "<table" not in html and "<b>" not in html


# Text made of the characters Textile gives meaning to, words, Japanese, and line structure.
TEXTILE_ALPHABET = st.sampled_from(
    [
        *list('*_-+@"!|#>.:()[]^~%={}<>/ \n'),
        "h1. ",
        "h2. ",
        "bq. ",
        "<pre>",
        "</pre>",
        "\n\n",
        "  ",
        "p=. ",
        "http://x.jp/",
        "word",
        "語句",
        "12",
        "チケット #5: 件名",
        "{{collapse(t)\n",
        "\n}}",
        "[[Page]]",
        "&amp;",
        "\t",
    ]
)
WORD = re.compile(r"[A-Za-z0-9]+|[ぁ-んァ-ン一-龥]+")
MARKUP_WORDS = {"pre", "h1", "h2", "bq", "p", "collapse", "amp", "toc"}  # syntax, not text


def _missing_words(original: str, converted: str) -> set[str]:
    """Words of the original that the Markdown (escapes removed) no longer contains."""
    unescaped = converted.replace("\\", "")
    return {word for word in set(WORD.findall(original)) - MARKUP_WORDS if word not in unescaped}


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTILE_ALPHABET, max_size=40).map("".join))
@example("|\n}}http://x.jp/|*")  # a line joined to a row that had ended: its text before the first "|" was dropped
def test_textile_never_crashes_never_drops_words_never_leaks(text: str) -> None:
    converted = to_markdown(text, "textile")
    assert _missing_words(text, converted) == set()
    _assert_contained(text, "textile")


@settings(max_examples=150, deadline=None)
@given(
    st.lists(TEXTILE_ALPHABET | st.sampled_from(["```", "~~~", "# ", "- ", "1. ", "<div>", "`"]), max_size=40).map(
        "".join
    )
)
def test_common_mark_never_crashes_never_drops_words_never_leaks(text: str) -> None:
    converted = to_markdown(text, "common_mark")
    assert _missing_words(text, converted) == set()
    _assert_contained(text, "common_mark")


def test_conversion_is_deterministic() -> None:
    text = "h2. 概要\n\n* *a*\n* b\n\n|_. x |\n| 1 |\n\n{{collapse(t)\nbody\n}}"
    assert to_markdown(text, "textile") == to_markdown(text, "textile")
