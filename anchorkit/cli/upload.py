"""`anchorkit upload`: publish OUT to s3://bucket/prefix or a folder, by content (anchorkit.publish)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import (
    AWS,
    ENCRYPTION,
    GROUP,
    INGESTION,
    PUBLISHING,
    S3_CLIENT,
    JsonFlag,
    QuietFlag,
    Values,
    VerboseFlag,
    with_options,
)
from anchorkit.settings import UPLOAD


@with_options(UPLOAD, publishing=PUBLISHING, destination=S3_CLIENT + AWS + ENCRYPTION + INGESTION)
def upload_command(
    out: Annotated[
        Path,
        typer.Argument(
            help="The folder to publish (transform's documents or anchorkit chunk's chunks, with sidecars)."
        ),
    ],
    dest: Annotated[str, typer.Argument(help="Where to: s3://bucket/prefix, or a local folder.")],
    publishing: Values = GROUP,
    destination: Values = GROUP,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Publish OUT to S3 (or a folder) by content: only new/changed objects are uploaded.

    Example:

        anchorkit upload out s3://kb-docs/tickets --delete --dry-run
        anchorkit upload out s3://kb-docs/tickets --delete --sse aws:kms --start-ingestion KB12345678:DS12345678
    """
    from anchorkit.files import check_existing_folder
    from anchorkit.publish import upload as publish
    from anchorkit.publish.aws import AwsSettings

    check_existing_folder(out)
    values = publishing | destination
    settings = publish.PublishSettings.from_settings(values)
    opened = publish.open_destination(out, dest, settings, AwsSettings.from_settings(values), values["start_ingestion"])
    with output.upload_progress(not json_output and not settings.dry_run) as (on_plan, on_result):
        report = publish.upload(out, opened, settings, on_plan=on_plan, on_result=on_result)
    output.print_publish_report(report, json_output, publishing["list_keys"])
    if not report.ok:
        raise typer.Exit(1)
