"""The AWS toolbox shared by `upload`/`sync` (anchorkit.publish) and the sync state (anchorkit.state).

S3 locations and keys, the boto3 session and S3 client, what S3 errors mean (missing object, lost
condition, a setup problem to report in one line), request counting, and Bedrock ingestion jobs.
boto3 itself is imported only where a client is made, so the commands that never talk to AWS do not
pay for it.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ProfileNotFound

from anchorkit.errors import UsageError, url_host
from anchorkit.files import shown
from anchorkit.settings import default
from anchorkit.untrusted import split_url, without_userinfo

DEFAULT_MAX_ATTEMPTS: int = default("max_attempts")
RetryMode = Literal["standard", "adaptive"]
DEFAULT_RETRY_MODE: RetryMode = default("retry_mode")
RETRY_MODES: tuple[RetryMode, ...] = get_args(RetryMode)
log = logging.getLogger(__name__)

# S3 error codes: the object is not there; a conditional write (If-Match / If-None-Match) lost.
MISSING_CODES = {"404", "NoSuchKey", "NotFound"}
PRECONDITION_CODES = {"412", "PreconditionFailed", "ConditionalRequestConflict"}
# Errors that no retry and no other object will mend: the bucket, the credentials or the permissions.
SETUP_CODES = {
    "NoSuchBucket": "the bucket does not exist",
    "AccessDenied": "access denied (check the credentials' permissions and the bucket policy)",
    "AllAccessDisabled": "access to the bucket is disabled",
    "InvalidAccessKeyId": "the AWS access key id is not known to the server",
    "SignatureDoesNotMatch": "the AWS secret key does not match the access key id",
    "ExpiredToken": "the AWS session token has expired",
    "InvalidToken": "the AWS session token is not valid",
    "InvalidBucketName": "the bucket name is not valid",
    "PermanentRedirect": "the bucket is in another region (pass --region)",
    "AuthorizationHeaderMalformed": "the request was signed for the wrong region (pass --region)",
    "KMS.NotFoundException": "the --sse-kms-key-id key does not exist",
    "KMS.DisabledException": "the --sse-kms-key-id key is disabled",
}


class InvalidKey(ValueError):
    """An object key that could escape the prefix or confuse a consumer."""


class S3SetupError(UsageError):
    """S3 cannot be used at all (endpoint unreachable, no credentials, missing bucket, access denied)."""


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


# --------------------------------------------------------------------------------------------------
# Locations and keys


def validate_key(key: str) -> None:
    """Refuse keys with `..`/`.`/empty segments, a leading `/`, backslashes or control characters."""
    if not key:
        raise InvalidKey("empty key")
    if key.startswith("/"):
        raise InvalidKey(f"key {key!r} starts with '/'")
    if "\\" in key:
        raise InvalidKey(f"key {key!r} contains a backslash")
    if not key.isascii() and _not_utf8(key):
        raise InvalidKey(f"key {shown(key)} is not UTF-8 (a name in another encoding)")
    if any(unicodedata.category(char) == "Cc" for char in key):
        raise InvalidKey(f"key {key!r} contains a control character")
    if any(segment in {"", ".", ".."} for segment in key.split("/")):
        raise InvalidKey(f"key {key!r} has an empty, '.' or '..' path segment")


def _not_utf8(text: str) -> bool:
    """Whether ``text`` holds lone surrogates: the bytes of a file name that is not UTF-8, as Python reads it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # "" (whole bucket) or ends with "/"

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


# S3's bucket naming rules (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), checked
# before any request: botocore's own check answers with its regular expression, and a server with a 404.
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IP_ADDRESS = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")


def parse_location(text: str, what: str = "destination") -> S3Location | Path:
    """`s3://bucket/prefix` → S3Location (prefix normalised to end with `/`); a plain path → a folder.

    Text that starts like an S3 URL but is not one (`s3:/b`, `S3://b`, `s3//b`, `s3:b/x`) is a usage
    error: taken for a folder it would quietly write a tree named `s3:` into the current directory.
    """
    if not text.startswith("s3://"):
        if text[:3].lower() == "s3:" or text[:4].lower() == "s3//":
            raise UsageError(f"{what} {text!r} looks like a malformed S3 URL; write s3://bucket/prefix")
        return Path(text)
    bucket, _, prefix = text[len("s3://") :].partition("/")
    if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket or _IP_ADDRESS.fullmatch(bucket):
        raise UsageError(
            f"{what} {text!r}: bucket name {bucket!r} is not valid (3 to 63 lowercase letters, digits, dots and "
            "hyphens, beginning and ending with a letter or digit)"
        )
    prefix = prefix.strip("/")
    if prefix:
        try:
            validate_key(prefix)
        except InvalidKey as error:
            raise UsageError(f"{what} {text!r}: prefix is not valid: {error}") from None
        prefix += "/"
    return S3Location(bucket=bucket, prefix=prefix)


