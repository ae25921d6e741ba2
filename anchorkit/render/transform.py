"""The transform stage: snapshot → ``out/<id>.md`` (+ ``.metadata.json`` sidecars).

Streams the snapshot one ticket at a time (memory does not grow with the corpus), writes
atomically, leaves unchanged files untouched, removes outputs of tickets that left the snapshot,
and keeps going past bad tickets: each failure is reported with its file and reason, and the
outputs a failed ticket had before are kept.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from anchorkit import parallel
from anchorkit.anchors import check_label, find_titles
from anchorkit.errors import UsageError
from anchorkit.files import check_apart, file_mode, sync_file
from anchorkit.render.document import (
    LABELS,
    Lookups,
    Outline,
    RenderOptions,
    history_journals,
    parse_time,
    render_document,
    render_outline,
)
from anchorkit.render.private_marks import PrivateContent, PrivateMarks, read_private_marks, write_private_marks
from anchorkit.render.sidecar import SIDECAR_SUFFIX, build_sidecar, check_schema
from anchorkit.render.spacing import LineAdditive, TokenCounter, approx_tokens_with_margin
from anchorkit.settings import LAYOUTS, SIDECAR_SCHEMAS, SPACING_ANCHOR_FORMS, TEXT_FORMATS, default
from anchorkit.source.notes import note_numbers
from anchorkit.source.privacy import RESTRICTED_FIELDS_KEY, holds_restricted_fields, without_restricted_fields
from anchorkit.source.snapshot import (
    STATE_FILE,
    SnapshotError,
    check_issue,
    check_snapshot,
    ids_in,
    iter_issue_paths,
    load_lookups,
    load_state,
    read_issue,
)
from anchorkit.tokens import TOKENIZER_CHOICES, choose_tokenizer
from anchorkit.untrusted import ascii_number, parse_json

DEFAULT_MAX_TEXT_BYTES: int = default("max_text_bytes")
# The settings that are fields of RenderOptions and of TransformOptions under their own names.
RENDER_SETTINGS = (
    "lang",
    "include_private",
    "anchor_basic_info",
    "chunk_tokens",
    "anchor_subject_chars",
    "spacing_anchors",
    "timezone",
)
TRANSFORM_SETTINGS = (
    "sidecars",
    "sidecar_schema",
    "layout",
    "text_format",
    "max_text_bytes",
    "tokenizer",
    "tiktoken_file",
)
# Files this stage owns in the output folder (anything else there is left alone).
_OUTPUT_NAME = re.compile(rf"^\d+\.md(?:{re.escape(SIDECAR_SUFFIX)})?$", re.ASCII)
_TEMP_NAME = re.compile(rf"^\.\d+\.md(?:{re.escape(SIDECAR_SUFFIX)})?\..*\.tmp$", re.ASCII)
_PROJECT_DIR = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class TransformOptions:
    render: RenderOptions = field(default_factory=RenderOptions)
    sidecars: bool = default("sidecars")
    sidecar_schema: str = default("sidecar_schema")
    layout: str = default("layout")
    # None: use the snapshot's own setting (state.json "text_format"), else this format for all texts.
    text_format: str | None = default("text_format")
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    # How spacing anchors count tokens (tokens.choose_tokenizer): cl100k_base exactly, from the
    # vocabulary shipped with anchorkit (the same on every machine), or the approximation with a
    # safety margin when asked for.
    tokenizer: str = default("tokenizer")
    tiktoken_file: Path | None = default("tiktoken_file")
    # The sidecars' ``url`` is this Redmine's page of the issue; None: the snapshot's state.json "redmine_url".
    redmine_url: str | None = None

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> TransformOptions:
        """The options from the settings catalogue's values (transform's or sync's; a setting the command
        does not have takes its default), checked: a bad value is a usage error (exit 2) naming the option."""

        def value(name: str) -> Any:
            return values[name] if name in values else default(name)

        for name, allowed in (
            ("lang", tuple(LABELS)),
            ("text_format", TEXT_FORMATS),
            ("sidecar_schema", SIDECAR_SCHEMAS),
            ("layout", LAYOUTS),
            ("tokenizer", TOKENIZER_CHOICES),
            ("spacing_anchors", SPACING_ANCHOR_FORMS),
        ):
            if value(name) is not None and value(name) not in allowed:
                flag = "--" + name.replace("_", "-")
                raise UsageError(f"{flag} must be one of {', '.join(allowed)}, not {value(name)!r}")
        try:
            ZoneInfo(value("timezone"))
        except (ZoneInfoNotFoundError, ValueError):
            raise UsageError(
                f"--timezone: unknown time zone {value('timezone')!r} (use an IANA name such as Asia/Tokyo)"
            ) from None
        label = value("label")
        check_label(label)
        link_issues = value("link_issues")
        if link_issues and not re.match(r"https?://[^\s]+$", link_issues):
            raise UsageError(f"--link-issues must be an http(s) URL, not {link_issues!r}")
        render = RenderOptions(
            **{name: value(name) for name in RENDER_SETTINGS},
            labels={"ticket": label} if label else {},
            link_issues=link_issues.rstrip("/") if link_issues else None,
        )
        return cls(render=render, **{name: value(name) for name in TRANSFORM_SETTINGS})


@dataclass
class RenderedTicket:
    ticket_id: int
    relpath: str  # "12345.md", or "helpdesk/12345.md" with the by-project layout
    markdown: str
    sidecar: bytes | None
    warnings: list[str]
    outline: Outline | None = None  # render_ticket(outline=True): where the headings are in ``markdown``
    # With sidecars: the note numbers of the history's journals (source/notes.py), None when not all are known.
    notes: list[int] | None = None
    # What of the document is private (a private issue, or journals with private notes: --include-private).
    private: PrivateContent | None = None


@dataclass
class TicketFailure:
    source: str  # the snapshot file
    ticket_id: int | None
    message: str


@dataclass
class TransformReport:
    tickets: int = 0
    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    failed: list[TicketFailure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    private_skipped: int = 0  # private tickets left out (no --include-private)
    tokenizer: str | None = None  # what spacing anchors were counted with (None: --chunk-tokens 0)
    seconds: float = 0.0

    @property
    def differs(self) -> bool:
        return bool(self.created or self.changed or self.removed)

    def count(self, outcome: object) -> bool:
        """Count one ticket's outcome: False for a private issue left out or a failure, True otherwise."""
        if outcome == PRIVATE:
            self.private_skipped += 1
            return False
        self.tickets += 1
        if isinstance(outcome, TicketFailure):
            self.failed.append(outcome)
            return False
        return True

    def add(self, relpath: str, status: str) -> None:
        """Count a file as ``sync_file`` left it: "created", "changed" or "unchanged"."""
        if status == "unchanged":
            self.unchanged += 1
        else:
            (self.created if status == "created" else self.changed).append(relpath)

    def to_json(self) -> dict[str, Any]:
        return {
            "tickets": self.tickets,
            "created": self.created,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": [dataclasses.asdict(f) for f in self.failed],
            "warnings": self.warnings,
            "private_skipped": self.private_skipped,
            "tokenizer": self.tokenizer,
            "seconds": round(self.seconds, 3),
        }


