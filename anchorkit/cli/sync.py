"""`anchorkit sync`: pull → transform → upload with one set of settings (anchorkit.sync resolves them and
reports where each came from); with --state, the state beside the destination."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import (
    AWS,
    CHUNKS,
    DOCUMENTS,
    ENCRYPTION,
    GROUP,
    INGESTION,
    PUBLISHING,
    REDMINE,
    S3_CLIENT,
    STATE,
    TOKENIZER,
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
    documents=DOCUMENTS + CHUNKS + TOKENIZER,
    destination=PUBLISHING + S3_CLIENT + AWS + ENCRYPTION + INGESTION,
    state=STATE,
)
def sync_command(
    dest: Annotated[str | None, typer.Argument(help="Where to publish: s3://bucket/prefix or a local folder.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", metavar="FILE", help=f"Config file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE_NAME})."
        ),
    ] = None,
    snapshot: Annotated[
        Path | None, typer.Option("--snapshot", metavar="DIR", help="Snapshot folder pull keeps up to date.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="DIR", help="Output folder transform writes and upload publishes."),
    ] = None,
    redmine: Values = GROUP,
    documents: Values = GROUP,
    destination: Values = GROUP,
    state: Values = GROUP,
    rescope: Annotated[
        bool,
        typer.Option(
            "--rescope",
            help="With --state: accept another scope (Redmine, --project, --include-private, DEST) than the "
            "state's; with --delete, delete what falls outside it (docs/sync.md). A flag only.",
        ),
    ] = False,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Pull from Redmine, transform, and upload by content, in one go.

    Every option of pull, transform and upload that a scheduled run needs, from the command line, else
    ANCHORKIT_* / REDMINE_URL, else anchorkit.toml (docs/reference.md, "anchorkit sync"); with --state,
    on a runner without a persistent disk (docs/sync.md). The destination (its bucket, the credentials),
    the folders and the API key are checked before anything is pulled: exit 2 means nothing was done.

    Example:

        anchorkit sync s3://kb-docs/tickets --url https://redmine.example.com --snapshot snap --out out --delete
        anchorkit sync s3://kb-docs/tickets --url https://redmine.example.com --state s3://kb-docs/anchorkit-state/
        anchorkit sync s3://kb-chunks/tickets --url https://redmine.example.com --state s3://kb-chunks/state/ --chunks
    """
    from anchorkit import sync as syncing

    flags = {"dest": dest, "snapshot": snapshot, "out": out, **redmine, **documents, **destination, **state}
    resolved = syncing.resolve_from_environment(flags, config)
    settings = syncing.SyncSettings.from_settings(resolved)
    list_keys = resolved["list_keys"]
    if settings.state:
        with output.sync_progress(not json_output) as on_progress:
            stateless = syncing.sync_with_state(settings, rescope, output.print_warning, on_progress)
        output.print_stateless_sync_report(stateless, json_output, list_keys)
        if not stateless.ok:
            raise typer.Exit(1)
        return
    if rescope:
        raise UsageError("--rescope needs --state")
    with output.sync_progress(not json_output) as on_progress:
        report = syncing.sync_with_folders(settings, output.print_warning, on_progress)
    if json_output:
        output.print_json(report.to_json())
    else:
        assert settings.out is not None
        output.print_pull_report(report.pull, json_output=False)
        output.print_transform_report(report.transform, settings.out, check=False)
        output.print_publish_report(report.upload, json_output=False, list_keys=list_keys)
    if not report.ok:
        raise typer.Exit(1)
