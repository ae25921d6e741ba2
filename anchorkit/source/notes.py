"""Redmine's note numbers (``/issues/5#note-3``) for the journals pull stores.

Redmine numbers all of an issue's journals 1, 2, ... in (created_on, id) order, private notes and
journals that only change attributes included, and its issue page marks the n-th with
``id="note-n"`` (``Issue#visible_journals_with_index``, Redmine 5.0). The REST API does not give the
numbers (5.0's ``issues/show.api.rsb`` has none), and it leaves out the private notes of others
when the key may not view private notes in the issue's project: the numbers of the journals after
a hidden one cannot then be known from what it returns.

So pull numbers the journals of an issue from the full list the API returned, before it drops the
private notes (privacy.without_private_notes), and only when the key sees every journal of that
issue: it is an administrator, or one of its roles in the issue's project has
``view_private_notes``. Otherwise the journals get no number, and a link to a chunk of them is the
issue's URL without a fragment: a link to the wrong note would be worse than none. The numbers are
stored in each journal as ``note_number`` (a key Redmine does not use).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from anchorkit.errors import WorkFailed

if TYPE_CHECKING:  # transform reads the numbers and must not need python-redmine for it
    from anchorkit.source.redmine import RedmineClient

NOTE_NUMBER = "note_number"
VIEW_PRIVATE_NOTES = "view_private_notes"


def numbered_if_complete(document: dict[str, Any], numbering: NoteNumbering | None) -> dict[str, Any]:
    """``with_note_numbers(document)`` when ``numbering`` says the key sees every journal, else ``document``."""
    return with_note_numbers(document) if numbering and numbering.sees_every_journal(document["issue"]) else document


def with_note_numbers(document: dict[str, Any]) -> dict[str, Any]:
    """``{"issue": ...}`` with each journal's Redmine note number, counted over all its journals.

    Sorted here rather than taken from the list's order: Redmine reverses the list for a user who
    prefers comments in reverse order, but never the numbering.
    """
    issue = document["issue"]
    journals = issue.get("journals")
    if not isinstance(journals, list):
        return document
    ordered = sorted((j for j in journals if isinstance(j, dict)), key=_redmine_order)
    number = {id(journal): index for index, journal in enumerate(ordered, 1)}
    numbered = [{**j, NOTE_NUMBER: number[id(j)]} if isinstance(j, dict) else j for j in journals]
    return {**document, "issue": {**issue, "journals": numbered}}


def _redmine_order(journal: dict[str, Any]) -> tuple[str, int]:
    created_on, journal_id = journal.get("created_on"), journal.get("id")
    return (created_on if isinstance(created_on, str) else "", journal_id if isinstance(journal_id, int) else 0)


def note_numbers(journals: Iterable[dict[str, Any]]) -> list[int] | None:
    """The stored note numbers of these journals, in order; None unless every one has its number."""
    numbers = [journal.get(NOTE_NUMBER) for journal in journals]
    if not numbers or not all(isinstance(n, int) and not isinstance(n, bool) for n in numbers):
        return None
    return numbers  # type: ignore[return-value]


class NoteNumbering:
    """Whether the key sees every journal of an issue, so that its journals may be numbered.

    ``user``: ``/users/current.json?include=memberships`` (``admin`` is shown to the user itself).
    The permissions of the key's roles are read once each, when an issue of a project the key is a
    member of is first stored; a role that cannot be read counts as one without the permission.
    """

    def __init__(self, client: RedmineClient, user: dict[str, Any]) -> None:
        self.client = client
        self.admin = user.get("admin") is True
        self.project_roles: dict[int, set[int]] = {}
        for membership in user.get("memberships") or []:
            project = membership.get("project") if isinstance(membership, dict) else None
            if isinstance(project, dict) and isinstance(project.get("id"), int):
                roles = {r["id"] for r in membership.get("roles") or [] if isinstance(r, dict) and "id" in r}
                self.project_roles.setdefault(project["id"], set()).update(roles)
        self.role_allows: dict[int, bool] = {}
        self.lock = threading.Lock()

    def sees_every_journal(self, issue: dict[str, Any]) -> bool:
        if self.admin:
            return True
        project = issue.get("project")
        project_id = project.get("id") if isinstance(project, dict) else None
        roles = self.project_roles.get(project_id, set()) if isinstance(project_id, int) else set()
        return any(self._allows(role) for role in sorted(roles))

    def _allows(self, role_id: int) -> bool:
        with self.lock:
            if role_id not in self.role_allows:
                self.role_allows[role_id] = self._read_role(role_id)
            return self.role_allows[role_id]

    def _read_role(self, role_id: int) -> bool:
        try:
            with self.client.stats.purpose("roles"):
                role = self.client.get_json(f"/roles/{role_id}.json").get("role")
        except WorkFailed:  # RedmineError: the role is not readable with this key
            return False
        return isinstance(role, dict) and VIEW_PRIVATE_NOTES in (role.get("permissions") or [])
