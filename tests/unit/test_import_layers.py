"""The package's layers: pumice.common below everything, no import cycle (type-only imports
and imports inside functions included), the client apart from the store and the broker, the
broker on the MessageStore protocol."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pumice

SRC = Path(pumice.__file__).parent.parent


def _modules() -> dict[str, Path]:
    out = {}
    for p in (SRC / "pumice").rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(path: Path, known: dict[str, Path], in_functions: bool = False) -> set[str]:
    """Modules of ``known`` that ``path`` imports at module level or under TYPE_CHECKING, and
    with ``in_functions`` inside functions too (taken lazily, at call time, but a cycle all
    the same: it only hides from a module-level check)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if not in_functions and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.ImportFrom) and child.module:
                if child.module in known:
                    found.add(child.module)
                found.update(f"{child.module}.{a.name}" for a in child.names if f"{child.module}.{a.name}" in known)
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name in known)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            connect(v)
    return out


GRAPH = {m: _imports(p, _modules()) for m, p in _modules().items()}
GRAPH_WITH_FUNCTION_IMPORTS = {m: _imports(p, _modules(), in_functions=True) for m, p in _modules().items()}


def test_no_import_cycle() -> None:
    assert _cycles(GRAPH) == []


def test_no_import_cycle_through_imports_inside_functions() -> None:
    assert _cycles(GRAPH_WITH_FUNCTION_IMPORTS) == []


def test_imports_inside_functions_are_counted() -> None:
    # reindex imports reindex_source inside a function, for pyspark's sake
    assert "pumice.spark.jobs.reindex_source" not in GRAPH["pumice.spark.jobs.reindex"]
    assert "pumice.spark.jobs.reindex_source" in GRAPH_WITH_FUNCTION_IMPORTS["pumice.spark.jobs.reindex"]


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


LEAF_HELPERS = {"pumice.config", "pumice.native"}


def test_common_imports_only_common_and_the_leaf_helpers() -> None:
    for module, deps in GRAPH.items():
        if module.startswith("pumice.common"):
            assert all(d.startswith("pumice.common") or d in LEAF_HELPERS for d in deps), (module, deps)
    # pumice.native, the data plane's switch, is a leaf: the extension or nothing
    assert GRAPH["pumice.native"] <= {"pumice._native"}, GRAPH["pumice.native"]


def test_the_client_and_tools_import_neither_the_store_nor_the_broker() -> None:
    for module, deps in GRAPH.items():
        if module.startswith(("pumice.client", "pumice.tools")):
            bad = {d for d in deps if d.startswith(("pumice.store", "pumice.broker", "pumice.namesrv"))}
            assert not bad, (module, bad)


def test_importing_the_client_loads_no_store_module_nor_numpy() -> None:
    code = (
        "import sys, pumice.client; "
        "print(sorted(m for m in sys.modules if m.startswith(('pumice.store', 'pumice.broker', 'numpy'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_only_the_controller_knows_the_concrete_store() -> None:
    # the broker's processors and services take the MessageStore protocol; mypy holds them to it
    users = {m for m, deps in GRAPH.items() if "pumice.store.message_store" in deps and m.startswith("pumice.broker")}
    assert users == {"pumice.broker.broker_controller"}


def test_dledger_sits_between_the_store_and_the_broker() -> None:
    # the store sees DLedger only through a protocol; DLedger never reaches up into the broker
    for module, deps in GRAPH_WITH_FUNCTION_IMPORTS.items():
        if module.startswith("pumice.store"):
            assert not {d for d in deps if d.startswith("pumice.dledger")}, module
        if module.startswith("pumice.dledger"):
            bad = {
                d for d in deps if d.startswith(("pumice.broker", "pumice.namesrv", "pumice.client", "pumice.spark"))
            }
            assert not bad, (module, bad)
