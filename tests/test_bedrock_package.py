"""The Lambda deployment zip: it builds, and the handler runs from it with boto3 alone beside it."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from support.bedrock import documented_batch, event, put_file, rendered, sidecar_attributes
from support.s3_server import DUMMY_CREDENTIALS, S3Server

from anchorkit.bedrock.package import HANDLER, PackagingError, Target, build, handler_contents
from anchorkit.chunk import chunk_document
from anchorkit.tokens import load_cl100k_base

REPO = Path(__file__).resolve().parents[1]
# boto3 and what it requires, at the versions installed here: what the Lambda runtime provides.
RUNTIME = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3")

# Run inside the clean environment, from the unzipped function code (Lambda's /var/task).
LAMBDA_SCRIPT = """
import importlib.util, json, logging, sys
logging.basicConfig(level=logging.WARNING)  # the Lambda Python runtime's root logger: a handler, warnings and up
event = json.load(sys.stdin)
unwanted = ("typer", "rich", "redminelib", "requests", "anchorkit.cli")
absent = [name for name in unwanted if importlib.util.find_spec(name) is None]
import anchorkit.bedrock
answer = anchorkit.bedrock.handler(event, None)
loaded = sorted({name.split(".")[0] for name in sys.modules})
print(json.dumps({"answer": answer, "absent": absent, "loaded": loaded, "from": anchorkit.bedrock.__file__}))
"""


@pytest.fixture(scope="module")
def lambda_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zip built for the Python running the tests (its wheels fetched by pip for this platform)."""
    machine = platform.machine()
    local = Target(
        f"{sys.version_info.major}.{sys.version_info.minor}",
        platforms=(f"manylinux2014_{machine}", f"manylinux_2_28_{machine}"),
    )
    out = tmp_path_factory.mktemp("zip") / "anchorkit-lambda.zip"
    build(out, local)
    return out


def test_the_zip_holds_the_handler_and_its_pure_dependencies_and_nothing_of_the_cli(lambda_zip: Path) -> None:
    names = zipfile.ZipFile(lambda_zip).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {"anchorkit", "markdown_it", "mdurl", "tiktoken", "regex"} <= tops
    assert not tops & {"boto3", "botocore", "typer", "rich", "redminelib", "requests", "rapidfuzz"}
    assert {"anchorkit/bedrock/runner.py", "anchorkit/anchors.py", "anchorkit/chunk/core.py"} <= set(names)
    assert {"anchorkit/data/cl100k_base.tiktoken.gz", "anchorkit/data/NOTICE.md"} <= set(names)
    assert not {
        "anchorkit/cli/__init__.py",
        "anchorkit/source/redmine.py",
        "anchorkit/render/transform.py",
        "anchorkit/bedrock/package.py",
    } & set(names)
    shipped = REPO / "anchorkit" / "data" / "cl100k_base.tiktoken.gz"
    assert zipfile.ZipFile(lambda_zip).read("anchorkit/data/cl100k_base.tiktoken.gz") == shipped.read_bytes()
    assert [info.date_time for info in zipfile.ZipFile(lambda_zip).infolist()][:1] == [(2020, 1, 1, 0, 0, 0)]
    assert names == sorted(names)


