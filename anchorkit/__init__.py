"""anchorkit: anchor every chunk of Redmine tickets to its ticket ID, publish for RAG, and prove it.

The library a program calls, documented in docs/api.md: transform a snapshot into anchored documents,
cut a document into chunks that each name their ticket, verify an answer against what was retrieved
for it (and write its page), evaluate a set of cases, anchor retrieved chunks at query time::

    import anchorkit

    report = anchorkit.transform_snapshot(Path("snapshot"), Path("out"), anchorkit.TransformOptions())

Each name is imported from its stage when it is first used (PEP 562), so that ``import anchorkit``, and
``anchorkit --help`` with it, loads none of them (markdown-it, rapidfuzz, botocore …). Type checkers and
editors read the names' types from ``__init__.pyi``; a static import here would also put every stage in
the Lambda zip, which is built from what the handler's modules import (anchorkit/bedrock/package.py).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

# Each name of the API and the module that defines it.
_API = {
    # snapshot → anchored documents (and Bedrock sidecars)
    "transform_snapshot": "anchorkit.render.transform",
    "TransformOptions": "anchorkit.render.transform",
    "TransformReport": "anchorkit.render.transform",
    "RenderOptions": "anchorkit.render.document",
    # a document → chunks that each name their ticket and link to their note (counted with a tokenizer)
    "chunk_document": "anchorkit.chunk",
    "ChunkedTicket": "anchorkit.chunk",
    "choose_tokenizer": "anchorkit.tokens",
    # a snapshot or a transform output folder → JSON Lines or a Bedrock folder of chunks (`anchorkit chunk`)
    "chunk_source": "anchorkit.chunk.pipeline",
    "ChunkOptions": "anchorkit.chunk.pipeline",
    "ChunkReport": "anchorkit.chunk.writers",
    # an answer against its retrieval: parse both, check, filter, page
    "read_retrieval": "anchorkit.verify.shapes",
    "read_answer": "anchorkit.verify.shapes",
    "verify_citations": "anchorkit.verify.citations",
    "VerifyOptions": "anchorkit.verify.citations",
    "VerifyReport": "anchorkit.verify.citations",
    "render_report": "anchorkit.verify.html",
    # many cases: metrics and gates
    "load_cases": "anchorkit.verify.evaluation",
    "evaluate": "anchorkit.verify.evaluation",
    "EvalGates": "anchorkit.verify.evaluation",
    # retrieved chunks anchored at query time
    "anchor_chunks": "anchorkit.verify.inject",
    "InjectReport": "anchorkit.verify.inject",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module 'anchorkit' has no attribute {name!r}")
    value = getattr(import_module(_API[name]), name)
    globals()[name] = value  # once imported, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
