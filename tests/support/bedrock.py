"""Bedrock custom-transformation inputs for the tests and the benchmark: documents, native-like chunks,
batch files in either shape, and the event that names them."""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anchorkit.audit.chunkers import FixedSizeChunker, HierarchicalChunker, SemanticChunker, TextLayout, TokenChunker
from anchorkit.bedrock.audit import read_audit_lines
from anchorkit.bedrock.batches import read_batch
from anchorkit.bedrock.counts import Counts
from anchorkit.bedrock.runner import S3Store, Settings, run
from anchorkit.render.document import DEFAULT_CHUNK_TOKENS, RenderOptions
from anchorkit.render.transform import RenderedTicket, TransformOptions, iter_documents
from anchorkit.source.notes import with_note_numbers
from anchorkit.tokens import CL100K_BASE, TiktokenTokenizer, load_cl100k_base
from support.s3_server import S3Server

REDMINE = "https://redmine.example.co.jp"

# Bedrock's native strategies as the issue names them: fixed 300 / 20 %, hierarchical 1,500 / 300
# (the children are what is embedded and retrieved), semantic (the audit's lexical stand-in).
NATIVE_CHUNKERS: dict[str, TokenChunker] = {
    "fixed": FixedSizeChunker(300, 20),
    "hierarchical": HierarchicalChunker(1500, 300, 60),
    "semantic": SemanticChunker(300),
}


def cl100k() -> TiktokenTokenizer:
    """cl100k_base, as the handler's chunk mode counts with it (the vocabulary ships with anchorkit)."""
    return load_cl100k_base()


def numbered_snapshot(source: Path, target: Path) -> Path:
    """A copy of the snapshot whose journals carry Redmine's note numbers, as pull stores them when its
    key sees every journal: the sidecars then list them (``note_numbers``) and chunks link to notes."""
    shutil.copytree(source, target)
    for path in (target / "issues").glob("*.json"):
        numbered = with_note_numbers(json.loads(path.read_text(encoding="utf-8")))
        path.write_text(json.dumps(numbered, ensure_ascii=False), encoding="utf-8")
    return target


