"""What made the documents a report measured (the report's ``rendering``), so that a report read a month later
says what it was measured on: the options a snapshot was rendered with, after the config file and the
environment, or that the input was read as found (an output folder records no rendering options); and whether
what was measured may hold private content, which decides the mode of the files the report is written to.
Pure: the input's own evidence of private content is read by ``render.private_marks.private_content_evidence``.
"""

from __future__ import annotations

import shlex
from typing import Any

from anchorkit.render.transform import TransformOptions
from anchorkit.settings import default, option_name

RENDERED = "rendered from the snapshot"
AS_FOUND = "read as found"
NO_PRIVATE_EVIDENCE = "no private marks (.anchorkit-private.json) and no file only its owner may read"


def snapshot_rendering(options: TransformOptions) -> dict[str, Any]:
    """The rendering of a snapshot with ``options``: every option that changes the documents, as applied."""
    render = options.render
    applied = {
        "lang": render.lang,
        "label": render.labels.get("ticket"),  # None: the language's
        "include_private": render.include_private,
        "anchor_basic_info": render.anchor_basic_info,
        "chunk_tokens": render.chunk_tokens,
        "anchor_subject_chars": render.anchor_subject_chars,
        "spacing_anchors": render.spacing_anchors,
        "timezone": render.timezone,
        "link_issues": render.link_issues,
        "text_format": options.text_format,  # None: the snapshot's own (state.json)
        "max_text_bytes": options.max_text_bytes,
        "sidecars": options.sidecars,
        "sidecar_schema": options.sidecar_schema,
        "layout": options.layout,
        "tokenizer": options.tokenizer,
    }
    evidence = (
        "include_private is on: private issues and private notes were measured"
        if render.include_private
        else "include_private is off: private issues and private notes were left out"
    )
    return {
        "documents": RENDERED,
        "options": applied,
        "private_content": render.include_private,
        "private_content_evidence": evidence,
    }


def found_rendering(private_evidence: str | None) -> dict[str, Any]:
    """The rendering of documents or chunks read as found; ``private_evidence``: why they may hold private
    content (None: nothing says so)."""
    return {
        "documents": AS_FOUND,
        "options": None,
        "private_content": private_evidence is not None,
        "private_content_evidence": private_evidence or NO_PRIVATE_EVIDENCE,
    }


def as_flags(options: dict[str, Any]) -> str:
    """The options as transform's command line takes them (``--lang en --chunk-tokens 512 ...``: given to
    transform, they make the documents measured). One left unset (None: the language's label, the snapshot's
    text format, no issue links) is left out, and so is a switch that is off by default and off here
    (``--include-private``: transform has no ``--no-`` form of it)."""
    flags = []
    for name, value in options.items():
        flag = option_name(name)
        if value is True:
            flags.append(flag)
        elif value is False:
            if default(name):
                flags.append(f"--no-{flag.removeprefix('--')}")
        elif value is not None:
            flags.append(f"{flag} {shlex.quote(str(value))}")  # (a label may hold a space)
    return " ".join(flags)


def describe(rendering: dict[str, Any]) -> str:
    """The rendering in one line, for the terminal and the audit page."""
    if rendering["options"] is None:
        how = f"{rendering['documents']} (the input records no rendering options)"
    else:
        how = f"{rendering['documents']} with {as_flags(rendering['options'])}"
    private = "yes" if rendering["private_content"] else "no"
    return f"{how}; private content: {private} ({rendering['private_content_evidence']})"
