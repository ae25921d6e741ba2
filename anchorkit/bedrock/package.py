"""The Lambda deployment zip: the anchorkit modules the handler imports, and the packages they need.

    python -m anchorkit.bedrock.package --out anchorkit-lambda.zip        # Lambda python3.12, x86_64
    python -m anchorkit.bedrock.package --out … --architecture arm64 --python-version 3.13

What goes in is found, not listed: the anchorkit modules that ``anchorkit.bedrock`` reaches by its
imports, read statically (modulefinder, so imports inside functions count too), and the third-party
packages those modules import, with what those packages require. boto3 and botocore are not shipped:
the Lambda Python runtime has them. A package the handler's modules import but never call is named
in ``NOT_SHIPPED`` with the reason; any other third-party import the build does not know fails it, so
that the handler can never come to need typer, rich or python-redmine unnoticed. The data files a
shipped module reads (``PACKAGE_DATA``: the cl100k_base vocabulary of anchorkit.tokens) go with it.

Third-party packages come from pip as wheels for the target (``--only-binary``, the Lambda runtime's
Python version and manylinux platform), at the versions installed here, the ones the tests ran
against. The zip is reproducible: sorted entries, fixed dates and modes.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import modulefinder
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ENTRY_MODULE = "anchorkit.bedrock"
HANDLER = "anchorkit.bedrock.handler"
DEFAULT_PYTHON = "3.12"
ARCHITECTURES = ("x86_64", "arm64")
# In the Lambda Python runtime (and what they require, should a shipped package require them).
PROVIDED_BY_RUNTIME = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3"})
NOT_SHIPPED = {
    "rapidfuzz": "imported only inside verify's quote and claim similarity, which the handler never calls",
    "idna": "imported only inside verify's check of the hosts of an answer's links, which the handler never calls",
    "requests": "tiktoken uses it only to download a vocabulary",
}
# The third-party distributions anchorkit's pure core may bring into the Lambda: Markdown parsing
# (markdown_blocks), and cl100k tokenizing for chunk mode (tiktoken, with the regex it requires).
KNOWN_DEPENDENCIES = ("markdown-it-py", "mdurl", "tiktoken", "regex")
# Files of anchorkit's own that a shipped module reads (importlib.resources), shipped with it: the
# cl100k_base vocabulary chunk mode counts with, and its origin and licence.
PACKAGE_DATA = {"anchorkit.tokens": ("anchorkit/data/cl100k_base.tiktoken.gz", "anchorkit/data/NOTICE.md")}
_EXTRA_ONLY = re.compile(r";.*\bextra\s*==")
_ZIP_DATE = (2020, 1, 1, 0, 0, 0)


class PackagingError(RuntimeError):
    """The zip cannot be built; the message says why."""


@dataclass(frozen=True)
class Target:
    python_version: str = DEFAULT_PYTHON
    architecture: str = "x86_64"
    platforms: tuple[str, ...] = ()  # pip platform tags; () = those of the Lambda runtime's OS

    def pip_platforms(self) -> list[str]:
        if self.platforms:
            return list(self.platforms)
        machine = "aarch64" if self.architecture == "arm64" else "x86_64"
        # python3.12 and later run on Amazon Linux 2023 (glibc 2.34), earlier ones on Amazon Linux 2 (2.26).
        newer = tuple(map(int, self.python_version.split("."))) >= (3, 12)
        return [f"manylinux2014_{machine}"] + ([f"manylinux_2_28_{machine}"] if newer else [])


@dataclass(frozen=True)
class Contents:
    modules: dict[str, Path]  # path inside the zip -> source file, for anchorkit's modules and their data
    distributions: dict[str, str]  # name -> version, the third-party packages shipped


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def handler_contents(source_root: Path) -> Contents:
    """What the handler needs: anchorkit's modules it reaches, and the distributions to ship."""
    finder = modulefinder.ModuleFinder(path=[str(source_root)])  # only anchorkit is found: the rest is "missing"
    finder.import_hook(ENTRY_MODULE)
    files = {name: getattr(module, "__file__", None) for name, module in finder.modules.items()}
    modules = {
        Path(file).relative_to(source_root).as_posix(): Path(file)
        for name, file in files.items()
        if (name == "anchorkit" or name.startswith("anchorkit.")) and file
    }
    for name, data in PACKAGE_DATA.items():
        if name in files:
            modules.update((path, source_root / path) for path in data)
    imported = {name.split(".")[0] for name in finder.badmodules} - set(sys.stdlib_module_names) - {"anchorkit"}
    owners = importlib.metadata.packages_distributions()
    wanted: set[str] = set()
    for name in sorted(imported):
        if name not in owners:
            raise PackagingError(f"{ENTRY_MODULE} imports {name!r}, which no installed distribution provides")
        wanted.update(_normalized(owner) for owner in owners[name])
    unknown = wanted - PROVIDED_BY_RUNTIME - set(NOT_SHIPPED) - {_normalized(d) for d in KNOWN_DEPENDENCIES}
    if unknown:
        raise PackagingError(
            f"{ENTRY_MODULE} imports {', '.join(sorted(unknown))}: the Lambda ships only "
            f"{', '.join(sorted(KNOWN_DEPENDENCIES))} (see anchorkit/bedrock/package.py)"
        )
    shipped = _closure(wanted - PROVIDED_BY_RUNTIME - set(NOT_SHIPPED))
    return Contents(modules, {name: importlib.metadata.version(name) for name in sorted(shipped)})