def rendered(snapshot: Path, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> list[RenderedTicket]:
    """The snapshot's anchored documents (default options, cl100k placement) with their sidecars."""
    options = TransformOptions(
        render=RenderOptions(chunk_tokens=chunk_tokens),
        sidecars=True,
        tokenizer=CL100K_BASE,
    )
    return [result for result in iter_documents(snapshot, options) if isinstance(result, RenderedTicket)]


def native_chunks(document: str, chunker: TokenChunker, tokenizer: TiktokenTokenizer) -> list[str]:
    """The document cut as the chunker cuts it (its first level), decoded the way a chunker decodes
    token windows: a character cut between two tokens is dropped."""
    (tokens,) = tokenizer.tokenize_many([document])
    encoded = document.encode("utf-8")
    spans = chunker.split(TextLayout(document), tokens)[0]
    return [
        encoded[tokens.byte_offset(start) : tokens.byte_offset(end)].decode("utf-8", "ignore") for start, end in spans
    ]


def documented_batch(texts: Sequence[str], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"fileContents": [...]}``, the shape AWS documents."""
    return {
        "fileContents": [
            {"contentBody": text, "contentType": "TEXT", "contentMetadata": dict(metadata or {})} for text in texts
        ]
    }


def chunk_list_batch(texts: Sequence[str], key: str = "chunks") -> dict[str, Any]:
    """``{"version": "1.0", "chunks" | "chunkList": [...]}``, the shape public handlers read."""
    return {
        "version": "1.0",
        key: [
            {
                "content": {"type": "TEXT", "text": text},
                "metadata": {"attributes": [{"key": "x-amz-bedrock-kb-chunk-id", "value": f"c{n}", "type": "STRING"}]},
            }
            for n, text in enumerate(texts)
        ],
    }


def put_file(
    client: Any,
    bucket: str,
    prefix: str,
    name: str,
    batches: Iterable[dict[str, Any] | bytes],
    metadata: dict[str, Any] | None = None,
    source_uri: str | None = None,
) -> dict[str, Any]:
    """Write a file's batch files to the intermediate bucket; its ``inputFiles`` entry."""
    keys = []
    for number, batch in enumerate(batches, start=1):
        key = f"{prefix}/aws/bedrock/knowledge_base/KB/DS/JOB/{name}/batch_{number}.json"
        body = batch if isinstance(batch, bytes) else json.dumps(batch, ensure_ascii=False).encode("utf-8")
        client.put_object(Bucket=bucket, Key=key, Body=body)
        keys.append(key)
    return {
        "originalFileLocation": {"type": "S3", "s3_location": {"uri": source_uri or f"s3://tickets/{name}"}},
        "fileMetadata": dict(metadata or {}),
        "contentBatches": [{"key": key} for key in keys],
    }


def event(bucket: str, files: list[dict[str, Any]], version: str = "1.0") -> dict[str, Any]:
    return {
        "version": version,
        "knowledgeBaseId": "KB12345678",
        "dataSourceId": "DS12345678",
        "ingestionJobId": "JOB1234567",
        "bucketName": bucket,
        "priorTask": "CHUNKING",
        "inputFiles": files,
    }


def sidecar_attributes(ticket: RenderedTicket) -> dict[str, Any]:
    """The document's sidecar attributes, as Bedrock hands them to the function as file metadata."""
    assert ticket.sidecar is not None
    attributes: dict[str, Any] = json.loads(ticket.sidecar)["metadataAttributes"]
    return attributes


def in_batches(texts: Sequence[str], size: int) -> list[list[str]]:
    return [list(texts[start : start + size]) for start in range(0, len(texts), size)] or [[]]


def settings(**changes: str) -> Settings:
    return Settings.from_environment({"ANCHORKIT_REDMINE_URL": REDMINE, **changes})


@dataclass
class Intermediate:
    """The knowledge base's intermediate bucket, under a test's prefix."""

    client: Any
    bucket: str
    prefix: str

    def put(
        self, name: str, batches: list[Any], metadata: dict[str, Any] | None = None, source_uri: str | None = None
    ) -> dict[str, Any]:
        return put_file(self.client, self.bucket, self.prefix, name, batches, metadata, source_uri)

    def run(self, files: list[Any], version: str = "1.0", **environment: str) -> dict[str, Any]:
        return run(event(self.bucket, files, version), settings(**environment), S3Store(self.client))

    def raw(self, key: str) -> bytes:
        body: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        return body

    def batches(self, output: dict[str, Any]) -> list[bytes]:
        return [self.raw(batch["key"]) for batch in output["contentBatches"]]

    def chunks(self, output: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """(text, chunk metadata) of every item of the output file's batches, in order."""
        batches = map(read_batch, self.batches(output))
        return [(batch.text(item) or "", batch.metadata(item)) for batch in batches for item in batch.items]


def genuine_lines(document: str, ticket_id: int) -> set[str]:
    """The document's own anchor and title lines of the ticket: what a chunk must hold one of, whole."""
    shape = re.compile(rf"[>#] [^#\\\n]{{1,40}}? #{ticket_id}:(?: .*)?")
    return {line for line in document.split("\n") if shape.fullmatch(line)}


def names_ticket(chunk: str, lines: set[str]) -> bool:
    return any(line in lines for line in chunk.split("\n"))


def audit_of(logs: pytest.LogCaptureFixture) -> Counts:
    """The counts of the one audit line the invocation logged."""
    counts, found = read_audit_lines(record.getMessage() for record in logs.records)
    assert found == 1
    return counts


def messages(logs: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [record.getMessage() for record in logs.records if record.levelno == level]


def capture(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="anchorkit.bedrock")
    return caplog


# Fixtures of the handler's tests (a pytest plugin: tests/conftest.py lists this module).
@pytest.fixture
def kb(s3_server: S3Server, s3_prefix: str) -> Intermediate:
    """The intermediate bucket of one test, on the real S3 server."""
    return Intermediate(s3_server.client(), s3_server.bucket, s3_prefix)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    return capture(caplog)


class MemoryStore:
    """Batches in a dict: the handler's work without S3's."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get(self, bucket: str, key: str) -> bytes:
        return self.objects[key]

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.objects[key] = body
