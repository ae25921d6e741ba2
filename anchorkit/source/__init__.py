"""The source stage: Redmine → snapshot folder.

redmine: the client (timeouts, retries, paging, lookups); pull: the incremental pull and its settings;
snapshot: reading the snapshot (strict, every error names its file) and, for pull, writing it.

The pull itself is ``anchorkit.source.pull.pull`` (the package keeps the name ``pull`` for the module)."""

from anchorkit.source.pull import PullError, PullReport, PullSettings, SnapshotLocked, read_api_key
from anchorkit.source.redmine import RedmineClient, RedmineError, RetryPolicy
from anchorkit.source.snapshot import SnapshotError, load_issue, load_lookups, load_state

__all__ = [
    "PullError",
    "PullReport",
    "PullSettings",
    "RedmineClient",
    "RedmineError",
    "RetryPolicy",
    "SnapshotError",
    "SnapshotLocked",
    "load_issue",
    "load_lookups",
    "load_state",
    "read_api_key",
]
