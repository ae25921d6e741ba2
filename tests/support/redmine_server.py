"""Pytest plugin: a real Redmine (Debian's `redmine` package) on 127.0.0.1 for integration tests.

Registered in tests/conftest.py's ``pytest_plugins``. What it offers:

- ``redmine_server`` (session fixture) -> :class:`RedmineServer`: ``url`` (base URL), ``admin_key`` (the
  admin's API key; never print it), ``reader_role_id`` (a role that may view, add and edit issues and add
  notes but lacks ``view_private_notes``), ``custom_field_id`` (an issue custom field "影響範囲", string,
  for all projects and trackers). The server is started once per test session on a free port through
  ``scripts/redmine-server.sh start`` and stopped at the end. Set ``ANCHORKIT_REDMINE_URL`` to reuse a
  server that is already running instead.
- ``redmine_admin`` (session fixture) -> :class:`RedmineAdmin`, a small REST client acting as admin:
  ``create_project()``, ``create_user(admin=False)`` (returns the user with its ``api_key``),
  ``add_member(project_id, user_id, role_ids)``, ``create_issue(project_id, subject, **fields)``,
  ``update_issue(issue_id, **fields)`` (status_id, assigned_to_id, custom_fields, notes, private_notes, ...),
  ``add_note(issue_id, notes, private=False)``, ``delete_issue(issue_id)``, ``get_issue(issue_id)``,
  ``request(method, path, json=None, params=None, api_key=None)`` for anything else, and
  ``rails_runner(ruby_code) -> stdout`` for what the REST API cannot do (roles, custom field
  definitions, ``Setting.text_formatting = "common_mark"``, fast seeding with ActiveRecord).
- ``redmine_project`` (function fixture) -> a fresh project dict (unique identifier), so tests never
  depend on each other or on data left by earlier runs (the Debian SQLite database persists in
  /var/lib/dbconfig-common/sqlite3/redmine/instances/default/; configuration in /etc/redmine/default/).

Scripts (benchmarks) use ``with running_redmine() as server:`` for the same server without pytest.

When Redmine cannot be installed or started, the fixtures call ``support.skip_or_fail``: a skip locally,
a failure under CI=true.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from support import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
SERVER_SCRIPT = REPO / "scripts" / "redmine-server.sh"
REDMINE_HOME = Path("/usr/share/redmine")
READER_ROLE_NAME = "anchorkit reader (no private notes)"
CUSTOM_FIELD_NAME = "影響範囲"
ADMIN_ATTEMPTS = 4

# One runner call (each costs seconds): enable REST, ensure the role and custom field, report ids and key.
SETUP_RUBY = f"""
Setting.rest_api_enabled = "1"
role = Role.find_by(name: {READER_ROLE_NAME!r}) || Role.create!(
  name: {READER_ROLE_NAME!r}, issues_visibility: "default",
  permissions: [:view_issues, :add_issues, :edit_issues, :add_issue_notes, :view_project])
field = IssueCustomField.find_by(name: {CUSTOM_FIELD_NAME!r}) || IssueCustomField.create!(
  name: {CUSTOM_FIELD_NAME!r}, field_format: "string", is_for_all: true, visible: true,
  tracker_ids: Tracker.pluck(:id))
puts({{"admin_key" => User.find_by_login("admin").api_key, "reader_role_id" => role.id,
       "custom_field_id" => field.id}}.to_json)
