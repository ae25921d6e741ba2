"""Reading what `verify` and `eval` are given: retrievals, answers and context, in the accepted shapes.

Shape readers take parsed JSON and return verify.py's data types; file loading is at the edge
(``load_*``). Every problem raises ``InputError`` naming the file (or case) and what is wrong; for
an unknown shape or a file that is not JSON, the message lists the shapes that are accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.snapshot import SnapshotError, read_json
from anchorkit.verify import Answer, Chunk, Citation, Claim, parse_ticket_id

RETRIEVAL_SHAPES = (
    'Bedrock Retrieve response {"retrievalResults": [{"content": {"text": …}, "location": {"s3Location": {"uri": …}}, '
    '"metadata": {…}}]}',
    'Bedrock RetrieveAndGenerate response {"output": {"text": …}, "citations": [{"retrievedReferences": [...]}]}',
    'a plain list of chunks [{"id": …, "text": …, "uri": …, "ticket_id"?: …}] (or {"chunks": [...]})',
)
ANSWER_SHAPES = (
    'structured claims {"claims": [{"text": …, "citations": [{"source_id": …, "quoted_span": …}]}], "answer": …?}',
    'a list of ticket results [{"issue_id": 12345, …}] (or {"results": [...]})',
    'plain text: a non-.json file, a JSON string, or {"text": …} / {"answer": …}',
    "a Bedrock RetrieveAndGenerate response (its output.text and citations)",
)
SOURCE_URI_METADATA = "x-amz-bedrock-kb-source-uri"
CHUNK_ID_METADATA = "x-amz-bedrock-kb-chunk-id"
TICKET_ID_METADATA = "ticket_id"  # the attribute anchorkit's sidecars (sidecar.py) give every document


class InputError(UsageError):
    """Input that cannot be used; the message names where it came from and what is wrong."""


def _accepted(what: str, shapes: tuple[str, ...]) -> str:
    return f"accepted {what} shapes:\n" + "\n".join(f"  - {shape}" for shape in shapes)


def _unknown_shape(origin: str, what: str, shapes: tuple[str, ...]) -> InputError:
    return InputError(f"{origin}: not a known {what} shape; {_accepted(what, shapes)}")


# --------------------------------------------------------------------------- retrieval


def read_retrieval(data: Any, origin: str) -> tuple[str, list[Chunk]]:
    """(shape name, chunks) of a retrieval in any accepted shape."""
    if isinstance(data, Mapping) and isinstance(data.get("retrievalResults"), list):
        return "bedrock_retrieve", _bedrock_chunks(data["retrievalResults"], origin, "retrievalResults")
    if isinstance(data, Mapping) and isinstance(data.get("citations"), list):
        return "retrieve_and_generate", _bedrock_chunks(_rag_references(data, origin), origin, "retrievedReferences")
    if isinstance(data, Mapping) and isinstance(data.get("chunks"), list):
        return "chunks", _plain_chunks(data["chunks"], origin)
    if isinstance(data, list):
        return "chunks", _plain_chunks(data, origin)
    raise _unknown_shape(origin, "retrieval", RETRIEVAL_SHAPES)


def _rag_references(data: Mapping[str, Any], origin: str) -> list[Any]:
    references: list[Any] = []
    for index, citation in enumerate(data["citations"]):
        refs = citation.get("retrievedReferences", []) if isinstance(citation, Mapping) else None
        if not isinstance(refs, list):
            raise InputError(f"{origin}: citations[{index}].retrievedReferences is not a list")
        references.extend(refs)
    return references


def _bedrock_chunks(results: list[Any], origin: str, key: str) -> list[Chunk]:
    """Bedrock results: text in content.text; URI in location.s3Location.uri (or another location
    type's url/uri, or the source-URI metadata); id = the chunk-id metadata, else the 1-based position."""
    chunks: list[Chunk] = []
    for index, result in enumerate(results):
        where = f"{origin}: {key}[{index}]"
        text = _path(result, "content", "text")
        if not isinstance(text, str):
            raise InputError(f"{where}.content.text is missing or not a string")
        metadata = result.get("metadata") if isinstance(result.get("metadata"), Mapping) else {}
        chunk_id = metadata.get(CHUNK_ID_METADATA)
        uri = _location_uri(result.get("location")) or metadata.get(SOURCE_URI_METADATA)
        chunks.append(
            Chunk(
                id=str(chunk_id) if chunk_id is not None else str(index + 1),
                text=text,
                uri=uri if isinstance(uri, str) else None,
                ticket_id=parse_ticket_id(metadata.get(TICKET_ID_METADATA)),
            )
        )
    return chunks


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


def _plain_chunks(items: list[Any], origin: str) -> list[Chunk]:
    chunks: list[Chunk] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            raise InputError(f"{origin}: chunk [{index}] must be an object with a string \"text\"")
        uri = item.get("uri")
        if uri is not None and not isinstance(uri, str):
            raise InputError(f"{origin}: chunk [{index}]: \"uri\" must be a string")
        chunk_id = item.get("id")
        chunk_id = str(chunk_id) if chunk_id is not None else str(index + 1)
        chunks.append(Chunk(chunk_id, item["text"], uri, parse_ticket_id(item.get(TICKET_ID_METADATA))))
    return chunks


# --------------------------------------------------------------------------- answers


def read_answer(data: Any, origin: str) -> Answer:
    """An answer in any accepted shape."""
    if isinstance(data, str):
        return Answer("text", text=data)
    if isinstance(data, Mapping) and isinstance(data.get("claims"), list):
        top_text = data.get("answer", data.get("text", ""))
        if not isinstance(top_text, str):
            raise InputError(f"{origin}: \"answer\" must be a string")
        return Answer("claims", text=top_text, claims=tuple(_claims(data["claims"], origin)))
    if isinstance(data, Mapping) and isinstance(data.get("citations"), list) and "output" in data:
        return _rag_answer(data, origin)
    if isinstance(data, Mapping) and isinstance(data.get("results"), list):
        return Answer("results", results=tuple(_results(data["results"], origin)))
    if isinstance(data, list):
        return Answer("results", results=tuple(_results(data, origin)))
    if isinstance(data, Mapping):
        for key in ("text", "answer"):
            if isinstance(data.get(key), str):
                return Answer("text", text=data[key])
    raise _unknown_shape(origin, "answer", ANSWER_SHAPES)


def _claims(items: list[Any], origin: str) -> list[Claim]:
    claims: list[Claim] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            raise InputError(f"{origin}: claims[{index}] must be an object with a string \"text\"")
        citations = item.get("citations", [])
        if not isinstance(citations, list):
            raise InputError(f"{origin}: claims[{index}].citations must be a list")
        claims.append(Claim(item["text"], tuple(_citation(c, f"{origin}: claims[{index}]") for c in citations)))
    return claims


def _citation(item: Any, where: str) -> Citation:
    if not isinstance(item, Mapping) or isinstance(item.get("source_id"), bool):
        raise InputError(f"{where}: a citation must be an object with \"source_id\" (string or number)")
    source_id = item.get("source_id")
    span = item.get("quoted_span")
    if not isinstance(source_id, (str, int)) or (span is not None and not isinstance(span, str)):
        raise InputError(f"{where}: a citation needs \"source_id\" (string or number) and an optional string \"quoted_span\"")
    return Citation(str(source_id), span)


def _results(items: list[Any], origin: str) -> list[Mapping[str, Any]]:
    for index, item in enumerate(items):
        if not isinstance(item, Mapping) or "issue_id" not in item:
            raise InputError(f"{origin}: results[{index}] must be an object with \"issue_id\"")
    return items


def _rag_answer(data: Mapping[str, Any], origin: str) -> Answer:
    """RetrieveAndGenerate: each citation's generated part is a claim citing its references, by the
    ids read_retrieval gives the same references (so pass the same response as the retrieval)."""
    output = data["output"]
    text = output.get("text") if isinstance(output, Mapping) else None
    if not isinstance(text, str):
        raise InputError(f"{origin}: output.text is missing or not a string")
    chunks = iter(_bedrock_chunks(_rag_references(data, origin), origin, "retrievedReferences"))
    claims: list[Claim] = []
    for citation in data["citations"]:
        part = _path(citation, "generatedResponsePart", "textResponsePart", "text")
        sources = tuple(Citation(next(chunks).id) for _ in citation.get("retrievedReferences", []))
        claims.append(Claim(part if isinstance(part, str) else "", sources))
    return Answer("retrieve_and_generate", text=text, claims=tuple(claims))


def _path(data: Any, *keys: str) -> Any:
    """data[k1][k2]…, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


# --------------------------------------------------------------------------- files


def load_json(path: Path) -> Any:
    """Parsed JSON of a file (snapshot.read_json); InputError naming the file and what is wrong."""
    try:
        return read_json(path)
    except SnapshotError as error:
        raise InputError(str(error)) from None


def read_text_file(path: Path) -> str:
    """A UTF-8 text file (a BOM is dropped); a missing file raises FileNotFoundError (a usage error)."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: invalid UTF-8 at byte {error.start}") from None


def _is_json_file(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def _load_json_of(path: Path, what: str, shapes: tuple[str, ...]) -> Any:
    """load_json, its error followed by the shapes the file may have."""
    try:
        return load_json(path)
    except InputError as error:
        raise InputError(f"{error}; {_accepted(what, shapes)}") from None


def load_retrieval(path: Path) -> tuple[str, list[Chunk]]:
    return read_retrieval(_load_json_of(path, "retrieval", RETRIEVAL_SHAPES), str(path))


def load_answer(path: Path) -> Answer:
    """A ``.json`` file in any answer shape; any other file is a plain-text answer."""
    if _is_json_file(path):
        return read_answer(_load_json_of(path, "answer", ANSWER_SHAPES), str(path))
    return Answer("text", text=read_text_file(path))


def load_context(path: Path) -> tuple[list[Chunk], str]:
    """A later turn's context: a ``.json`` file is an earlier retrieval (any retrieval shape: its chunks
    vouch for ids by URI and anchors); any other file is the context message text (genuine anchors only)."""
    if _is_json_file(path):
        return load_retrieval(path)[1], ""
    return [], read_text_file(path)
