"""Small folder helpers for the publish tests: a transform-like output folder, and its content."""

from __future__ import annotations

import json
from pathlib import Path


def write_ticket(folder: Path, ticket_id: int, body: str = "本文", sidecar: bool = True) -> None:
    """One document and (optionally) its Bedrock sidecar, named as transform names them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{ticket_id}.md").write_text(f"# チケット #{ticket_id}: 件名\n{body}\n", encoding="utf-8")
    if sidecar:
        sidecar_json = {"metadataAttributes": {"ticket_id": ticket_id, "body": body}}
        (folder / f"{ticket_id}.md.metadata.json").write_text(json.dumps(sidecar_json), encoding="utf-8")


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` by relative path, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
