"""What a `sync --state` / `pull --state` run decides to write, without any server.

One test per rule of the README's "One run" paragraph of `sync --state` (and of `pull --state`), on
typed manifests (anchorkit.sync.manifest) and the pure planner (anchorkit.sync.plan).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from anchorkit.cli import output
from anchorkit.publish.upload import parse_max_delete
from anchorkit.source.snapshot import StoredStamp
from anchorkit.sync.manifest import (
    MANIFEST_FORMAT,
    PENDING,
    Manifest,
    ManifestError,
    Scope,
    TicketEntry,
)
from anchorkit.sync.plan import (
    DeletePolicy,
    Listing,
    Local,
    Rendered,
    outside_scope,
    plan,
    plan_pull,
    regeneration_reason,
    scope_refusal,
    to_restore,
)
from anchorkit.sync.stateless import StatelessSyncReport

SCOPE = Scope.of("https://redmine.example.com/", ["ops"], False, "s3://kb/tickets/")
OLD, NEW = "2026-03-01T00:00:00Z", "2026-03-15T09:30:00Z"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def published(issue_id: int, version: str = OLD, body: bytes = b"old") -> TicketEntry:
    return TicketEntry(updated_on=version, stored=version, project_id=1, objects={f"{issue_id}.md": sha(body)})


def state(*entries: tuple[int, TicketEntry], cursor: str = OLD) -> Manifest:
    return Manifest(
        pull={"cursor": cursor},
        lookups={"statuses": {"1": "新規"}},
        fingerprint="fp",
        tickets=dict(entries),
        scope=SCOPE,
    )


def listing(fetched: set[int] = frozenset(), removed: set[int] = frozenset(), cursor: str = NEW) -> Listing:
    return Listing(
        fetched=frozenset(fetched),
        removed=frozenset(removed),
        pull_state={"cursor": cursor},
        lookups={"statuses": {"1": "新規"}},
        fingerprint="fp",
    )


def rendered(issue_id: int, version: str = NEW, body: bytes = b"new") -> Rendered:
    return Rendered(issue_id, version, 1, {f"{issue_id}.md": body})


# ---------------------------------------------------------------------------------------------------
# The manifest: read in one place


def test_a_manifest_round_trips_through_its_typed_form_unchanged() -> None:
    raw = {
        "format": MANIFEST_FORMAT,
        "fingerprint": "fp",
        "pull": {"cursor": OLD, "runs_since_full": 2},
        "lookups": {"users": {"3": "佐藤 次郎"}},
        "source_lookups": {"users": {"3": "佐藤 花子"}},
        "tickets": {
            "7": {"updated_on": OLD, "stored": NEW, "project_id": 1, "objects": {"7.md": "a" * 64}},
            "9": {"gone": True, "objects": {"9.md": "b" * 64}},
        },
        "scope": SCOPE.to_json(),
    }
    assert Manifest.from_json(raw, "m").to_json() == raw


def test_a_ticket_from_before_stored_versions_stored_exactly_its_published_version() -> None:
    manifest = Manifest.from_json({"tickets": {"7": {"updated_on": OLD, "project_id": 1, "objects": {}}}}, "m")
    assert manifest.tickets[7].stored == OLD
    assert manifest.unpublished_ids() == set()


def test_without_source_lookups_the_raw_issues_have_the_published_lookups() -> None:
    manifest = Manifest.from_json({"lookups": {"users": {"3": "佐藤"}}, "tickets": {}}, "m")
    assert manifest.lookups_of_raw_issues == {"users": {"3": "佐藤"}}


def test_a_manifest_written_by_a_newer_anchorkit_is_refused_with_a_clear_error() -> None:
    with pytest.raises(ManifestError, match="format 2, written by a newer anchorkit") as refused:
        Manifest.from_json({"format": MANIFEST_FORMAT + 1, "tickets": {}}, "s3://kb/state/manifest.json")
    assert refused.value.exit_code == 2


def test_an_unreadable_ticket_entry_is_a_one_line_error_naming_the_manifest() -> None:
    with pytest.raises(ManifestError, match=r"s3://kb/state/manifest\.json: .*unreadable entry"):
        Manifest.from_json({"tickets": {"seven": {}}}, "s3://kb/state/manifest.json")


# ---------------------------------------------------------------------------------------------------
# One run, rule by rule


def test_pull_is_given_the_stored_version_of_every_ticket_but_gone_ones() -> None:
    manifest = state((7, TicketEntry(updated_on=OLD, stored=NEW, project_id=1)), (9, TicketEntry(gone=True)))
    assert manifest.stamps() == {7: StoredStamp(NEW, 1)}


def test_tickets_stored_but_not_yet_published_are_restored_and_rendered() -> None:
    manifest = state((7, TicketEntry(updated_on=OLD, stored=NEW, project_id=1)), (8, published(8)))
    assert set(to_restore(manifest, present=set(), removed=set(), attempted=set(), regenerate=False)) == {7}


def test_a_changed_fingerprint_or_changed_names_regenerate_every_stored_ticket_and_say_which() -> None:
    manifest = state((7, published(7)), (8, published(8)))
    assert regeneration_reason(manifest, "fp", manifest.lookups) is None
    assert regeneration_reason(manifest, "fp-new-labels", manifest.lookups) == (
        "the anchorkit version or the output options changed"
    )
    renamed = {**manifest.lookups, "statuses": {"1": {"name": "New"}}, "users": {"5": {"name": "Sato"}}}
    assert regeneration_reason(manifest, "fp", renamed) == "names changed in the lookups (statuses, users)"
    assert regeneration_reason(manifest, "fp-new-labels", renamed) == (
        "the anchorkit version or the output options changed; names changed in the lookups (statuses, users)"
    )
    assert set(to_restore(manifest, present={8}, removed=set(), attempted=set(), regenerate=True)) == {7}


def test_a_first_run_renders_everything_but_not_again() -> None:
    assert regeneration_reason(Manifest(), "fp", {"statuses": {"1": {"name": "New"}}}) is None


def test_the_summary_says_why_every_document_was_rendered_again(capsys: pytest.CaptureFixture[str]) -> None:
    renamed = StatelessSyncReport(
        "kb/state", "kb/docs", rendered=3, regenerated_because="names changed in the lookups (users)"
    )
    output.print_stateless_sync_report(renamed, json_output=False)
    assert "kb/docs: rendered 3 (all: names changed in the lookups (users)), uploaded 0" in capsys.readouterr().out
    output.print_stateless_sync_report(StatelessSyncReport("kb/state", "kb/docs", rendered=1), json_output=False)
    assert "kb/docs: rendered 1, uploaded 0" in capsys.readouterr().out


def test_only_objects_whose_checksum_differs_are_uploaded() -> None:
    manifest = state((7, published(7, body=b"same")), (8, published(8)))
    decided = plan(
        manifest, listing(fetched={7, 8}), Local((rendered(7, body=b"same"), rendered(8))), DeletePolicy(), SCOPE
    )
    assert decided.uploads == {"8.md": b"new"}
    assert decided.raw_writes == [7, 8]


def test_documents_of_gone_issues_are_deleted_only_with_delete() -> None:
    manifest = state((7, published(7)), (8, published(8)))
    removed = listing(removed={8})
    assert plan(manifest, removed, Local(), DeletePolicy(delete=True, force=True), SCOPE).deletes == ["8.md"]
    kept = plan(manifest, removed, Local(), DeletePolicy(delete=False), SCOPE)
    assert kept.deletes == [] and kept.summary()["gone_kept"] == 1
    assert kept.expected().tickets[8] == TicketEntry(objects={"8.md": sha(b"old")}, gone=True)


def test_the_raw_copy_of_an_issue_that_went_away_is_dropped_with_or_without_delete() -> None:
    manifest = state((7, published(7)), (8, published(8)))
    for delete in (True, False):
        assert plan(
            manifest, listing(removed={8}), Local(), DeletePolicy(delete=delete, force=True), SCOPE
        ).raw_deletes == [8]


def test_deletes_beyond_max_delete_are_refused_unless_forced() -> None:
    manifest = state(*((i, published(i)) for i in range(1, 11)))
    gone_half = listing(removed={1, 2, 3, 4, 5})
    refused = plan(manifest, gone_half, Local(), DeletePolicy(max_delete=parse_max_delete("10%")), SCOPE)
    assert refused.refused is not None and "refusing to delete 5 of 10 objects" in refused.refused
    assert (
        plan(manifest, gone_half, Local(), DeletePolicy(max_delete=parse_max_delete("10%"), force=True), SCOPE).refused
        is None
    )


def test_an_issue_that_came_back_is_published_again_not_deleted() -> None:
    manifest = state((8, TicketEntry(objects={"8.md": sha(b"old")}, gone=True)))
    decided = plan(manifest, listing(fetched={8}), Local((rendered(8),)), DeletePolicy(force=True), SCOPE)
    assert decided.deletes == [] and decided.uploads == {"8.md": b"new"}
    assert decided.expected().tickets[8] == TicketEntry(NEW, NEW, 1, {"8.md": sha(b"new")})


def test_objects_a_new_rendering_no_longer_has_are_deleted_even_without_delete() -> None:
    manifest = state((7, published(7)))
    moved = Rendered(7, NEW, 1, {"ops/7.md": b"new"})  # another --layout
    decided = plan(manifest, listing(fetched={7}), Local((moved,)), DeletePolicy(delete=False), SCOPE)
    assert decided.deletes == ["7.md"] and set(decided.uploads) == {"ops/7.md"}


def test_when_every_write_succeeds_the_manifest_records_the_new_versions_and_cursor() -> None:
    manifest = state((7, published(7)))
    after = plan(manifest, listing(fetched={7}), Local((rendered(7),)), DeletePolicy(), SCOPE).expected()
    assert after.tickets[7] == TicketEntry(NEW, NEW, 1, {"7.md": sha(b"new")})
    assert after.cursor == NEW and after.scope == SCOPE and after.source_lookups is None


def test_a_run_with_nothing_changed_writes_nothing_not_even_the_state() -> None:
    manifest = state((7, published(7)), cursor=NEW)
    idle = plan(
        manifest,
        Listing(pull_state={"cursor": NEW, "runs_since_full": 5}, lookups=manifest.lookups, fingerprint="fp"),
        Local(),
        DeletePolicy(),
        SCOPE,
    )
    assert idle.idle and not idle.writes_documents


def test_a_failed_upload_is_not_claimed_and_holds_the_cursor_back() -> None:
    manifest = state((7, published(7)), (8, published(8)))
    decided = plan(
        manifest,
        listing(fetched={7, 8}),
        Local((rendered(7), rendered(8, "2026-03-20T00:00:00Z"))),
        DeletePolicy(),
        SCOPE,
    )
    after = decided.manifest_after({"7.md": "HTTP 503", "8.md": None}, raw_failed=set())
    # Pending, not the old checksum: the write may have happened (a timeout after the server stored it).
    assert after.tickets[7] == TicketEntry(None, NEW, 1, {"7.md": PENDING})
    assert after.cursor == NEW  # never past 7's version
    assert after.tickets[8].updated_on == "2026-03-20T00:00:00Z"


def test_every_object_a_run_changes_is_recorded_as_pending_before_it_is_written() -> None:
    # 7 gains a chunk, 9 is new, 8 only changes, 6 drops a chunk, 5 is gone (deleted with --delete), 4 stays:
    # the state must know of every object the run may leave half done, as one that may or may not hold
    # either version, and of their tickets as not published.
    grown = Rendered(7, NEW, 1, {"7.md": b"new", "7-001.md": b"more"})
    shrunk = Rendered(6, NEW, 1, {"6.md": b"old"})
    two_chunks = TicketEntry(OLD, OLD, 1, {"6.md": sha(b"old"), "6-001.md": sha(b"more")})
    manifest = state((4, published(4)), (5, published(5)), (6, two_chunks), (7, published(7)), (8, published(8)))
    decided = plan(
        manifest,
        listing(fetched={6, 7, 8, 9}, removed={5}),
        Local((shrunk, grown, rendered(8), rendered(9), rendered(4, OLD, b"old"))),
        DeletePolicy(force=True),
        SCOPE,
    )
    intent = decided.intent()
    assert intent is not None and intent.tickets[4] == manifest.tickets[4]
    assert intent.tickets[5] == TicketEntry(OLD, OLD, 1, {"5.md": PENDING})
    assert intent.tickets[6] == TicketEntry(None, OLD, 1, {"6.md": sha(b"old"), "6-001.md": PENDING})
    assert intent.tickets[7] == TicketEntry(None, OLD, 1, {"7.md": PENDING, "7-001.md": PENDING})
    assert intent.tickets[8] == TicketEntry(None, OLD, 1, {"8.md": PENDING})
    assert intent.tickets[9] == TicketEntry(None, None, 1, {"9.md": PENDING})
    assert intent.cursor == OLD
    # A run after one killed there writes again what the tickets have, whatever bytes were left (8 went back
    # to the bytes the manifest had: a note made private again without a new updated_on) ...
    back = plan(intent, listing(fetched={8}), Local((rendered(8, OLD, b"old"),)), DeletePolicy(), SCOPE)
    assert back.uploads == {"8.md": b"old"} and back.intent() is None  # already pending: no second intent
    # ... deletes what they no longer have (7 shrank back), and again what is gone or dropped.
    again = plan(
        intent, listing(fetched={6, 7}, removed={5}), Local((shrunk, rendered(7))), DeletePolicy(force=True), SCOPE
    )
    assert sorted(again.deletes) == ["5.md", "6-001.md", "7-001.md"] and again.uploads == {"7.md": b"new"}
    # A run that changes no object commits nothing first.
    assert plan(manifest, listing(), Local((rendered(4, OLD, b"old"),)), DeletePolicy(), SCOPE).intent() is None


def test_a_failed_upload_of_a_new_object_leaves_it_pending_it_may_have_been_stored() -> None:
    decided = plan(state(), listing(fetched={9}), Local((rendered(9),)), DeletePolicy(), SCOPE)
    after = decided.manifest_after({"9.md": "read timeout"}, raw_failed=set())
    assert after.tickets[9].objects == {"9.md": PENDING} and after.tickets[9].updated_on is None


def test_a_failed_delete_leaves_the_object_pending_it_may_have_been_deleted() -> None:
    two_chunks = TicketEntry(OLD, OLD, 1, {"6.md": sha(b"old"), "6-001.md": sha(b"more")})
    manifest = state((5, published(5)), (6, two_chunks), (4, published(4)))
    decided = plan(
        manifest,
        listing(fetched={6}, removed={4, 5}),
        Local((Rendered(6, NEW, 1, {"6.md": b"old"}),)),
        DeletePolicy(delete=False),
        SCOPE,
    )
    withdrawn = replace(decided, withdrawn=frozenset({5}), deletes=[*decided.deletes, "5.md"])
    after = withdrawn.manifest_after({"6-001.md": "HTTP 503", "5.md": "read timeout"}, raw_failed=set())
    assert after.tickets[6].objects == {"6.md": sha(b"old"), "6-001.md": PENDING}
    assert after.tickets[6].updated_on is None
    assert after.tickets[5].objects == {"5.md": PENDING}
    assert after.tickets[4].objects == {"4.md": sha(b"old")}  # not deleted (no --delete): still there as it was


def test_a_raw_issue_that_could_not_be_stored_keeps_the_previous_stored_version() -> None:
    manifest = state((7, published(7)))
    decided = plan(manifest, listing(fetched={7}), Local((rendered(7),)), DeletePolicy(), SCOPE)
    after = decided.manifest_after({}, raw_failed={7})
    assert after.tickets[7].stored == OLD and after.tickets[7].updated_on is None
    assert after.cursor == NEW  # the held-back stamp is NEW itself: the listing shows 7 again


def test_a_ticket_that_failed_to_render_keeps_its_documents_and_is_redone() -> None:
    manifest = state((7, published(7)))
    decided = plan(
        manifest, listing(fetched={7}, cursor="2026-04-01T00:00:00Z"), Local(failed={7: NEW}), DeletePolicy(), SCOPE
    )
    after = decided.expected()
    assert decided.uploads == {} and decided.deletes == [] and decided.raw_writes == []
    assert after.tickets[7].updated_on is None and after.tickets[7].objects == {"7.md": sha(b"old")}
    assert after.cursor == NEW


def test_a_ticket_neither_in_the_state_nor_given_by_redmine_is_redone_by_a_later_run() -> None:
    manifest = state((7, published(7)))
    after = plan(
        manifest,
        Listing(missing=frozenset({7}), pull_state={"cursor": OLD}, lookups=manifest.lookups, fingerprint="fp"),
        Local(),
        DeletePolicy(),
        SCOPE,
    ).expected()
    assert after.tickets[7].stored is None and after.tickets[7].updated_on is None


def test_only_raw_issues_of_the_stored_version_are_compared_and_only_when_a_listing_costs_less() -> None:
    # 7 and 8 were fetched again at the version the state holds (a refetch): their copies may be the same
    # bytes. 9 has a new version, so other bytes (updated_on is in them); 10 is new. Both are written unseen.
    manifest = state((7, published(7, NEW)), (8, published(8, NEW)), (9, published(9)))
    fetched = Local((rendered(7), rendered(8), rendered(9), rendered(10)))
    decided = plan(manifest, listing(fetched={7, 8, 9, 10}), fetched, DeletePolicy(), SCOPE)
    assert decided.raw_to_compare() == [7, 8]  # 2 PUTs saved at most, against 1 listing request
    # One such issue: writing it costs no more than the one listing that would tell.
    one = plan(manifest, listing(fetched={7, 9}), Local((rendered(7), rendered(9))), DeletePolicy(), SCOPE)
    assert one.raw_to_compare() == []
    # 1,001 copies take two listing requests: two candidates are not worth them, three are.
    big = state(*((i, published(i, NEW)) for i in range(1, 1002)))
    for count, expected in ((2, []), (3, [1, 2, 3])):
        ids = set(range(1, count + 1))
        again = Local(tuple(rendered(i) for i in sorted(ids)))
        assert plan(big, listing(fetched=ids), again, DeletePolicy(), SCOPE).raw_to_compare() == expected


def test_raw_issues_found_unchanged_are_not_written_yet_recorded_as_stored() -> None:
    manifest = state((7, published(7, NEW)), (8, published(8, NEW)), (9, published(9)))
    decided = plan(
        manifest,
        listing(fetched={7, 8, 9}),
        Local((rendered(7, body=b"old"), rendered(8, body=b"old"), rendered(9))),
        DeletePolicy(),
        SCOPE,
    ).without_unchanged_raw({7, 8, 11})  # 11: not fetched by this run, so not this plan's to skip
    assert decided.raw_writes == [9] and decided.raw_unchanged == {7, 8}
    summary = decided.summary()
    assert summary["store_issues"] == 1 and summary["unchanged_issues"] == 2
    after = decided.expected()
    assert [after.tickets[i].stored for i in (7, 8, 9)] == [NEW, NEW, NEW]
    # The raw writes of 7 and 8 were all this run had for them: it writes nothing now.
    idle = plan(
        state((7, published(7, NEW)), cursor=NEW),
        listing(fetched={7}),
        Local((rendered(7, body=b"old"),)),
        DeletePolicy(),
        SCOPE,
    )
    assert idle.writes_documents and not idle.without_unchanged_raw({7}).writes_documents


# ---------------------------------------------------------------------------------------------------
# Scope


def test_a_run_with_other_projects_is_refused_naming_the_states_scope() -> None:
    everything = Scope.of("https://redmine.example.com", [], False, "s3://kb/tickets/")
    refusal = scope_refusal(SCOPE, everything, "s3://kb/state/")
    assert refusal is not None
    assert "s3://kb/state/ holds https://redmine.example.com, projects ops, public issues only" in refusal
    assert "this run asks for every project" in refusal


def test_a_corrected_destination_is_refused_rather_than_publishing_nothing() -> None:
    moved = Scope.of("https://redmine.example.com", ["ops"], False, "s3://kb/tickets-v2/")
    refusal = scope_refusal(SCOPE, moved, "s3://kb/state/")
    assert refusal is not None and "destination s3://kb/tickets-v2/" in refusal


def test_a_pull_with_the_state_matches_any_destination_and_a_first_sync_adds_its_own() -> None:
    pulled = Scope.of("https://redmine.example.com", ["ops"], False)
    assert scope_refusal(SCOPE, pulled, "s3://kb/state/") is None
    assert pulled.merged(SCOPE) == SCOPE
    assert scope_refusal(SCOPE, Scope.of("https://redmine.example.com", ["ops"], True), "s") is not None


def test_tickets_of_projects_outside_a_narrowed_scope_are_found_by_the_projects_lookup() -> None:
    projects = {
        "1": {"identifier": "ops", "parent_id": None},
        "2": {"identifier": "ops-db", "parent_id": 1},
        "3": {"identifier": "sales", "parent_id": None},
    }
    manifest = state(
        (7, TicketEntry(OLD, OLD, 1)),
        (8, TicketEntry(OLD, OLD, 2)),
        (9, TicketEntry(OLD, OLD, 3)),
    )
    assert outside_scope(manifest, ("ops",), projects) == {9}  # a subproject stays in scope
    assert outside_scope(manifest, (), projects) == set()
    assert outside_scope(manifest, ("unknown",), projects) == set()  # nothing removed on a guess


# ---------------------------------------------------------------------------------------------------
# pull --state


def test_pull_with_the_state_moves_stored_versions_and_leaves_what_is_published() -> None:
    manifest = state((7, published(7)), (8, published(8)), (9, TicketEntry(OLD, OLD, 1, {})))
    pulled = plan_pull(
        manifest,
        SCOPE,
        {7: StoredStamp(NEW, 1), 10: StoredStamp(NEW, 2)},
        {8, 9},
        {"cursor": NEW},
        {"statuses": {"1": "New"}},
    )
    after = pulled.manifest_after(raw_failed=set())
    assert after.tickets[7] == TicketEntry(OLD, NEW, 1, {"7.md": sha(b"old")})
    assert after.tickets[10] == TicketEntry(None, NEW, 2, {})
    assert after.tickets[8] == TicketEntry(objects={"8.md": sha(b"old")}, gone=True)  # sync deletes it
    assert 9 not in after.tickets  # nothing published: nothing to delete
    assert after.source_lookups == {"statuses": {"1": "New"}} and after.lookups == manifest.lookups
    assert after.fingerprint == "fp" and after.cursor == NEW


def test_pull_with_the_state_holds_the_cursor_before_a_raw_issue_it_could_not_store() -> None:
    manifest = state((7, published(7)))
    pulled = plan_pull(
        manifest, SCOPE, {7: StoredStamp(NEW, 1)}, set(), {"cursor": "2026-04-01T00:00:00Z"}, manifest.lookups
    )
    after = pulled.manifest_after(raw_failed={7})
    assert after.tickets[7] == manifest.tickets[7] and after.cursor == NEW