# --------------------------------------------------------------------------------------------------
# Session and client


SseAlgorithm = Literal["AES256", "aws:kms"]
SSE_ALGORITHMS: tuple[SseAlgorithm, ...] = get_args(SseAlgorithm)


AWS_SETTING_NAMES = ("endpoint_url", "region", "profile", "sse", "sse_kms_key_id")


@dataclass(frozen=True)
class AwsSettings:
    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None
    # Server-side encryption of every object written (documents, sidecars, the sync state), as the aws
    # cli's --sse / --sse-kms-key-id: buckets holding tickets often deny a PUT without it.
    sse: SseAlgorithm | None = None
    sse_kms_key_id: str | None = None

    def __post_init__(self) -> None:
        if self.endpoint_url is not None:
            check_endpoint_url(self.endpoint_url)

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> AwsSettings:
        """The settings catalogue's values (the options of the commands that reach AWS) as one object;
        a setting the command does not have (state show: no --sse) is left out."""
        return cls(**{name: values.get(name) for name in AWS_SETTING_NAMES})

    def encryption_parameters(self) -> dict[str, str]:
        """The PutObject parameters for the encryption asked for (none when none was)."""
        if self.sse is None:
            if self.sse_kms_key_id is not None:
                raise UsageError("--sse-kms-key-id needs --sse aws:kms")
            return {}
        if self.sse not in SSE_ALGORITHMS:
            raise UsageError(f"--sse {self.sse!r}: expected {' or '.join(SSE_ALGORITHMS)}")
        if self.sse_kms_key_id is not None and self.sse != "aws:kms":
            raise UsageError(f"--sse-kms-key-id needs --sse aws:kms, not --sse {self.sse}")
        parameters: dict[str, str] = {"ServerSideEncryption": self.sse}
        if self.sse_kms_key_id is not None:
            parameters["SSEKMSKeyId"] = self.sse_kms_key_id
        return parameters


