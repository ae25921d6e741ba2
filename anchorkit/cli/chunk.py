"""`anchorkit chunk`: a snapshot or transform output → chunks that each name their ticket (anchorkit.chunk)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import (
    CHECK,
    CHUNKING,
    DOCUMENTS,
    GROUP,
    JOBS,
    REDMINE,
    TOKENIZER,
    JsonFlag,
    QuietFlag,
    Values,
    VerboseFlag,
    some_of,
    with_options,
)
from anchorkit.settings import CHUNK, default

STDOUT = Path("-")


@with_options(
    CHUNK,
    chunking=CHUNKING,
    sidecars=some_of(DOCUMENTS, "sidecars", "sidecar_schema"),
    rendering=some_of(DOCUMENTS, "lang", "label", "timezone", "max_text_bytes", "link_issues"),
    privacy=some_of(REDMINE, "include_private"),
    text_format=some_of(REDMINE, "text_format"),
    redmine=some_of(REDMINE, "url"),
    tokenizer=TOKENIZER,
    jobs=JOBS,
    checking=CHECK,
)
def chunk_command(
    source: Annotated[
        Path,
        typer.Argument(
            help="A snapshot folder (issues/<id>.json …: rendered as transform does) or a transform output folder."
        ),
    ],
    jsonl: Annotated[
        Path | None,
        typer.Option(
            "--jsonl",
            metavar="FILE",
            help='One JSON object a line per chunk {"id", "ticket_id", "text", "metadata"} ("-": stdout).',
        ),
    ] = default("jsonl"),
    chunk_out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="DIR",
            help="A folder of <id>/<id>-<n>.md chunk files (created if missing), for chunking strategy NONE.",
        ),
    ] = default("chunk_out"),
    chunking: Values = GROUP,
    sidecars: Values = GROUP,
    rendering: Values = GROUP,
    privacy: Values = GROUP,
    text_format: Values = GROUP,
    redmine: Values = GROUP,
    tokenizer: Values = GROUP,
    jobs: Values = GROUP,
    checking: Values = GROUP,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Cut every ticket into chunks of at most --chunk-tokens tokens that each begin with its anchor.

    The first chunk of a ticket begins with its title line, every other one with `> チケット #ID: subject`,
    and nothing else in a chunk is an anchor. Chunks are cut between journals and sections first, then
    at lists, sentences, table rows (header repeated) and code lines (fence reopened). Each carries its
    metadata: ticket_id, subject, url (…#note-n for a journal's), section, date and author, position.
    Give exactly one of --jsonl and --out. Unchanged files are not rewritten, the chunk files of a ticket
    that shrank or left the source are removed; a bad ticket is reported (file and reason) while the
    others are still done; exit code 1 if any ticket failed. With --jsonl - only the chunks go to stdout
    (the summary, or --json's object, to stderr). --lang … --text-format say how a snapshot's tickets are
    rendered; a transform folder's documents are chunked as they are.

    Example:

        anchorkit chunk snapshot --out chunks --sidecars
        anchorkit chunk out --chunk-tokens 512 --jsonl - > chunks.jsonl
    """
    from anchorkit.chunk.pipeline import ChunkOptions, chunk_source
    from anchorkit.publish.keys import CHUNKS
    from anchorkit.sync.chunking import check_out_layout

    check = checking["check"]
    if chunk_out is not None:
        check_out_layout(chunk_out, CHUNKS, "chunk")
    options = ChunkOptions.from_settings(chunking | sidecars | rendering | privacy | text_format | redmine | tokenizer)
    to_stdout = jsonl == STDOUT
    with output.progress_bar("chunking", "tickets", not json_output) as on_progress:
        report = chunk_source(
            source,
            jsonl=sys.stdout.buffer if to_stdout else jsonl,
            out=chunk_out,
            options=options,
            check=check,
            jobs=jobs["jobs"],
            progress=on_progress,
        )
    ok = not report.failed and not (check and report.differs)
    target = "stdout" if to_stdout else str(chunk_out or jsonl)
    if json_output:  # on stderr when stdout holds the chunks
        output.print_json(
            {"ok": ok, "check": check, "out": target, **report.to_json()}, sys.stderr if to_stdout else None
        )
    else:
        folder = None if to_stdout else chunk_out if chunk_out is not None else jsonl.parent if jsonl else None
        output.print_chunk_report(report, target, folder, check)
    if not ok:
        raise typer.Exit(1)
