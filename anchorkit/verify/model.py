"""What verify works on: retrieved chunks, citations, claims and answers, and the defaults they share.

Untrusted text (chunks, answers) is only ever matched against fixed patterns; nothing is built from it.
"""

from __future__ import annotations

from collections.abc import (
    Mapping,
)
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from anchorkit.settings import default

DEFAULT_URI_PATTERN: str = default("uri_pattern")
"""Source URI → ticket id: ``…/12345.md`` (flat layout), ``…/<project>/12345.md`` (by-project) and
``…/12345/12345-004.md`` (anchorkit's chunks)."""
DEFAULT_QUOTE_THRESHOLD: float = default("quote_threshold")
"""A quoted span must match some part of the cited chunk with at least this similarity (0..1)."""
DEFAULT_GROUNDING_THRESHOLD: float = default("grounding_threshold")
"""At least this share of a claim's tokens (CJK bigrams / words) must occur in its cited chunks."""
UNVERIFIED_MARKER = "[unverified]"
"""What a dropped ``#12345`` mention becomes in a filtered text answer."""

OnInvalid = Literal["drop", "flag"]
OnEmpty = Literal["pass", "block"]
Severity = Literal["critical", "warning", "info"]
T = TypeVar("T")

DEFAULT_MIN_ID_DIGITS: int = default("min_id_digits")
"""A bare ``#n`` (no label, not in a Redmine URL) is a ticket id only with at least this many digits
(or when ``n`` is a retrieved ticket): ``手順 #2`` is step 2, not ticket #2. Labelled forms
(``チケット #2``, ``Ticket#2``, ``Redmine #2``) and Redmine issue URLs always are."""


# --------------------------------------------------------------------------- input data


@dataclass(frozen=True)
class Chunk:
    """One retrieved chunk: the id an answer cites it by, its text and its source URI.

    ``ticket_id``/``subject``: what the knowledge base stored with the document (the ``ticket_id`` and
    ``subject`` attributes of anchorkit's sidecars), when the retrieval reports them; ``title``: the
    source's title (a cited-answer pipeline's ``Source.title``); ``score``: the retriever's relevance
    score; ``url``: where a person reads the source (the metadata's ``url``: the Redmine issue, or the
    note the chunk starts in), which the report pages link to.
    """

    id: str
    text: str
    uri: str | None = None
    ticket_id: int | None = None
    title: str | None = None
    subject: str | None = None
    score: float | None = None
    url: str | None = None
    notes: frozenset[int] | None = None  # the Redmine notes it holds text of (verify.links); None: not said


@dataclass(frozen=True)
class Citation:
    """A claim's reference to a retrieved chunk, optionally quoting it.

    ``position``: the 0-based position of the chunk in the retrieval, for citations that name a
    position instead of an id (``[2]`` markers, LangChain's integer source ids); ``source_id`` is
    then how the answer wrote it. ``note``: the Redmine note of the cited ticket the citation names
    (a structured ``{"ticket_id": 12345, "note": 3}``); a source id such as ``"12345#note-3"`` names
    one too (verify.links.note_source).
    """

    source_id: str
    quoted_span: str | None = None
    position: int | None = None
    note: int | None = None


@dataclass(frozen=True)
class Claim:
    text: str
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class Answer:
    """An answer in any accepted shape, normalised (verify_shapes.py says which shape fills what).

    ``text``: free text outside claims (a plain-text answer, ``output.text``, a top-level ``answer``);
    ``summary``: a GroundedAnswer's summary; ``claims``: structured claims; ``results``: ticket result
    objects ``{"issue_id": …}`` (kept as given, they are the product); ``extra``: (where, text) of every
    other string the answer holds, checked for ticket ids too; ``retrieved``: chunks the answer carries
    itself (RetrieveAndGenerate references, LlamaIndex ``source_nodes``, LangChain ``context``).
    """

    shape: str
    text: str = ""
    claims: tuple[Claim, ...] = ()
    results: tuple[Mapping[str, Any], ...] = ()
    summary: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    retrieved: tuple[Chunk, ...] = ()
    notes: tuple[str, ...] = ()  # what reading ``retrieved`` skipped
