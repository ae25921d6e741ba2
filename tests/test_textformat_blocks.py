"""The oracle's yardstick (tests/support/html_blocks.py): what it compares and what it ignores."""

from __future__ import annotations

from support.html_blocks import Block, compare_blocks, html_blocks, markdown_blocks

REDMINE_HTML = (
    '<ul class="toc"><li><a href="#A">A</a></li></ul>'
    '<a name="A"></a><h2 >A<a href="#A" class="wiki-anchor">&para;</a></h2>'
    '<p>see <a class="issue" href="/issues/1">#1</a> and <a class="external" href="http://x.jp">x</a><br />next</p>'
    "<ul><li>a<ul><li>b</li></ul></li></ul>"
    "<blockquote><p>q</p></blockquote>"
    "<table><tr><th>h </th></tr><tr><td> c </td></tr></table>"
    '<pre><code class="ruby syntaxhl"><span>puts</span> 1\n</code></pre>'
    '<p><a id="c-show" class="collapsible" href="#">T</a><a id="c-hide" class="collapsible" href="#">T</a>'
    '<div id="c"><p>body <img src="/a.png" alt="" /></p></div></p>'
)


def test_redmine_html_is_reduced_to_content_blocks() -> None:
    assert html_blocks(REDMINE_HTML) == [
        Block("h2", "A"),
        Block("p", "see #1 and x next", links=("http://x.jp",)),
        Block("li", "a", list_depth=1),
        Block("li", "b", list_depth=2),
        Block("p", "q", quote_depth=1),
        Block("cell", "h"),
        Block("cell", "c"),
        Block("code", "puts 1"),
        Block("p", "T"),
        Block("p", "body", images=("/a.png",)),
    ]


def test_markdown_side_reads_loose_lists_and_tables_like_redmine() -> None:
    markdown = "## A\n\n- a\n\n  - b\n\n> q\n\n| h |\n|---|\n| c |\n\n```ruby\nputs 1\n```"
    assert markdown_blocks(markdown) == [
        Block("h2", "A"),
        Block("li", "a", list_depth=1),
        Block("li", "b", list_depth=2),
        Block("p", "q", quote_depth=1),
        Block("cell", "h"),
        Block("cell", "c"),
        Block("code", "puts 1"),
    ]


def test_comparison_counts_matching_blocks_and_lists_differences() -> None:
    expected = html_blocks("<p>a</p><table><tr><td>1</td><td>2</td></tr></table>")
    actual = markdown_blocks("a\n\n| 1 | 3 |\n|---|---|")
    comparison = compare_blocks(expected, actual)
    assert (comparison.matched, comparison.total) == (2, 3)
    assert comparison.differences() == [(Block("cell", "2"), Block("cell", "3"))]
