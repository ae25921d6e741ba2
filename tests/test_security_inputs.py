"""Every JSON input anchorkit reads, nested 100,000 levels deep (Python's parser gives up) or 300 levels
deep (it parses, and then the code that copies or writes it would not): one line naming the file and
exit code 2, or a failure of that one file while the rest goes on; never a traceback.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from anchorkit.cli import app
from anchorkit.untrusted import JSONNumberTooLong, JSONTooDeep, nesting_exceeds, parse_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
runner = CliRunner()
TICKET = 12301  # a fixture ticket


def unparsable() -> str:
    return "[" * 100_000 + "]" * 100_000


def parsable_but_deep() -> str:
    return '{"a": ' * 300 + "1" + "}" * 300


NESTINGS = {"100,000 levels": unparsable, "300 levels": parsable_but_deep}


def run(folder: Path, *args: str | Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [str(a) for a in args], env={"REDMINE_API_KEY": "not-used", "ANCHORKIT_CONFIG": ""})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def snapshot_copy(folder: Path) -> Path:
    snap = folder / "snapshot"
    shutil.copytree(FIXTURES, snap, ignore=shutil.ignore_patterns("eval", "README.md"))
    return snap


def retrieval(folder: Path) -> Path:
    path = folder / "retrieval.json"
    chunk = {"id": "c1", "text": f"> チケット #{TICKET}: VPN\n\n切断される", "uri": f"s3://kb/{TICKET}.md"}
    path.write_text(json.dumps([chunk], ensure_ascii=False), encoding="utf-8")
    return path


def answer(folder: Path) -> Path:
    path = folder / "answer.txt"
    path.write_text(f"チケット #{TICKET} を参照してください。", encoding="utf-8")
    return path


# What each input is, given a folder and the deep JSON: (the file, the command that reads it).
Case = Callable[[Path, str], tuple[Path, list[str | Path]]]


def state_manifest(command: str) -> Case:
    def case(folder: Path, deep: str) -> tuple[Path, list[str | Path]]:
        state = folder / "state"
        state.mkdir()
        (state / "manifest.json").write_text(deep)
        where = {
            "state show": ["state", "show", state],
            "sync --state": ["sync", folder / "docs", "--state", state, "--url", "http://127.0.0.1:9"],
            "pull --state": ["pull", "--snapshot", folder / "snap", "--state", state, "--url", "http://127.0.0.1:9"],
        }[command]
        return state / "manifest.json", where

    return case


def snapshot_file(name: str) -> Case:
    def case(folder: Path, deep: str) -> tuple[Path, list[str | Path]]:
        snap = snapshot_copy(folder)
        (snap / name).write_text(deep)
        return snap / name, ["transform", snap, "--out", folder / "out"]

    return case


def verify_input(option: str) -> Case:
    def case(folder: Path, deep: str) -> tuple[Path, list[str | Path]]:
        path = folder / "deep.json"
        path.write_text(deep)
        given = {"-r": path, "-a": answer(folder), "--context": None}
        if option == "-a":
            given = {"-r": retrieval(folder), "-a": path}
        elif option == "--context":
            given = {"-r": retrieval(folder), "-a": answer(folder), "--context": path}
        return path, ["verify", *(part for key, value in given.items() if value for part in (key, value))]

    return case


def inject_input(folder: Path, deep: str) -> tuple[Path, list[str | Path]]:
    path = folder / "deep.json"
    path.write_text(deep)
    return path, ["inject", path]


FATAL: dict[str, Case] = {
    "state manifest, state show": state_manifest("state show"),
    "state manifest, sync --state": state_manifest("sync --state"),
    "state manifest, pull --state": state_manifest("pull --state"),
    "snapshot lookups.json": snapshot_file("lookups.json"),
    "snapshot state.json": snapshot_file("state.json"),
    "verify --retrieval": verify_input("-r"),
    "verify --answer": verify_input("-a"),
    "verify --context": verify_input("--context"),
    "inject retrieval": inject_input,
}


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("what", FATAL)
def test_a_deeply_nested_json_input_is_a_usage_error_in_one_line_naming_the_file(
    tmp_path: Path, what: str, nesting: str
) -> None:
    path, command = FATAL[what](tmp_path, NESTINGS[nesting]())

    code, _, stderr = run(tmp_path, *command)

    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith(f"error: {path}") and "nested too deeply" in stderr


def test_a_deeply_nested_config_file_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "anchorkit.toml"
    path.write_text("[sync]\nlabel = " + "[" * 100_000 + "]" * 100_000 + "\n")
    result = runner.invoke(
        app,
        ["sync", str(tmp_path / "docs"), "--url", "http://127.0.0.1:9"],
        env={"ANCHORKIT_CONFIG": str(path), "REDMINE_API_KEY": "not-used"},
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2
    assert result.stderr == f"error: {path}: cannot read the config file: nested too deeply\n"


@pytest.mark.parametrize("nesting", NESTINGS)
def test_a_deeply_nested_ticket_fails_alone_and_the_others_are_transformed_and_measured(
    tmp_path: Path, nesting: str
) -> None:
    intact = tmp_path / "intact"
    assert run(tmp_path, "transform", snapshot_copy(tmp_path / "reference"), "--out", intact)[0] == 0
    snap = snapshot_copy(tmp_path)
    bad = snap / "issues" / f"{TICKET}.json"
    bad.write_text(NESTINGS[nesting]())

    code, _, stderr = run(tmp_path, "transform", snap, "--out", tmp_path / "out")
    assert code == 1 and f"failed: {bad}: JSON nested too deeply" in stderr
    others = {path.name for path in intact.glob("*.md")} - {f"{TICKET}.md"}
    assert {path.name for path in (tmp_path / "out").glob("*.md")} == others

    code, _, stderr = run(tmp_path, "stats", snap)
    assert code == 1 and f"{bad}: JSON nested too deeply" in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("nesting", NESTINGS)
def test_a_deeply_nested_sidecar_is_reported_by_stats_and_left_alone_by_transform(tmp_path: Path, nesting: str) -> None:
    out = tmp_path / "out"
    assert run(tmp_path, "transform", snapshot_copy(tmp_path), "--out", out, "--sidecars")[0] == 0
    sidecar = out / f"{TICKET}.md.metadata.json"
    sidecar.write_text(NESTINGS[nesting]())
    stray = out / "99999.md.metadata.json"  # not one transform wrote: it must stay
    stray.write_text(NESTINGS[nesting]())

    code, stdout, _ = run(tmp_path, "stats", out, "--json")
    assert code == 0
    invalid = json.loads(stdout)["limits"]["sidecars_invalid"]["items"]
    assert [item["relpath"] for item in invalid] == [sidecar.name]

    code, _, stderr = run(tmp_path, "transform", snapshot_copy(tmp_path / "again"), "--out", out, "--sidecars")
    assert code == 0, stderr
    assert stray.read_text() == NESTINGS[nesting]() and json.loads(sidecar.read_text())["metadataAttributes"]


@pytest.mark.parametrize("nesting", NESTINGS)
def test_a_deeply_nested_eval_case_fails_alone(tmp_path: Path, nesting: str) -> None:
    cases = tmp_path / "cases.jsonl"
    good = {"id": "ok", "query": "VPN", "retrieved": json.loads(retrieval(tmp_path).read_text()), "answer": "回答"}
    cases.write_text(NESTINGS[nesting]() + "\n" + json.dumps(good, ensure_ascii=False) + "\n", encoding="utf-8")

    code, stdout, _ = run(tmp_path, "eval", cases, "--json")

    report = json.loads(stdout)
    assert code == 1 and report["cases"] == 1
    assert [error.partition(": ")[::2] for error in report["errors"]] == [
        (f"{cases}:1", "JSON nested too deeply (more than 200 levels)")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "[" * 201 + "]" * 201,
        '{"a": ' * 201 + "1" + "}" * 201,
        '[\n {"log": "[ERROR] [x] {y}"}, \n' * 201 + "1" + "]" * 201,  # deep enough, brackets in strings too
    ],
)
def test_json_nested_deeper_than_the_limit_is_refused_however_its_brackets_are_spread(text: str) -> None:
    with pytest.raises(JSONTooDeep):
        parse_json(text)
    with pytest.raises(JSONTooDeep):
        parse_json(text.encode())


@pytest.mark.parametrize(
    "text",
    [
        "[" * 200 + "]" * 200,  # exactly the limit
        "[" * 200 + "]" * 199 + ", [], []]",  # exactly the limit, with brackets enough to be walked
        json.dumps({"notes": "[ERROR] " * 500, "journals": [{"details": [{"a": 1}]}] * 300}),  # many brackets, shallow
    ],
)
def test_json_at_most_as_deep_as_the_limit_parses_whatever_its_brackets(text: str) -> None:
    assert parse_json(text) == json.loads(text) == parse_json(text.encode())


def test_a_number_too_long_to_convert_is_refused_like_malformed_json() -> None:
    text = '{"ticket_id": 1' + "0" * 5000 + "}"
    with pytest.raises(JSONNumberTooLong, match="a JSON number of more than 4,300 digits"):
        parse_json(text)
    with pytest.raises(ValueError):  # what every reader of untrusted JSON already catches
        parse_json(text.encode())
    assert parse_json('{"ticket_id": 1' + "0" * 4000 + "}")["ticket_id"] == 10**4000


def test_a_lone_surrogate_becomes_a_replacement_character_in_keys_and_values_and_pairs_stay_whole() -> None:
    text = r'{"a\ud800": ["\udc00 x", {"k": "\ud83d\ude00 \ud83d"}], "n": 1}'
    expected = {"a\ufffd": ["\ufffd x", {"k": "\U0001f600 \ufffd"}], "n": 1}
    assert parse_json(text) == parse_json(text.encode()) == expected
    json.dumps(parse_json(text), ensure_ascii=False).encode("utf-8")  # writable: no lone surrogate left


def depth(value: object) -> int:
    """Levels of lists and objects, by the definition (recursive: only for the small values below)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


json_values = st.recursive(
    st.none() | st.integers() | st.text(max_size=3),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=2), children, max_size=3),
    max_leaves=40,
)


@given(json_values, st.integers(min_value=0, max_value=8))
def test_the_nesting_walk_agrees_with_the_definition_of_depth(value: object, limit: int) -> None:
    assert nesting_exceeds(value, limit) == (depth(value) > limit)
