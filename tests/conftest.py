from __future__ import annotations

import os
from pathlib import Path

import pytest

# Real-server fixtures live in tests/support/ (one plugin per server), and the Lambda tests' (support.bedrock).
pytest_plugins: list[str] = ["support.s3_server", "support.redmine_server", "support.browser", "support.bedrock"]

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
INTEGRATION_MARKERS = ("redmine", "s3", "browser")


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture
def clean_cli_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ANCHORKIT_*/REDMINE_* of the machine's, and no anchorkit.toml but the test's own (the test runs
    in its tmp_path): what a command reads is what the test gives it."""
    for name in [name for name in os.environ if name.startswith(("ANCHORKIT_", "REDMINE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """Under CI=true an integration test that skips is a failure: CI must exercise the real servers."""
    outcome = yield
    report = outcome.get_result()
    if (
        os.environ.get("CI") == "true"
        and report.skipped
        and any(item.get_closest_marker(m) for m in INTEGRATION_MARKERS)
    ):
        report.outcome = "failed"
        report.longrepr = f"integration test skipped under CI=true: {report.longrepr}"
