"""Amazon Bedrock Knowledge Bases' custom transformation (post-chunking) Lambda function, anchored.

``anchorkit.bedrock.handler`` is the Lambda handler: for every file Bedrock ingests, it reads the
file's content batches from the intermediate bucket, gives every chunk its ticket's anchor (inject
mode) or cuts the whole document with the ticket-aware chunker (chunk mode), writes the batches back
and answers with their keys (docs/bedrock-lambda.md). It needs boto3 and anchorkit's pure core only.

event: the event and the response; batches: the two batch file shapes; anchoring: tickets, anchors,
modes; counts and audit: what was done, and the sums read back; runner: the S3 edge and the entry
point; package: the deployment zip.
"""

from __future__ import annotations

from anchorkit.bedrock.runner import handler

__all__ = ["handler"]
