"""JSON Lines of chunks as anchorkit writes them, of a known size, for the tests and benchmarks of the
JSON Lines writer at scale."""

from __future__ import annotations

import json

CHUNK_TEXT = "ログを確認したところ認証サーバーでタイムアウトが発生していました。" * 20  # about 2 KB a chunk


def ticket_lines(ticket_id: int, chunks: int = 3) -> bytes:
    """A ticket's chunks as anchorkit writes them: one JSON object a line, id and ticket id first."""
    return b"".join(
        json.dumps(
            {"id": f"{ticket_id}-{n:03d}", "ticket_id": ticket_id, "text": CHUNK_TEXT, "metadata": {}},
            ensure_ascii=False,
        ).encode("utf-8")
        + b"\n"
        for n in range(chunks)
    )
