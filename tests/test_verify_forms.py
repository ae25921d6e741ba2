"""verify and the less common ways an answer names a ticket or a note: links relative to the Redmine
(``/issues/5``), hosts written without their scheme, Redmine's journal anchor (``#change-45678``), note
numbers in words and after a capitalised sentence word, lists whose later numbers lack their ``#``, and
colours in CSS. Each form: a phantom is caught, a legitimate citation passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.ids import filter_text_stream
from anchorkit.verify.model import UNVERIFIED_MARKER
from anchorkit.verify.shapes import read_answer, read_retrieval

TICKET = 12345
PHANTOM = 99999
ASCII = "redmine.example.com"
IDN = "レッドマイン.example"


def chunks(host: str | None = ASCII) -> list[dict[str, Any]]:
    """TICKET's chunk holding notes 3-4; linked to the Redmine at ``host`` (None: an S3 layout, no link)."""
    link = {"url": f"https://{host}/issues/{TICKET}#note-3"} if host else {}
    return [
        {
            "id": f"{TICKET}-003",
            "ticket_id": TICKET,
            "text": f"> チケット #{TICKET}: VPN接続が不安定になる\n\n### [2024-06-12] 佐藤\n\n再起動で直りました。",
            "metadata": {"section": "history", "chunk_notes": "3-4", **link},
        }
    ]


def check(answer: Any, host: str | None = ASCII) -> VerifyReport:
    return verify_citations(
        read_answer(answer, "answer"), read_retrieval(chunks(host), "r").chunks, options=VerifyOptions()
    )


def found(answer: Any, host: str | None = ASCII) -> list[tuple[str, int | None]]:
    return [(f.kind, f.ticket_id) for f in check(answer, host).findings]


# --------------------------------------------------------------------------- links relative to the Redmine

# (the answer, the link in it)
RELATIVE_LINKS = [
    ("[詳細](/issues/{t})", "/issues/{t}"),
    ("[x](issues/{t})", "issues/{t}"),
    ('<a href="/issues/{t}">詳細</a>', "/issues/{t}"),
    ("手順は /issues/{t} を参照", "/issues/{t}"),
    ("[詳細](/redmine/issues/{t})", "/redmine/issues/{t}"),
]


@pytest.mark.parametrize("host", [ASCII, None])
@pytest.mark.parametrize(("template", "link"), RELATIVE_LINKS)
def test_a_relative_link_names_its_ticket_with_or_without_a_known_redmine(
    template: str, link: str, host: str | None
) -> None:
    assert check(template.format(t=TICKET), host).findings == []
    phantom = check(template.format(t=PHANTOM), host)
    assert [(f.kind, f.ticket_id) for f in phantom.findings] == [("phantom_ticket_id", PHANTOM)]
    assert phantom.filtered_answer["text"] == template.replace(link, UNVERIFIED_MARKER)


def test_a_relative_link_is_replaced_whole_in_the_filtered_answer() -> None:
    report = check(f"[詳細](/issues/{PHANTOM}#note-3) と #{TICKET}")
    assert report.filtered_answer["text"] == f"[詳細]({UNVERIFIED_MARKER}) と #{TICKET}"


@pytest.mark.parametrize("host", [ASCII, None])
def test_a_relative_links_note_is_checked_like_an_absolute_links(host: str | None) -> None:
    assert check(f"手順は /issues/{TICKET}#note-4 を参照", host).findings == []
    assert found(f"[詳細](/issues/{TICKET}#note-9)", host) == [("note_not_retrieved", TICKET)]
    assert found(f"手順は /issues/{PHANTOM}#note-3 を参照", host) == [("phantom_ticket_id", PHANTOM)]


@pytest.mark.parametrize("text", ["owner/repo/issues/5", "/owner/repo/issues/5", "https://github.com/o/r/issues/5"])
def test_a_path_that_is_no_redmine_issue_names_no_ticket(text: str) -> None:
    assert check(f"{text} を参照").findings == []


# --------------------------------------------------------------------------- hosts without their scheme


@pytest.mark.parametrize(("retrieved", "written"), [(ASCII, ASCII), (IDN, IDN), (IDN, "xn--eck1csa8f1c2b.example")])
def test_a_host_without_its_scheme_is_a_link(retrieved: str, written: str) -> None:
    assert check(f"詳細: {written}/issues/{TICKET}#note-3 を参照", retrieved).findings == []
    assert found(f"詳細: {written}/issues/{TICKET}#note-9", retrieved) == [("note_not_retrieved", TICKET)]
    phantom = check(f"詳細: {written}/issues/{PHANTOM} を参照", retrieved)
    assert [(f.kind, f.ticket_id) for f in phantom.findings] == [("phantom_ticket_id", PHANTOM)]
    assert phantom.filtered_answer["text"] == f"詳細: {UNVERIFIED_MARKER} を参照"


@pytest.mark.parametrize(
    ("retrieved", "written"),
    [(ASCII, "www.example.com"), (IDN, "レツドマイン.example"), (IDN, "evil.レッドマイン.example"), (ASCII, IDN)],
)
def test_a_host_without_its_scheme_on_another_host_is_a_foreign_link(retrieved: str, written: str) -> None:
    report = check(f"詳細は {written}/issues/{TICKET} を参照", retrieved)
    assert [(f.kind, f.ticket_id) for f in report.findings] == [("foreign_link", TICKET)]
    assert report.filtered_answer["text"] == f"詳細は {UNVERIFIED_MARKER} を参照"


