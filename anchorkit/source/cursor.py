"""The incremental cursor: the ``updated_on`` (Redmine's UTC timestamps) up to which a snapshot holds every
change, in state.json; an incremental run lists what changed since, less an overlap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

REDMINE_TIME = "%Y-%m-%dT%H:%M:%SZ"


def shift_time(stamp: str, seconds: float) -> str:
    moment = datetime.strptime(stamp, REDMINE_TIME).replace(tzinfo=UTC) + timedelta(seconds=seconds)
    return moment.strftime(REDMINE_TIME)


def parse_cursor(value: Any) -> str | None:
    """The stored cursor if it is a Redmine timestamp; anything else means "no cursor" (a full run)."""
    try:
        datetime.strptime(value, REDMINE_TIME)
    except (TypeError, ValueError):
        return None
    return str(value)


def next_cursor(cursor: str | None, listed: list[str], failed: list[str]) -> str | None:
    """The largest ``updated_on`` listed, but never past an issue that failed (the next run lists it again)."""
    candidates = [stamp for stamp in [cursor, *listed] if stamp]
    if not candidates:
        return None
    return min([max(candidates), *(stamp for stamp in failed if stamp)])
