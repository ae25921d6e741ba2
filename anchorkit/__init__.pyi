"""The types of the names ``anchorkit/__init__.py`` imports on first use (PEP 561 stub)."""

from anchorkit.chunk import ChunkedTicket as ChunkedTicket
from anchorkit.chunk import chunk_document as chunk_document
from anchorkit.chunk.pipeline import ChunkOptions as ChunkOptions
from anchorkit.chunk.pipeline import chunk_source as chunk_source
from anchorkit.chunk.writers import ChunkReport as ChunkReport
from anchorkit.render.document import RenderOptions as RenderOptions
from anchorkit.render.transform import TransformOptions as TransformOptions
from anchorkit.render.transform import TransformReport as TransformReport
from anchorkit.render.transform import transform_snapshot as transform_snapshot
from anchorkit.tokens import choose_tokenizer as choose_tokenizer
from anchorkit.verify.citations import VerifyOptions as VerifyOptions
from anchorkit.verify.citations import VerifyReport as VerifyReport
from anchorkit.verify.citations import verify_citations as verify_citations
from anchorkit.verify.evaluation import EvalGates as EvalGates
from anchorkit.verify.evaluation import evaluate as evaluate
from anchorkit.verify.evaluation import load_cases as load_cases
from anchorkit.verify.html import render_report as render_report
from anchorkit.verify.inject import InjectReport as InjectReport
from anchorkit.verify.inject import anchor_chunks as anchor_chunks
from anchorkit.verify.shapes import read_answer as read_answer
from anchorkit.verify.shapes import read_retrieval as read_retrieval

__version__: str
__all__: list[str]
