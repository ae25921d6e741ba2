"""`anchorkit state`: look at a sync state, and break the lease of a run that died holding it
(anchorkit.sync, anchorkit.publish.state)."""

from __future__ import annotations

from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.help import HelpCommand, HelpGroup
from anchorkit.cli.options import AWS, GROUP, JsonFlag, QuietFlag, Values, VerboseFlag, with_options
from anchorkit.errors import UsageError
from anchorkit.settings import STATE_BREAK_LEASE, STATE_SHOW

state_app = typer.Typer(
    help="Inspect the sync state of `sync --state` / `pull --state`, and break a stale lease.",
    no_args_is_help=True,
    cls=HelpGroup,
)
StateArgument = Annotated[str, typer.Argument(help="The state: s3://bucket/prefix/ or a local folder.")]


@state_app.command("show", cls=HelpCommand)
@with_options(STATE_SHOW, aws=AWS)
def state_show_command(
    state: StateArgument,
    aws: Values = GROUP,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Print a state's scope, cursor, ticket counts and lease (holder, expiry, active or stale); writes nothing.

    The lease status: "active" (a run on this host is writing), "held" (unexpired, holder on another host:
    active unless that run was killed), "stale" (expired, or its process is gone: the next run takes an
    expired lease over; `anchorkit state break-lease` ends one before it expires).

    Example:

        anchorkit state show s3://kb-docs/anchorkit-state/ --json
    """
    from anchorkit.publish.aws import AwsSettings
    from anchorkit.sync import open_state, view_state

    view = view_state(open_state(state, AwsSettings.from_settings(aws)))
    if json_output:
        output.print_json({"ok": True, **view.to_json()})
    else:
        output.print_state_view(view)


@state_app.command("break-lease", cls=HelpCommand)
@with_options(STATE_BREAK_LEASE, aws=AWS)
def state_break_lease_command(
    state: StateArgument,
    holder: Annotated[
        str,
        typer.Option("--holder", help="The holder `state show` names; nothing is broken if another holds the lease."),
    ],
    aws: Values = GROUP,
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """End the S3 lease of a run that died holding it (kill -9, a lost runner) before it expires.

    The lease is rewritten as expired with If-Match on the ETag just read, so a live holder that renewed it
    meanwhile is never overridden (exit 3); another holder, no lease, or a holder running on this host: exit 2.
    A local state needs no breaking: the OS releases the lock of a dead process.

    Example:

        anchorkit state break-lease s3://kb-docs/anchorkit-state/ --holder runner-7:4242:1a2b3c4d
    """
    from anchorkit.publish import state as states
    from anchorkit.publish.aws import AwsSettings
    from anchorkit.sync import open_state

    store = open_state(state, AwsSettings.from_settings(aws))
    if not isinstance(store, states.S3StateStore):
        raise UsageError(f"{state}: a local state is held by an OS lock that dies with its process; nothing to break")
    broken = store.break_lease(holder)
    if json_output:
        output.print_json(
            {
                "ok": True,
                "state": store.describe(),
                "holder": broken.holder,
                "taken_at": states.iso_time(broken.taken_at),
                "expires_at": states.iso_time(broken.expires_at),
            }
        )
        return
    output.console.print(
        f"{store.describe()}: broke the lease of {broken.holder} (taken {states.iso_time(broken.taken_at) or '?'}, "
        f"would have expired {states.iso_time(broken.expires_at)}); the next run takes it over",
        highlight=False,
        markup=False,
    )
