"""A public ticket's outline without its private journals is the outline rendered without --include-private."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from anchorkit.chunk.private_notes import without_journal_notes, without_journals
from anchorkit.render.document import RenderOptions, history_journals, render_outline
from anchorkit.source.snapshot import load_issue, load_lookups
from tests.support.long_tickets import write_long_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
WIDENED, PUBLIC = RenderOptions(include_private=True), RenderOptions()


def stripped_and_expected(issue: dict[str, Any], lookups: Any) -> tuple[Any, Any, list[int]]:
    journals = history_journals(issue, lookups, WIDENED)
    private = [position for position, journal in enumerate(journals) if journal.get("private_notes")]
    stripped = without_journals(render_outline(issue, lookups, WIDENED), private)
    return stripped, render_outline(issue, lookups, PUBLIC), private


def test_the_fixtures_public_tickets_lose_exactly_their_private_journals() -> None:
    lookups = load_lookups(FIXTURES)
    stripped_any = 0
    for path in sorted((FIXTURES / "issues").glob("*.json")):
        issue = load_issue(path)
        if issue.get("is_private"):
            continue
        stripped, expected, private = stripped_and_expected(issue, lookups)
        assert stripped == expected, path.name
        stripped_any += bool(private)
    assert stripped_any >= 5


@pytest.mark.parametrize("share", [0.3, 0.9, 1.0])
def test_long_tickets_with_any_share_of_private_journals_lose_exactly_those(tmp_path: Path, share: float) -> None:
    # 1.0: every journal private, so the history's heading goes too (as a rendering without them has none).
    ids = write_long_snapshot(tmp_path, 12, seed=5)
    for ticket_id in ids:
        issue = load_issue(tmp_path / "issues" / f"{ticket_id}.json")
        draw = random.Random(ticket_id)
        for journal in issue.get("journals") or []:
            journal["private_notes"] = draw.random() < share
        stripped, expected, private = stripped_and_expected(issue, {})
        assert private and stripped == expected, ticket_id


def test_the_metadata_keep_the_public_notes_numbers_and_lose_the_private_mark() -> None:
    metadata = {"ticket_id": 5, "note_numbers": "1-5,7", "private": True, "project": "p"}
    assert without_journal_notes(metadata, [1, 3]) == {"ticket_id": 5, "note_numbers": "1,3,5,7", "project": "p"}