def check_endpoint_url(url: str) -> None:
    """A usage error unless ``url`` is ``http(s)://host[:port][/path]``, before anything is contacted: another
    scheme fails only at the first request, and a ``user:password@`` would be printed in botocore's messages
    (S3 takes its credentials from the AWS credential chain, never from the URL). Never echoes a password."""
    shown_url = without_userinfo(url)
    try:
        parts = split_url(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--endpoint-url {shown_url!r}: expected http://host[:port] or https://host[:port]")
    if "@" in parts.netloc:
        raise UsageError(
            f"--endpoint-url {shown_url!r}: holds a user name or password; give the credentials as AWS "
            "credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, --profile), not in the URL"
        )


def parse_retry_mode(text: str) -> RetryMode:
    for mode in RETRY_MODES:
        if text == mode:
            return mode
    raise UsageError(f"--retry-mode {text!r}: expected {' or '.join(RETRY_MODES)}")


def make_session(aws: AwsSettings) -> Any:
    """A boto3 session with the normal credential chain (env, profile, SSO, instance role...).

    Every S3 client made from it writes with the encryption of ``aws`` (``--sse``): the parameters are
    added to each PutObject here, once, so no writer (publish, the state) can forget them.
    """
    import boto3

    encryption = aws.encryption_parameters()
    try:
        session = boto3.session.Session(profile_name=aws.profile, region_name=aws.region)
    except ProfileNotFound as error:
        raise S3SetupError(str(error)) from None
    if encryption:

        def encrypt(params: dict[str, Any], **_: Any) -> None:
            for name, value in encryption.items():
                params.setdefault(name, value)

        # provide-client-params runs before botocore (and its Stubber) look at the parameters.
        session.events.register("provide-client-params.s3.PutObject", encrypt)
    return session


def make_s3_client(
    session: Any,
    *,
    endpoint_url: str | None = None,
    threads: int,
    retry_mode: RetryMode = DEFAULT_RETRY_MODE,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> Any:
    """An S3 client sized for `threads` workers, retrying throttling, 5xx and dropped connections."""
    from botocore.config import Config

    config = Config(
        max_pool_connections=threads,
        # total_max_attempts counts the first attempt; the retries dict's "max_attempts" would not.
        retries={"mode": retry_mode, "total_max_attempts": max_attempts},
        connect_timeout=10,
        read_timeout=60,
        # We send Content-MD5 ourselves; an extra CRC32 per request is redundant CPU on small objects.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    try:
        client = session.client("s3", endpoint_url=endpoint_url, config=config)
    except ValueError as error:  # e.g. an endpoint URL that is not a URL
        raise S3SetupError(f"--endpoint-url: {error}") from None
    # First, so that it sees every failed attempt before botocore's retry handler answers.
    client.meta.events.register_first("needs-retry.s3", log_failed_attempt)
    return client


def log_failed_attempt(
    response: Any, attempts: int, caught_exception: Exception | None, operation: Any = None, **_: Any
) -> None:
    """Say which S3 request failed and why (shown with -v); botocore then retries it by its retry mode."""
    if caught_exception is not None:
        reason = describe_error(caught_exception)
    elif response is not None and (response[0].status_code >= 500 or response[0].status_code == 429):
        reason = f"HTTP {response[0].status_code} {response[1].get('Error', {}).get('Code', '')}".strip()
    else:
        return
    log.info("S3 %s: %s (attempt %d)", getattr(operation, "name", "request"), reason, attempts)


# --------------------------------------------------------------------------------------------------
# Errors


def describe_error(error: BaseException) -> str:
    """A one-line error text; botocore messages name the operation and code, and any URL in them is shown
    without a ``user:password@`` (an endpoint URL holding one is refused, but a proxy URL may)."""
    return f"{type(error).__name__}: {_USERINFO.sub('://', str(error))}"


_USERINFO = re.compile(r"://[^/@\s]*@")


def setup_problem(error: BaseException) -> str | None:
    """Why S3 cannot be used at all, in one line naming the host or bucket; None for other errors
    (a throttled or failed request, worth reporting per object and retrying next run)."""
    if isinstance(error, NoCredentialsError):
        return (
            "no AWS credentials found (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, pass --profile, "
            "or use an instance role)"
        )
    if isinstance(error, BotoCoreError) and "endpoint_url" in getattr(error, "kwargs", {}):
        return f"cannot connect to S3 at {url_host(error.kwargs['endpoint_url'])}: {cause_of(error)}"
    if isinstance(error, ClientError):
        code = error_code(error)
        reason = SETUP_CODES.get(code)
        if reason is not None:
            bucket = error.response.get("Error", {}).get("BucketName")
            return f"S3 {code}: {reason}" + (f" (bucket {bucket})" if bucket else "")
    return None


def cause_of(error: BotoCoreError) -> str:
    """The innermost reason of a connection error (refused, no such host, timed out), not the URL again."""
    cause: BaseException | None = (
        error.kwargs.get("error") if isinstance(error.kwargs.get("error"), BaseException) else None
    )
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return type(error).__name__
    text = str(cause).rpartition("]")[2].strip() or str(cause)
    return f"{type(cause).__name__}: {text}" if text else type(cause).__name__


def as_setup_error(error: BaseException) -> S3SetupError | None:
    problem = setup_problem(error)
    return None if problem is None else S3SetupError(problem)


# --------------------------------------------------------------------------------------------------
# Request counting


@contextlib.contextmanager
def counting_requests(*clients: Any) -> Iterator[Counter[str]]:
    """HTTP requests per S3 operation (retries included) sent by these clients while the block runs,
    through botocore's event hooks; a client given twice (a target and a state sharing one) counts once."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def count(event_name: str, **_: Any) -> None:
        with lock:
            counts[event_name.rsplit(".", 1)[-1]] += 1

    unique = {id(client): client for client in clients if client is not None}
    for client in unique.values():
        client.meta.events.register("before-send.s3", count)
    try:
        yield counts
    finally:
        for client in unique.values():
            client.meta.events.unregister("before-send.s3", count)


# --------------------------------------------------------------------------------------------------
# Bedrock ingestion


def parse_ingestion_target(text: str) -> tuple[str, str]:
    """`KB_ID:DATA_SOURCE_ID` → (knowledge base id, data source id)."""
    knowledge_base_id, separator, data_source_id = text.partition(":")
    if not separator or not knowledge_base_id or not data_source_id or ":" in data_source_id:
        raise UsageError(f"--start-ingestion {text!r}: expected KB_ID:DATA_SOURCE_ID")
    return knowledge_base_id, data_source_id


def start_ingestion(bedrock_agent_client: Any, knowledge_base_id: str, data_source_id: str) -> dict[str, str]:
    """Start a Bedrock Knowledge Base ingestion job (the KB's own sync); returns its id and status."""
    response = bedrock_agent_client.start_ingestion_job(
        knowledgeBaseId=knowledge_base_id,
        dataSourceId=data_source_id,
        description="anchorkit upload",
    )
    job = response["ingestionJob"]
    return {"ingestion_job_id": job["ingestionJobId"], "status": job["status"]}


def try_start_ingestion(
    client_factory: Callable[[], Any], knowledge_base_id: str, data_source_id: str
) -> tuple[dict[str, str] | None, str | None]:
    """Start an ingestion job: (the job, None), or (None, why it could not start); never raises."""
    try:
        # The client is made here so that a missing region is reported like any other failure.
        return start_ingestion(client_factory(), knowledge_base_id, data_source_id), None
    except Exception as error:  # returned: the caller reports it in the summary and the exit code
        return None, describe_error(error)
