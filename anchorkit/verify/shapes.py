"""Reading what `verify`, `eval` and `inject` are given: retrievals, answers and context, in the accepted shapes.

The one place that knows the shapes (docs/verify.md has them as a table). Shape readers take parsed
JSON and return verify.py's data types; file loading is at the edge (``load_*``). Every problem raises
``InputError`` naming the file (or case) and what is wrong; for an unknown shape the message lists the
shapes that are accepted. Nothing is silently "unchecked" because its shape was not understood.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.note_ranges import metadata_int
from anchorkit.untrusted import JSONOverLimit, parse_json
from anchorkit.verify.ids import parse_ticket_id
from anchorkit.verify.links import chunk_notes
from anchorkit.verify.model import Answer, Chunk, Citation, Claim

RETRIEVAL_SHAPES = (
    'Bedrock Retrieve response {"retrievalResults": [{"content": {"text": …}, "location": {…}, "metadata": {…}, '
    '"score": …}]}',
    'Bedrock RetrieveAndGenerate response {"output": {"text": …}, "citations": [{"retrievedReferences": [...]}]}',
    'LlamaIndex response {"response": …, "source_nodes": [{"node": {"id_", "text", "metadata"}, "score"}]}',
    'a list of chunks, or {"chunks" | "sources" | "documents" | "context" | "source_documents": [...]}: plain '
    '{"id", "text", "uri", "ticket_id"}, cited-answer sources {"id", "title", "content", "url", "metadata"}, '
    'LangChain documents {"page_content", "metadata": {"source", "ticket_id"}}',
)
ANSWER_SHAPES = (
    'structured claims (a grounded answer) {"claims": [{"text": …, "citations": [{"source_id": …, '
    '"quoted_span": …}] | "citation_ids": [...]}], "summary"?: …, "answer"?: …}',
    'LangChain cited answer {"answer": …, "citations": [0, 5] | [{"source_id": 7, "quote": …}]}',
    'a list of ticket results [{"issue_id": 12345, …}] (or {"results": [...]})',
    "a Bedrock RetrieveAndGenerate response, a LlamaIndex response {response, source_nodes}, "
    'LangChain {"answer" | "result", "context" | "source_documents"}',
    'plain text: a file that is not JSON, a JSON string (JSON inside it is read as an answer), {"text": …} / '
    '{"answer": …}',
    "JSON Lines: one answer of any of these shapes a line",
)
CONTEXT_SHAPES = (
    "the context message as text (its genuine anchors count)",
    "an earlier retrieval in any retrieval shape",
    'Bedrock Converse messages {"messages": [{"role": "user", "content": [{"text": …}]}], "system"?: [...]} '
    "(user and system text only)",
)
SOURCE_URI_METADATA = "x-amz-bedrock-kb-source-uri"
CHUNK_ID_METADATA = "x-amz-bedrock-kb-chunk-id"
TICKET_ID_METADATA = "ticket_id"  # the attribute anchorkit's sidecars (sidecar.py) give every document
CARRYING_SHAPES = frozenset({"retrieve_and_generate", "llamaindex", "langchain"})
"""Answer shapes that carry the chunks they were generated from (no separate retrieval needed)."""

# Where each chunk field is read from, first found wins (metadata keys are looked up in "metadata").
_CHUNK_TEXT = ("text", "page_content", "content")
_CHUNK_ID = ("id", "id_")
_CHUNK_URI = ("uri", "url", "source_uri")
_METADATA_URI = (
    SOURCE_URI_METADATA,
    "source",
    "source_uri",
    "url",
    "uri",
    "file_path",
)  # file_path: LlamaIndex's readers
_CHUNK_LISTS = ("chunks", "sources", "documents", "context", "source_documents")
# Keys of an answer object that are not the answer: the question and the conversation.
_NOT_ANSWER = frozenset({"input", "query", "question", "chat_history", "messages", "id"})
_TEXT_KEYS = ("answer", "text", "response", "result")
_FENCE = re.compile(r"\A\s*```[A-Za-z]*[ \t]*\n(?P<body>.*?)\n\s*```\s*\Z", re.S)


class InputError(UsageError):
    """Input that cannot be used (exit 2); the message names where it came from and what is wrong."""


class JSONInputOverLimit(InputError):
    """JSON that anchorkit refuses to read (untrusted.JSONOverLimit: nested too deeply, a number too long)."""


@dataclass(frozen=True)
class Retrieval:
    """A retrieval as read: its shape, its chunks and what was skipped (a result without text)."""

    shape: str
    chunks: list[Chunk]
    notes: list[str]


def _accepted(what: str, shapes: tuple[str, ...]) -> str:
    return f"accepted {what} shapes:\n" + "\n".join(f"  - {shape}" for shape in shapes)


def _unknown_shape(origin: str, what: str, shapes: tuple[str, ...]) -> InputError:
    return InputError(f"{origin}: not a known {what} shape; {_accepted(what, shapes)}")


# --------------------------------------------------------------------------- retrieval


def read_retrieval(data: Any, origin: str) -> Retrieval:
    """A retrieval in any accepted shape."""
    shape, items, notes = retrieval_items(data, origin)
    return Retrieval(shape, [chunk for _, chunk in items if chunk is not None], notes)


def retrieval_items(data: Any, origin: str) -> tuple[str, list[tuple[Mapping[str, Any], Chunk | None]], list[str]]:
    """(shape, each chunk item of ``data`` as it is in ``data`` with its Chunk or None where it was
    skipped, notes): for rewriting a retrieval in place (set_chunk_text) in its own shape."""
    located = _chunk_list(data, origin)
    if located is None:
        raise _unknown_shape(origin, "retrieval", RETRIEVAL_SHAPES)
    shape, items, key = located
    notes: list[str] = []
    return shape, [(item, read_chunk(item, i, f"{origin}: {key}[{i}]", notes)) for i, item in enumerate(items)], notes


def set_chunk_text(item: Any, text: str) -> None:
    """Replace a chunk item's text where read_chunk found it (the item is changed in place)."""
    for wrapper in ("kwargs", "node"):
        if isinstance(item.get(wrapper), Mapping):
            item = item[wrapper]
    key = next((k for k in _CHUNK_TEXT if isinstance(item.get(k), str)), None)
    if key is not None:
        item[key] = text
    else:
        item["content"]["text"] = text


