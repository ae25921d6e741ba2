"""sync --state after a run that stopped between overwriting a published object and its commit, on the real
Redmine and the real S3 server, for documents and for chunks.

The manifest of such a run still holds the checksum of what the object held before. When the ticket's bytes
go back to those without a new ``updated_on`` (here: a note made public, then private again), the next run
renders what the manifest describes: it must still write the object again, or the dead run's version (the
private note) stays published until the ticket changes. Requests are counted on the S3 client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.redmine_server import RedmineAdmin, RedmineServer
from support.s3_server import S3Server
from test_sync_raw import Interrupted
from test_sync_state import StatelessRunner, comparable, seed_issues

from anchorkit.publish.state import S3StateStore
from anchorkit.publish.upload import PublishSettings, S3Location, S3Target
from anchorkit.render.transform import TransformOptions
from anchorkit.source.pull import PullSettings
from anchorkit.sync import ChunkLayout, StatelessSyncReport, run_sync

SECRET = "社外秘: 管理者パスワードは金庫の中"


class Runner(StatelessRunner):
    """StatelessRunner's scheduled job, publishing documents or, with ``chunks``, chunks."""

    def __init__(
        self, redmine: RedmineServer, s3: S3Server, project: str, scratch: Path, chunks: ChunkLayout | None
    ) -> None:
        super().__init__(redmine, s3, project, scratch)
        self.chunks = chunks

    def sync(self, label: str | None = None, full: bool = False, client: Any = None) -> StatelessSyncReport:
        client = client or self.s3.client()
        return run_sync(
            self.redmine.url,
            self.redmine.admin_key,
            S3StateStore(client, S3Location(self.s3.bucket, f"{self.state}/")),
            S3Target(client, S3Location(self.s3.bucket, f"{self.docs}/")),
            TransformOptions(sidecars=True),
            PullSettings(projects=(self.project,), full=full),
            work_dir=self.empty_folder(),
            publishing=PublishSettings(delete=True, force=True),
            chunks=self.chunks,
        )

    def holding_the_secret(self) -> list[str]:
        return sorted(k for k, data in self.documents().items() if SECRET.encode() in data)


def interrupt_after_storing(client: Any, prefix: str, text: str) -> None:
    """``client``'s run stops right after it stored the first object under ``prefix`` holding ``text``."""
    wanted = text.encode()

    def record(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        body = params.get("Body")
        context["interrupt"] = params["Key"].startswith(prefix) and isinstance(body, bytes) and wanted in body

    def interrupt(context: dict[str, Any], **_: Any) -> None:
        if context.get("interrupt"):
            raise Interrupted

    client.meta.events.register("before-parameter-build.s3.PutObject", record)
    client.meta.events.register("after-call.s3.PutObject", interrupt)


def set_note_private(admin: RedmineAdmin, issue_id: int, notes: str, private: bool) -> None:
    """Make a note private or public: the issue's ``updated_on`` does not move (Redmine does not date it)."""
    before = admin.get_issue(issue_id)["issue"]
    journal = next(j for j in before["journals"] if j.get("notes") == notes)
    admin.request("PUT", f"/journals/{journal['id']}.json", json={"journal": {"private_notes": private}})
    after = admin.get_issue(issue_id)["issue"]
    assert after["updated_on"] == before["updated_on"]
    assert next(j for j in after["journals"] if j["id"] == journal["id"])["private_notes"] is private


@pytest.mark.redmine
@pytest.mark.s3
@pytest.mark.timeout(300)
@pytest.mark.parametrize("chunks", [None, ChunkLayout(tokens=300)], ids=["documents", "chunks"])
def test_an_object_an_interrupted_run_overwrote_is_written_again_when_the_ticket_goes_back_to_its_bytes(
    redmine_server: RedmineServer,
    redmine_admin: RedmineAdmin,
    s3_server: S3Server,
    tmp_path: Path,
    chunks: ChunkLayout | None,
) -> None:
    project, (_, printer) = seed_issues(redmine_admin, 2)
    redmine_admin.add_note(printer, SECRET, private=True)
    sync = Runner(redmine_server, s3_server, project["identifier"], tmp_path, chunks)
    assert sync.sync().ok and sync.holding_the_secret() == []
    published = sync.documents()

    # The note is made public; a refetch overwrites the printer's object with it and stops before its commit.
    set_note_private(redmine_admin, printer, SECRET, private=False)
    client = s3_server.client()
    interrupt_after_storing(client, f"{sync.docs}/", SECRET)
    with pytest.raises(Interrupted):
        sync.sync(full=True, client=client)
    overwritten = sync.holding_the_secret()
    assert len(overwritten) == 1 and overwritten[0] in published  # overwritten, not a new object

    # Private again, without a new updated_on: the ticket renders the bytes the manifest still describes.
    set_note_private(redmine_admin, printer, SECRET, private=True)
    client = s3_server.client()
    resumed = sync.sync(client=client)  # an incremental run: the printer comes from the state's raw JSON
    assert resumed.ok and set(overwritten) <= set(resumed.uploaded)  # was none: the private note stayed
    assert all(key.startswith(str(printer)) for key in resumed.uploaded)  # the printer's objects only
    assert sync.holding_the_secret() == [] and sync.documents() == published
    reference = Runner(redmine_server, s3_server, project["identifier"], tmp_path, chunks)
    assert reference.sync().ok
    assert comparable(sync.manifest()) == comparable(reference.manifest())
    assert sync.sync().s3_requests == {"GetObject": 1, "ListObjectsV2": 1}  # then nothing to do, as before

    # A run that changes a published object (the note public again: a refetch) records it as pending first:
    # one PUT more than before (the manifest, before the first write), one HEAD less (that conditional PUT
    # is the check that no other run committed meanwhile).
    set_note_private(redmine_admin, printer, SECRET, private=False)
    changed = sync.sync(full=True)
    assert changed.ok and set(overwritten) <= set(changed.uploaded) and changed.state_issues_written == 1
    lease_and_manifests = 4  # lease taken, intent, lease renewed before the commit, the commit
    assert changed.s3_requests["PutObject"] == len(changed.uploaded) + 1 + lease_and_manifests  # + its raw issue
    assert "HeadObject" not in changed.s3_requests
