"""The render stage: snapshot → one anchored Markdown document per ticket (+ Bedrock sidecars).

textile, commonmark, markdown_text, textformat: Redmine text → Markdown; document: one issue → its
anchored document (pure); spacing: the anchors --chunk-tokens adds (pure); sidecar: Bedrock metadata
sidecars (pure); transform: the batch over a snapshot, with its options.

Nothing is imported here: the chunker, and the Lambda function with it, needs the pure sidecar and
spacing modules, and importing this package must not bring transform's snapshot reading and the
Redmine client with them (the Lambda zip holds what its modules import, anchorkit/bedrock/package.py).
Import the modules themselves (``from anchorkit.render.transform import TransformOptions``); the
library's entry points are at the top, ``anchorkit.transform_snapshot``.
"""

__all__: list[str] = []  # its modules are imported by name, each on its own
