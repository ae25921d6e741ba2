"""The chunker on hostile tickets (tests/support/hostile_tickets.py), judged by what a consumer reads
(tests/support/chunk_judge.py): every chunk begins with its ticket's anchor or title and names no other, none
is over N, the chunks give the content back, at most 1.25x the fewest chunks possible, and each links to its
note. tests/benchmarks/bench_chunk_hostile.py runs the same judge over thousands of them."""

from __future__ import annotations

import json
import math
import random
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.chunk_judge import Ticket, judge, sections_of
from support.hostile_tickets import REDMINE_URL, SHAPES, TEXT_FORMAT, hostile_issue, tables
from support.long_tickets import long_issue, lookups

from anchorkit.anchors import ANCHOR_PATTERN, strip_anchors
from anchorkit.chunk import ChunkError, chunk_document
from anchorkit.chunk.writers import chunk_record
from anchorkit.render.document import RenderOptions, history_journals, render_document, render_outline
from anchorkit.source.notes import with_note_numbers
from anchorkit.tokens import load_cl100k_base

TOKENIZER = load_cl100k_base()
LOOKUPS = lookups()


def rendered(issue: dict[str, Any], lang: str = "ja") -> tuple[str, Ticket, dict[str, Any]]:
    """The ticket's document, what the judge knows of it, and the metadata its sidecar gives the chunker."""
    issue = with_note_numbers({"issue": issue})["issue"]
    options = RenderOptions(text_format=TEXT_FORMAT, chunk_tokens=0, lang=lang)
    document = render_document(issue, LOOKUPS, options)
    whole = render_document(
        issue, LOOKUPS, RenderOptions(text_format=TEXT_FORMAT, chunk_tokens=0, lang=lang, anchor_subject_chars=0)
    )
    outline = render_outline(issue, LOOKUPS, options)
    content = strip_anchors(document)
    assert outline.content == content
    journals = history_journals(issue, LOOKUPS, options)
    sections, journal_starts = sections_of(outline.headings)
    url = f"{REDMINE_URL}/issues/{issue['id']}"
    anchor = next(m[0] for m in ANCHOR_PATTERN.finditer(whole) if int(m["id"]) == issue["id"])
    ticket = Ticket(
        issue["id"],
        content,
        document.split("\n", 1)[0],
        anchor,
        url,
        sections,
        journal_starts,
        [j["note_number"] for j in journals] or None,
    )
    metadata = {"ticket_id": issue["id"], "subject": issue["subject"], "url": url}
    if journals:
        metadata["note_numbers"] = [j["note_number"] for j in journals]
    return document, ticket, metadata


def records(document: Any, metadata: dict[str, Any], chunk_tokens: int, overlap: int = 0) -> list[dict[str, Any]]:
    chunks = chunk_document(document, metadata, TOKENIZER, chunk_tokens, overlap).chunks
    return [json.loads(json.dumps(chunk_record(chunk), ensure_ascii=False)) for chunk in chunks]


