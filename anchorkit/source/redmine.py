"""Talking to Redmine: python-redmine with an engine that really times out and retries.

python-redmine 2.5.0 copies ``requests={'timeout': ...}`` onto the ``requests.Session`` object, where
requests ignores it: a dead connection hangs forever. :class:`ResilientEngine` passes a (connect, read)
timeout to every request and retries connection errors, timeouts, 5xx and 429 with exponential backoff
(honouring ``Retry-After``). It also gives each worker thread its own session, since a
``requests.Session`` is not guaranteed to be thread-safe.

The API key travels only in the ``X-Redmine-API-Key`` header, and only to the configured server: a
redirect to another host is refused (:class:`RedirectRefused`), since requests strips ``Authorization``
on such a redirect but not a custom header. Error messages name the method, the path and the failure,
never the key or the full URL (which could carry ``user:password@``).

A body is read as JSON is (:func:`json_body`), not as requests would: UTF-8 whatever charset the reply
names, never with undecodable bytes replaced, and never nested deep enough to crash the parser; a reply
that is not that fails the request, naming the path and what is wrong.
"""

from __future__ import annotations

import codecs
import contextlib
import email.utils
import json
import logging
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from redminelib import Redmine, exceptions
from redminelib.engines.sync import SyncEngine

from anchorkit.errors import UsageError, WorkFailed, url_host
from anchorkit.settings import default
from anchorkit.untrusted import JSONOverLimit, ascii_number, is_count, parse_json

# Statuses worth another try: throttling and server-side trouble that usually passes.
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})
TRANSPORT_ERRORS = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
PAGE_SIZE = 100  # Redmine's maximum `limit`
MAX_REDIRECTS = 5
log = logging.getLogger(__name__)

Sleeper = Callable[[float], None]


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait for Redmine and how hard to insist."""

    attempts: int = default("retries")
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 300.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = default("timeout")

    def backoff_s(self, attempt: int) -> float:
        """Full-jitter exponential backoff: spreads the retries of concurrent workers apart."""
        return random.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))


class RequestStats:
    """HTTP requests actually sent (retries included), shared by all worker threads, counted per purpose.

    A thread states what its requests are for with ``with stats.purpose("issues"): ...``; the report can
    then show that a run cost list pages + issues + lookups and nothing else.
    """

    def __init__(self) -> None:
        self.requests = 0
        self.retries = 0
        self.by_purpose: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextlib.contextmanager
    def purpose(self, name: str) -> Iterator[None]:
        previous = getattr(self._local, "purpose", "other")
        self._local.purpose = name
        try:
            yield
        finally:
            self._local.purpose = previous

    def count(self, retry: bool) -> None:
        with self._lock:
            self.requests += 1
            self.retries += int(retry)
            self.by_purpose[getattr(self._local, "purpose", "other")] += 1


class RedirectRefused(UsageError):
    """Redmine answered with a redirect to another server: the API key is not sent there (exit 2)."""

    def __init__(self, from_url: str, to_url: str) -> None:
        origin, target = url_host(from_url), url_host(to_url)
        super().__init__(
            f"Redmine at {origin} redirected {urlsplit(from_url).path} to another host, {target}: refused, the API "
            f"key is only sent to {origin} (if Redmine has moved there, give that address as --url)"
        )


class SameServerSession(requests.Session):
    """A session that follows a redirect only within the server it was asked for (a path, or http to
    https on the standard ports: requests' own rule for keeping ``Authorization``), never to another."""

    def rebuild_auth(self, prepared_request: requests.PreparedRequest, response: requests.Response) -> None:
        original = response.request.url or ""
        if self.should_strip_auth(original, prepared_request.url or ""):
            raise RedirectRefused(original, prepared_request.url or "")
        super().rebuild_auth(prepared_request, response)


class RedmineError(WorkFailed):
    """A request that failed for good. The message never contains the API key or the full URL."""

    def __init__(self, method: str, path: str, reason: str, status: int | None = None) -> None:
        super().__init__(f"{method.upper()} {path}: {reason}")
        self.status = status


def retry_after_s(response: requests.Response) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta-seconds or HTTP-date), if any."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    seconds = ascii_number(value.strip())
    if seconds is not None:
        return float(seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def after_attempts(count: int) -> str:
    return "after 1 attempt" if count == 1 else f"after {count} attempts"


def transport_cause(error: Exception) -> str:
    """Why a connection failed, in a few words (refused, unknown host, timed out), without the URL."""
    if isinstance(error, requests.Timeout):
        return "timed out"
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(error))
    return found.group(1).strip() if found else "connection dropped"


