"""The state's ``manifest.json`` as typed values: one ticket entry, the scope, the cursor.

Read in ONE place (:meth:`Manifest.from_json`): the legacy keys of older manifests are mapped there and
nowhere else, and the format version is checked, so a manifest written by a newer anchorkit is refused
with a clear error instead of being half understood and overwritten.

Per ticket two versions are kept apart: ``stored``, the ``updated_on`` of the raw issue JSON held in the
state's ``issues/<id>.json``, and ``updated_on``, the version whose documents are published (None while
they are not all written). `pull --state` moves only the first (and the shared cursor), so `sync --state`
publishes every ticket whose two versions differ. The lookups likewise: ``source_lookups`` are the raw
issues' (None: the same as ``lookups``), ``lookups`` the ones the published documents used.

``layout`` is what the tickets are published as: ``documents`` (one per ticket, what a manifest without
the key describes) or ``chunks`` (`sync --state --chunks`); a run in the other layout replaces them all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from anchorkit.errors import UsageError
from anchorkit.publish.keys import CHUNKS, DOCUMENTS
from anchorkit.source import snapshot
from anchorkit.untrusted import without_userinfo

MANIFEST_FORMAT = 1
# The checksum of an object a run set out to write but may not have (killed before its commit, or the write
# failed): never a real one, so the next run writes it again if it is still wanted and deletes it if not.
PENDING = ""


class ManifestError(UsageError):
    """The manifest cannot be used (unreadable, or written by a newer anchorkit); nothing was written."""


class ScopeMismatch(UsageError):
    """A run asked for another scope than the state's (projects, privacy, Redmine, destination)."""


@dataclass(frozen=True)
class Scope:
    """Which tickets a state holds and where it publishes them: a run with another scope is refused.

    ``projects`` empty means every project the API key sees. ``destination`` is None until a
    `sync --state` published somewhere (a state made by `pull --state` has none yet).
    """

    redmine: str
    projects: tuple[str, ...] = ()
    include_private: bool = False
    destination: str | None = None

    @classmethod
    def of(
        cls, redmine: str, projects: tuple[str, ...] | list[str], include_private: bool, destination: str | None = None
    ) -> Scope:
        """The scope of a run. The Redmine is recorded without ``user:password@`` (a URL may carry them
        for a proxy in front of Redmine): the state, its messages and ``state show`` never hold a secret."""
        return cls(without_userinfo(redmine).rstrip("/"), tuple(sorted(set(projects))), include_private, destination)

    def describe(self) -> str:
        projects = "projects " + ", ".join(self.projects) if self.projects else "every project"
        private = "private issues and notes included" if self.include_private else "public issues only"
        where = f", published to {self.destination}" if self.destination else ""
        return f"{self.redmine}, {projects}, {private}{where}"

    def differences(self, run: Scope) -> list[str]:
        """What ``run`` asks for that this (the state's) scope is not; a missing destination matches any."""
        found = []
        if run.redmine != self.redmine:
            found.append(f"Redmine {run.redmine}")
        if run.projects != self.projects:
            found.append("projects " + ", ".join(run.projects) if run.projects else "every project")
        if run.include_private != self.include_private:
            found.append("--include-private" if run.include_private else "no --include-private")
        if run.destination is not None and self.destination is not None and run.destination != self.destination:
            found.append(f"destination {run.destination}" + relative_note(self.destination))
        return found

    def merged(self, run: Scope) -> Scope:
        """This scope, with the destination a first `sync --state` adds to a state `pull --state` made."""
        return (
            self
            if self.destination is not None or run.destination is None
            else replace(self, destination=run.destination)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "redmine": self.redmine,
            "projects": list(self.projects),
            "include_private": self.include_private,
            "destination": self.destination,
        }


def relative_note(destination: str) -> str:
    """What to say of a state's destination that is a relative folder: an earlier anchorkit recorded a local
    DEST as typed, relative to a working folder it did not record, so it names no one place; a run (which
    compares absolute paths) never matches it, and is told why."""
    if destination.startswith("s3://") or PurePath(destination).is_absolute():
        return ""
    return (
        f" (the state's {destination} is relative to the folder an earlier anchorkit ran in, which it did not "
        "record: if that is this destination, --rescope records it as this absolute path and publishes every "
        "ticket there again)"
    )


@dataclass(slots=True)  # not frozen: a state holds 10,000s of them, and a frozen one is slower to build
class TicketEntry:
    """One ticket in the state: what is stored, what is published, and the objects published for it.

    A ``gone`` entry is an issue Redmine no longer shows whose documents are still published (deleted
    by the next `sync --state --delete`); only its ``objects`` matter, and ``withdrawn``: Redmine said
    it is private now or in a project outside the scope, so the next `sync --state` deletes its
    documents with or without ``--delete``.
    """

    updated_on: str | None = None  # the published version (None: not all its documents are written)
    stored: str | None = None  # the version of its raw JSON in the state (None: none stored)
    project_id: int | None = None
    objects: dict[str, str] = field(default_factory=dict)  # key -> SHA-256 of what was uploaded
    gone: bool = False
    withdrawn: bool = False

    @property
    def unpublished(self) -> bool:
        """Its published documents are not those of its stored raw JSON (pulled since, or unfinished)."""
        return not self.gone and (self.updated_on is None or self.stored != self.updated_on)

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TicketEntry:
        objects = dict(raw.get("objects", {}))
        if raw.get("gone"):
            return cls(objects=objects, gone=True, withdrawn=bool(raw.get("withdrawn")))
        return cls(
            updated_on=raw.get("updated_on"),
            # Manifests written before "stored" existed held the raw JSON of exactly the published version.
            stored=raw["stored"] if "stored" in raw else raw.get("updated_on"),
            project_id=raw.get("project_id"),
            objects=objects,
        )

    def to_json(self) -> dict[str, Any]:
        if self.gone:
            return {"gone": True, "objects": dict(self.objects), **({"withdrawn": True} if self.withdrawn else {})}
        return {
            "updated_on": self.updated_on,
            "project_id": self.project_id,
            "objects": dict(self.objects),
            "stored": self.stored,
        }