def resolve_render_options(snapshot_dir: Path, options: TransformOptions) -> RenderOptions:
    """The render options with the text format settled (CLI override, else the snapshot's setting), and
    without the subjects of subtasks when some may be private: a snapshot pulled with --include-private
    keeps them whole (pull reduces a private subtask to its number only without it), and which of them are
    private is not known here, so a document without --include-private shows their numbers only."""
    state = load_state(snapshot_dir)
    setting: Any = options.text_format or state.get("text_format", "textile")
    source = "--text-format" if options.text_format else str(snapshot_dir / STATE_FILE)  # what a message names
    if isinstance(setting, list):
        try:
            steps = tuple(sorted((_since(step["since"]), step["format"]) for step in setting))
        except (TypeError, KeyError, ValueError):
            raise SnapshotError(
                f"{source}: text_format must be a format or a list of {{since, format}}, each since an ISO time"
                " such as 2024-04-01T00:00:00Z"
            ) from None
        formats = [fmt for _, fmt in steps]
    else:
        steps, formats = setting, [setting]
    unknown = [fmt for fmt in formats if fmt not in TEXT_FORMATS]
    if unknown:
        raise SnapshotError(f"{source}: unknown text format {unknown[0]!r} (expected one of {', '.join(TEXT_FORMATS)})")
    pulled_private = bool(state.get("include_private"))
    restricted = frozenset(ids_in(state, RESTRICTED_FIELDS_KEY)) if pulled_private else frozenset()
    return dataclasses.replace(
        options.render,
        text_format=steps,
        private_subtask_subjects=pulled_private,
        restricted_custom_fields=restricted,
    )


