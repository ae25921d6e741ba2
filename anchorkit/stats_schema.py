"""JSON Schema (draft 2020-12) of ``anchorkit stats --json``: the contract auditors diff against.

Bump ``stats.SCHEMA_VERSION`` on any incompatible change (the ``version`` const here follows it);
adding optional keys is compatible.
"""

from __future__ import annotations

from typing import Any

from anchorkit.stats import LIMIT_FINDINGS, SCHEMA_NAME, SCHEMA_VERSION
from anchorkit.tokens import APPROX, CL100K_BASE

_PERCENT = {"type": ["number", "null"]}
_COUNT = {"type": "integer", "minimum": 0}
_TICKET = {"type": ["integer", "null"]}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": list(properties), "properties": properties, "additionalProperties": False}


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
_FINDING = _object({"count": _COUNT, "items": {"type": "array", "items": {"type": "object", "required": ["ticket_id", "relpath"]}}})
_RUN = _object({"tokens": _COUNT, "ticket_id": _TICKET})

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "anchorkit stats report",
    **_object(
        {
            "schema": {"const": SCHEMA_NAME},
            "version": {"const": SCHEMA_VERSION},
            "source": _object({"path": {"type": "string"}, "kind": {"enum": ["output", "snapshot"]}, "documents": _COUNT}),
            "tokenizer": _object(
                {
                    "name": {"enum": [CL100K_BASE, APPROX]},
                    "exact": {"type": "boolean"},
                    "fallback_reason": {"type": ["string", "null"]},
                    "approx_error_percent": {
                        "oneOf": [{"type": "null"}, _object({"total": {"type": "number"}, "mean_absolute": {"type": "number"}})]
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
                                "items": _object({"from": {"type": "number"}, "to": {"type": ["number", "null"]}, "count": _COUNT}),
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
            "limits": _object({name: _FINDING for name in LIMIT_FINDINGS}),
            "errors": {"type": "array", "items": _object({"path": {"type": "string"}, "message": {"type": "string"}})},
            "gates": _object({"fail_under_coverage": _PERCENT, "fail_over_overhead": _PERCENT, "failures": {"type": "array", "items": {"type": "string"}}}),
        }
    ),
}