def _chunk_list(data: Any, origin: str) -> tuple[str, list[Any], str] | None:
    """(shape, the chunk items, their key) of a retrieval, None for an unknown shape."""
    if isinstance(data, list):
        return "chunks", data, "chunks"
    if not isinstance(data, Mapping):
        return None
    if isinstance(data.get("retrievalResults"), list):
        return "bedrock_retrieve", data["retrievalResults"], "retrievalResults"
    if isinstance(data.get("citations"), list) and "output" in data:
        return "retrieve_and_generate", _rag_references(data, origin), "retrievedReferences"
    if isinstance(data.get("source_nodes"), list):
        return "llamaindex", data["source_nodes"], "source_nodes"
    for key in _CHUNK_LISTS:
        if isinstance(data.get(key), list):
            return "chunks", data[key], key
    return None


def _rag_references(data: Mapping[str, Any], origin: str) -> list[Any]:
    references: list[Any] = []
    for index, citation in enumerate(data["citations"]):
        refs = citation.get("retrievedReferences", []) if isinstance(citation, Mapping) else None
        if not isinstance(refs, list):
            raise InputError(f"{origin}: citations[{index}].retrievedReferences is not a list")
        references.extend(refs)
    return references


def _first(mapping: Mapping[str, Any], keys: tuple[str, ...], kind: type | tuple[type, ...] = str) -> Any:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
    return None


