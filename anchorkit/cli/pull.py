"""`anchorkit pull`: fetch tickets from Redmine into a snapshot, incrementally (anchorkit.source.pull); with
--state, the snapshot's bookkeeping and raw issues kept in the sync state (anchorkit.sync)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import (
    AWS,
    ENCRYPTION,
    GROUP,
    REDMINE,
    S3_CLIENT,
    STATE,
    JsonFlag,
    QuietFlag,
    Values,
    VerboseFlag,
    with_options,
)
from anchorkit.settings import PULL


@with_options(PULL, redmine=REDMINE, state=STATE + AWS + ENCRYPTION + S3_CLIENT)
def pull_command(
    snapshot: Annotated[
        Path,
        typer.Option(
            "--snapshot", metavar="DIR", help="Snapshot folder to create or update (issues/, lookups.json, state.json)."
        ),
    ],
    redmine: Values = GROUP,
    state: Values = GROUP,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Fetch new and changed issues (with journals) from Redmine into SNAPSHOT; exit 1 if any failed.

    With --state the bookkeeping and raw issues live in a sync state, and `sync --state` publishes what
    this stored (docs/reference.md, "pull --state"; docs/sync.md).

    Example:

        anchorkit pull --url https://redmine.example.com --snapshot snap --project helpdesk
        anchorkit pull --url https://redmine.example.com --snapshot snap --state s3://kb-docs/anchorkit-state/
    """
    from anchorkit.source import preflight
    from anchorkit.source import pull as pulling

    arguments = pulling.PullSettings.from_settings(redmine)
    preflight.check_redmine_url(redmine["url"])  # before --state records it in the state's scope
    preflight.check_snapshot_folder(snapshot)
    api_key = preflight.read_api_key(redmine["api_key_file"], os.environ, warn=output.print_warning)
    if state["state"] is not None:
        from anchorkit.publish.aws import AwsSettings
        from anchorkit.publish.upload import PublishSettings
        from anchorkit.sync import pull_into_state

        with output.progress_bar("pulling", "issues", not json_output) as on_progress:
            stored = pull_into_state(
                redmine["url"],
                snapshot,
                api_key,
                arguments,
                state["state"],
                AwsSettings.from_settings(state),
                PublishSettings.from_settings(state),
                state["lease_seconds"],
                progress=on_progress,
            )
        output.print_state_pull_report(stored, json_output)
        if not stored.ok:
            raise typer.Exit(1)
        return
    with output.progress_bar("pulling", "issues", not json_output) as on_progress:
        report = pulling.pull(redmine["url"], snapshot, api_key, arguments, progress=on_progress)
    output.print_pull_report(report, json_output)
    if not report.ok:
        raise typer.Exit(1)