def _since(value: Any) -> str:
    """A switch's time as Redmine writes its timestamps, so that they compare as text (ValueError: not a time)."""
    moment = parse_time(value) if isinstance(value, str) else None
    if moment is None:
        raise ValueError(value)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def resolve_redmine_url(snapshot_dir: Path, options: TransformOptions) -> TransformOptions:
    """The options with the sidecars' Redmine URL settled (given, else the one pull recorded)."""
    if options.redmine_url is not None or not options.sidecars:
        return options
    url = load_state(snapshot_dir).get("redmine_url")
    return dataclasses.replace(options, redmine_url=url if isinstance(url, str) and url else None)


def issue_url(redmine_url: str | None, ticket_id: int) -> str | None:
    return f"{redmine_url.rstrip('/')}/issues/{ticket_id}" if redmine_url else None


def iter_documents(snapshot_dir: Path, options: TransformOptions) -> Iterator[RenderedTicket | TicketFailure]:
    """Render every ticket of the snapshot, one at a time, in ticket-id order."""
    options = resolve_redmine_url(snapshot_dir, options)
    render_options = resolve_render_options(snapshot_dir, options)
    lookups = load_lookups(snapshot_dir)
    count_tokens = spacing_counter(options)
    for path in iter_issue_paths(snapshot_dir):
        result = render_ticket(path, lookups, render_options, options, count_tokens)
        if isinstance(result, (RenderedTicket, TicketFailure)):
            yield result


def spacing_counter(options: TransformOptions) -> TokenCounter:
    """How spacing anchors count tokens: cl100k_base exactly, or the approximation with its margin
    (``--chunk-tokens 0`` places none: then no vocabulary is loaded).

    ValueError / tokens.TokenizerUnavailable for an unknown name or a vocabulary file that cannot be
    loaded. The tokenizer is loaded once per process (tokens.choose_tokenizer).
    """
    if not options.render.chunk_tokens:
        return approx_tokens_with_margin
    tokenizer = choose_tokenizer(options.tokenizer, options.tiktoken_file)
    # An exact tokenizer's counts add up at line starts: spacing tokenizes each piece of a document once.
    return LineAdditive(tokenizer.count) if tokenizer.exact else approx_tokens_with_margin


PRIVATE = "private"  # render_ticket's answer for a private issue left out on purpose


