"""A snapshot the size of a real service desk's (deterministic): mostly short tidy tickets, some long ones,
and the few monsters every large Redmine has.

One ticket in five is a long one (``long_tickets.long_issue``: ~9,000 tokens, 30+ journals); the others are
the fixtures' tickets again under new ids. The last three are a journal of 50,000 pasted log lines (~5 MB),
a ticket of 800 journals and a description of ~3 MB: over transform's default --max-text-bytes, so a run
either raises it or reports them failed (as a real one would).

    write_scale_snapshot(Path("snap"), 20_000)   # -> the ticket ids written
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

from support.long_tickets import _paragraph, long_issue, lookups

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
FIRST_ID = 100_001
LONG_EVERY = 5  # one long ticket in so many
HUGE_TICKETS = 3
LOG_LINES = 50_000
MANY_JOURNALS = 800
DESCRIPTION_PARAGRAPHS = 6_000
MAX_TEXT_BYTES = 10_000_000  # a --max-text-bytes that lets the huge tickets through


def _short(fixture: dict[str, Any], ticket_id: int) -> dict[str, Any]:
    issue = copy.deepcopy(fixture)
    issue["id"] = ticket_id
    for index, journal in enumerate(issue.get("journals", [])):
        journal["id"] = ticket_id * 1000 + index
    return issue


def _huge(kind: int, ticket_id: int) -> dict[str, Any]:
    rng = random.Random(kind)
    issue = long_issue(ticket_id, random.Random(ticket_id))
    if kind == 0:
        log = "\n".join(
            f"2026-03-01T00:{line // 60 % 60:02d}:{line % 60:02d}Z app[{line % 97}]: request {line} handled in "
            f"{rng.randrange(1, 999)} ms status=200 path=/api/v1/items/{line}"
            for line in range(LOG_LINES)
        )
        issue["journals"][3]["notes"] = "ログを貼ります。\n\n<pre>\n" + log + "\n</pre>"
    elif kind == 1:
        journals = issue["journals"]
        issue["journals"] = [
            dict(journals[index % len(journals)], id=ticket_id * 1000 + index) for index in range(MANY_JOURNALS)
        ]
    else:
        issue["description"] = "\n\n".join(_paragraph(rng, 6) for _ in range(DESCRIPTION_PARAGRAPHS))
    return issue


def write_scale_snapshot(folder: Path, count: int) -> list[int]:
    """Write ``count`` tickets (at least ``HUGE_TICKETS``) as a snapshot in ``folder``; the ticket ids written."""
    issues = folder / "issues"
    issues.mkdir(parents=True, exist_ok=True)
    fixtures = [
        json.loads(path.read_text(encoding="utf-8"))["issue"] for path in sorted(FIXTURES.glob("issues/*.json"))
    ]
    ids = list(range(FIRST_ID, FIRST_ID + count))
    ordinary = count - HUGE_TICKETS
    for index, ticket_id in enumerate(ids):
        if index >= ordinary:
            issue = _huge(index - ordinary, ticket_id)
        elif index % LONG_EVERY == 0:
            issue = long_issue(ticket_id, random.Random(ticket_id))
        else:
            issue = _short(fixtures[index % len(fixtures)], ticket_id)
        document = json.dumps({"issue": issue}, ensure_ascii=False, indent=1)
        (issues / f"{ticket_id}.json").write_text(document, encoding="utf-8")
    (folder / "lookups.json").write_text(json.dumps(lookups(), ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state.json").write_text((FIXTURES / "state.json").read_text(encoding="utf-8"), encoding="utf-8")
    return ids
