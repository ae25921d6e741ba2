"""The audit (`anchorkit stats`): what the anchors cost in tokens and how many chunks keep their ticket ID.

chunkers: Bedrock-like and LangChain chunkers; sources: the documents to audit; measure: per-document
measurements; collect: the report; stats: the whole run and its CI gates; schema: the report's JSON Schema;
html: the report page."""

from __future__ import annotations

from anchorkit.audit.collect import SCHEMA_VERSION
from anchorkit.audit.html import format_percent, format_ratio, render_html
from anchorkit.audit.measure import (
    CHUNK_LENGTHS,
    DocumentVersion,
    Lengths,
    Measurer,
    anchors_needed,
    identified_windows,
    window_tally,
)
from anchorkit.audit.schema import REPORT_SCHEMA
from anchorkit.audit.sources import (
    MAX_DOCUMENT_BYTES,
    OversizedDocument,
    SourceDocument,
    is_snapshot,
    iter_output_folder,
    iter_snapshot,
)
from anchorkit.audit.stats import Gates, audit

__all__ = [
    "CHUNK_LENGTHS",
    "MAX_DOCUMENT_BYTES",
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "DocumentVersion",
    "Gates",
    "Lengths",
    "Measurer",
    "OversizedDocument",
    "SourceDocument",
    "anchors_needed",
    "audit",
    "format_percent",
    "format_ratio",
    "identified_windows",
    "is_snapshot",
    "iter_output_folder",
    "iter_snapshot",
    "render_html",
    "window_tally",
]
