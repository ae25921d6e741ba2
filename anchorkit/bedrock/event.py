"""The custom transformation's event and response, as AWS documents them. Pure.

Input (Bedrock → Lambda)::

    {"version": "1.0", "knowledgeBaseId": "…", "dataSourceId": "…", "ingestionJobId": "…",
     "bucketName": "…", "priorTask": "…",
     "inputFiles": [{"originalFileLocation": {"type": "S3", "s3_location": {"uri": "s3://…/12345.md"}},
                     "fileMetadata": {"ticket_id": 12345, …},
                     "contentBatches": [{"key": "…"}]}]}

Output (Lambda → Bedrock): ``{"outputFiles": [...]}``, one entry per input file, with its
``originalFileLocation`` and ``fileMetadata`` as they came and the keys of the batches written.

A file whose entry cannot be read, or every file of an event of another version, is *failed*: it is
answered with its entry exactly as it came (its original batches, nothing anchorkit wrote), so
Bedrock ingests or rejects it as it would without this function, and nothing is lost.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anchorkit.untrusted import without_lone_surrogates

EVENT_VERSION = "1.0"


class EventError(ValueError):
    """An event with no file list to answer: the whole invocation fails."""


@dataclass(frozen=True)
class InputFile:
    """One entry of ``inputFiles``; ``problem`` says why it cannot be processed (None: it can)."""

    entry: Any  # as received (an object, unless the entry is broken)
    batch_keys: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def source_uri(self) -> str | None:
        """The original file's URI (``s3://bucket/tickets/12345.md``), when the entry gives one."""
        location = self._field("originalFileLocation")
        s3_location = location.get("s3_location") if isinstance(location, dict) else None
        uri = s3_location.get("uri") if isinstance(s3_location, dict) else None
        return uri if isinstance(uri, str) else None

    @property
    def metadata(self) -> Mapping[str, Any]:
        """``fileMetadata``, each lone surrogate of its strings replaced by U+FFFD (``"VPN\\ud800"`` is valid
        JSON, but no batch written in UTF-8 could hold the subject), as the batches' texts are read."""
        metadata = self._field("fileMetadata")
        return without_lone_surrogates(metadata) if isinstance(metadata, dict) else {}

    @property
    def name(self) -> str:
        """How log lines name the file: its URI, else its first batch key."""
        return self.source_uri or (self.batch_keys[0] if self.batch_keys else "<file without location>")

    def _field(self, key: str) -> Any:
        return self.entry.get(key) if isinstance(self.entry, dict) else None

    def output(self, keys: Sequence[str]) -> dict[str, Any]:
        """The file's ``outputFiles`` entry with the batches written at ``keys``."""
        return {
            "originalFileLocation": copy.deepcopy(self._field("originalFileLocation")),
            "fileMetadata": copy.deepcopy(self._field("fileMetadata") or {}),
            "contentBatches": [{"key": key} for key in keys],
        }

    def unchanged(self) -> Any:
        """The file's entry exactly as it came: its original batches, for a file that failed."""
        return copy.deepcopy(self.entry)


@dataclass(frozen=True)
class Invocation:
    bucket: str
    files: list[InputFile]
    version: Any = EVENT_VERSION
    ids: dict[str, str] = field(default_factory=dict)  # knowledgeBaseId, dataSourceId, ingestionJobId


def parse_event(event: Any) -> Invocation:
    """The event's files; EventError when there is no bucket or file list to answer at all."""
    if not isinstance(event, dict):
        raise EventError(f"the event is a {type(event).__name__}, not a JSON object")
    bucket, files = event.get("bucketName"), event.get("inputFiles")
    if not isinstance(bucket, str) or not bucket:
        raise EventError("the event has no bucketName: there is no intermediate bucket to read batches from")
    if not isinstance(files, list):
        raise EventError("the event has no inputFiles list")
    version = event.get("version")
    wrong_version = (
        None if version == EVENT_VERSION else f"event version {version!r} (anchorkit reads {EVENT_VERSION!r})"
    )
    ids = {
        key: event[key]
        for key in ("knowledgeBaseId", "dataSourceId", "ingestionJobId")
        if isinstance(event.get(key), str)
    }
    return Invocation(bucket, [_input_file(entry, wrong_version) for entry in files], version, ids)


def _input_file(entry: Any, wrong_version: str | None) -> InputFile:
    if not isinstance(entry, dict):
        return InputFile(entry, problem=f"an inputFiles entry is a {type(entry).__name__}, not an object")
    batches = entry.get("contentBatches")
    if not isinstance(batches, list) or not batches:
        return InputFile(entry, problem="no contentBatches list")
    keys = tuple(batch.get("key") if isinstance(batch, dict) else None for batch in batches)
    if not all(isinstance(key, str) and key for key in keys):
        return InputFile(entry, problem="a contentBatches entry without a key")
    return InputFile(entry, keys, wrong_version)  # type: ignore[arg-type]  # all str, checked above


def response(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"outputFiles": list(outputs)}
