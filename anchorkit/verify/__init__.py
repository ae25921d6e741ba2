"""Answer-time verification: keep only ticket ids and citations that come from what was actually retrieved.

model: the data (chunks, citations, claims, answers); folding: the text as a reader sees it, which the mention
scan reads (compatibility characters as NFKC makes them, invisible ones dropped), and the bidirectional controls;
ids: valid ids and the filtering of answers; links: where a chunk is in Redmine (its url, the notes it holds) and
the notes an answer cites; similarity: quotes and claims against their sources; citations: the findings and the
report; shapes: the one reader of retrieval, answer and context files; evaluation: eval over many cases; html: the
report page; inject: anchors added to retrieved chunks at query time."""

from __future__ import annotations

from anchorkit.verify.citations import VerifyOptions, VerifyReport, grounding_score, verify_citations
from anchorkit.verify.evaluation import EvalSummary, evaluate, load_cases
from anchorkit.verify.html import render_report
from anchorkit.verify.ids import (
    compile_uri_pattern,
    context_ticket_ids,
    filter_ids,
    filter_stream,
    filter_text,
    filter_text_stream,
    mentioned_ids,
    valid_ids,
)
from anchorkit.verify.inject import anchor_chunks
from anchorkit.verify.model import (
    DEFAULT_GROUNDING_THRESHOLD,
    DEFAULT_MIN_ID_DIGITS,
    DEFAULT_QUOTE_THRESHOLD,
    DEFAULT_URI_PATTERN,
    Answer,
    Chunk,
    Citation,
    Claim,
)
from anchorkit.verify.shapes import (
    CARRYING_SHAPES,
    InputError,
    load_answers,
    load_context,
    load_retrieval,
    load_retrieval_json,
    read_answer,
    read_context,
    read_retrieval,
)
from anchorkit.verify.similarity import claim_overlap, content_tokens, normalize_for_match, quote_similarity

__all__ = [
    "CARRYING_SHAPES",
    "DEFAULT_GROUNDING_THRESHOLD",
    "DEFAULT_MIN_ID_DIGITS",
    "DEFAULT_QUOTE_THRESHOLD",
    "DEFAULT_URI_PATTERN",
    "Answer",
    "Chunk",
    "Citation",
    "Claim",
    "EvalSummary",
    "InputError",
    "VerifyOptions",
    "VerifyReport",
    "anchor_chunks",
    "claim_overlap",
    "compile_uri_pattern",
    "content_tokens",
    "context_ticket_ids",
    "evaluate",
    "filter_ids",
    "filter_stream",
    "filter_text",
    "filter_text_stream",
    "grounding_score",
    "load_answers",
    "load_cases",
    "load_context",
    "load_retrieval",
    "load_retrieval_json",
    "mentioned_ids",
    "normalize_for_match",
    "quote_similarity",
    "read_answer",
    "read_context",
    "read_retrieval",
    "render_report",
    "valid_ids",
    "verify_citations",
]
