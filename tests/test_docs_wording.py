"""The docs speak to users: no words from the project's internal notes, no files that are not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "fixtures").rglob("README.md")])
# The design documents the project started from ("seed 000"), who merges ("the lead"), notes to an editor.
INTERNAL = re.compile(r"\bseed[- ]?\d{3}\b|\bseed-style\b|\bthe seed's\b|\bthe lead\b|\blead's\b|For the README", re.I)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_say_what_a_thing_is_not_where_it_came_from(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert [match[0] for match in INTERNAL.finditer(text)] == []


# A file of the project, as the docs name it: a path (`tests/support/faultproxy.py`, `sync/apply.py` inside
# anchorkit/) or a top-level document (`DESIGN.md`); not a user's file (`./anchorkit.toml`) or a placeholder.
PROJECT_FILE = re.compile(r"(?:[a-z_]+/)+[\w.-]+\.(?:md|py|sh|toml|json|jsonl)|[A-Z]{2,}\.md")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_files_the_docs_name_exist(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    # What the docs quote as code (`...`) and where they link ([...](...)).
    quoted = re.findall(r"`([^`\s]+)`|\]\(([^)#\s]+)\)", text)
    named = {name for pair in quoted for name in pair if name}
    bases = (REPO, path.parent, REPO / "anchorkit", REPO / "tests")
    missing = [
        name for name in sorted(named) if PROJECT_FILE.fullmatch(name) and not any((b / name).exists() for b in bases)
    ]
    assert missing == []
