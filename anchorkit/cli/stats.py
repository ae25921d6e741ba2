"""`anchorkit stats`: what the anchors cost in tokens, and how many chunks keep their ticket ID (anchorkit.audit)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from typer._click.core import ParameterSource  # typer vendors click and re-exports none of it
from typer._click.globals import get_current_context

from anchorkit.cli import output
from anchorkit.cli.options import (
    DOCUMENTS,
    GROUP,
    JOBS,
    TOKENIZER,
    QuietFlag,
    Values,
    VerboseFlag,
    some_of,
    with_options,
)
from anchorkit.settings import STATS, default

# The names --chunking accepts (anchorkit.audit.chunkers.CHUNKERS; a test keeps the two the same).
CHUNKER_NAMES = ("fixed", "hierarchical", "semantic", "heading", "langchain-recursive", "langchain-markdown")
CHUNK_TOKENS: int = default("chunk_tokens")


@with_options(STATS, tokenizer=TOKENIZER, rendering=some_of(DOCUMENTS, "max_text_bytes"), jobs=JOBS)
def stats_command(
    path: Annotated[
        Path,
        typer.Argument(
            help="A transform output folder, or a snapshot folder (it has issues/: transformed in memory); or chunks "
            "as they are: `anchorkit chunk` JSON Lines or folder, the Bedrock Lambda's output batches or log file.",
        ),
    ],
    tokenizer: Values = GROUP,
    chunking: Annotated[
        list[str] | None,
        typer.Option(
            "--chunking",
            metavar="SPEC",
            help=f"A chunker to measure, repeatable: NAME[:key=value,...], NAME one of {', '.join(CHUNKER_NAMES)} "
            "(default: Bedrock's four, and LangChain's when installed, at --chunk-tokens).",
        ),
    ] = None,
    chunk_tokens: Annotated[
        int,
        typer.Option(
            "--chunk-tokens",
            min=0,
            help="Your knowledge base's chunk length: the chunkers cut N tokens and the cost is weighed for N "
            f"(a snapshot is transformed with it; 0: anchors after headings only, measured at {CHUNK_TOKENS}).",
        ),
    ] = default("chunk_tokens", STATS),
    lengths: Annotated[
        str,
        typer.Option(
            "--lengths",
            metavar="N,N,...",
            help="The chunk lengths of the table to choose --chunk-tokens from ('none': no table).",
        ),
    ] = default("lengths", STATS),
    anchor_subject_chars: Annotated[
        int | None,
        typer.Option(
            "--anchor-subject-chars",
            min=0,
            help="Snapshot input: transform with this --anchor-subject-chars (default: transform's).",
        ),
    ] = default("anchor_subject_chars", STATS),
    anchor_basic_info: Annotated[
        bool | None,
        typer.Option(
            "--anchor-basic-info/--no-anchor-basic-info",
            help="Snapshot input: transform with or without it (default: transform's).",
        ),
    ] = default("anchor_basic_info", STATS),
    rendering: Values = GROUP,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the report as one JSON object (schema anchorkit-stats, version 5: docs/stats.md).",
        ),
    ] = False,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write the audit page (one self-contained HTML file) here.",
        ),
    ] = default("html", STATS),
    fail_under_coverage: Annotated[
        float | None,
        typer.Option(
            "--fail-under-coverage",
            min=0,
            max=100,
            metavar="PERCENT",
            help="Exit 1 if any chunker's coverage of the anchored documents is under this.",
        ),
    ] = default("fail_under_coverage", STATS),
    fail_over_overhead: Annotated[
        float | None,
        typer.Option(
            "--fail-over-overhead",
            min=0,
            metavar="PERCENT",
            help="Exit 1 if the anchors add more than this share of tokens in total.",
        ),
    ] = default("fail_over_overhead", STATS),
    jobs: Values = GROUP,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Audit anchored documents: token overhead of the anchors, and chunk coverage with and without them.

    Every document is measured as it is and with its anchors removed; every chunker cuts both, and
    coverage is the share of chunks whose text names their own ticket (an anchor or the title line).
    The anchors' cost is shown beside the lower bound (the fewest anchor tokens that put a whole anchor
    in every window of --chunk-tokens), and a table gives coverage and cost at other chunk lengths.
    Exit code 1 if a document could not be read or a --fail-* gate failed (a gate over no documents fails).
    Chunks as they are (anchorkit's own, or the Bedrock Lambda's) are judged by their text instead:
    each must hold its ticket's complete anchor or title line and no other's, within --chunk-tokens.

    Example:

        anchorkit stats snapshot --chunk-tokens 512 --html stats.html --fail-under-coverage 99
    """
    from anchorkit.audit.html import render_html
    from anchorkit.audit.stats import run_audit
    from anchorkit.cli.verify import write_file
    from anchorkit.files import check_writable_file, file_mode

    if html is not None:  # before the documents are measured
        check_writable_file(html, "--html")
    values = (
        tokenizer
        | rendering
        | jobs
        | {
            "chunking": chunking or [],
            "chunk_tokens": chunk_tokens,
            "lengths": lengths,
            "anchor_subject_chars": anchor_subject_chars,
            "anchor_basic_info": anchor_basic_info,
            "fail_under_coverage": fail_under_coverage,
            "fail_over_overhead": fail_over_overhead,
        }
    )
    # Which options the command line gave: one the environment or the config file gives for every run is no
    # usage error on an input it does not apply to (run_audit).
    context = get_current_context()
    flags = {name for name in values if context.get_parameter_source(name) is ParameterSource.COMMANDLINE}
    with output.progress_bar("measuring", "documents", not json_output) as on_progress:
        report = run_audit(path, values, on_progress, flags)
    if html is not None:
        # The page quotes the documents (their paths, anchors of other tickets): private content, its owner's alone.
        write_file(html, render_html(report), "--html", file_mode(report["rendering"]["private_content"]))
    if json_output:
        output.print_json(report)
    else:
        output.print_stats_report(report)
    if not report["ok"]:
        raise typer.Exit(1)