def render_ticket(
    path: Path,
    lookups: Lookups,
    render_options: RenderOptions,
    options: TransformOptions,
    count_tokens: TokenCounter = approx_tokens_with_margin,
    *,
    outline: bool = False,
) -> RenderedTicket | TicketFailure | str:
    """One ticket's document and sidecar, its failure, or ``PRIVATE`` for a private issue left out on purpose.

    ``outline``: the document's outline instead (``RenderedTicket.outline``; ``markdown`` is then its
    content, the document without anchors), for the chunker."""
    ticket_id = ascii_number(path.stem)
    try:
        issue = read_issue(path)
        # Before anything else is checked: a ticket made private is left out (its old document removed and
        # withdrawn) even when another field would fail it, since a failed ticket's document is kept.
        if issue.get("is_private") and not render_options.include_private:
            return PRIVATE
        check_issue(path, issue)
        ticket_id = issue["id"]
        if render_options.restricted_custom_fields and not render_options.include_private:
            issue = without_restricted_fields({"issue": issue}, render_options.restricted_custom_fields)["issue"]
        _check_sizes(path, issue, options.max_text_bytes, render_options.include_private)
        # The history's journals, read once for the document and for what the sidecar and the private marks say.
        journals = history_journals(issue, lookups, render_options)
        outlined = render_outline(issue, lookups, render_options, journals) if outline else None
        markdown = (
            outlined.content if outlined else render_document(issue, lookups, render_options, count_tokens, journals)
        )
        notes = note_numbers(journals) if options.sidecars else None
        # Without --include-private neither a private issue nor a private note gets here.
        private = _private_content(issue, journals, render_options)
        sidecar, warnings = (
            build_sidecar(
                issue,
                lookups,
                options.sidecar_schema,
                url=issue_url(options.redmine_url, ticket_id),
                # The chunker takes them whole from ``notes``: no sidecar of the document is written, and a
                # chunk's own sidecar holds only its notes, so the 2,048 characters of an attribute do not apply.
                notes=None if outline else notes,
                private=private is not None,
            )
            if options.sidecars
            else (None, [])
        )
    except SnapshotError as exc:
        return TicketFailure(str(path), ticket_id, str(exc))
    except Exception as exc:
        return TicketFailure(
            str(path), ticket_id, f"{path}: ticket #{ticket_id}: cannot render ({type(exc).__name__}: {exc})"
        )
    relpath = _relpath(issue, lookups, options.layout)
    return RenderedTicket(ticket_id, relpath, markdown, sidecar, warnings, outlined, notes, private)


def _private_content(
    issue: dict[str, Any], journals: list[dict[str, Any]], options: RenderOptions
) -> PrivateContent | None:
    """What of the issue's document is private: all of it (a private issue, or one that shows subtasks'
    subjects some of which may be private, or values of custom fields only some roles may see), the
    journals with private notes, or nothing."""
    shows_private_subjects = options.private_subtask_subjects and options.subtask_subjects and issue.get("children")
    shows_restricted = options.include_private and holds_restricted_fields(issue, options.restricted_custom_fields)
    if issue.get("is_private") or shows_private_subjects or shows_restricted:
        return PrivateContent()
    private = tuple(position for position, journal in enumerate(journals) if journal.get("private_notes"))
    return PrivateContent(private, len(journals)) if private else None


def _check_sizes(path: Path, issue: dict[str, Any], limit: int, include_private: bool) -> None:
    """A SnapshotError for a text over ``limit`` bytes that the document would hold: a private note left out
    (without ``include_private``) is none of them, and a message must not name it."""
    texts = [("description", issue.get("description"))]
    texts += [
        (f"journal {j.get('id')} notes", j.get("notes"))
        for j in issue.get("journals") or []
        if isinstance(j, dict) and (include_private or not j.get("private_notes"))
    ]
    for what, text in texts:
        if isinstance(text, str) and len(text) > limit // 4 and len(text.encode("utf-8")) > limit:
            raise SnapshotError(
                f"{path}: ticket #{issue['id']}: {what} is {len(text.encode('utf-8')):,} bytes, over the "
                f"{limit:,}-byte limit (--max-text-bytes)"
            )


def _relpath(issue: dict[str, Any], lookups: Lookups, layout: str) -> str:
    name = f"{issue['id']}.md"
    if layout == "flat":
        return name
    raw_project = issue.get("project")
    project = raw_project if isinstance(raw_project, dict) else {}
    identifier = lookups.get("projects", {}).get(str(project.get("id")), {}).get("identifier")
    folder = _PROJECT_DIR.sub("-", str(identifier or f"project-{project.get('id', 'none')}")).strip("-") or "project"
    return f"{folder}/{name}"


