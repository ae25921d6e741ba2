"""What a snapshot keeps of what is not public, without ``--include-private``: at most a number.

Private notes are left out of the journals, and the values of custom fields only some roles may see
out of the issue and its journals. Redmine lists an issue's subtasks with their subjects,
private ones included, to any key that sees the parent: a subtask that is not public is reduced to
``{"id": N}``. An issue Redmine no longer lists may be withdrawn from publication (private now, moved
out of the pulled projects): its documents must go at once, not as stale documents. Pure functions;
:mod:`anchorkit.source.pull` asks Redmine.
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


def without_private_notes(document: dict[str, Any]) -> dict[str, Any]:
    """The issue minus journals marked ``private_notes`` (an admin key sees them all, so we filter)."""
    issue = document["issue"]
    journals = issue.get("journals")
    if not isinstance(journals, list) or not any(j.get("private_notes") for j in journals if isinstance(j, dict)):
        return document
    public = [j for j in journals if not (isinstance(j, dict) and j.get("private_notes"))]
    return {**document, "issue": {**issue, "journals": public}}


# Custom fields Redmine shows only to some roles (``visible: false``): an administrator's key sees their
# values in every issue, and in the journals that changed them. Left out like private notes. state.json
# records the fields every stored issue was filtered with: when they differ from the run's, all the
# stored issues are fetched again (a field restricted later changes no issue's ``updated_on``).
RESTRICTED_FIELDS_KEY = "restricted_custom_fields"
RESTRICTED_FIELDS_CHANGED_WARNING = (
    "the stored issues were not filtered with the custom fields restricted to some roles now (stored by an "
    "earlier anchorkit, or a field's visibility changed): all of them are fetched again"
)


def restricted_field_ids(definitions: Any) -> frozenset[int]:
    """The ids of the custom fields not visible to everyone, from ``/custom_fields.json``'s records (admin
    only). A record that does not say ``visible: true`` counts as restricted: the safe side. ValueError
    for anything that is not a list of records with ids."""
    if not isinstance(definitions, list):
        raise ValueError("not a list of custom fields")
    restricted: set[int] = set()
    for record in definitions:
        field_id = record.get("id") if isinstance(record, dict) else None
        if not isinstance(field_id, int) or isinstance(field_id, bool):
            raise ValueError("a custom field without an id")
        if record.get("visible") is not True:
            restricted.add(field_id)
    return frozenset(restricted)


def filtered_fields_changed(state: dict[str, Any], restricted: frozenset[int]) -> bool:
    """Whether the stored issues of a snapshot with this state.json were filtered with other restricted
    custom fields than ``restricted`` (or never: no record)."""
    return state.get(RESTRICTED_FIELDS_KEY) != sorted(restricted)


def without_restricted_fields(document: dict[str, Any], restricted: frozenset[int]) -> dict[str, Any]:
    """``{"issue": ...}`` without the values of these custom fields: neither the issue's own nor the
    journals' changes of them (details ``{"property": "cf", "name": "<id>"}``, old and new values). The
    journals stay, so that Redmine's note numbers still count them."""
    issue = document["issue"]
    if not restricted:
        return document
    names = {str(field_id) for field_id in restricted}
    changed: dict[str, Any] = {}
    fields = issue.get("custom_fields")
    if isinstance(fields, list):
        changed["custom_fields"] = [f for f in fields if not (isinstance(f, dict) and f.get("id") in restricted)]
    journals = issue.get("journals")
    if isinstance(journals, list):
        changed["journals"] = [_without_field_changes(journal, names) for journal in journals]
    return {**document, "issue": {**issue, **changed}}


def holds_restricted_fields(issue: dict[str, Any], restricted: frozenset[int]) -> bool:
    """Whether the issue holds a value of one of these custom fields: its own, or a journal's change of one."""
    if not restricted:
        return False
    return without_restricted_fields({"issue": issue}, restricted)["issue"] != issue


def _without_field_changes(journal: Any, names: set[str]) -> Any:
    details = journal.get("details") if isinstance(journal, dict) else None
    if not isinstance(details, list):
        return journal
    return {**journal, "details": [d for d in details if not _changes_field(d, names)]}


def _changes_field(detail: Any, names: set[str]) -> bool:
    return isinstance(detail, dict) and detail.get("property") == "cf" and str(detail.get("name")) in names
