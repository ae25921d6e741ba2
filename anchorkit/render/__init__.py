"""The render stage: snapshot → one anchored Markdown document per ticket (+ Bedrock sidecars).

textile, commonmark, markdown_text, textformat: Redmine text → Markdown; document: one issue → its
anchored document (pure); spacing: the anchors --chunk-tokens adds (pure); sidecar: Bedrock metadata
sidecars (pure); transform: the batch over a snapshot, with its options."""

from anchorkit.render.document import RenderOptions, render_document
from anchorkit.render.sidecar import build_sidecar
from anchorkit.render.spacing import approx_tokens_with_margin, space_anchors
from anchorkit.render.textformat import to_markdown
from anchorkit.render.transform import TransformOptions, TransformReport, iter_documents, transform_snapshot

__all__ = [
    "RenderOptions",
    "TransformOptions",
    "TransformReport",
    "approx_tokens_with_margin",
    "build_sidecar",
    "iter_documents",
    "render_document",
    "space_anchors",
    "to_markdown",
    "transform_snapshot",
]
