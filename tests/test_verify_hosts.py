"""verify and the host of a Redmine URL: an internationalised host is read, and matches its punycode form
both ways; a URL of a retrieved ticket on another host (a look-alike, a typo, ``user@`` before another host)
leads elsewhere and is critical (``foreign_link``), wherever the answer writes it.

The retrieval says where its Redmine is by its chunks' ``url`` metadata (or a source URI that is a Redmine
issue URL); a retrieval that says nothing of it (an S3 layout without urls) checks no host.
"""

from __future__ import annotations

from typing import Any

import pytest

from anchorkit.verify.citations import VerifyOptions, VerifyReport, verify_citations
from anchorkit.verify.html import render_report
from anchorkit.verify.ids import filter_text
from anchorkit.verify.model import UNVERIFIED_MARKER
from anchorkit.verify.shapes import read_answer, read_retrieval
from tests.test_verify_html import parse

TICKET = 12345
PHANTOM = 12399
IDN = "レッドマイン.example"
PUNYCODE = "xn--eck1csa8f1c2b.example"
ASCII = "redmine.example.com"


def chunks(host: str, uri: str | None = None) -> list[dict[str, Any]]:
    """TICKET's chunk holding notes 3-4 (anchorkit's chunk metadata), linked to the Redmine at ``host``."""
    return [
        {
            "id": f"{TICKET}-003",
            "ticket_id": TICKET,
            "text": f"> チケット #{TICKET}: VPN接続が不安定になる\n\n### [2024-06-12] 佐藤\n\n再起動で直りました。",
            **({"uri": uri} if uri else {}),
            "metadata": {"section": "history", "chunk_notes": "3-4", "url": f"https://{host}/issues/{TICKET}#note-3"},
        }
    ]


def check(retrieved: list[dict[str, Any]], answer: Any, on_invalid: str = "drop") -> VerifyReport:
    options = VerifyOptions(on_invalid=on_invalid)  # type: ignore[arg-type]
    return verify_citations(read_answer(answer, "answer"), read_retrieval(retrieved, "r").chunks, options=options)


def found(report: VerifyReport) -> list[tuple[str, int | None]]:
    return [(f.kind, f.ticket_id) for f in report.findings]


# --------------------------------------------------------------------------- an internationalised host


@pytest.mark.parametrize("retrieved_host", [IDN, PUNYCODE])
@pytest.mark.parametrize("written_host", [IDN, PUNYCODE, "XN--ECK1CSA8F1C2B.EXAMPLE.", "ﾚｯﾄﾞﾏｲﾝ.example"])
def test_an_idn_host_and_its_punycode_are_one_redmine(retrieved_host: str, written_host: str) -> None:
    def text(ticket: int, note: int) -> str:
        return f"詳細は https://{written_host}/issues/{ticket}#note-{note} を参照。"

    assert check(chunks(retrieved_host), text(TICKET, 4)).findings == []
    assert found(check(chunks(retrieved_host), text(TICKET, 2))) == [("note_not_retrieved", TICKET)]
    phantom = check(chunks(retrieved_host), text(PHANTOM, 2))
    assert found(phantom) == [("phantom_ticket_id", PHANTOM)]
    assert phantom.filtered_answer["text"] == f"詳細は {UNVERIFIED_MARKER} を参照。"


@pytest.mark.parametrize("host", [IDN, "ｒｅｄｍｉｎｅ.ｅｘａｍｐｌｅ.ｃｏｍ"])
def test_a_phantom_in_a_url_with_a_host_that_is_not_ascii_is_caught_whatever_was_retrieved(host: str) -> None:
    for retrieved in (chunks(ASCII), [{"id": "c", "text": "VPN", "uri": f"s3://kb/tickets/{TICKET}.md"}]):
        report = check(retrieved, f"https://{host}/issues/{PHANTOM}、チケット#{TICKET}です")
        assert found(report) == [("phantom_ticket_id", PHANTOM)]
        assert report.filtered_answer["text"] == f"{UNVERIFIED_MARKER}、チケット#{TICKET}です"


def test_an_ascii_url_that_runs_into_japanese_text_still_ends_where_it_begins() -> None:
    report = check(chunks(ASCII), f"https://wiki.example.com/faqチケット#{PHANTOM}です")
    assert found(report) == [("phantom_ticket_id", PHANTOM)]


# --------------------------------------------------------------------------- hosts that lead elsewhere

LOOK_ALIKES = [
    ("レツドマイン.example", IDN),  # small ッ and big ツ
    ("レッドマイン.example.evil", IDN),
    ("redmine.еxample.com", ASCII),  # a Cyrillic е
    ("redmine.examp1e.com", ASCII),
    ("redmine.exa\u0308mple.com", ASCII),  # a combining mark: a browser makes it "ä", another host
    ("redmine.example.com.evil.example", ASCII),
    (f"{ASCII}@evil.example", ASCII),  # user information: the host is evil.example
    ("straße.example", "strasse.example"),  # IDNA 2008: not the transitional "ss"
]


