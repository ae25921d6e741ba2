"""`anchorkit verify`, `eval` and `inject`: only ticket ids and citations that come from what was retrieved,
and anchors added to retrieved chunks at query time (anchorkit.verify)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from anchorkit.cli import output
from anchorkit.cli.options import CHECKS, GROUP, JsonFlag, OnInvalid, QuietFlag, Values, VerboseFlag, with_options
from anchorkit.errors import UsageError
from anchorkit.files import PRIVATE_FILE_MODE
from anchorkit.settings import EVAL, VERIFY, default


def write_file(path: Path, text: str, option: str, mode: int | None) -> None:
    """A file the command was asked to write (--html, --out), atomically, with ``mode`` (files.file_mode; None:
    the umask's); an unwritable path is a usage error (exit 2), not a traceback."""
    from anchorkit.files import write_atomic

    try:
        write_atomic(path, text.encode("utf-8"), mode)
    except OSError as exc:
        raise UsageError(f"{option} {path}: {exc.strerror or exc}") from None


@with_options(VERIFY, checks=CHECKS)
def verify_command(
    retrieval: Annotated[
        Path | None,
        typer.Option(
            "--retrieval",
            "-r",
            metavar="FILE",
            help="What was retrieved: Bedrock Retrieve or RetrieveAndGenerate, LlamaIndex, or a list of chunks "
            "(plain, cited-answer sources with a source id, LangChain documents); shapes: docs/verify.md.",
        ),
    ] = default("retrieval"),
    answer: Annotated[
        Path | None,
        typer.Option(
            "--answer",
            "-a",
            metavar="FILE",
            help="The answer ('-': stdin): any answer shape in JSON, JSON Lines of many answers, or plain text "
            "(default: the --retrieval file, when it holds the answer too).",
        ),
    ] = default("answer"),
    context: Annotated[
        list[Path] | None,
        typer.Option(
            "--context",
            metavar="FILE",
            help="Later turns: the context sent to the model, Bedrock Converse messages or an earlier retrieval; "
            "its ticket ids are valid too. Repeatable.",
        ),
    ] = None,
    checks: Values = GROUP,
    on_invalid: Annotated[
        OnInvalid,
        typer.Option(
            "--on-invalid",
            help=(
                "drop: the filtered answer loses phantom ids, citations and results, and links to another host;"
                " flag: only report them."
            ),
        ),
    ] = default("on_invalid"),
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write the answer as a self-contained HTML page (a JSON Lines file: every answer on one page).",
        ),
    ] = default("html"),
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Print the report as one JSON object (JSON Lines answers: one object a line)."),
    ] = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Check an answer against the chunks retrieved for it: the filtered answer on stdout, the findings on stderr.

    Findings: phantom ticket ids and sources, cited notes of a retrieved ticket that were not retrieved,
    answers that should have refused (critical), quote drift, weak grounding, wrong tickets, mismatched
    URLs and subjects (warnings). Sources link to the Redmine note their chunk's metadata names.

    Exit 0 (findings are reported, not fatal), 1 with --strict when something critical was found or when
    a line of a JSON Lines answer file could not be read, 2 for a usage error or input that cannot be read
    (missing file, malformed JSON, unknown shape).

    Example:

        anchorkit verify --retrieval retrieval.json --answer answer.json --strict --html answer.html
    """
    from anchorkit.files import check_writable_file
    from anchorkit.verify.citations import VerifyOptions, verify_citations
    from anchorkit.verify.html import PageRecord, render_report, render_reports
    from anchorkit.verify.ids import valid_ids
    from anchorkit.verify.shapes import read_inputs

    if html is not None:
        check_writable_file(html, "--html")
    options = VerifyOptions.from_settings(checks | {"on_invalid": on_invalid})
    inputs = read_inputs(retrieval, answer, context or [])
    extra_valid = valid_ids(inputs.context_chunks, options.uri_pattern)
    several = len(inputs.answers) > 1 or bool(inputs.errors)
    reports = [
        (
            origin,
            verify_citations(
                parsed_answer,
                inputs.chunks,
                context=inputs.context_texts,
                extra_valid_ids=extra_valid,
                options=options,
                notes=inputs.notes,
            ),
        )
        for origin, parsed_answer in inputs.answers
    ]
    if html is not None:  # before any output: a page that cannot be written (exit 2) leaves stdout empty
        files = [("retrieval", retrieval), ("answer", answer or retrieval), *(("context", c) for c in context or [])]
        record = PageRecord.of_files(options, *files)
        page = (
            render_reports(reports, record=record, errors=inputs.errors)
            if several
            else render_report(reports[0][1], record=record)
        )
        # The page quotes the retrieved chunks, which may be private whatever the run that made them: its owner's alone.
        write_file(html, page, "--html", PRIVATE_FILE_MODE)
    for origin, report in reports:
        if json_output and several:  # JSON Lines: one compact object per answer
            line = json.dumps({"origin": origin, **report.to_json()}, ensure_ascii=False, sort_keys=True)
            sys.stdout.write(line + "\n")
        elif json_output:
            output.print_json(report.to_json())
        else:
            output.print_verify_report(report, origin if several else None)
    for error in inputs.errors:  # an answer line that failed (exit 1); the others were verified
        output.print_problem("failed", error)
    critical = any(report.critical > 0 for _, report in reports)
    if inputs.errors or (checks["strict"] and critical):
        raise typer.Exit(1)


@with_options(EVAL, checks=CHECKS)
def eval_command(
    cases_file: Annotated[
        Path,
        typer.Argument(
            metavar="CASES",
            help="JSON Lines, one case a line: {id?, query, retrieved | sources, answer, expected_ids?, "
            "expected_source_ids?, context?}; retrieved and answer in any shape verify reads (docs/verify.md).",
        ),
    ],
    checks: Values = GROUP,
    min_grounding: Annotated[
        float | None,
        typer.Option(
            "--min-grounding",
            min=0.0,
            max=1.0,
            metavar="SCORE",
            help="Exit 1 if the mean grounding score is below this.",
        ),
    ] = default("min_grounding"),
    max_phantom_rate: Annotated[
        float | None,
        typer.Option(
            "--max-phantom-rate",
            min=0.0,
            max=1.0,
            metavar="RATE",
            help="Exit 1 if the share of cases with a phantom id or source is above this.",
        ),
    ] = default("max_phantom_rate"),
    html: Annotated[
        Path | None,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Also write the eval as a self-contained HTML page: the gates' verdict on top, then every case.",
        ),
    ] = default("html"),
    json_output: JsonFlag = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Verify every case of an eval set (JSONL): grounding, phantom rate, recall by ticket and by source id, precision.

    Per-case findings are listed too.

    Exit 1 if a case could not be read (the others are still evaluated), with --strict if any case has a
    critical finding, or if --min-grounding / --max-phantom-rate are not met; 2 for a usage error.

    Example:

        anchorkit eval cases.jsonl --min-grounding 0.8 --max-phantom-rate 0 --html eval.html
    """
    from anchorkit.files import check_writable_file
    from anchorkit.verify.citations import VerifyOptions
    from anchorkit.verify.evaluation import EvalGates, evaluate, load_cases
    from anchorkit.verify.shapes import input_errors

    if html is not None:  # before the cases are evaluated
        check_writable_file(html, "--html")
    options = VerifyOptions.from_settings(checks)
    gates = EvalGates(min_grounding, max_phantom_rate, checks["strict"])
    with input_errors():
        cases, errors = load_cases(cases_file)
    with output.progress_bar("verifying", "cases", not json_output) as on_progress:
        summary = evaluate(cases, errors, options, on_progress)
    failed_gates = gates.failures(summary)
    if html is not None:
        from anchorkit.verify.html import PageRecord, render_eval

        page = render_eval(summary, gates, PageRecord.of_files(options, ("cases", cases_file)))
        write_file(html, page, "--html", PRIVATE_FILE_MODE)  # it quotes the cases' answers and retrieved chunks
    if json_output:
        output.print_json({"ok": not failed_gates, **summary.to_json(), "gates": gates.to_json(summary)})
    else:
        output.print_eval_summary(summary)
    for failure in failed_gates:
        output.print_problem("gate failed", failure)
    if failed_gates:
        raise typer.Exit(1)


