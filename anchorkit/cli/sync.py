"""`anchorkit sync`: pull → transform → upload with one set of settings (anchorkit.sync resolves them and
reports where each came from); with --state, the state beside the destination."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import (
    AWS,
    DOCUMENTS,
    ENCRYPTION,
    GROUP,
    INGESTION,
    PUBLISHING,
    REDMINE,
    S3_CLIENT,
    STATE,
    JsonFlag,
    QuietFlag,
    Values,
    VerboseFlag,
    with_options,
)
from anchorkit.errors import UsageError
from anchorkit.settings import CONFIG_ENV, CONFIG_FILE_NAME, SYNC


@with_options(
    SYNC,
    redmine=REDMINE,
    documents=DOCUMENTS,
    destination=PUBLISHING + S3_CLIENT + AWS + ENCRYPTION + INGESTION,
    state=STATE,
)
def sync_command(
    dest: Annotated[
        str | None, typer.Argument(help="s3://bucket/prefix or a local folder (or ANCHORKIT_DEST / config dest).")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help=f"Config file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE_NAME})."),
    ] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Snapshot folder pull keeps up to date.")] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output folder transform writes and upload publishes.")
    ] = None,
    redmine: Values = GROUP,
    documents: Values = GROUP,
    destination: Values = GROUP,
    state: Values = GROUP,
    rescope: Annotated[
        bool,
        typer.Option(
            "--rescope",
            help="With --state: accept a Redmine URL, --project, --include-private or destination other than the "
            "state's (otherwise refused, exit 2); this run lists every issue, and with --delete deletes the documents "
            "of tickets outside the new scope. A command-line flag only.",
        ),
    ] = False,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Pull from Redmine, transform, and upload by content, in one go (flags > ANCHORKIT_*/REDMINE_* > anchorkit.toml).

    Example:

        anchorkit sync s3://kb-docs/tickets --url https://redmine.example.com --snapshot snap --out out --delete
        anchorkit sync s3://kb-docs/tickets --url https://redmine.example.com --state s3://kb-docs/anchorkit-state/
    """
    from anchorkit import sync as syncing

    flags = {"dest": dest, "snapshot": snapshot, "out": out, **redmine, **documents, **destination, **state}
    settings = syncing.SyncSettings.from_settings(syncing.resolve_from_environment(flags, config))
    show_progress = not json_output and output.err_console.is_terminal
    if settings.state:
        with output.sync_progress(show_progress) as on_progress:
            stateless = syncing.sync_with_state(settings, rescope, output.print_warning, on_progress)
        output.print_stateless_sync_report(stateless, json_output)
        if not stateless.ok:
            raise typer.Exit(1)
        return
    if rescope:
        raise UsageError("--rescope needs --state")
    with output.sync_progress(show_progress) as on_progress:
        report = syncing.sync_with_folders(settings, output.print_warning, on_progress)
    if json_output:
        output.print_json(report.to_json())
    else:
        assert settings.out is not None
        output.print_pull_report(report.pull, json_output=False)
        output.print_transform_report(report.transform, settings.out, check=False)
        output.print_publish_report(report.upload, json_output=False)
    if not report.ok:
        raise typer.Exit(1)