def read_chunk(item: Any, index: int, where: str, notes: list[str]) -> Chunk | None:
    """One chunk of any shape (docs/verify.md); None, with a note, for a result without text (a
    Bedrock IMAGE or table row): it cannot be cited for text, the others are still checked."""
    if not isinstance(item, Mapping):
        raise InputError(f"{where}: a chunk must be an object")
    if isinstance(item.get("kwargs"), Mapping):  # a LangChain document serialised with dumpd()
        item = item["kwargs"]
    if isinstance(item.get("node"), Mapping):  # LlamaIndex NodeWithScore: the node, its score beside it
        item = {**item["node"], "score": item.get("score")}
    content = item.get("content")
    text = _first(item, _CHUNK_TEXT)
    if text is None and isinstance(content, Mapping):
        text = content.get("text") if isinstance(content.get("text"), str) else None
        if text is None:
            notes.append(f"{where}: skipped: no text (content type {str(content.get('type', '?'))!r})")
            return None
    if text is None:
        raise InputError(
            f'{where}: no text: a chunk needs "text", "content", "page_content" or Bedrock\'s "content": {{"text": …}}'
        )
    if "uri" in item and not isinstance(item["uri"], str):
        raise InputError(f'{where}: "uri" must be a string')
    metadata = item.get("metadata") if isinstance(item.get("metadata"), Mapping) else {}
    chunk_id = _first(item, _CHUNK_ID, (str, int)) or _first(metadata, (CHUNK_ID_METADATA,), (str, int))
    uri = _location_uri(item.get("location")) or _first(item, _CHUNK_URI) or _first(metadata, _METADATA_URI)
    raw_ticket = next(
        (m[k] for m in (item, metadata) for k in (TICKET_ID_METADATA, "issue_id") if m.get(k) is not None), None
    )
    ticket_id = parse_ticket_id(raw_ticket)
    if raw_ticket is not None and ticket_id is None:
        notes.append(f"{where}: ticket_id {str(raw_ticket)!r} is not a ticket id: ignored")
    score = _first(item, ("score",), (int, float))
    return Chunk(
        id=str(chunk_id) if chunk_id is not None else str(index + 1),
        text=text,
        uri=uri,
        ticket_id=ticket_id,
        title=_first(item, ("title",)) or _first(metadata, ("title",)),
        subject=_first(item, ("subject",)) or _first(metadata, ("subject",)),
        score=float(score) if score is not None else _first(metadata, ("score",), (int, float)),
        url=_first(metadata, ("url",)) or _first(item, ("url",)),
        notes=chunk_notes(text, metadata, item),
    )


def _location_uri(location: Any) -> str | None:
    """s3Location.uri, or the uri/url of whichever location type Bedrock reported (web, confluence…)."""
    if not isinstance(location, Mapping):
        return None
    for value in location.values():
        if isinstance(value, Mapping):
            for key in ("uri", "url"):
                if isinstance(value.get(key), str):
                    return value[key]
    return None


# --------------------------------------------------------------------------- answers


def read_answer(data: Any, origin: str) -> Answer:
    """An answer in any accepted shape."""
    if isinstance(data, str):
        embedded = _embedded_json(data)
        return read_answer(embedded, origin) if embedded is not None else Answer("text", text=data)
    if isinstance(data, list):
        return Answer("results", results=tuple(_results(data, origin)))
    if not isinstance(data, Mapping):
        raise _unknown_shape(origin, "answer", ANSWER_SHAPES)
    if isinstance(data.get("output"), Mapping) and isinstance(data.get("citations"), list):
        return _rag_answer(data, origin)
    return _answer_object(data, origin)


def _embedded_json(text: str) -> Any:
    """The JSON object or list a model's raw text holds (a fenced ```json block or the whole text)."""
    fenced = _FENCE.match(text)
    body = (fenced["body"] if fenced else text).strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        return parse_json(body)
    except ValueError:
        return None