def test_a_host_glued_to_japanese_prose_is_read_by_the_redmines_name_at_its_end() -> None:
    assert check(f"詳細は{IDN}/issues/{TICKET}を参照", IDN).findings == []
    assert found(f"詳細は{IDN}/issues/{PHANTOM}を参照", IDN) == [("phantom_ticket_id", PHANTOM)]
    assert found(f"詳細はevil.{IDN}/issues/{TICKET}を参照", IDN) == [("foreign_link", TICKET)]


# --------------------------------------------------------------------------- Redmine's journal anchor


@pytest.mark.parametrize(
    "written",
    [f"https://{ASCII}/issues/{{t}}#change-45678", "/issues/{t}#change-45678", f"{ASCII}/issues/{{t}}#change-3"],
)
def test_a_journal_anchor_is_a_citation_of_its_ticket_only(written: str) -> None:
    # 45678 is a journal's id: no note (the chunk holds notes 3-4 only) and no ticket.
    assert check(f"{written.format(t=TICKET)} を参照").findings == []
    assert found(f"{written.format(t=PHANTOM)} を参照") == [("phantom_ticket_id", PHANTOM)]


def test_a_source_id_with_a_journal_anchor_cites_its_ticket() -> None:
    def claim(source_id: str) -> dict[str, Any]:
        return {"claims": [{"text": "再起動で直りました", "citations": [{"source_id": source_id}]}]}

    assert check(claim(f"{TICKET}#change-45678")).findings == []
    assert found(claim(f"{PHANTOM}#change-45678")) == [("phantom_source_id", None)]


# --------------------------------------------------------------------------- notes in words


@pytest.mark.parametrize(
    "template",
    [
        "See Note {n} of #{t}",
        "Per Note {n} of ticket {t}, the VPN was restarted.",
        "#{t} の注記 {k}",
        "#{t} の注記{k}で解決",
        "#{t} note {w}",
        "Note {w} of #{t}",
        "See comment {w} on #{t}",
    ],
)
def test_a_note_number_in_words_or_after_a_capitalised_word_is_checked(template: str) -> None:
    def text(n: int) -> str:
        return template.format(t=TICKET, n=n, k="一二三四五六七八九"[n - 1], w={3: "three", 4: "four", 9: "nine"}[n])

    assert check(text(3)).findings == []
    assert check(text(4)).findings == []
    assert found(text(9)) == [("note_not_retrieved", TICKET)]


@pytest.mark.parametrize(
    "text",
    [
        "#{t} の注記一覧",  # the list of notes
        "#{t} の注記 九つ",  # nine of them
        "#{t} の 九番目の注記",  # an ordinal: the ninth note need not be Redmine's note 9
        "the ninth note of #{t}",
        "Galaxy Note 9 in #{t}",  # a phone
        "#{t} note nine times",
    ],
)
def test_counts_ordinals_and_product_names_name_no_note(text: str) -> None:
    assert check(text.format(t=TICKET)).findings == []


def test_a_list_of_notes_in_words_is_checked_note_by_note() -> None:
    assert check(f"#{TICKET} の注記 三と四").findings == []
    assert found(f"#{TICKET} notes three and nine") == [("note_not_retrieved", TICKET)]


# --------------------------------------------------------------------------- lists of ticket numbers


@pytest.mark.parametrize(
    "template",
    ["#{t}, {p}", "#{t} と {p}", "#{t} と {p} を参照", "tickets #{t}, #{p} and {q}", "チケット #{t}、{p}。"],
)
def test_a_shorter_number_ending_a_list_member_is_a_ticket(template: str) -> None:
    phantom = template.format(t=TICKET, p=999, q=1000)
    expected = [("phantom_ticket_id", 999)] + ([("phantom_ticket_id", 1000)] if "{q}" in template else [])
    assert found(phantom) == expected
    assert check(template.format(t=TICKET, p=TICKET, q=TICKET)).findings == []


@pytest.mark.parametrize(
    "text",
    ["#{t} で 3 件", "#{t}, 2 times", "#{t}, 10000 times", "#{t} と 500 エラー", "#{t}, 100 件", "#{t}、2026年12月7日"],
)
def test_a_quantity_after_a_ticket_is_no_ticket(text: str) -> None:
    assert check(text.format(t=TICKET)).findings == []


# --------------------------------------------------------------------------- colours


@pytest.mark.parametrize(
    "text",
    [
        "color: #336699",
        "background:#fff",
        "#33a",
        "#336a99",
        "border: 1px solid #336699;",
        ".btn { box-shadow: 0 0 2px #33669900; }",
        "--brand: #336699;",
        '<rect fill="#336699"/>',
        'style="background-color:#336699"',
    ],
)
def test_a_colour_in_css_is_no_ticket(text: str) -> None:
    assert check(text).findings == []


@pytest.mark.parametrize("text", ["see #336699 here", "border: #99999", "#336699 の件"])
def test_an_all_digit_hash_outside_css_is_still_a_ticket(text: str) -> None:
    assert [kind for kind, _ in found(text)] == ["phantom_ticket_id"]


# --------------------------------------------------------------------------- streams


@pytest.mark.parametrize(
    "text",
    [f"[詳細](/issues/{PHANTOM}) と #{TICKET}", f"#{TICKET}, 999 を参照", f"詳細は{IDN}/issues/{PHANTOM}を参照"],
)
def test_a_stream_cut_anywhere_filters_these_forms_as_the_whole_text(text: str) -> None:
    import asyncio

    async def filtered(cut: int) -> str:
        async def deltas() -> Any:
            yield text[:cut]
            yield text[cut:]

        return "".join([piece async for piece in filter_text_stream(deltas(), {TICKET})])

    whole = check(text).filtered_answer["text"]
    assert UNVERIFIED_MARKER in whole
    for cut in range(len(text) + 1):
        assert asyncio.run(filtered(cut)) == whole, cut
