"""lookups.json: the id -> name tables pull reads from Redmine (statuses, trackers, users...), and the
names an issue reveals, which stand in for a table the key may not read. Pure, but for
:class:`LookupFetcher`, which asks Redmine through the client it is given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anchorkit.source.redmine import RedmineClient, RedmineError
from anchorkit.untrusted import ascii_number

Names = dict[str, dict[str, dict[str, Any]]]  # table -> id -> {"name": ...}, the lookups.json shape


def names_in_issue(issue: dict[str, Any]) -> Names:
    """Every id -> name pair an issue reveals, per lookups table (the fallback when a table is forbidden)."""
    names: Names = {}

    def add(table: str, ref: Any, **extra: Any) -> None:
        if isinstance(ref, dict) and ref.get("id") is not None and isinstance(ref.get("name"), str):
            names.setdefault(table, {})[str(ref["id"])] = {"name": ref["name"], **extra}

    status = issue.get("status")
    closed = {"is_closed": status["is_closed"]} if isinstance(status, dict) and "is_closed" in status else {}
    add("statuses", status, **closed)
    add("trackers", issue.get("tracker"))
    add("priorities", issue.get("priority"))
    add("projects", issue.get("project"))
    add("versions", issue.get("fixed_version"))
    add("categories", issue.get("category"))
    for role in ("author", "assigned_to"):
        add("users", issue.get(role))
    for journal in issue.get("journals") or []:
        if isinstance(journal, dict):
            add("users", journal.get("user"))
    for custom_field in issue.get("custom_fields") or []:
        add("custom_fields", custom_field)
    return names


def fill_missing(lookups: Names, seen: Names) -> None:
    """Add names seen in issues for ids a table lacks; ids the API described are left as they are."""
    for table, rows in seen.items():
        target = lookups.setdefault(table, {})
        for key, row in rows.items():
            target.setdefault(key, row)


Row = Callable[[dict[str, Any]], "dict[str, Any] | None"]  # API record -> lookups row (None: skip it)


def user_row(record: dict[str, Any]) -> dict[str, Any]:
    return {"name": f"{record.get('firstname', '')} {record.get('lastname', '')}".strip(), "login": record.get("login")}


def project_row(record: dict[str, Any]) -> dict[str, Any]:
    parent = record.get("parent") or {}
    return {"name": record["name"], "identifier": record.get("identifier"), "parent_id": parent.get("id")}


def custom_field_row(record: dict[str, Any]) -> dict[str, Any] | None:
    if record.get("customized_type") != "issue":
        return None
    return {"name": record["name"], "field_format": record.get("field_format")}


def name_row(record: dict[str, Any]) -> dict[str, Any]:
    return {"name": record["name"]}


def status_row(record: dict[str, Any]) -> dict[str, Any]:
    return {"name": record["name"], "is_closed": bool(record.get("is_closed"))}


def version_row(record: dict[str, Any]) -> dict[str, Any]:
    return {"name": record["name"], "status": record.get("status")}


# table -> (python-redmine manager, filter params, row shape); versions and categories are per project.
GLOBAL_TABLES: dict[str, tuple[str, dict[str, Any], Row]] = {
    "statuses": ("issue_status", {}, status_row),
    "trackers": ("tracker", {}, name_row),
    "priorities": ("enumeration", {"resource": "issue_priorities"}, name_row),
    "custom_fields": ("custom_field", {}, custom_field_row),
    "users": ("user", {}, user_row),
    "projects": ("project", {}, project_row),
}
PROJECT_TABLES: dict[str, tuple[str, Row]] = {
    "versions": ("version", version_row),
    "categories": ("issue_category", name_row),
}


class LookupFetcher:
    """Reads the lookup tables from Redmine; tables the key may not read are noted, not fatal."""

    def __init__(self, client: RedmineClient) -> None:
        self.client = client
        self.forbidden: set[str] = set()
        self.failed: set[str] = set()

    def fetch(self, project_ids: list[int]) -> Names:
        """Every table it could read completely; a forbidden or failed table is absent from the result."""
        tables: Names = {}
        for name, (manager, params, row) in GLOBAL_TABLES.items():
            self._read_into(tables, name, manager, params, row)
        for project_id in project_ids:
            for name, (manager, row) in PROJECT_TABLES.items():
                self._read_into(tables, name, manager, {"project_id": project_id}, row)
        for name in self.forbidden | self.failed:
            tables.pop(name, None)
        return tables

    def _read_into(self, tables: Names, name: str, manager: str, params: dict[str, Any], row: Row) -> None:
        try:
            records = self.client.all_of(manager, params)
        except RedmineError as error:
            (self.forbidden if error.status in (403, 404) else self.failed).add(name)
            return
        try:
            shaped_rows = {str(record["id"]): shaped for record in records if (shaped := row(record)) is not None}
        except (KeyError, TypeError):  # records without an id or a name: not the table we asked for
            self.failed.add(name)
            return
        tables.setdefault(name, {}).update(shaped_rows)


def descendants(projects: dict[str, dict[str, Any]], roots: set[int]) -> set[int]:
    """The given project ids and all their subprojects (a project's issue list includes subprojects)."""
    found = set(roots)
    grew = True
    while grew:
        grew = False
        for key, row in projects.items():
            if row.get("parent_id") in found and int(key) not in found:
                found.add(int(key))
                grew = True
    return found


def resolve_projects(projects: dict[str, dict[str, Any]], wanted: list[str]) -> set[int] | None:
    """Ids for project identifiers (or numeric ids); None if one is unknown (then nothing is removed)."""
    by_identifier = {row.get("identifier"): int(key) for key, row in projects.items()}
    ids: set[int] = set()
    for ident in wanted:
        if (number := ascii_number(ident)) is not None:
            ids.add(number)
        elif ident in by_identifier:
            ids.add(by_identifier[ident])
        else:
            return None
    return ids