class ResilientEngine(SyncEngine):
    """python-redmine engine with real timeouts, retries with backoff, per-thread sessions and counting."""

    def __init__(
        self, *, base_url: str, policy: RetryPolicy, stats: RequestStats, sleep: Sleeper = time.sleep, **options: Any
    ) -> None:
        self.base_url = base_url
        self.policy = policy
        self.stats = stats
        self.sleep = sleep
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()
        super().__init__(**options)

    @staticmethod
    def create_session(**params: Any) -> requests.Session:
        session = SameServerSession()
        session.max_redirects = MAX_REDIRECTS
        for name, value in params.items():
            setattr(session, name, value)
        return session

    @property
    def session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self.create_session(**self.requests)
            self.session = session
        return session

    @session.setter
    def session(self, value: requests.Session) -> None:
        # BaseEngine.__init__ assigns the creating thread's session; keep it for that thread only.
        # Proxy and CA settings come from the environment once per session, not on every request:
        # requests re-reads os.environ per call, a measurable share of the client's CPU per ticket.
        value.proxies.update(requests.utils.get_environ_proxies(self.base_url))
        value.verify = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or value.verify
        value.trust_env = False
        self._local.session = value
        with self._sessions_lock:
            self._sessions.append(value)

    def close(self) -> None:
        with self._sessions_lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()

    def request(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        data: Any = None,
    ) -> Any:
        kwargs = self.construct_request_kwargs(method, headers, params, data)
        timeout = (self.policy.connect_timeout_s, self.policy.read_timeout_s)
        path = urlsplit(url).path
        for attempt in range(self.policy.attempts):
            last_try = attempt == self.policy.attempts - 1
            self.stats.count(retry=attempt > 0)
            status: int | None = None
            wait = self.policy.backoff_s(attempt)
            try:
                response = self.session.request(method, url, timeout=timeout, **kwargs)
                status = response.status_code
                if status not in RETRYABLE_STATUSES:
                    return self.decoded(method, path, response)
                reason = f"HTTP {status}"
                asked = retry_after_s(response)
                wait = min(asked, self.policy.retry_after_max_s) if asked is not None else wait
            except requests.TooManyRedirects:
                raise RedmineError(method, path, f"more than {MAX_REDIRECTS} redirects") from None
            except TRANSPORT_ERRORS as error:
                reason = f"{type(error).__name__} ({transport_cause(error)})"
            except requests.exceptions.ContentDecodingError:
                reason = "corrupt compressed body (its Content-Encoding does not decode)"
            except UnusableBody as error:  # e.g. a body cut short by a dropped connection: as transient as the drop
                reason = str(error)
            if last_try:
                raise RedmineError(method, path, f"{reason} {after_attempts(attempt + 1)}", status)
            self.retry_after(method, path, reason, attempt, wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def decoded(self, method: str, path: str, response: requests.Response) -> Any:
        """python-redmine's reading of a reply, its body decoded by :func:`json_body`: python-redmine calls
        ``response.json()``, which decodes by the charset the header names (or a guess), replaces bytes it
        cannot decode and nests as deep as the recursion limit lets it."""
        if response.status_code == 422:  # python-redmine reads Redmine's reasons from the body, whatever it is
            raise RedmineError(method, path, f"HTTP 422 {validation_errors(response.content)}", 422)
        response.json = lambda **_: json_body(response.content)  # type: ignore[method-assign]
        return self.process_response(response)

    def retry_after(self, method: str, path: str, reason: str, attempt: int, wait_s: float) -> None:
        """Say what is retried and why (shown with -v), then wait."""
        log.info(
            "Redmine %s %s: %s; attempt %d of %d in %.1f s",
            method.upper(),
            path,
            reason,
            attempt + 2,
            self.policy.attempts,
            wait_s,
        )
        self.sleep(wait_s)


class UnusableBody(Exception):
    """A reply whose body is not the JSON it should be; the message says why, never what the body holds.
    Not a ValueError: python-redmine would turn that into its JSONDecodeError and lose the reason."""


def json_body(content: bytes) -> Any:
    """A reply's body as JSON (RFC 8259): UTF-8 whatever charset the header names (a BOM skipped), no
    ``NaN`` or ``Infinity``, nesting and numbers bounded (untrusted.parse_json); :class:`UnusableBody` else."""
    try:
        text = content.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as error:
        raise UnusableBody(f"response is not UTF-8 (invalid byte at offset {error.start})") from None
    try:
        return parse_json(text, allow_nan=False)
    except json.JSONDecodeError as error:
        raise UnusableBody(f"response is not JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    except JSONOverLimit as error:
        raise UnusableBody(f"response refused: {error}") from None


def validation_errors(content: bytes) -> str:
    """What Redmine says is wrong in a 422 reply (``{"errors": [...]}``), or that the body is not that."""
    try:
        body = json_body(content)
    except UnusableBody as error:
        return f"({error})"
    errors = body.get("errors") if isinstance(body, dict) else None
    if not isinstance(errors, list) or not all(isinstance(item, str) for item in errors):
        return "(response is not a list of errors)"
    return f"({'; '.join(errors)})"


@contextlib.contextmanager
def translated_errors(method: str, path: str) -> Iterator[None]:
    """python-redmine's exceptions as :class:`RedmineError`, status code kept (callers tell 403/404 apart)."""
    try:
        yield
    except exceptions.ForbiddenError:
        raise RedmineError(method, path, "HTTP 403 Forbidden", 403) from None
    except exceptions.ResourceNotFoundError:
        raise RedmineError(method, path, "HTTP 404 Not Found", 404) from None
    except exceptions.AuthError:
        raise RedmineError(method, path, "HTTP 401 Unauthorized (check the API key)", 401) from None
    except exceptions.JSONDecodeError:
        raise RedmineError(method, path, "response is not valid JSON") from None
    except exceptions.UnknownError as error:
        raise RedmineError(method, path, f"HTTP {error.status_code}", error.status_code) from None
    except exceptions.BaseRedmineError as error:
        raise RedmineError(method, path, type(error).__name__) from None


@dataclass(frozen=True)
class IssuePage:
    issues: list[dict[str, Any]]
    total_count: int


def listing_page(body: dict[str, Any], after_id: int) -> IssuePage:
    """A page of ``/issues.json`` (issues after ``after_id``), shape-checked; :class:`RedmineError` otherwise.

    A body without the listing (another application's, a proxy's page) must not pass for an empty listing:
    a full run would then remove every stored issue. Ids at or below ``after_id`` mean the ``issue_id``
    filter was ignored: the next page would be this one again, forever.
    """
    issues, total = body.get("issues"), body.get("total_count")
    if not isinstance(issues, list) or not is_count(total) or not all(map(_is_listed, issues)):
        raise RedmineError("get", "/issues.json", "unexpected response shape (not a listing of issues)")
    if any(issue["id"] <= after_id for issue in issues):
        raise RedmineError("get", "/issues.json", f"the issue_id filter was ignored (ids not above {after_id} listed)")
    return IssuePage(issues=issues, total_count=total)


def _is_listed(issue: Any) -> bool:
    return isinstance(issue, dict) and is_count(issue.get("id"))


class RedmineClient:
    """The calls pull needs, on top of python-redmine and :class:`ResilientEngine`."""

    def __init__(self, url: str, api_key: str, policy: RetryPolicy | None = None, sleep: Sleeper = time.sleep) -> None:
        self.url = url.rstrip("/")
        self.stats = RequestStats()
        self.redmine = Redmine(
            self.url,
            key=api_key,
            engine=ResilientEngine,
            base_url=self.url,
            policy=policy or RetryPolicy(),
            stats=self.stats,
            sleep=sleep,
        )
        self.engine: ResilientEngine = self.redmine.engine

    def close(self) -> None:
        self.engine.close()

    def get_json(self, path: str, **params: Any) -> dict[str, Any]:
        """GET ``path`` (e.g. ``/issues/5.json``) and return the decoded JSON object."""
        with translated_errors("get", path):
            body = self.engine.request("get", f"{self.url}{path}", params=params)
        if not isinstance(body, dict):
            raise RedmineError("get", path, "response is not a JSON object")
        return body

    def issue_page(self, after_id: int, project: str | None = None, updated_since: str | None = None) -> IssuePage:
        """One page of issues with ``id > after_id``, closed ones included, sorted by id.

        Keyset paging (``issue_id=>=N``, offset always 0) instead of growing offsets: an issue that is
        deleted, hidden or (on incremental runs) newly updated while we page cannot shift the rest of
        the listing, so nothing is skipped.
        """
        params: dict[str, Any] = {
            "status_id": "*",
            "sort": "id",
            "limit": PAGE_SIZE,
            "offset": 0,
            "issue_id": f">={after_id + 1}",
        }
        if project is not None:
            params["project_id"] = project
        if updated_since is not None:
            params["updated_on"] = f">={updated_since}"
        return listing_page(self.get_json("/issues.json", **params), after_id)

    def issue(self, issue_id: int) -> dict[str, Any]:
        """``{"issue": {...}}`` with journals, attachments, relations and children, as Redmine returns it."""
        return self.get_json(f"/issues/{issue_id}.json", include="journals,attachments,relations,children")

    def visible_issues(self, issue_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The listing summaries (project, ``is_private``...) of those of these issues the key sees; a
        deleted or hidden one is absent. One request per page of ids."""
        wanted = sorted(set(issue_ids))
        visible: dict[int, dict[str, Any]] = {}
        for start in range(0, len(wanted), PAGE_SIZE):
            page = wanted[start : start + PAGE_SIZE]
            body = self.get_json(
                "/issues.json", issue_id=",".join(map(str, page)), status_id="*", limit=PAGE_SIZE, offset=0
            )
            issues = body.get("issues")
            for issue in issues if isinstance(issues, list) else []:
                if isinstance(issue, dict) and isinstance(issue.get("id"), int):
                    visible[issue["id"]] = issue
        return visible

    def public_issue_ids(self, issue_ids: Iterable[int]) -> set[int]:
        """Which of these issues are public ones the key sees (not a private, deleted or hidden one)."""
        return {issue_id for issue_id, issue in self.visible_issues(issue_ids).items() if not issue.get("is_private")}

    def current_user(self) -> dict[str, Any] | None:
        """The key's user with its memberships; None when Redmine treats us as anonymous (it does that
        for an unknown key instead of refusing it)."""
        try:
            body = self.get_json("/users/current.json", include="memberships")
        except RedmineError as error:
            if error.status == 401:
                return None
            raise
        user = body.get("user")
        return user if isinstance(user, dict) else {}

    def all_of(self, manager_name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every record of a python-redmine resource (it does the paging), as the raw JSON objects."""
        manager = getattr(self.redmine, manager_name)
        with translated_errors("get", manager_name):
            try:
                return [record.raw() for record in (manager.filter(**params) if params else manager.all())]
            except (KeyError, TypeError, AttributeError):  # python-redmine reading a body of another shape
                raise RedmineError("get", manager_name, "unexpected response shape") from None