@dataclass(frozen=True)
class Manifest:
    """Everything a run reads first: pull's bookkeeping, the lookups, the fingerprint, the tickets."""

    pull: dict[str, Any] = field(default_factory=dict)  # pull's state.json (cursor, runs, text_format...)
    lookups: dict[str, Any] = field(default_factory=dict)  # the names the published documents used
    source_lookups: dict[str, Any] | None = None  # the raw issues' names, when a pull --state refreshed them
    fingerprint: str | None = None
    tickets: dict[int, TicketEntry] = field(default_factory=dict)
    scope: Scope | None = None  # None: made before anchorkit recorded scopes
    layout: str = DOCUMENTS  # what the tickets' objects are: DOCUMENTS or CHUNKS

    @property
    def cursor(self) -> str | None:
        return self.pull.get("cursor")

    @property
    def lookups_of_raw_issues(self) -> dict[str, Any]:
        """The lookups the state's raw issues were pulled with (what the next pull starts from)."""
        return self.lookups if self.source_lookups is None else self.source_lookups

    def stamps(self) -> dict[int, snapshot.StoredStamp]:
        """The tickets as pull's stored stamps: the version of their raw JSON in the state (a gone
        ticket's issue is not stored)."""
        return {i: snapshot.StoredStamp(e.stored, e.project_id) for i, e in self.tickets.items() if not e.gone}

    def unpublished_ids(self) -> set[int]:
        return {issue_id for issue_id, entry in self.tickets.items() if entry.unpublished}

    def published_count(self) -> int:
        return sum(len(entry.objects) for entry in self.tickets.values())

    def counts(self) -> dict[str, int]:
        """For `state show`: tickets, published ones, unfinished ones, gone ones, objects."""
        entries = self.tickets.values()
        return {
            "tickets": len(self.tickets),
            "published": sum(1 for e in entries if not e.gone and not e.unpublished),
            "unpublished": sum(1 for e in entries if e.unpublished),
            "gone": sum(1 for e in entries if e.gone),
            "objects": self.published_count(),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> Manifest:
        version = raw.get("format", MANIFEST_FORMAT)
        if not isinstance(version, int) or version > MANIFEST_FORMAT:
            raise ManifestError(
                f"{where}: the state manifest has format {version!r}, written by a newer anchorkit (this one reads "
                f"format {MANIFEST_FORMAT}); upgrade anchorkit, nothing was written"
            )
        tickets = raw.get("tickets", {})
        if not isinstance(tickets, dict):
            raise ManifestError(f"{where}: the state manifest is not an object with a 'tickets' table")
        scope = raw.get("scope")
        layout = raw.get("layout", DOCUMENTS)
        if layout not in (DOCUMENTS, CHUNKS):
            raise ManifestError(f"{where}: the state manifest has an unknown layout {layout!r}")
        try:
            return cls(
                pull=dict(raw.get("pull", {})),
                lookups=dict(raw.get("lookups", {})),
                source_lookups=raw.get("source_lookups"),
                fingerprint=raw.get("fingerprint"),
                tickets={int(key): TicketEntry.from_json(entry) for key, entry in tickets.items()},
                # Scope.of: a state written before userinfo was stripped loses it at its next commit.
                scope=None
                if scope is None
                else Scope.of(
                    str(scope["redmine"]),
                    tuple(scope.get("projects", ())),
                    bool(scope.get("include_private")),
                    scope.get("destination"),
                ),
                layout=layout,
            )
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ManifestError(f"{where}: the state manifest has an unreadable entry ({error!r})") from None

    def to_json(self) -> dict[str, Any]:
        written: dict[str, Any] = {
            "format": MANIFEST_FORMAT,
            "fingerprint": self.fingerprint,
            "pull": self.pull,
            "lookups": self.lookups,
            "tickets": {str(i): self.tickets[i].to_json() for i in sorted(self.tickets)},
        }
        if self.source_lookups is not None:
            written["source_lookups"] = self.source_lookups
        if self.scope is not None:
            written["scope"] = self.scope.to_json()
        if self.layout != DOCUMENTS:  # a state of documents reads as before, by older anchorkits too
            written["layout"] = self.layout
        return written

    def without_published(self) -> Manifest:
        """The state as if nothing were published (a new destination): every stored ticket to be
        published again, no document of a gone issue to delete there."""
        return replace(
            self, tickets={i: replace(e, updated_on=None, objects={}) for i, e in self.tickets.items() if not e.gone}
        )

    def same_as(self, other: Manifest) -> bool:
        """Equal but for the count of runs since the last full listing: rewriting the state for that alone
        would cost a PUT on every run (so automatic full listings count only runs that wrote something)."""

        def without_run_count(manifest: Manifest) -> Manifest:
            return replace(manifest, pull={k: v for k, v in manifest.pull.items() if k != "runs_since_full"})

        return without_run_count(self) == without_run_count(other)
