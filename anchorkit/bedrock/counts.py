"""The counts the handler keeps and the audit reports. Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class Counts:
    files: int = 0
    failed_files: int = 0  # answered with their original batches (a batch or entry anchorkit cannot read)
    inject_files: int = 0
    chunk_files: int = 0
    batches: int = 0
    chunks_in: int = 0
    chunks_out: int = 0
    already_anchored: int = 0  # passed byte for byte (unless neutralised): they held their ticket's complete anchor
    anchored: int = 0  # the anchor put in front by the handler
    unknown_ticket: int = 0  # passed through: the ticket could not be known
    not_text: int = 0  # passed through: not a text chunk, or an empty or blank one (nothing to anchor)
    neutralised: int = 0  # chunks of a known ticket in which another ticket's anchor or title shapes were escaped
    missing_anchor: int = 0  # read back from batches: ticket known, no complete anchor (the handler leaves none)
    shapes: dict[str, int] = field(default_factory=dict)  # batches per shape read

    def __add__(self, other: Counts) -> Counts:
        total = Counts()
        for number in NUMBERS:
            setattr(total, number.name, getattr(self, number.name) + getattr(other, number.name))
        total.shapes = {
            key: self.shapes.get(key, 0) + other.shapes.get(key, 0) for key in {*self.shapes, *other.shapes}
        }
        return total

    @property
    def named(self) -> int:
        """Text chunks out that hold their ticket's complete anchor."""
        return self.already_anchored + self.anchored

    @property
    def coverage(self) -> float | None:
        """The share of text chunks out that name their ticket (None: no text chunk)."""
        text_chunks = self.chunks_out - self.not_text
        return self.named / text_chunks if text_chunks else None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


NUMBERS = [f for f in fields(Counts) if f.name != "shapes"]