def _closure(names: Iterable[str]) -> set[str]:
    """The distributions and everything they require (extras aside), less what is not shipped."""
    todo, seen = list(names), set()
    while todo:
        name = todo.pop()
        if name in seen or name in PROVIDED_BY_RUNTIME or name in NOT_SHIPPED:
            continue
        seen.add(name)
        for requirement in importlib.metadata.requires(name) or []:
            if not _EXTRA_ONLY.search(requirement):
                todo.append(_normalized(re.match(r"[A-Za-z0-9._-]+", requirement)[0]))  # type: ignore[index]
    return seen


def build(out: Path, target: Target = Target(), source_root: Path | None = None) -> Contents:
    """Write the zip at ``out``; what it holds."""
    if target.architecture not in ARCHITECTURES:
        raise PackagingError(f"architecture {target.architecture!r}: expected one of {', '.join(ARCHITECTURES)}")
    root = source_root or Path(__file__).resolve().parents[2]
    contents = handler_contents(root)
    with tempfile.TemporaryDirectory(prefix="anchorkit-lambda-") as folder:
        site = Path(folder)
        _pip_install(contents.distributions, target, site)
        files = dict(contents.modules)
        files.update(
            (path.relative_to(site).as_posix(), path)
            for path in site.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.relative_to(site).parts[0] != "bin"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
            for name in sorted(files):
                info = zipfile.ZipInfo(name, _ZIP_DATE)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, files[name].read_bytes())
        partial.replace(out)
    return contents


def _pip_install(distributions: dict[str, str], target: Target, site: Path) -> None:
    if not distributions:
        return
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", "--target", str(site)]
    command += ["--only-binary=:all:", "--implementation", "cp", "--python-version", target.python_version]
    for platform in target.pip_platforms():
        command += ["--platform", platform]
    command += [f"{name}=={version}" for name, version in distributions.items()]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise PackagingError(f"pip could not fetch the wheels for {target}:\n{result.stderr.strip()}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m anchorkit.bedrock.package", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("anchorkit-lambda.zip"), help="the zip to write")
    parser.add_argument(
        "--python-version", default=DEFAULT_PYTHON, help="the Lambda runtime's Python (default %(default)s)"
    )
    parser.add_argument(
        "--architecture", choices=ARCHITECTURES, default="x86_64", help="the function's (default %(default)s)"
    )
    parser.add_argument(
        "--platform", action="append", default=[], help="a pip platform tag instead of the runtime's (repeatable)"
    )
    arguments = parser.parse_args(argv)
    target = Target(arguments.python_version, arguments.architecture, tuple(arguments.platform))
    try:
        contents = build(arguments.out, target)
    except PackagingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    shipped = ", ".join(f"{name} {version}" for name, version in contents.distributions.items()) or "none"
    modules = sum(path.endswith(".py") for path in contents.modules)
    print(
        f"{arguments.out}: {arguments.out.stat().st_size:,} bytes, handler {HANDLER}, "
        f"Python {target.python_version} {target.architecture}; {modules} anchorkit modules "
        f"and {len(contents.modules) - modules} data files; "
        f"packages: {shipped}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