@pytest.mark.parametrize(("written", "retrieved"), LOOK_ALIKES)
def test_a_url_of_a_retrieved_ticket_on_another_host_is_critical_and_dropped(written: str, retrieved: str) -> None:
    url = f"https://{written}/issues/{TICKET}#note-3"
    report = check(chunks(retrieved), f"手順は {url} を参照。")
    assert found(report) == [("foreign_link", TICKET)]
    assert report.critical == 1 and report.to_json()["ok"] is False
    assert report.filtered_answer["text"] == f"手順は {UNVERIFIED_MARKER} を参照。"
    claim = {"text": f"再起動で直りました ({url})", "citations": [{"source_id": f"{TICKET}-003"}]}
    dropped = check(chunks(retrieved), {"claims": [claim]})
    assert found(dropped) == [("foreign_link", TICKET)] and dropped.filtered_answer["claims"] == []
    flagged = check(chunks(retrieved), {"claims": [claim]}, on_invalid="flag")
    assert len(flagged.filtered_answer["claims"]) == 1 and flagged.critical == 1


@pytest.mark.parametrize(
    "written",
    [
        f"https://{ASCII.upper()}/issues/{TICKET}#note-3",
        f"http://{ASCII}:3000/issues/{TICKET}",
        f"https://user@{ASCII}./issues/{TICKET}",
        f"ｈｔｔｐｓ：／／ｒｅｄｍｉｎｅ．ｅｘａｍｐｌｅ．ｃｏｍ/issues/{TICKET}",
        f"https://red\u00admine.example.com/issues/{TICKET}",  # a soft hyphen: a browser drops it
        f"https:\\\\{ASCII}\\issues\\{TICKET}",
        f"{ASCII}/issues/{TICKET}",
    ],
)
def test_the_same_host_however_written_is_the_retrievals_redmine(written: str) -> None:
    assert check(chunks(ASCII), f"{written} を参照").findings == []


def test_without_a_known_redmine_no_host_is_checked() -> None:
    s3 = [{"id": "c", "text": "VPN 切断は解消しました。", "uri": f"s3://kb/tickets/{TICKET}.md"}]
    assert check(s3, f"https://redmine.examp1e.com/issues/{TICKET} を参照").findings == []


def test_a_source_uri_that_is_a_redmine_url_says_where_the_redmine_is() -> None:
    loader = [{"page_content": "VPN", "metadata": {"source": f"https://{ASCII}/issues/{TICKET}"}}]
    assert check(loader, f"https://{ASCII}/issues/{TICKET}").findings == []
    assert found(check(loader, f"https://redmine.examp1e.com/issues/{TICKET}")) == [("foreign_link", TICKET)]


def test_a_citation_of_a_url_on_another_host_cites_no_retrieved_chunk() -> None:
    def cited(source_id: str) -> VerifyReport:
        return check(
            chunks(IDN), {"claims": [{"text": "再起動で直りました。", "citations": [{"source_id": source_id}]}]}
        )

    assert cited(f"https://{PUNYCODE}/issues/{TICKET}#note-3").critical == 0
    report = cited(f"https://レツドマイン.example/issues/{TICKET}#note-3")
    assert [(f.kind, f.source_id) for f in report.findings if f.severity == "critical"] == [
        ("phantom_source_id", f"https://レツドマイン.example/issues/{TICKET}#note-3")
    ]
    assert f"the retrieved chunks come from {IDN}" in report.findings[0].message


def test_a_result_url_on_another_host_is_critical_filtered_and_not_linked() -> None:
    url = f"https://redmine.examp1e.com/issues/{TICKET}"
    report = check(chunks(ASCII), [{"issue_id": TICKET, "url": url}])
    assert found(report) == [("foreign_link", TICKET)]
    assert report.filtered_answer["results"] == [{"issue_id": TICKET, "url": UNVERIFIED_MARKER}]
    page = render_report(report)
    assert url not in parse(page).hrefs() and "(another host: not linked)" in page


def test_the_page_strikes_a_link_to_another_host_and_says_why() -> None:
    url = f"https://redmine.examp1e.com/issues/{TICKET}"
    page = render_report(check(chunks(ASCII), f"詳細は {url} を参照。"))
    assert f'<del class="phantom" title="not on the Redmine the chunks come from">{url}</del>' in page
    assert "link to another host" in page


def test_filter_text_replaces_a_url_its_caller_says_leads_elsewhere() -> None:
    text = f"https://{ASCII}/issues/{TICKET} と https://evil.example/issues/{TICKET}"
    assert filter_text(text, {TICKET}, elsewhere=lambda url: "evil" in url) == (
        f"https://{ASCII}/issues/{TICKET} と {UNVERIFIED_MARKER}"
    )


# --------------------------------------------------------------------------- URLs as a browser follows them


@pytest.mark.parametrize(
    "url",
    [
        f"https:\\\\{ASCII}\\issues\\{PHANTOM}",
        f"https://{ASCII}\\issues\\{PHANTOM}",
        f"https:/{ASCII}/issues/{PHANTOM}",
        f"https:///{ASCII}/issues/{PHANTOM}",
        f"https://{ASCII}/redmine\\issues/{PHANTOM}",
    ],
)
def test_a_url_with_backslashes_or_other_slashes_after_its_scheme_names_its_ticket(url: str) -> None:
    report = check(chunks(ASCII), f"詳細は {url} を参照")
    assert found(report) == [("phantom_ticket_id", PHANTOM)]
    assert report.filtered_answer["text"] == f"詳細は {UNVERIFIED_MARKER} を参照"