def transform_snapshot(
    snapshot_dir: Path,
    out_dir: Path,
    options: TransformOptions,
    check: bool = default("check"),
    jobs: int = default("jobs"),
    progress: Callable[[int, int], None] | None = None,
) -> TransformReport:
    """Bring ``out_dir`` up to date with the snapshot (or, with ``check``, only say what would change).

    ``jobs`` > 1 renders and writes batches of tickets in that many processes; 0: one per CPU core
    when the snapshot has more than one batch. The outputs and the report do not depend on it.
    ``progress(done, total)`` is called after each ticket (a CLI's progress bar). Raises
    :class:`UsageError` before anything is written for an ``out_dir`` that is the snapshot, lies inside it or
    holds it (the documents would be written among its issues, or be read back as some).
    """
    check_snapshot(snapshot_dir)  # (first: `transform out --out out` is, first of all, no snapshot)
    check_apart(out_dir, snapshot_dir, "--out", "snapshot")
    if options.layout not in LAYOUTS:
        raise ValueError(f"unknown layout {options.layout!r} (expected one of {', '.join(LAYOUTS)})")
    if options.sidecars:  # one error for the run, not one failed ticket per ticket
        check_schema(options.sidecar_schema)
    started = time.perf_counter()
    options = resolve_redmine_url(snapshot_dir, options)
    report = TransformReport()
    expected: set[str] = set()
    keep_ids: set[int] = set()  # failed tickets keep whatever output they had
    # Settled here, not in the workers: a bad state.json or lookups.json must stop the run with its
    # error, and a worker whose initializer fails would only be replaced by another one, forever.
    render_options = resolve_render_options(snapshot_dir, options)
    spacing_counter(options)  # a vocabulary that cannot be loaded stops the run here, with its error
    if render_options.chunk_tokens:
        report.tokenizer = options.tokenizer
    settings = (load_lookups(snapshot_dir), render_options, options, out_dir, check)
    paths = list(iter_issue_paths(snapshot_dir))
    marks = _previous_marks(out_dir)
    # With --include-private every file written is its owner's alone (files.PRIVATE_FILE_MODE), the folders made
    # for them too; without it, the umask's (a file left as it is keeps its mode).
    mode = file_mode(render_options.include_private)
    if render_options.include_private and not check:  # until the run ends: cut short, it leaves no document unmarked
        write_private_marks(out_dir, PrivateMarks(every=True), mode)
    private: dict[int, PrivateContent] = {}
    outcomes = parallel.map_batches(_transform_batch, paths, jobs, setup=_BatchSettings, args=settings)
    for done, outcome in enumerate(outcomes, start=1):
        if progress is not None:
            progress(done, len(paths))
        if not report.count(outcome):
            if isinstance(outcome, TicketFailure) and outcome.ticket_id is not None:
                keep_ids.add(outcome.ticket_id)
            continue
        assert isinstance(outcome, TicketOutputs)
        report.warnings.extend(outcome.warnings)
        if outcome.private is not None:
            private[outcome.ticket_id] = outcome.private
        for relpath, status in outcome.outputs:
            expected.add(relpath)
            report.add(relpath, status)
    for relpath in _stale_outputs(out_dir, expected, keep_ids):
        report.removed.append(relpath)
        if not check:
            (out_dir / relpath).unlink()
    if not check:  # a failed ticket keeps its document, and so its mark
        kept = {ticket_id: content for ticket_id in keep_ids if (content := marks.of(ticket_id)) is not None}
        write_private_marks(out_dir, PrivateMarks({**kept, **private}), mode)
    report.seconds = time.perf_counter() - started
    return report


def _previous_marks(out_dir: Path) -> PrivateMarks:
    try:
        return read_private_marks(out_dir)
    except UsageError:  # unreadable: any document kept from before may hold private content
        return PrivateMarks(every=True)


@dataclass
class TicketOutputs:
    """What transform did with one ticket's files: (relpath, "created" | "changed" | "unchanged")."""

    outputs: list[tuple[str, Literal["created", "changed", "unchanged"]]]
    warnings: list[str]
    ticket_id: int
    private: PrivateContent | None  # what of its document is private (private_marks.py)


@dataclass(frozen=True)
class _BatchSettings:
    lookups: Lookups
    render_options: RenderOptions
    options: TransformOptions
    out_dir: Path
    check: bool


def _transform_batch(settings: _BatchSettings, paths: list[Path]) -> list[TicketOutputs | TicketFailure | str]:
    """Render and write a batch of tickets (in a worker process, or in this one with one job)."""
    count_tokens = spacing_counter(settings.options)
    outcomes: list[TicketOutputs | TicketFailure | str] = []
    for path in paths:
        result = render_ticket(path, settings.lookups, settings.render_options, settings.options, count_tokens)
        if not isinstance(result, RenderedTicket):
            outcomes.append(result)
            continue
        outcomes.append(_write_outputs(path, result, settings))
    return outcomes


