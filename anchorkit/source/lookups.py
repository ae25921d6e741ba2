"""lookups.json: the id -> name tables pull reads from Redmine (statuses, trackers, users...), and the
names an issue reveals, which stand in for a table the key may not read; the users and projects a snapshot
keeps of them (:func:`narrowed`); the projects a --project covers (:class:`ProjectScope`). Pure, but for
:class:`LookupFetcher`, which asks Redmine through the client it is given."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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
    # (Not the login: no document shows it, and it names an account to whoever reads the snapshot.)
    return {"name": f"{record.get('firstname', '')} {record.get('lastname', '')}".strip()}


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
    """Reads the lookup tables from Redmine, each at most once a run; tables the key may not read are noted,
    not fatal. ``tables``: those it read completely."""

    def __init__(self, client: RedmineClient) -> None:
        self.client = client
        self.tables: Names = {}
        self.forbidden: set[str] = set()
        self.failed: set[str] = set()

    def table(self, name: str) -> dict[str, dict[str, Any]] | None:
        """The table ``name`` of :data:`GLOBAL_TABLES`, read unless it was already; None when it cannot be."""
        if name not in self.tables and name not in self.forbidden | self.failed:
            manager, params, row = GLOBAL_TABLES[name]
            self._read_into(self.tables, name, manager, params, row)  # (nothing of a table it cannot read)
        return self.tables.get(name)

    def fetch(self, project_ids: list[int]) -> Names:
        """Every table it could read completely (the project tables of these projects); a forbidden or failed
        table is absent from the result."""
        for name in GLOBAL_TABLES:
            self.table(name)
        tables: Names = {}
        for project_id in project_ids:
            for name, (manager, row) in PROJECT_TABLES.items():
                self._read_into(tables, name, manager, {"project_id": project_id}, row)
        self.tables.update((name, rows) for name, rows in tables.items() if name not in self.forbidden | self.failed)
        return self.tables

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


# The tables lookups.json keeps only the rows of that its snapshot needs: the users, projects and custom fields its
# issues name (with --project, the projects it covers too), not every one the key may see (a name may be
# confidential: a project whose issues are all private, a field of another project's or one only some roles see).
NARROWED_TABLES = ("users", "projects", "custom_fields")
# state.json: lookups.json was narrowed so (by a run that knew what every stored issue names), by the rule of this
# version of it (1: users, and projects with --project only; 2: projects always, custom fields too); a snapshot
# without it, or narrowed by an earlier rule, has its files read once for that.
NARROWED_STATE = "lookups_narrowed"
NARROWED_VERSION = 2
# state.json: the largest project id when the projects table was last read; a project with a larger one is newer.
PROJECTS_MAX_ID = "projects_max_id"
# The journal changes whose values are ids of those, named through lookups.json alone (render/document.py).
DETAIL_TABLES = {"assigned_to_id": "users", "author_id": "users", "project_id": "projects"}
NamedIds = dict[str, set[str]]  # table of NARROWED_TABLES -> ids (as lookups.json keys them)


def named_ids(issue: dict[str, Any]) -> NamedIds:
    """The users, projects and custom fields an issue names: with their names (author, assignee, journal users, its
    project, its custom fields), and by id alone, in its journals' changes (an assignee, author or project changed;
    a custom field's value changed, which the history names through lookups.json)."""
    found: NamedIds = {table: set(rows) for table, rows in names_in_issue(issue).items() if table in NARROWED_TABLES}
    for journal in issue.get("journals") or []:
        details = journal.get("details") if isinstance(journal, dict) else None
        for detail in details if isinstance(details, list) else []:
            if not isinstance(detail, dict):
                continue
            if detail.get("property") == "cf" and detail.get("name") not in (None, ""):
                found.setdefault("custom_fields", set()).add(str(detail["name"]))
            table = DETAIL_TABLES.get(str(detail.get("name")))
            if table is None or detail.get("property") != "attr":
                continue
            values = (detail.get("old_value"), detail.get("new_value"))
            found.setdefault(table, set()).update(str(value) for value in values if value not in (None, ""))
    return found


def unknown_key(table: str) -> str:
    """The state.json key of the ids of ``table`` (users, projects) that the snapshot's issues name and that Redmine's
    table did not list when read (a locked user, a project the key may not see): an issue naming them has the table
    read no more (the next lookups refresh reads it all the same)."""
    return f"unknown_{table}"


def current_lookups(
    fetcher: LookupFetcher, cached: Names, seen: Names, named: NamedIds, unknown: NamedIds, may_read: bool
) -> tuple[Names, NamedIds]:
    """The lookups after a run, and the ids ``named`` (or ``unknown`` already) that a table read did not list.
    Tables read completely replace the cached ones (forbidden or failed ones keep what we had), names seen in the
    issues fill what they lack. A user or project an issue names by id alone (a journal's change of assignee or
    project) that no table holds, and no earlier read found unknown, has its table read (``may_read``), once a
    run: lookups.json keeps only those the snapshot names, so one new to it is missing until then."""
    lookups = {**cached, **fetcher.tables}
    fill_missing(lookups, seen)

    def missing() -> NamedIds:
        wanted = {table: named.get(table, set()) | unknown.get(table, set()) for table in NARROWED_TABLES}
        return {table: ids - lookups.get(table, {}).keys() for table, ids in wanted.items()}

    unread = [table for table, ids in missing().items() if ids - unknown.get(table, set())]
    if unread and may_read:
        with fetcher.client.stats.purpose("lookups"):
            for table in unread:
                fetcher.table(table)
        lookups = {**lookups, **fetcher.tables}
        fill_missing(lookups, seen)
    read = set(fetcher.tables) | fetcher.forbidden  # (an id is unknown once a table read does not list it)
    still = missing()
    return lookups, {table: ids if table in read else ids & unknown.get(table, set()) for table, ids in still.items()}


def add_named(into: NamedIds, more: Mapping[str, set[str]]) -> None:
    for table, ids in more.items():
        into.setdefault(table, set()).update(ids)


def narrowed(lookups: Names, keep: Mapping[str, set[str]]) -> Names:
    """``lookups`` with each table of ``keep`` reduced to the rows of its ids (the other tables as they are)."""
    return {
        table: {key: row for key, row in rows.items() if key in keep[table]} if table in keep else rows
        for table, rows in lookups.items()
    }


@dataclass(frozen=True)
class ProjectScope:
    """The projects a run with --project pulls, by a projects table: those named and their subprojects."""

    ids: frozenset[int]

    @classmethod
    def of(cls, projects: dict[str, dict[str, Any]], wanted: tuple[str, ...]) -> ProjectScope | None:
        """None unless the table holds every project of ``wanted`` (identifiers or ids)."""
        roots = resolve_projects(projects, list(wanted))
        if roots is None or not roots <= {number for key in projects if (number := ascii_number(key)) is not None}:
            return None
        return cls(frozenset(descendants(projects, roots)))

    def __contains__(self, project_id: object) -> bool:
        return project_id in self.ids

    def covers(self, summary: dict[str, Any]) -> bool:
        """Whether a listed issue is in one of these projects."""
        return project_of(summary) in self.ids


def project_of(summary: dict[str, Any]) -> int | None:
    """The id of a listed issue's project (None if the listing does not say)."""
    project = summary.get("project")
    project_id = project.get("id") if isinstance(project, dict) else None
    return project_id if isinstance(project_id, int) and not isinstance(project_id, bool) else None