def test_the_build_refuses_a_handler_that_would_import_the_cli(tmp_path: Path) -> None:
    package = tmp_path / "anchorkit"
    (package / "bedrock").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "bedrock" / "__init__.py").write_text("import typer\nimport markdown_it\n")

    with pytest.raises(PackagingError, match=r"anchorkit\.bedrock imports typer: the Lambda ships only markdown-it-py"):
        handler_contents(tmp_path)


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with boto3 alone (and what it requires), as the Lambda Python runtime has it."""
    clean = tmp_path_factory.mktemp("clean")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(clean)], check=True)
    python = clean / "bin" / "python"
    pins = [f"{name}=={version(name)}" for name in RUNTIME]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *pins], check=True)
    return python


def run_from_zip(
    lambda_zip: Path, python: Path, s3_server: S3Server, folder: Path, files: list[Any], mode: str
) -> tuple[dict[str, Any], str]:
    """The handler called from the unzipped function code (Lambda's /var/task): its report and its log."""
    task = folder / "task"
    zipfile.ZipFile(lambda_zip).extractall(task)
    environment = {
        "PYTHONPATH": str(task),
        "ANCHORKIT_BEDROCK_MODE": mode,
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint_url,
        "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(folder / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(folder / "none"),
    }
    result = subprocess.run(
        [str(python), "-c", LAMBDA_SCRIPT],
        input=json.dumps(event(s3_server.bucket, files)),
        capture_output=True,
        text=True,
        cwd=task,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["from"] == str(task / "anchorkit" / "bedrock" / "__init__.py")
    assert report["absent"] == ["typer", "rich", "redminelib", "requests", "anchorkit.cli"]
    assert not set(report["loaded"]) & {"typer", "rich", "redminelib", "requests", "rapidfuzz"}
    assert '"event": "anchorkit.bedrock.audit"' in result.stderr  # the audit line reaches the log
    return report, result.stderr


@pytest.mark.s3
def test_the_handler_injects_anchors_from_the_zip_with_boto3_alone_beside_it(
    lambda_zip: Path, clean_python: Path, tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    s3 = s3_server.client()
    files = [
        put_file(s3, s3_server.bucket, s3_prefix, "12301.md", [documented_batch(["# チケット #12301: VPN", "本文"])])
    ]

    report, _ = run_from_zip(lambda_zip, clean_python, s3_server, tmp_path, files, "inject")

    assert "tiktoken" not in report["loaded"]  # inject mode never loads the tokenizer
    (output,) = report["answer"]["outputFiles"]
    written = s3.get_object(Bucket=s3_server.bucket, Key=output["contentBatches"][0]["key"])["Body"].read()
    assert [item["contentBody"] for item in json.loads(written)["fileContents"]] == [
        "# チケット #12301: VPN",
        "> チケット #12301: VPN\n\n本文",
    ]


@pytest.mark.s3
def test_the_handler_cuts_whole_documents_from_the_zip_with_boto3_alone_beside_it(
    lambda_zip: Path, clean_python: Path, tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    (doc,) = [ticket for ticket in rendered(REPO / "fixtures") if ticket.ticket_id == 12301]
    s3 = s3_server.client()
    metadata = sidecar_attributes(doc)
    files = [put_file(s3, s3_server.bucket, s3_prefix, doc.relpath, [documented_batch([doc.markdown])], metadata)]

    report, log = run_from_zip(lambda_zip, clean_python, s3_server, tmp_path, files, "chunk")

    assert "tiktoken" in report["loaded"]  # the zip's (the clean environment has none), with its vocabulary
    (output,) = report["answer"]["outputFiles"]
    written = s3.get_object(Bucket=s3_server.bucket, Key=output["contentBatches"][0]["key"])["Body"].read()
    chunks = json.loads(written)["fileContents"]
    tokenizer = load_cl100k_base()
    expected = chunk_document(doc.markdown, metadata, tokenizer, 300).chunks
    assert [chunk["contentBody"] for chunk in chunks] == [chunk.text for chunk in expected]
    assert len(chunks) > 1 and all(tokenizer.count(chunk["contentBody"]) <= 300 for chunk in chunks)
    assert all(chunk["contentMetadata"]["ticket_id"] == 12301 for chunk in chunks)
    assert '"chunk_files": 1' in log


def test_the_default_target_is_lambdas_python_3_12_on_x86_64() -> None:
    assert HANDLER == "anchorkit.bedrock.handler"
    assert Target().pip_platforms() == ["manylinux2014_x86_64", "manylinux_2_28_x86_64"]
    assert Target("3.11", "arm64").pip_platforms() == ["manylinux2014_aarch64"]  # Amazon Linux 2: glibc 2.26
