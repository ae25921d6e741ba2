"""JSON Schema (draft 2020-12) of ``anchorkit stats --json``: the contract auditors diff against.

Bump ``stats.SCHEMA_VERSION`` on any incompatible change (the ``version`` const here follows it);
adding optional keys is compatible.
"""

from __future__ import annotations

from typing import Any

from anchorkit.audit.chunk_layouts import CHUNK_KINDS, PROBLEMS
from anchorkit.audit.collect import SCHEMA_NAME, SCHEMA_VERSION
from anchorkit.audit.measure import LIMIT_FINDINGS
from anchorkit.audit.rendering import AS_FOUND, RENDERED
from anchorkit.bedrock.counts import NUMBERS
from anchorkit.tokens import APPROX, CL100K_BASE

_PERCENT = {"type": ["number", "null"]}
_COUNT = {"type": "integer", "minimum": 0}
_TICKET = {"type": ["integer", "null"]}


def _object(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    required = [name for name in properties if name not in optional]
    return {"type": "object", "required": required, "properties": properties, "additionalProperties": False}


_COVERAGE = _object(
    {
        "chunks": _COUNT,
        "identified": _COUNT,
        "coverage_percent": _PERCENT,
        "mentioning_other": _COUNT,
        "mentioning_other_percent": _PERCENT,
        "longest_unidentified_run_tokens": _COUNT,
        "longest_unidentified_run_ticket_id": _TICKET,
    }
)
_FINDING = _object(
    {"count": _COUNT, "items": {"type": "array", "items": {"type": "object", "required": ["ticket_id", "relpath"]}}}
)
_RUN = _object({"tokens": _COUNT, "ticket_id": _TICKET})
_RATIO = {"type": ["number", "null"], "minimum": 0}
# Placements at one chunk length, added up (efficiency and each row of the chunk-length table).
_PLACEMENTS = {
    "chunk_tokens": {"type": "integer", "minimum": 1},
    "windows": _COUNT,
    "identified": _COUNT,
    "coverage_percent": _PERCENT,
    "anchors": _COUNT,
    "anchor_tokens": {"type": "integer"},
    "overhead_percent": _PERCENT,
    "bound_anchors": _COUNT,
    "bound_tokens": _COUNT,
    "bound_overhead_percent": _PERCENT,
    "ratio_to_bound": _RATIO,
    "documents_anchor_too_long": _COUNT,
    "longest_anchorless_run": _RUN,
}
_TICKET_PLACEMENT = _object(
    {
        "ticket_id": {"type": "integer"},
        "relpath": {"type": "string"},
        "tokens_without_anchors": _COUNT,
        "anchors": _COUNT,
        "anchor_cost_tokens": {"type": "number"},
        "anchor_tokens": {"type": "integer"},
        "bound_anchors": {"type": ["integer", "null"]},
        "bound_tokens": {"type": ["integer", "null"]},
        "ratio_to_bound": _RATIO,
    }
)
# Chunks as they are (audit/chunk_layouts.py): anchorkit's own, or the Lambda's output batches.
_CHUNKS = _object(
    {
        "chunk_tokens": {"type": "integer", "minimum": 1},
        "chunks": _COUNT,
        "tickets": _COUNT,
        "identified": _COUNT,
        "coverage_percent": _PERCENT,
        **dict.fromkeys(PROBLEMS, _COUNT),
        "tokens": _COUNT,
        "longest_chunk_tokens": _COUNT,
        "ticket_chunks": _COUNT,
        "fewest_chunks": _COUNT,
        "tickets_header_too_long": _COUNT,
        "ratio_to_fewest": _RATIO,
        "overlapping_chunks": _COUNT,
        "repeated_chunks": _COUNT,
        "problems": {
            "type": "array",
            "items": _object(
                {
                    "where": {"type": "string"},
                    "ticket_id": _TICKET,
                    "tokens": _COUNT,
                    "problems": {"type": "array", "items": {"enum": list(PROBLEMS)}},
                }
            ),
        },
    }
)
# The Lambda's audit lines, summed (anchorkit/bedrock/audit.py).
_LAMBDA = _object(
    {
        "invocations": _COUNT,
        **{number.name: _COUNT for number in NUMBERS},
        "shapes": {"type": "object", "additionalProperties": _COUNT},
        "named": _COUNT,
        "coverage_percent": _PERCENT,
    }
)
_DOCUMENT_SECTIONS = ("overhead", "chunking", "efficiency", "chunk_lengths", "limits")
# What made the documents measured (audit/rendering.py): a snapshot's options as applied, or none for an input
# read as found; and whether they may hold private content, and why (the report is then written 0600).
_RENDERING_OPTIONS = _object(
    {
        "lang": {"type": "string"},
        "label": {"type": ["string", "null"]},
        "include_private": {"type": "boolean"},
        "anchor_basic_info": {"type": "boolean"},
        "chunk_tokens": _COUNT,
        "anchor_subject_chars": _COUNT,
        "spacing_anchors": {"type": "string"},
        "timezone": {"type": "string"},
        "link_issues": {"type": ["string", "null"]},
        "text_format": {"type": ["string", "null"]},
        "max_text_bytes": _COUNT,
        "sidecars": {"type": "boolean"},
        "sidecar_schema": {"type": "string"},
        "layout": {"type": "string"},
        "tokenizer": {"enum": [CL100K_BASE, APPROX]},
    }
)
_RENDERING = _object(
    {
        "documents": {"enum": [RENDERED, AS_FOUND]},
        "options": {"oneOf": [{"type": "null"}, _RENDERING_OPTIONS]},
        "private_content": {"type": "boolean"},
        "private_content_evidence": {"type": "string"},
    }
)
_TRANSFORM = _object({"chunk_tokens": _COUNT, "anchor_subject_chars": _COUNT, "anchor_basic_info": {"type": "boolean"}})

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "anchorkit stats report",
    **_object(
        {
            "schema": {"const": SCHEMA_NAME},
            "version": {"const": SCHEMA_VERSION},
            # What was audited: documents (through emulated chunkers), or chunks as they are.
            "layout": {"enum": ["documents", *sorted(set(CHUNK_KINDS.values()))]},
            # The CLI adds when and by which version the report was made (the library's audit() leaves it out).
            "run": _object(
                {"generated_at": {"type": "string", "format": "date-time"}, "anchorkit_version": {"type": "string"}}
            ),
            # The CLI's verdict, as in every command's --json: no unreadable document and no failed gate.
            "ok": {"type": "boolean"},
            "source": _object(
                {
                    "path": {"type": "string"},
                    "kind": {"enum": ["output", "snapshot", *CHUNK_KINDS]},
                    "documents": _COUNT,
                    "chunks": _COUNT,  # chunk layouts: how many chunks (or, from a log, chunks out) were counted
                    # The transform options a snapshot was rendered with; null for an output folder.
                    "transform": {"oneOf": [{"type": "null"}, _TRANSFORM]},
                },
                optional=("transform", "documents", "chunks"),
            ),
            "rendering": _RENDERING,
            "tokenizer": _object(
                {
                    "name": {"enum": [CL100K_BASE, APPROX]},
                    "exact": {"type": "boolean"},
                    "note": {"type": "string"},
                    "approx_error_percent": {
                        "oneOf": [
                            {"type": "null"},
                            _object({"total": {"type": "number"}, "mean_absolute": {"type": "number"}}),
                        ]
                    },
                }
            ),
            "overhead": _object(
                {
                    "tokens_with_anchors": _COUNT,
                    "tokens_without_anchors": _COUNT,
                    "anchor_tokens": {"type": "integer"},
                    "percent": _PERCENT,
                    "per_ticket_percent": _object({"p50": _PERCENT, "p90": _PERCENT, "max": _PERCENT}),
                    "histogram": _object(
                        {
                            "bin_width_percent": {"type": "number"},
                            "bins": {
                                "type": "array",
                                "items": _object(
                                    {"from": {"type": "number"}, "to": {"type": ["number", "null"]}, "count": _COUNT}
                                ),
                            },
                        }
                    ),
                    "top": {
                        "type": "array",
                        "items": _object(
                            {
                                "ticket_id": {"type": "integer"},
                                "relpath": {"type": "string"},
                                "tokens_with_anchors": _COUNT,
                                "tokens_without_anchors": _COUNT,
                                "percent": {"type": "number"},
                            }
                        ),
                    },
                    "longest_anchorless_run": _object({"anchored": _RUN, "stripped": _RUN}),
                }
            ),
            "chunking": {
                "type": "array",
                "items": _object(
                    {
                        "chunker": {"type": "string"},
                        "level": {"type": "string"},
                        "spec": {"type": "string"},
                        "unit": {"enum": ["tokens", "characters"]},
                        "note": {"type": ["string", "null"]},
                        "anchored": _COVERAGE,
                        "stripped": _COVERAGE,
                    }
                ),
            },
            "efficiency": _object(
                {
                    **_PLACEMENTS,
                    "per_ticket_ratio": _object({"p50": _RATIO, "p90": _RATIO, "max": _RATIO}),
                    "top": {"type": "array", "items": _TICKET_PLACEMENT},
                }
            ),
            "chunk_lengths": _object(
                {
                    "documents": {"enum": ["rendered at each length", "as they are"]},
                    "overlap_percent": _COUNT,
                    "rows": {"type": "array", "items": _object(_PLACEMENTS)},
                }
            ),
            "limits": _object(dict.fromkeys(LIMIT_FINDINGS, _FINDING)),
            "chunks": _CHUNKS,
            "lambda": _LAMBDA,
            "errors": {"type": "array", "items": _object({"path": {"type": "string"}, "message": {"type": "string"}})},
            "gates": _object(
                {
                    "fail_under_coverage": _PERCENT,
                    "fail_over_overhead": _PERCENT,
                    "failures": {"type": "array", "items": {"type": "string"}},
                }
            ),
        },
        optional=("run", "ok", "chunks", "lambda", *_DOCUMENT_SECTIONS),
    ),
    # A documents report has every section it had up to version 3; a chunk report has its own.
    "allOf": [
        {
            "if": {"properties": {"layout": {"const": "documents"}}},
            "then": {"required": list(_DOCUMENT_SECTIONS), "properties": {"source": {"required": ["documents"]}}},
            "else": {"required": ["source"], "properties": {"source": {"required": ["chunks"]}}},
        }
    ],
}
