"""The package's import graph has no cycle, module by module and stage by stage.

Every ``import`` / ``from`` statement of the AST counts: at module level, inside functions and
under ``if TYPE_CHECKING:`` (which never runs, but a lower-level module naming a higher-level
one's type is the same layering fault). Stages are the subpackages and top-level modules of
``memcap``: the stage graph collapses each onto its stage, so two stages that reach into each
other through different modules are a cycle too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "memcap"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """memcap modules that ``path`` imports anywhere (module level, functions, TYPE_CHECKING)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from memcap.a import b` imports the module memcap.a.b when there is one,
            # else the name b from memcap.a.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        found |= {t for t in targets if t in modules and t != name}
    return found


def _graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = {}
    for path in paths:
        name = _module_name(path)
        targets = _imports(path, modules)
        # Importing memcap.a.b runs memcap.a's __init__ first, unless the importer is inside
        # memcap.a (whose __init__ is then already running).
        graph[name] = targets | {
            parent
            for target in targets
            for parent in _parents(target)
            if parent in modules and not _inside(name, parent)
        }
    return graph


def _stage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between stages (``memcap.<first part>``), without the root package."""
    stages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name == "memcap":
            continue
        edges = stages.setdefault(_stage(name), set())
        edges |= {_stage(t) for t in targets if t != "memcap"} - {_stage(name)}
    return stages


def _stage(name: str) -> str:
    return ".".join(name.split(".")[:2])


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None (iterative depth-first search)."""
    state: dict[str, int] = {}
    for root in graph:
        if root in state:
            continue
        stack, path = [(root, iter(sorted(graph[root])))], [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_the_package_has_no_import_cycle():
    graph = _graph()
    assert len(graph) > 20, "the walk must see the package's modules"
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_stage_imports_a_stage_that_imports_it():
    stages = _stage_graph(_graph())
    assert {"memcap.extract", "memcap.capacity", "memcap.synthetic"} <= set(stages)
    assert _cycle(stages) is None, " -> ".join(_cycle(stages))


def test_a_cycle_through_two_modules_of_each_stage_would_be_found():
    graph = {
        "memcap.a.x": {"memcap.b.y"},
        "memcap.b.y": set(),
        "memcap.b.z": {"memcap.a.w"},
        "memcap.a.w": set(),
    }
    assert _cycle(graph) is None
    assert _cycle(_stage_graph(graph)) == ["memcap.a", "memcap.b", "memcap.a"]


def test_a_cycle_hidden_in_a_function_would_be_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_function_level_imports_count(tmp_path, monkeypatch):
    source = tmp_path / "memcap" / "x.py"
    source.parent.mkdir()
    source.write_text("def f():\n    from memcap.y import g\n    import memcap.z\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "memcap")
    assert _imports(source, {"memcap.x", "memcap.y", "memcap.z"}) == {"memcap.y", "memcap.z"}


def test_typing_only_and_relative_imports_count(tmp_path, monkeypatch):
    source = tmp_path / "memcap" / "s" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memcap.y import T\n"
        "from . import z\n"
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "memcap")
    modules = {"memcap.s", "memcap.s.x", "memcap.y", "memcap.s.z"}
    assert _imports(source, modules) == {"memcap.y", "memcap.s.z"}


def test_errors_module_imports_nothing_from_memcap():
    graph = _graph()
    assert graph["memcap.errors"] <= {"memcap"}, graph["memcap.errors"]
