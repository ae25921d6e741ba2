"""The publish stage: an output folder → S3 (or a folder), by content.

aws: the AWS toolbox (locations and keys, session and client, what S3 errors mean, Bedrock ingestion);
objects: what is published (a folder scanned, or bytes) and where (an S3 prefix, a local folder);
upload: plan-then-apply publishing with its settings and the delete guard; state: the sync state's
storage (a local folder under a lock, or S3 with a lease and conditional writes).

`anchorkit upload` is ``anchorkit.publish.upload.upload`` (the package keeps the name ``upload`` for the module)."""

from anchorkit.publish.aws import AwsSettings, S3Location, parse_location
from anchorkit.publish.objects import LocalDirTarget, S3Target
from anchorkit.publish.state import LocalStateStore, S3StateStore, StateConflict, StateStore, open_store
from anchorkit.publish.upload import (
    Destination,
    PublishReport,
    PublishSettings,
    open_destination,
    publish,
)

__all__ = [
    "AwsSettings",
    "Destination",
    "LocalDirTarget",
    "LocalStateStore",
    "PublishReport",
    "PublishSettings",
    "S3Location",
    "S3StateStore",
    "S3Target",
    "StateConflict",
    "StateStore",
    "open_destination",
    "open_store",
    "parse_location",
    "publish",
]