def _write_outputs(source: Path, result: RenderedTicket, settings: _BatchSettings) -> TicketOutputs | TicketFailure:
    """Write one ticket's files. A write that fails (a full disk, a quota) fails this ticket alone, named
    by its file; the write is atomic, so the file is its old self or absent, never half written."""
    files = [(result.relpath, result.markdown.encode("utf-8"))]
    if result.sidecar is not None:
        files.insert(0, (result.relpath + SIDECAR_SUFFIX, result.sidecar))  # metadata before its document
    outputs: list[tuple[str, Literal["created", "changed", "unchanged"]]] = []
    folder = settings.out_dir / result.relpath.rpartition("/")[0]
    if folder != settings.out_dir and folder.is_symlink():  # written through, the documents would land elsewhere
        return TicketFailure(
            str(source),
            result.ticket_id,
            f"{folder}: a symbolic link: documents are not written through it (remove it)",
        )
    mode = file_mode(settings.render_options.include_private)
    for relpath, data in files:
        target = settings.out_dir / relpath
        try:
            outputs.append((relpath, sync_file(target, data, check=settings.check, mode=mode)))
        except OSError as error:
            return TicketFailure(str(source), result.ticket_id, f"{target}: cannot write ({error.strerror or error})")
    return TicketOutputs(outputs, result.warnings, result.ticket_id, result.private)


def _stale_outputs(out_dir: Path, expected: set[str], keep_ids: set[int]) -> list[str]:
    """Our files in ``out_dir`` (and its project folders) that this run did not produce.

    A file is ours by its name and its content: a document starts with its ticket's title line,
    a sidecar holds its ticket's id; anything else (a user's own ``2024.md``) is left alone.
    """
    if not out_dir.is_dir():
        return []
    stale = []
    for relpath in sorted(_relpaths(out_dir, depth=2)):
        name = relpath.rpartition("/")[2]
        if _TEMP_NAME.match(name):
            stale.append(relpath)  # left behind by an interrupted run
        elif _OUTPUT_NAME.match(name) and relpath not in expected:
            ticket_id = int(name.split(".")[0])
            if ticket_id not in keep_ids and written_for(out_dir / relpath, ticket_id, _is_title_of):
                stale.append(relpath)
    return stale


def written_for(path: Path, ticket_id: int, first_line_names: Callable[[str, int], bool]) -> bool:
    """Whether ``path`` is an output of ours for this ticket: a sidecar holding its id, or a document
    whose first line ``first_line_names`` the ticket (anything else is a user's file, left alone)."""
    try:
        with path.open("rb") as file:
            head = file.read(_HEAD_BYTES)
    except OSError:
        return False
    if path.name.endswith(SIDECAR_SUFFIX):
        return _sidecar_ticket_id(head) == ticket_id
    return first_line_names(head.split(b"\n", 1)[0].decode("utf-8", "replace"), ticket_id)


def _is_title_of(line: str, ticket_id: int) -> bool:
    titles = find_titles(line)
    return bool(titles) and titles[0].ticket_id == ticket_id


def _sidecar_ticket_id(data: bytes) -> Any:
    """The ticket id a sidecar (simple or typed schema) describes, or None."""
    try:
        value = parse_json(data)["metadataAttributes"]["ticket_id"]
        return value["value"]["numberValue"] if isinstance(value, dict) else value
    except (ValueError, TypeError, KeyError):
        return None


# A title line is at most a few hundred bytes (a 255-character subject); sidecars are <= 10 KB.
_HEAD_BYTES = 16_384


def _relpaths(folder: Path, depth: int, prefix: str = "") -> Iterator[str]:
    # Strings from os.scandir, not Path objects: the output folder may hold 200,000 files.
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                yield prefix + entry.name
            elif depth > 1 and entry.is_dir(follow_symlinks=False):
                yield from _relpaths(Path(entry.path), depth - 1, f"{prefix}{entry.name}/")
