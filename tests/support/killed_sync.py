"""Run the anchorkit CLI and kill -9 ourselves around the N-th S3 write: a crash at an exact point.

    ANCHORKIT_KILL_AT_WRITE=N ANCHORKIT_KILL_WHEN=before|after python tests/support/killed_sync.py sync ...

Counts PutObject and DeleteObject calls through botocore (every client the CLI creates) and sends
SIGKILL to this process right before the N-th is sent, or right after it succeeded. Without the
variables it is the plain CLI. A timer cannot aim at the few hundred milliseconds in which a small
sync writes; a write count can.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from botocore.client import BaseClient

from anchorkit.cli import app

WRITES = {"PutObject", "DeleteObject"}
KILL_AT = int(os.environ.get("ANCHORKIT_KILL_AT_WRITE", "0"))
KILL_AFTER = os.environ.get("ANCHORKIT_KILL_WHEN", "after") == "after"
_seen = 0
_lock = threading.Lock()
_send = BaseClient._make_api_call


def _counting_call(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
    global _seen
    if operation_name not in WRITES:
        return _send(self, operation_name, api_params)
    with _lock:
        _seen += 1
        number = _seen
    if number == KILL_AT and not KILL_AFTER:
        os.kill(os.getpid(), signal.SIGKILL)
    result = _send(self, operation_name, api_params)
    if number == KILL_AT and KILL_AFTER:
        os.kill(os.getpid(), signal.SIGKILL)
    return result


if __name__ == "__main__":
    if KILL_AT:
        BaseClient._make_api_call = _counting_call  # type: ignore[method-assign]
    sys.exit(app())