"""


def rails_runner(code: str, timeout_s: float = 300) -> str:
    """Run Ruby code inside Redmine (production env) and return its stdout."""
    result = subprocess.run(
        ["bin/rails", "runner", code],
        cwd=REDMINE_HOME,
        env={**os.environ, "RAILS_ENV": "production"},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"rails runner failed ({result.returncode}): {result.stderr[-2000:]}")
    return result.stdout


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class RedmineServer:
    url: str
    admin_key: str
    reader_role_id: int
    custom_field_id: int


def _taken_by_a_retried_attempt(error: AssertionError, field: str) -> bool:
    """Whether creating a record with a fresh uuid name failed as taken: an attempt answered 500 after Redmine had
    stored the record (the SQLite lock hit a later statement of its request), and the retry found it there."""
    return "-> 422" in str(error) and f"{field} has already been taken" in str(error)


class RedmineAdmin:
    """REST helpers acting as the admin (or as another user when ``api_key`` is given)."""

    def __init__(self, server: RedmineServer) -> None:
        self.server = server
        self.url = server.url
        self.session = requests.Session()

    def request(
        self,
        method: str,
        path: str,
        json: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        api_key: str | None = None,
    ) -> dict[str, Any]:
        # Debian's Redmine keeps one SQLite file that `rails runner` seeding writes too; SQLite answers a
        # transaction that would upgrade its read lock mid-way with "database is locked" at once, whatever
        # the busy timeout, and Redmine rolls it back and answers 500. Setting up test data tries again (a
        # create whose record was stored all the same is found by its unique name); the code under test has
        # its own retries.
        for attempt in range(ADMIN_ATTEMPTS):
            response = self.session.request(
                method,
                f"{self.url}{path}",
                json=json,
                params=params,
                headers={"X-Redmine-API-Key": api_key or self.server.admin_key},
                timeout=60,
            )
            if response.status_code != 500 or attempt == ADMIN_ATTEMPTS - 1:
                break
            time.sleep(0.5 * (attempt + 1))
        if response.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {response.status_code}: {response.text[:500]}")
        return response.json() if response.content.strip() else {}

    def rails_runner(self, code: str) -> str:
        return rails_runner(code)

    def create_project(self, **fields: Any) -> dict[str, Any]:
        identifier = fields.pop("identifier", f"ak-{uuid.uuid4().hex[:12]}")
        project = {"name": f"Project {identifier}", "identifier": identifier, "is_public": False, **fields}
        try:
            return self.request("POST", "/projects.json", json={"project": project})["project"]
        except AssertionError as error:
            if not _taken_by_a_retried_attempt(error, "Identifier"):
                raise
            return self.request("GET", f"/projects/{identifier}.json")["project"]

    def create_user(self, admin: bool = False, **fields: Any) -> dict[str, Any]:
        login = fields.pop("login", f"user{uuid.uuid4().hex[:10]}")
        user = {
            "login": login,
            "firstname": fields.pop("firstname", "Taro"),
            "lastname": fields.pop("lastname", login),
            "mail": f"{login}@example.invalid",
            "password": uuid.uuid4().hex,
            "admin": admin,
            **fields,
        }
        try:
            created = self.request("POST", "/users.json", json={"user": user})["user"]
        except AssertionError as error:
            if not _taken_by_a_retried_attempt(error, "Login"):
                raise
            listed = self.request("GET", "/users.json", params={"name": login, "status": ""})["users"]
            created = next(found for found in listed if found["login"] == login)
        # Admins see api_key in users/show; it is created on first access.
        return self.request("GET", f"/users/{created['id']}.json")["user"]

    def add_member(self, project_id: int, user_id: int, role_ids: list[int]) -> None:
        membership = {"user_id": user_id, "role_ids": role_ids}
        self.request("POST", f"/projects/{project_id}/memberships.json", json={"membership": membership})

    def create_issue(self, project_id: int, subject: str, api_key: str | None = None, **fields: Any) -> dict[str, Any]:
        issue = {"project_id": project_id, "subject": subject, **fields}
        return self.request("POST", "/issues.json", json={"issue": issue}, api_key=api_key)["issue"]

    def update_issue(self, issue_id: int, api_key: str | None = None, **fields: Any) -> None:
        self.request("PUT", f"/issues/{issue_id}.json", json={"issue": fields}, api_key=api_key)

    def add_note(self, issue_id: int, notes: str, private: bool = False, api_key: str | None = None) -> None:
        self.update_issue(issue_id, api_key=api_key, notes=notes, private_notes=private)

    def delete_issue(self, issue_id: int) -> None:
        self.request("DELETE", f"/issues/{issue_id}.json")

    def get_issue(self, issue_id: int, api_key: str | None = None) -> dict[str, Any]:
        params = {"include": "journals,attachments,relations,children"}
        return self.request("GET", f"/issues/{issue_id}.json", params=params, api_key=api_key)


def _setup(url: str) -> RedmineServer:
    lines = [line for line in rails_runner(SETUP_RUBY).splitlines() if line.startswith("{")]
    facts = json.loads(lines[-1])
    return RedmineServer(url=url, **facts)


class RedmineUnavailable(Exception):
    """Redmine is not installed or did not start; the message says why."""


@contextlib.contextmanager
def running_redmine() -> Iterator[RedmineServer]:
    """A ready Redmine: the one at $ANCHORKIT_REDMINE_URL, else a fresh server on a free port, stopped after."""
    reuse_url = os.environ.get("ANCHORKIT_REDMINE_URL")
    if reuse_url:
        yield _setup(reuse_url.rstrip("/"))
        return
    if not (REDMINE_HOME / "bin" / "rails").exists():
        raise RedmineUnavailable("Debian's redmine package is not installed (make servers-install)")
    state_dir = Path(tempfile.mkdtemp(prefix="anchorkit-redmine-"))
    env = {**os.environ, "REDMINE_PORT": str(free_port()), "REDMINE_STATE_DIR": str(state_dir)}
    try:
        started = subprocess.run(
            ["bash", str(SERVER_SCRIPT), "start"], env=env, capture_output=True, text=True, check=False
        )
        if started.returncode != 0:
            log_file = state_dir / "server.log"
            log = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise RedmineUnavailable(f"Redmine did not start: {started.stderr.strip()} {log}")
        yield _setup(started.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["bash", str(SERVER_SCRIPT), "stop"], env=env, capture_output=True, check=False)
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def redmine_server() -> Iterator[RedmineServer]:
    try:
        with running_redmine() as server:
            yield server
    except RedmineUnavailable as reason:
        skip_or_fail(str(reason))


@pytest.fixture(scope="session")
def redmine_admin(redmine_server: RedmineServer) -> RedmineAdmin:
    return RedmineAdmin(redmine_server)


@pytest.fixture
def redmine_project(redmine_admin: RedmineAdmin) -> dict[str, Any]:
    return redmine_admin.create_project()