def _answer_object(data: Mapping[str, Any], origin: str) -> Answer:
    """Every recognised part of an answer object; each other string in it is kept to be checked too."""
    used: set[str] = set()
    shape = ""
    claims: list[Claim] = []
    results: list[Mapping[str, Any]] = []
    retrieved: list[Chunk] = []
    notes: list[str] = []
    text_key = next((k for k in _TEXT_KEYS if isinstance(data.get(k), str)), None)
    if isinstance(data.get("claims"), list):
        shape, claims = "claims", _claims(data["claims"], origin)
        used.add("claims")
    elif isinstance(data.get("citations"), list) and text_key is not None:
        # LangChain's cited answer: the whole answer is one claim citing its sources.
        shape = "cited_answer"
        claims = [
            Claim(
                data[text_key],
                tuple(
                    _citation(c, f"{origin}: citations[{i}]", positional=True) for i, c in enumerate(data["citations"])
                ),
            )
        ]
        used |= {"citations", text_key}
    if isinstance(data.get("results"), list):
        shape = shape or "results"
        results = _results(data["results"], origin)
        used.add("results")
    for key in ("source_nodes", "context", "source_documents"):
        if isinstance(data.get(key), list):
            retrieval = read_retrieval({key: data[key]}, origin)
            retrieved += retrieval.chunks
            notes += retrieval.notes
            shape = shape or ("llamaindex" if key == "source_nodes" else "langchain")
            used.add(key)
    text = data[text_key] if text_key is not None and text_key not in used else ""
    if text_key is not None:
        shape = shape or "text"
        used.add(text_key)
    summary = data["summary"] if isinstance(data.get("summary"), str) else ""
    if summary:
        used.add("summary")
    if not shape:
        raise _unknown_shape(origin, "answer", ANSWER_SHAPES)
    extra = [(f"$.{k}", s) for k, v in data.items() if k not in used and k not in _NOT_ANSWER for s in _strings(v)]
    return Answer(
        shape,
        text=text,
        claims=tuple(claims),
        results=tuple(results),
        summary=summary,
        extra=tuple(extra),
        retrieved=tuple(retrieved),
        notes=tuple(notes),
    )


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _claims(items: list[Any], origin: str) -> list[Claim]:
    claims: list[Claim] = []
    for index, item in enumerate(items):
        where = f"{origin}: claims[{index}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            raise InputError(f'{where} must be an object with a string "text"')
        citations: list[Citation] = []
        for key in ("citations", "citation_ids"):  # objects with quoted spans / bare ids
            listed = item.get(key, [])
            if not isinstance(listed, list):
                raise InputError(f"{where}.{key} must be a list")
            citations += [_citation(c, f"{where}.{key}[{i}]") for i, c in enumerate(listed)]
        claims.append(Claim(item["text"], tuple(citations)))
    return claims


def _citation(item: Any, where: str, positional: bool = False) -> Citation:
    """A citation: {"source_id", "quoted_span" | "quote"}, {"ticket_id", "note"} (a note of a ticket,
    verify.links) or a bare id. ``positional``: LangChain's integer source ids are 0-based positions in
    the documents it was given."""
    note = None
    if isinstance(item, Mapping):
        source_id, span = item.get("source_id"), item.get("quoted_span", item.get("quote"))
        if source_id is None and item.get("ticket_id") is not None:
            ticket_id = parse_ticket_id(item["ticket_id"])
            if ticket_id is None:
                raise InputError(f'{where}: "ticket_id" must be a ticket number')
            source_id = f"#{ticket_id}"
        if item.get("note") is not None:
            note = metadata_int(item["note"])
            if note is None:
                raise InputError(f'{where}: "note" must be a note number')
    else:
        source_id, span = item, None
    if (
        isinstance(source_id, bool)
        or not isinstance(source_id, (str, int))
        or (span is not None and not isinstance(span, str))
    ):
        raise InputError(
            f'{where}: a citation needs "source_id" (string or number) or "ticket_id", and an optional string '
            '"quoted_span"'
        )
    if positional and isinstance(source_id, int):
        return Citation(str(source_id), span, position=source_id, note=note)
    return Citation(str(source_id), span, note=note)


def _results(items: list[Any], origin: str) -> list[Mapping[str, Any]]:
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or "issue_id" not in item:
            raise InputError(f'{origin}: results[{index}] must be an object with "issue_id"')
    return items


def _rag_answer(data: Mapping[str, Any], origin: str) -> Answer:
    """RetrieveAndGenerate: each citation's generated part is a claim citing its references, which the
    answer carries as its retrieval (so the response alone can be verified)."""
    text = data["output"].get("text")
    if not isinstance(text, str):
        raise InputError(f"{origin}: output.text is missing or not a string")
    notes: list[str] = []
    claims: list[Claim] = []
    retrieved: list[Chunk] = []
    position = 0
    for index, citation in enumerate(data["citations"]):
        refs = citation.get("retrievedReferences", []) if isinstance(citation, Mapping) else None
        if not isinstance(refs, list):
            raise InputError(f"{origin}: citations[{index}].retrievedReferences is not a list")
        cited: list[Citation] = []
        for ref in refs:
            chunk = read_chunk(ref, position, f"{origin}: retrievedReferences[{position}]", notes)
            position += 1
            if chunk is not None:
                retrieved.append(chunk)
                cited.append(Citation(chunk.id))
        part = _path(citation, "generatedResponsePart", "textResponsePart", "text")
        claims.append(Claim(part if isinstance(part, str) else "", tuple(cited)))
    return Answer(
        "retrieve_and_generate", text=text, claims=tuple(claims), retrieved=tuple(retrieved), notes=tuple(notes)
    )


