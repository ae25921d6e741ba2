"""What a snapshot keeps of what is not public, without ``--include-private``: at most a number.

Redmine lists an issue's subtasks with their subjects, private ones included, to any key that sees the
parent: a subtask that is not public is reduced to ``{"id": N}``. An issue Redmine no longer lists may
be withdrawn from publication (private now, moved out of the pulled projects): its documents must go
at once, not as stale documents. Pure functions; :mod:`anchorkit.source.pull` asks Redmine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# state.json records that every stored issue had its private subtasks reduced to their numbers (the
# rule's version: a stricter rule later bumps it, and stored issues are fetched again once).
SUBTASKS_CHECKED = {"private_subtasks_checked": 1}
SUBTASKS_UNCHECKED_WARNING = (
    "issues stored by an earlier anchorkit may show the subjects of private subtasks: all of them are fetched "
    "again, once"
)


def subtasks_checked(state: dict[str, Any]) -> bool:
    """Whether the issues of a snapshot with this state.json were stored with their subtasks checked."""
    return all(state.get(key) == value for key, value in SUBTASKS_CHECKED.items())


def without_private_subtasks(document: dict[str, Any], public_of: Callable[[set[int]], set[int]]) -> dict[str, Any]:
    """``{"issue": ...}`` with every subtask that is not public reduced to its number; ``public_of`` says
    which of some issue ids are public (a request to Redmine)."""
    issue = document["issue"]
    children = issue.get("children")
    ids = subtask_ids(children)
    if not ids or not isinstance(children, list):
        return document
    return {**document, "issue": {**issue, "children": only_public_subtasks(children, public_of(ids))}}


def subtask_ids(children: Any) -> set[int]:
    """The ids of an issue's subtasks, theirs included (Redmine nests them: ``children[].children``)."""
    found: set[int] = set()
    pending = [children]
    while pending:
        level = pending.pop()
        for child in level if isinstance(level, list) else []:
            if isinstance(child, dict) and isinstance(child.get("id"), int):
                found.add(child["id"])
                pending.append(child.get("children"))
    return found


def only_public_subtasks(children: list[Any], public: set[int]) -> list[Any]:
    """``children`` where a subtask that is not public is reduced to its number (``{"id": N}``): Redmine
    lists every subtask with its subject, private ones included, whoever asks."""
    kept: list[Any] = []
    for child in children:
        if not isinstance(child, dict) or child.get("id") not in public:
            if isinstance(child, dict) and isinstance(child.get("id"), int):
                kept.append({"id": child["id"]})
            continue
        nested = child.get("children")
        kept.append({**child, "children": only_public_subtasks(nested, public)} if isinstance(nested, list) else child)
    return kept


def shows_subtask(document: Any, subtask_id: int) -> bool:
    """Does this stored issue show more of the subtask than its number?"""
    pending = [document.get("issue", {}).get("children") if isinstance(document, dict) else None]
    while pending:
        level = pending.pop()
        for child in level if isinstance(level, list) else []:
            if isinstance(child, dict):
                if child.get("id") == subtask_id and set(child) != {"id"}:
                    return True
                pending.append(child.get("children"))
    return False


def is_withdrawn(summary: dict[str, Any], include_private: bool, pulled_projects: set[int] | None) -> bool:
    """Whether an issue Redmine still shows (its listing ``summary``) is out of what is published: private
    (without ``include_private``), or in a project outside ``pulled_projects`` (None: every project)."""
    project = summary.get("project")
    project_id = project.get("id") if isinstance(project, dict) else None
    private = bool(summary.get("is_private")) and not include_private
    return private or (pulled_projects is not None and project_id not in pulled_projects)
