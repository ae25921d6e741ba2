"""The layout the design notes describe (docs/design.md, "Module map"): a folder per stage, the shared
pieces at the root, imports that only point down the pipeline, no loops, no module over 800 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "anchorkit"
# Who may import whom: a stage imports the shared root and the stages before it, never after it.
ALLOWED = {
    "root": {"root"},
    "source": {"root", "source"},
    "render": {"root", "source", "render"},
    "publish": {"root", "render", "publish"},
    # The audit of chunks as they are reads the Lambda's batches and log lines, and ids as verify does.
    "audit": {"root", "source", "render", "verify", "bedrock", "audit"},
    "verify": {"root", "verify"},
    # anchorkit's own chunks: cut from rendered documents (a snapshot's, or a transform folder's).
    "chunk": {"root", "source", "render", "chunk"},
    "sync": {"root", "source", "render", "chunk", "publish", "sync"},
    # The Lambda: anchors chunks Bedrock made (verify knows which ticket a chunk names), or makes them.
    "bedrock": {"root", "verify", "chunk", "bedrock"},
    "cli": {"root", "source", "render", "chunk", "publish", "audit", "verify", "sync", "cli"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    if module == "anchorkit.__main__":  # `python -m anchorkit`: the command line
        return "cli"
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) else "root"


def imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("anchorkit"):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("anchorkit")}
    return found


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def test_imports_only_point_down_the_pipeline() -> None:
    upward = [
        f"{module} imports {imported}"
        for module, path in MODULES.items()
        for imported in imports(path, top_level_only=False)
        if imported in MODULES and layer(imported) not in ALLOWED[layer(module)]
    ]
    assert upward == []


def test_there_are_no_import_loops() -> None:
    graph = {
        module: {name for name in imports(path, top_level_only=True) if name in MODULES and name != module}
        for module, path in MODULES.items()
    }
    loops: list[list[str]] = []

    def visit(module: str, trail: list[str]) -> None:
        for imported in graph[module]:
            if imported in trail:
                loops.append([*trail[trail.index(imported) :], imported])
            elif imported not in done:
                visit(imported, [*trail, imported])
        done.add(module)

    done: set[str] = set()
    for module in graph:
        if module not in done:
            visit(module, [module])
    # A package's __init__ re-exporting its own modules is not a loop of the design.
    real = [loop for loop in loops if not all(name.startswith(loop[0].rsplit(".", 1)[0]) for name in loop)]
    assert real == []


def test_modules_stay_small_and_the_root_holds_only_shared_pieces() -> None:
    lengths = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {module: n for module, n in lengths.items() if n > 800} == {}
    assert len(list(PACKAGE.glob("*.py"))) <= 14


def test_every_package_says_what_it_exports() -> None:
    for init in PACKAGE.glob("*/__init__.py"):
        assert "__all__" in init.read_text(encoding="utf-8"), init


def defined_names(path: Path) -> set[str]:
    """What a module defines itself (or lists in __all__), not what it imported from elsewhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names |= {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)}
    return names


def test_nothing_is_reached_through_another_modules_imports() -> None:
    reached = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module in MODULES):
                continue
            defined = defined_names(MODULES[node.module])
            for alias in node.names:
                if alias.name not in defined and f"{node.module}.{alias.name}" not in MODULES:
                    reached.append(f"{module}: {alias.name} from {node.module}")
    assert reached == []