def _path(data: Any, *keys: str) -> Any:
    """data[k1][k2]…, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


# --------------------------------------------------------------------------- context


def read_context(data: Any, origin: str) -> tuple[list[Chunk], list[str]]:
    """(chunks, texts) a later turn's context vouches with: an earlier retrieval, Converse messages, a string."""
    if isinstance(data, str):
        return [], [data]
    messages = data.get("messages") if isinstance(data, Mapping) else data
    if isinstance(messages, list) and messages and all(isinstance(m, Mapping) and "role" in m for m in messages):
        system = data.get("system", []) if isinstance(data, Mapping) else []
        texts = [s for block in (system if isinstance(system, list) else [system]) for s in _strings(block)]
        for message in messages:
            if message.get("role") in ("user", "system"):  # the assistant's own words vouch for nothing
                # A tool result's JSON counts by its strings, as decoded: never by escapes re-encoded.
                texts += [text for value in _strings_or_json(message.get("content")) for text in _strings(value)]
        return [], texts
    if _chunk_list(data, origin) is None:
        raise _unknown_shape(origin, "context", CONTEXT_SHAPES)
    return read_retrieval(data, origin).chunks, []


def _strings_or_json(content: Any) -> Iterator[Any]:
    """The text of a message's content: strings, and "json" blocks (tool results) as JSON."""
    if isinstance(content, Mapping) and "json" in content:
        yield content["json"]
        return
    if isinstance(content, str):
        yield content
    elif isinstance(content, Mapping):
        for value in content.values():
            yield from _strings_or_json(value)
    elif isinstance(content, list):
        for value in content:
            yield from _strings_or_json(value)


# --------------------------------------------------------------------------- files


def read_text_file(path: Path) -> str:
    """A UTF-8 text file (a BOM is dropped), or stdin for "-"; a missing file raises FileNotFoundError."""
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else path.read_bytes()
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{_name(path)}: invalid UTF-8 at byte {error.start}") from None


def _name(path: Path) -> str:
    return "<stdin>" if str(path) == "-" else str(path)


