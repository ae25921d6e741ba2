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
from support.bedrock import documented_batch, event, put_file
from support.s3_server import DUMMY_CREDENTIALS, S3Server

from anchorkit.bedrock.package import HANDLER, PackagingError, Target, build, handler_contents

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
    assert {"anchorkit", "markdown_it", "mdurl"} <= tops
    assert not tops & {"boto3", "botocore", "typer", "rich", "redminelib", "requests", "rapidfuzz"}
    assert "anchorkit/bedrock/runner.py" in names and "anchorkit/anchors.py" in names
    assert not {"anchorkit/cli.py", "anchorkit/source/redmine.py", "anchorkit/bedrock/package.py"} & set(names)
    assert [info.date_time for info in zipfile.ZipFile(lambda_zip).infolist()][:1] == [(2020, 1, 1, 0, 0, 0)]
    assert names == sorted(names)


def test_the_build_refuses_a_handler_that_would_import_the_cli(tmp_path: Path) -> None:
    package = tmp_path / "anchorkit"
    (package / "bedrock").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "bedrock" / "__init__.py").write_text("import typer\nimport markdown_it\n")

    with pytest.raises(PackagingError, match=r"anchorkit\.bedrock imports typer: the Lambda ships only markdown-it-py"):
        handler_contents(tmp_path)


@pytest.mark.s3
def test_the_handler_runs_from_the_zip_with_boto3_alone_beside_it(
    lambda_zip: Path, tmp_path: Path, s3_server: S3Server, s3_prefix: str
) -> None:
    clean = tmp_path / "clean"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(clean)], check=True)
    python = clean / "bin" / "python"
    pins = [f"{name}=={version(name)}" for name in RUNTIME]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *pins], check=True)
    task = tmp_path / "task"
    zipfile.ZipFile(lambda_zip).extractall(task)
    s3 = s3_server.client()
    files = [
        put_file(s3, s3_server.bucket, s3_prefix, "12301.md", [documented_batch(["# チケット #12301: VPN", "本文"])])
    ]
    environment = {
        "PYTHONPATH": str(task),
        "AWS_ENDPOINT_URL_S3": s3_server.endpoint_url,
        "AWS_ACCESS_KEY_ID": DUMMY_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": DUMMY_CREDENTIALS["aws_secret_access_key"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
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
    assert not set(report["loaded"]) & {"typer", "rich", "redminelib", "requests", "rapidfuzz", "tiktoken"}
    assert '"event": "anchorkit.bedrock.audit"' in result.stderr  # the audit line reaches the log
    (output,) = report["answer"]["outputFiles"]
    written = s3.get_object(Bucket=s3_server.bucket, Key=output["contentBatches"][0]["key"])["Body"].read()
    assert [item["contentBody"] for item in json.loads(written)["fileContents"]] == [
        "# チケット #12301: VPN",
        "> チケット #12301: VPN\n\n本文",
    ]


def test_the_default_target_is_lambdas_python_3_12_on_x86_64() -> None:
    assert HANDLER == "anchorkit.bedrock.handler"
    assert Target().pip_platforms() == ["manylinux2014_x86_64", "manylinux_2_28_x86_64"]
    assert Target("3.11", "arm64").pip_platforms() == ["manylinux2014_aarch64"]  # Amazon Linux 2: glibc 2.26