def fewest(ticket: Ticket, header: str, chunk_tokens: int) -> int:
    """ceil((content - header) / (N - header)): the packing lower bound."""
    header_tokens = TOKENIZER.count(header)
    return max(1, math.ceil((TOKENIZER.count(ticket.content) - header_tokens) / (chunk_tokens - header_tokens)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    shapes=st.lists(st.sampled_from(sorted(SHAPES)), min_size=1, max_size=3, unique=True),
    chunk_tokens=st.one_of(st.sampled_from([64, 300, 512]), st.integers(48, 600)),
    overlap_share=st.sampled_from([0, 0, 0.05, 0.25, 0.5]),
    lang=st.sampled_from(["ja", "en"]),
)
def test_any_hostile_ticket_keeps_the_five_promises(
    seed: int, shapes: list[str], chunk_tokens: int, overlap_share: float, lang: str
) -> None:
    label = "チケット" if lang == "ja" else "Ticket"
    issue = hostile_issue(70001 + seed % 1000, random.Random(seed), shapes, label, small=True)
    document, ticket, metadata = rendered(issue, lang)
    overlap = int(chunk_tokens * overlap_share)
    try:
        found = records(document, metadata, chunk_tokens, overlap)
    except ChunkError as error:  # only a chunk length too small for the ticket's anchor (and overlap)
        assert "at least 16 needed" in str(error)
        return
    verdict = judge(ticket, found, TOKENIZER, chunk_tokens, overlap)
    # The lower bound can be within a few tokens of what its chunks hold, which no cut can reach (a cut inside a
    # token costs one more): a ticket of one chunk more than 1.25x of it is let pass when that is so.
    if "count" in verdict.broken and verdict.chunks == verdict.lower_bound + 1 and verdict.lower_bound <= 4:
        del verdict.broken["count"]
    assert not verdict.broken and not verdict.exposed, (verdict.broken, verdict.exposed)
    # The outline the snapshot path chunks gives the same chunks as the document.
    outline = render_outline(
        with_note_numbers({"issue": issue})["issue"],
        LOOKUPS,
        RenderOptions(text_format=TEXT_FORMAT, chunk_tokens=0, lang=lang),
    )
    assert records(outline, metadata, chunk_tokens, overlap) == found


@pytest.mark.parametrize("chunk_tokens", [64, 100])
def test_a_long_ticket_at_a_small_chunk_length_is_at_most_a_quarter_over_the_fewest_chunks(chunk_tokens: int) -> None:
    """At 64 tokens, 16 of them the anchor, the sentences and list items that fit in a chunk but not in what
    is left of one ended chunks half full: every long ticket was 1.3 to 1.5x the fewest chunks possible."""
    issue = long_issue(50001, random.Random(50001))
    document, ticket, metadata = rendered(issue)
    found = records(document, metadata, chunk_tokens)
    verdict = judge(ticket, found, TOKENIZER, chunk_tokens)
    assert not verdict.broken, verdict.broken
    assert len(found) <= 1.25 * verdict.lower_bound


def test_a_table_of_rows_of_half_a_chunk_beside_a_long_anchor_is_cut_inside_rows_when_it_must() -> None:
    """Rows that fit in a chunk one at a time but not two (40 columns, an anchor of a quarter of the chunk for a
    255-character subject): a chunk a row was 1.8x the fewest chunks possible."""
    rng = random.Random(3)
    while "列39" not in (table := tables(rng, textile=False)) or table.count("\n") < 100:
        pass
    subject = "".join(chr(code) for code in range(0x4E00, 0x9FFF, 97))[:255]
    issue = {"id": 70030, "subject": subject, "description": table, "created_on": "2025-06-01T00:00:00Z"}
    document, ticket, metadata = rendered(issue)
    found = records(document, metadata, 512)
    verdict = judge(ticket, found, TOKENIZER, 512)
    assert not verdict.broken, verdict.broken
    assert len(found) <= 1.25 * verdict.lower_bound


def test_a_line_without_letters_is_cut_between_characters_a_reader_sees_apart() -> None:
    """Emoji with ZWJ sequences, flags, skin tones, keycaps and variation selectors, without a letter or digit in
    a chunk's reach: such a line was cut wherever the tokens ran out, leaving a chunk that
    ends inside a family emoji and one that begins with a ZWJ or half a flag."""
    clusters = [
        "👨\u200d👩\u200d👧\u200d👦",
        "🇯🇵",
        "👩🏽\u200d💻",
        "❤\ufe0f",
        "#\ufe0f\u20e3",
        "🏳\ufe0f\u200d🌈",
        "🧑🏻\u200d🤝\u200d🧑🏿",
        "。",
    ]
    rng = random.Random(5)
    line = "".join(rng.choice(clusters) for _ in range(600))
    issue = {"id": 70002, "subject": "絵文字", "description": line, "created_on": "2025-06-01T00:00:00Z"}
    document, ticket, metadata = rendered(issue)
    for chunk_tokens in (64, 300):
        found = chunk_document(document, metadata, TOKENIZER, chunk_tokens).chunks
        assert len(found) > 5
        for chunk in found[1:]:
            at = chunk.own_start
            before, after = ticket.content[at - 1], ticket.content[at]
            assert before != "\u200d" and after not in "\u200d\ufe0f\u20e3", (chunk_tokens, at)
            assert not ("🏻" <= after <= "🏿"), (chunk_tokens, at)
            if "\U0001f1e6" <= after <= "\U0001f1ff":  # a flag's first half: an even number of halves before it
                run = at
                while "\U0001f1e6" <= ticket.content[run - 1] <= "\U0001f1ff":
                    run -= 1
                assert (at - run) % 2 == 0, (chunk_tokens, at)


@pytest.mark.parametrize(
    ("seed", "shapes", "chunk_tokens", "overlap"),
    [
        (937174, ["code_fences"], 100, 33),
        (816691, ["unicode_soup", "forgeries"], 200, 100),
        (761075, ["forgeries"], 512, 256),
        (681218, ["base64_blob"], 100, 33),
    ],
)
def test_an_overlap_that_ends_inside_a_token_repeats_no_more_than_asked(
    seed: int, shapes: list[str], chunk_tokens: int, overlap: int
) -> None:
    """Where the previous chunk ends inside a token, the offsets say one token less than the repeated text
    costs on its own: the overlap repeated one or two tokens more than --chunk-overlap."""
    issue = hostile_issue(70001 + seed % 1000, random.Random(seed), shapes, small=True)
    document, ticket, metadata = rendered(issue)
    chunks = chunk_document(document, metadata, TOKENIZER, chunk_tokens, overlap).chunks
    repeated = [TOKENIZER.count(ticket.content[b.start : a.end]) for a, b in pairwise(chunks)]
    assert max(repeated) <= overlap and sum(repeated) > 0
