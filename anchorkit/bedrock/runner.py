"""The Lambda function: read each file's batches from the intermediate bucket, transform, write, answer.

``handler(event, context)`` is the entry point (handler name ``anchorkit.bedrock.handler``). The work is
``run(event, settings, store)``, with S3 behind the small ``Store`` interface, one batch in memory at a
time: each batch is read, transformed and written before the next is read (a file whose ticket must
be found in its text is read twice instead). Output batches go beside the input, under ``anchorkit/``
in the same folder of the same bucket (``…/batch_1.json`` → ``…/anchorkit/batch_1.json``), so
re-running an ingestion overwrites them and the function needs no other bucket. Input batches are
never written.

Settings come from the environment (docs/bedrock-lambda.md): ``ANCHORKIT_BEDROCK_MODE`` (auto, inject,
chunk), ``ANCHORKIT_CHUNK_TOKENS``, ``ANCHORKIT_LABEL``, ``ANCHORKIT_URI_PATTERN``, ``ANCHORKIT_REDMINE_URL``
and ``ANCHORKIT_BEDROCK_STRICT``. A bad setting fails the invocation (``ConfigurationError``); a file that
cannot be processed fails alone and is answered with its original batches (see event.py), whatever
went wrong with it (an error nobody foresaw too: it is logged with its traceback).
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from anchorkit.anchors import DEFAULT_LABEL, label_problem
from anchorkit.bedrock import anchoring
from anchorkit.bedrock.anchoring import MODES, Mode, Options, Ticket
from anchorkit.bedrock.audit import audit_line
from anchorkit.bedrock.batches import Batch, BatchError, plain_value, read_batch
from anchorkit.bedrock.counts import Counts
from anchorkit.bedrock.event import EventError, InputFile, Invocation, parse_event, response
from anchorkit.chunk.core import DEFAULT_CHUNK_TOKENS, ChunkError
from anchorkit.tokens import CL100K_BASE, Tokenizer, TokenizerUnavailable, choose_tokenizer
from anchorkit.untrusted import ascii_number
from anchorkit.verify.ids import compile_uri_pattern
from anchorkit.verify.model import DEFAULT_URI_PATTERN

log = logging.getLogger("anchorkit.bedrock")

OUTPUT_FOLDER = "anchorkit"


class ConfigurationError(ValueError):
    """A setting of the function is wrong: no file can be processed until it is fixed."""


class FailedFiles(RuntimeError):
    """ANCHORKIT_BEDROCK_STRICT: some files could not be processed (the others were)."""


class StoreError(Exception):
    """The store could not read or write an object; the message says why (S3's error code included)."""


class Store(Protocol):
    """Where batches are read and written (raising StoreError)."""

    def get(self, bucket: str, key: str) -> bytes: ...

    def put(self, bucket: str, key: str, body: bytes) -> None: ...


DEFAULT_OPTIONS = Options(DEFAULT_LABEL, DEFAULT_CHUNK_TOKENS, compile_uri_pattern(DEFAULT_URI_PATTERN), None)


@dataclass(frozen=True)
class Settings:
    mode: str = "auto"
    options: Options = DEFAULT_OPTIONS
    strict: bool = False

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        mode = environ.get("ANCHORKIT_BEDROCK_MODE", "auto").strip().lower() or "auto"
        if mode not in MODES:
            raise ConfigurationError(f"ANCHORKIT_BEDROCK_MODE={_shown(mode)}: expected one of {', '.join(MODES)}")
        tokens = environ.get("ANCHORKIT_CHUNK_TOKENS", "").strip() or str(DEFAULT_CHUNK_TOKENS)
        if not 0 < (ascii_number(tokens) or 0) < _MAX_CHUNK_TOKENS:
            raise ConfigurationError(
                f"ANCHORKIT_CHUNK_TOKENS={_shown(tokens)}: expected a positive whole number of tokens (default "
                f"{DEFAULT_CHUNK_TOKENS})"
            )
        try:
            pattern = compile_uri_pattern(environ.get("ANCHORKIT_URI_PATTERN") or DEFAULT_URI_PATTERN)
        except (re.error, ValueError) as error:  # not a regex, or not one group
            raise ConfigurationError(f"ANCHORKIT_URI_PATTERN: {error}") from None
        strict = environ.get("ANCHORKIT_BEDROCK_STRICT", "").strip().lower()
        if strict not in ("", "0", "false", "1", "true"):
            raise ConfigurationError(f"ANCHORKIT_BEDROCK_STRICT={_shown(strict)}: expected true or false")
        label = environ.get("ANCHORKIT_LABEL") or DEFAULT_LABEL
        if problem := label_problem(label):
            raise ConfigurationError(f"ANCHORKIT_LABEL: {problem}")
        options = Options(
            label,
            int(tokens),
            pattern,
            environ.get("ANCHORKIT_REDMINE_URL") or None,
        )
        return cls(mode, options, strict in ("1", "true"))


_MAX_CHUNK_TOKENS = 10**7  # (no model reads a chunk that long: a typo, or another setting's value)


def _shown(value: object) -> str:
    """A bad setting's or metadata value as a message quotes it: as Python writes it (control characters
    escaped), and short, so that a secret pasted into the wrong variable is not written to the log whole."""
    shown = repr(value if not isinstance(value, str) or len(value) <= 12 else value[:8] + "…")
    return shown if len(shown) <= 24 else shown[:20] + "…"


def output_key(key: str) -> str:
    folder, name = posixpath.split(key)
    return posixpath.join(folder, OUTPUT_FOLDER, name)


class FileFailure(Exception):
    """One file cannot be processed; the message names what and why."""


def run(event: Any, settings: Settings, store: Store) -> dict[str, Any]:
    """Process every file of the event; the response Bedrock expects. Logs one audit line."""
    try:
        invocation = parse_event(event)
    except EventError as error:
        log.error("anchorkit: cannot process this event: %s", error)
        raise
    total, outputs, failed = Counts(), [], []
    for file in invocation.files:
        try:
            output, counts = _process(file, invocation, settings, store)
        except ConfigurationError:
            raise  # no file can be processed until the setting is fixed
        except Exception as error:  # a FileFailure, or a bug a file's content set off: that file fails alone
            expected = isinstance(error, FileFailure)
            reason = str(error) if expected else f"unexpected {type(error).__name__}: {error}"
            log.error(
                "anchorkit: %s failed, answered with its original batches: %s",
                file.name,
                reason,
                exc_info=not expected,
            )
            output, counts = file.unchanged(), Counts(failed_files=1)
            failed.append(file.name)
        outputs.append(output)
        total += Counts(files=1) + counts
    log.info(audit_line(total, invocation.ids))
    if failed and settings.strict:
        raise FailedFiles(f"{len(failed)} of {len(invocation.files)} files failed: {', '.join(failed)}")
    return response(outputs)


def chunk_tokenizer() -> Tokenizer:
    """cl100k_base (the vocabulary shipped in the zip), loaded when a file is first cut: inject mode never
    loads tiktoken. tokens keeps it for the container's next invocations."""
    try:
        return choose_tokenizer(CL100K_BASE)
    except TokenizerUnavailable as error:
        raise ConfigurationError(f"chunk mode needs the cl100k_base tokenizer: {error}") from None


def _process(
    file: InputFile, invocation: Invocation, settings: Settings, store: Store
) -> tuple[dict[str, Any], Counts]:
    if file.problem:
        raise FileFailure(file.problem)
    batches = _Batches(file, invocation.bucket, store)
    first = batches.first()
    ticket, conflict = anchoring.stored_ticket(file.metadata, file.source_uri, settings.options)
    if not conflict and anchoring.needs_text(ticket):
        texts = (text for batch in batches for text in map(batch.text, batch.items) if text is not None)
        ticket = anchoring.ticket_from_texts(texts, ticket, file.metadata, settings.options)
        if conflict := _unconfirmed_file_name(ticket):
            ticket = None
    if conflict:
        log.warning("anchorkit: %s: %s: its chunks pass through unanchored", file.name, conflict)
    mode, why = _mode(file, first, len(file.batch_keys), settings.mode, ticket)
    tokenizer = chunk_tokenizer() if mode == "chunk" else None
    counts = Counts(chunk_files=1) if mode == "chunk" else Counts(inject_files=1)
    keys = []
    for key, batch in zip(file.batch_keys, batches, strict=True):
        if tokenizer is not None:
            assert ticket is not None  # _mode chose chunk mode only then
            try:
                items, batch_counts, warnings = anchoring.chunk(
                    batch, ticket, file.metadata, tokenizer, settings.options
                )
            except ChunkError as error:
                raise FileFailure(f"the ticket-aware chunker cannot cut the document: {error}") from None
            for warning in warnings:
                log.warning("anchorkit: %s: %s", file.name, warning)
        else:
            items, batch_counts = anchoring.inject(batch, ticket, settings.options)
        keys.append(output_key(key))
        batches.write(keys[-1], batch.encode(items))
        counts += batch_counts + Counts(batches=1, shapes={batch.shape: 1})
    if ticket is None and not conflict:
        log.warning(
            "anchorkit: %s: ticket unknown (%s, no ticket id in its key, no title line at its start): %d chunks "
            "passed through",
            file.name,
            _no_ticket_id(file.metadata),
            counts.unknown_ticket,
        )
    if counts.neutralised:
        log.warning(
            "anchorkit: %s: %d chunks held lines shaped like another ticket's anchor or title: their '#' escaped",
            file.name,
            counts.neutralised,
        )
    log.info(
        "anchorkit: %s: %s mode (%s), %s batch shape, ticket %s, %d chunks in, %d out (%d already anchored, "
        "%d anchored)",
        file.name,
        mode,
        why,
        "/".join(sorted(counts.shapes)),
        f"#{ticket.ticket_id} (from its {ticket.source})" if ticket else "unknown",
        counts.chunks_in,
        counts.chunks_out,
        counts.already_anchored,
        counts.anchored,
    )
    return file.output(keys), counts


def _unconfirmed_file_name(ticket: Ticket | None) -> str | None:
    """Why a ticket that only the file name gives is not the file's: no title or anchor line of it in the
    file's text. Every anchorkit document starts with its title; a file of another kind whose name ends
    in a number (``release-notes/2024.md`` beside the tickets) would get a stranger's anchors and url."""
    if ticket is None or ticket.source != "key" or ticket.subject:
        return None
    return f"the file name says #{ticket.ticket_id}, but its text holds no title or anchor line of that ticket"


def _no_ticket_id(metadata: Mapping[str, Any]) -> str:
    """What the file's metadata says of its ticket_id, when it names no ticket."""
    value = plain_value(metadata.get("ticket_id"))
    return "no ticket_id metadata" if value is None else f"ticket_id metadata {_shown(value)} is not a ticket number"


def _mode(file: InputFile, first: Batch, batch_count: int, setting: str, ticket: Ticket | None) -> tuple[Mode, str]:
    """The file's mode and why, in the words of the log line."""
    if setting == "inject":
        return "inject", "ANCHORKIT_BEDROCK_MODE=inject"
    if not anchoring.is_whole_document(first, batch_count):
        if setting == "chunk":
            log.warning(
                "anchorkit: %s: ANCHORKIT_BEDROCK_MODE=chunk, but the file did not arrive as one document "
                "(%d batches, %d items; is the data source's chunking strategy NONE?): anchors injected instead",
                file.name,
                batch_count,
                len(first.items),
            )
        return "inject", f"{setting}: not one document (batches: {batch_count}, items in the first: {len(first.items)})"
    if ticket is None:
        log.warning("anchorkit: %s: a whole document of an unknown ticket cannot be chunked: passed through", file.name)
        return "inject", f"{setting}: a whole document, ticket unknown"
    return "chunk", f"{setting}: one item that begins with the document's title"


class _Batches:
    """A file's batches, read one at a time (the first kept: it decides the mode)."""

    def __init__(self, file: InputFile, bucket: str, store: Store) -> None:
        self.file, self.bucket, self.store = file, bucket, store
        self._first: Batch | None = None

    def first(self) -> Batch:
        if self._first is None:
            self._first = self._read(self.file.batch_keys[0])
        return self._first

    def __iter__(self) -> Iterator[Batch]:
        yield self.first()
        for key in self.file.batch_keys[1:]:
            yield self._read(key)

    def _read(self, key: str) -> Batch:
        try:
            raw = self.store.get(self.bucket, key)
        except StoreError as error:
            raise FileFailure(f"cannot read batch s3://{self.bucket}/{key}: {error}") from None
        try:
            return read_batch(raw)
        except BatchError as error:
            raise FileFailure(f"batch s3://{self.bucket}/{key}: {error}") from None

    def write(self, key: str, body: bytes) -> None:
        try:
            self.store.put(self.bucket, key, body)
        except StoreError as error:
            raise FileFailure(f"cannot write batch s3://{self.bucket}/{key}: {error}") from None


class S3Store:
    """The intermediate bucket through boto3 (credentials, region and endpoint from the environment)."""

    def __init__(self, client: Any) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        self.client = client
        self._errors = (BotoCoreError, ClientError)

    def get(self, bucket: str, key: str) -> bytes:
        try:
            body: bytes = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except self._errors as error:
            raise StoreError(str(error)) from None
        return body

    def put(self, bucket: str, key: str, body: bytes) -> None:
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
        except self._errors as error:
            raise StoreError(str(error)) from None


@lru_cache(maxsize=1)
def _s3_client() -> Any:
    """One client per Lambda container, kept across invocations (boto3 is in the Lambda runtime)."""
    import boto3
    from botocore.config import Config

    return boto3.client("s3", config=Config(retries={"mode": "standard", "max_attempts": 5}))


def handler(event: Any, context: Any) -> dict[str, Any]:
    """The Lambda entry point."""
    if log.level == logging.NOTSET and "AWS_LAMBDA_LOG_LEVEL" not in os.environ:
        # The Python runtime's root logger shows warnings only: the audit line is information.
        log.setLevel(logging.INFO)
    return run(event, Settings.from_environment(os.environ), S3Store(_s3_client()))