def inject_command(
    retrieval: Annotated[
        Path,
        typer.Argument(
            help="The retrieval ('-': stdin), in any shape verify reads (Bedrock Retrieve or RetrieveAndGenerate, "
            "LlamaIndex, a list of chunks)."
        ),
    ],
    inject_out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="Write the anchored retrieval here instead of stdout (the summary then goes to stdout).",
        ),
    ] = default("inject_out"),
    uri_pattern: Annotated[
        str,
        typer.Option(
            "--uri-pattern",
            metavar="REGEX",
            help="Regular expression whose one group is the ticket id in a chunk's source URI.",
        ),
    ] = default("uri_pattern"),
    label: Annotated[
        str | None,
        typer.Option("--label", help="Ticket label in the anchor lines, as transform's --label (default チケット)."),
    ] = default("label"),
    inject_strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Exit 1 if a chunk got no anchor: its ticket is unknown, or its metadata and URI disagree."
        ),
    ] = default("inject_strict"),
    json_output: Annotated[
        bool,
        typer.Option(
            "--json", help="The summary as one JSON object (per chunk: status, ticket, where the ticket came from)."
        ),
    ] = False,
    verbose: VerboseFlag = False,
    quiet: QuietFlag = False,
) -> None:
    """Prepend '> チケット #ID: subject' to each retrieved chunk (query-time anchoring); write the same shape back.

    The ticket comes from the chunk's ticket_id metadata, else its source URI, else a genuine anchor in it;
    the subject from the metadata, else the anchor, else the title. A chunk already starting with its
    anchor is left as it is; so is a chunk whose ticket is unknown or whose metadata and URI disagree, or
    that is empty or blank (reported). Without --out the retrieval goes to stdout and the summary to stderr.

    Exit 0 done, 1 with --strict when a chunk got no anchor, 2 for a usage error or unusable input.

    Example:

        anchorkit inject retrieval.json -o retrieval-anchored.json --strict
        anchorkit inject - < retrieval.json > retrieval-anchored.json
    """
    from anchorkit.anchors import DEFAULT_LABEL, check_label
    from anchorkit.files import check_writable_file
    from anchorkit.verify.ids import checked_uri_pattern
    from anchorkit.verify.inject import anchor_chunks
    from anchorkit.verify.shapes import input_errors, load_retrieval_json

    check_label(label)
    if inject_out is not None:  # before the retrieval is read (stdin cannot be read twice)
        check_writable_file(inject_out, "--out")
    pattern = checked_uri_pattern(uri_pattern)
    with input_errors():
        report = anchor_chunks(
            load_retrieval_json(retrieval), str(retrieval), uri_pattern=pattern, label=label or DEFAULT_LABEL
        )
    body = json.dumps(report.retrieval, ensure_ascii=False, indent=2) + "\n"
    if inject_out is None:
        sys.stdout.write(body)
    else:
        write_file(inject_out, body, "--out", PRIVATE_FILE_MODE)  # the retrieved chunks' text
    failed = inject_strict and bool(report.count("unknown_ticket") or report.count("conflict"))
    summary_file = sys.stdout if inject_out is not None else sys.stderr
    if json_output:
        summary_file.write(json.dumps({"ok": not failed, **report.to_json()}, ensure_ascii=False) + "\n")
    else:
        output.print_inject_summary(report, summary_file)
    if failed:
        raise typer.Exit(1)
