"""`anchorkit transform`: snapshot → anchored Markdown (+ sidecars) (anchorkit.render.transform)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import (
    CHECK,
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
)
from anchorkit.cli.options import with_options as options_of
from anchorkit.settings import TRANSFORM


@options_of(
    TRANSFORM,
    documents=DOCUMENTS,
    privacy=some_of(REDMINE, "include_private"),
    tokenizer=TOKENIZER,
    text_format=some_of(REDMINE, "text_format"),
    checking=CHECK,
    jobs=JOBS,
)
def transform_command(
    snapshot: Annotated[
        Path, typer.Argument(help="Snapshot folder (issues/<id>.json, lookups.json, state.json), e.g. fixtures.")
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", metavar="DIR", help="Output folder of the <id>.md documents (created if missing)."),
    ],
    documents: Values = GROUP,
    privacy: Values = GROUP,
    tokenizer: Values = GROUP,
    text_format: Values = GROUP,
    checking: Values = GROUP,
    jobs: Values = GROUP,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Turn a snapshot into one anchored Markdown document per ticket (and optional sidecars).

    Every section and every journal entry carries the anchor line `> チケット #ID: subject`, and more
    anchors are placed so that any window of --chunk-tokens tokens holds one: any chunk of that
    length names its ticket, wherever the chunker cuts. Output is deterministic: unchanged files are not
    rewritten, outputs of tickets no longer in the snapshot are removed, bad tickets are reported
    (file and reason) while the others are still done; exit code 1 if any ticket failed.

    Example:

        anchorkit transform snap --out out --sidecars --lang en --timezone Asia/Tokyo
    """
    from anchorkit.files import check_writable_folder
    from anchorkit.publish.keys import DOCUMENTS
    from anchorkit.render.transform import TransformOptions, transform_snapshot
    from anchorkit.source.snapshot import check_snapshot
    from anchorkit.sync.chunking import check_out_layout

    values = {**documents, **privacy, **tokenizer, **text_format}
    options = TransformOptions.from_settings(values)
    check = checking["check"]
    check_snapshot(snapshot)  # (before the layout: `transform chunks --out chunks` is first of all no snapshot)
    check_out_layout(out, DOCUMENTS, "transform")
    if not check:
        check_writable_folder(out, "--out")
    with output.progress_bar("rendering", "tickets", not json_output) as on_progress:
        report = transform_snapshot(snapshot, out, options, check=check, jobs=jobs["jobs"], progress=on_progress)
    if json_output:
        ok = not report.failed and not (check and report.differs)
        output.print_json({"ok": ok, "check": check, "out": str(out), **report.to_json()})
    else:
        output.print_transform_report(report, out, check)
    if report.failed or (check and report.differs):
        raise typer.Exit(1)