def _parse(text: str, origin: str) -> Any:
    try:
        return parse_json(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{origin}: malformed JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except JSONOverLimit as error:
        raise JSONInputOverLimit(f"{origin}: {error}") from None


def _json_documents(path: Path, what: str, shapes: tuple[str, ...]) -> tuple[list[tuple[str, Any]], list[str]]:
    """The JSON value(s) of a file or stdin, whatever the suffix, as (origin, value) pairs and the
    errors of unreadable lines: one JSON value; JSON Lines (``.jsonl``, or lines that each parse);
    or [("", text)] for text that is not JSON. A ``.json`` or ``.jsonl`` file must be JSON."""
    text = read_text_file(path)
    name, suffix = _name(path), path.suffix.lower()
    if suffix not in (".json", ".jsonl") and text.lstrip()[:1] not in ("{", "[", '"'):
        return [("", text)], []  # plain text ("12345" or "true" is an answer in words, not JSON)
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if suffix != ".jsonl":
        try:
            return [(name, _parse(text, name))], []
        except JSONInputOverLimit:
            raise  # whatever the suffix: it is JSON, and the accepted shapes would not help
        except InputError as error:
            if suffix == ".json":
                raise InputError(f"{error}; {_accepted(what, shapes)}") from None
            if len(lines) < 2 or _embedded_json(lines[0][1]) is None:
                return [("", text)], []  # plain text
    documents: list[tuple[str, Any]] = []
    errors: list[str] = []
    for number, line in lines:
        try:
            documents.append((f"{name}:{number}", _parse(line, f"{name}:{number}")))
        except InputError as error:
            errors.append(str(error))
    return documents, errors


def load_retrieval_json(path: Path, chunk_lines: bool = False) -> Any:
    """The one JSON document of a retrieval file or stdin ("-"), not yet read as a shape. ``chunk_lines``:
    JSON Lines of chunks (``anchorkit chunk --jsonl`` records, one a line) are the list of them (not for
    inject, which writes back the shape it read)."""
    documents, errors = _json_documents(path, "retrieval", RETRIEVAL_SHAPES)
    lines = chunk_lines and (path.suffix.lower() == ".jsonl" or len(documents) > 1)
    if lines and not errors and documents and all(_is_chunk_line(origin, data) for origin, data in documents):
        return [data for _, data in documents]
    if errors or len(documents) != 1 or not documents[0][0]:
        raise InputError(
            f"{_name(path)}: a retrieval must be one JSON document; {_accepted('retrieval', RETRIEVAL_SHAPES)}"
        )
    return documents[0][1]


def _is_chunk_line(origin: str, data: Any) -> bool:
    """A line of JSON Lines that is one chunk, not a whole retrieval."""
    return bool(origin) and isinstance(data, Mapping) and _chunk_list(data, origin) is None


def load_retrieval(path: Path) -> Retrieval:
    return read_retrieval(load_retrieval_json(path, chunk_lines=True), _name(path))


def load_answers(path: Path) -> tuple[list[tuple[str, Answer]], list[str]]:
    """The answers of a file or stdin ("-"): one JSON answer, JSON Lines of answers, or plain text.
    Unreadable lines of JSON Lines are errors; the other answers are still returned."""
    documents, errors = _json_documents(path, "answer", ANSWER_SHAPES)
    answers: list[tuple[str, Answer]] = []
    for origin, data in documents:
        if not origin:
            return [(_name(path), Answer("text", text=data))], []
        try:
            answers.append((origin, read_answer(data, origin)))
        except InputError as error:
            if len(documents) == 1:
                raise
            errors.append(str(error))
    return answers, errors


def load_context(path: Path) -> tuple[list[Chunk], list[str]]:
    """A later turn's context: JSON (an earlier retrieval, Converse messages, a string) or the context
    message as text (genuine anchors only)."""
    documents, errors = _json_documents(path, "context", CONTEXT_SHAPES)
    if errors or len(documents) != 1:
        raise InputError(
            f"{_name(path)}: a context must be one JSON document or text; {_accepted('context', CONTEXT_SHAPES)}"
        )
    origin, data = documents[0]
    return ([], [data]) if not origin else read_context(data, origin)


# --------------------------------------------------------------------------------------------------
# The inputs of one `verify` run


@dataclass
class VerifyInputs:
    chunks: list[Chunk]
    notes: list[str]
    answers: list[tuple[str, Answer]]
    errors: list[str]  # unreadable lines of a JSON Lines answer file
    context_chunks: list[Chunk]
    context_texts: list[str]


@contextlib.contextmanager
def input_errors() -> Iterator[None]:
    """A missing or unreadable input file is a usage error (exit 2) naming it."""
    try:
        yield
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        raise UsageError(f"{exc.filename}: {exc.strerror}") from None


def read_inputs(retrieval: Path | None, answer: Path | None, contexts: list[Path]) -> VerifyInputs:
    """All of verify's input files, or a usage error (exit 2) for a missing file, an unreadable file, malformed
    JSON or an unknown shape. The answer may carry its retrieval (RetrieveAndGenerate, LlamaIndex, LangChain
    context), and the retrieval its answer: then one file does."""
    with input_errors():
        if retrieval is None and answer is None:
            raise UsageError("give --retrieval, --answer, or both")
        read = load_retrieval(retrieval) if retrieval is not None and answer is not None else None
        if answer is None:
            assert retrieval is not None
            try:
                answers, errors = load_answers(retrieval)
            except InputError:
                answers, errors = [], []
            if not answers or any(a.shape not in CARRYING_SHAPES for _, a in answers):
                raise UsageError(
                    "--answer is required unless --retrieval holds the answer too (RetrieveAndGenerate, LlamaIndex)"
                )
        else:
            answers, errors = load_answers(answer)
        if read is None and retrieval is None and any(a.shape not in CARRYING_SHAPES for _, a in answers):
            raise UsageError(
                "--retrieval is required unless the answer carries its retrieval "
                "(RetrieveAndGenerate, LlamaIndex, LangChain context)"
            )
        context_chunks: list[Chunk] = []
        context_texts: list[str] = []
        for path in contexts:
            more_chunks, texts = load_context(path)
            context_chunks += more_chunks
            context_texts += texts
    return VerifyInputs(
        read.chunks if read else [], read.notes if read else [], answers, errors, context_chunks, context_texts
    )
