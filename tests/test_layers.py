"""The import graph of `fedeval/` keeps the layout ARCHITECTURE.md describes: each layer imports
only the layers before it, no module imports itself back through others, no module grows past
600 lines, and imports inside functions are kept for the CLI's lazy loading alone.

Read statically (ast), so it runs in `make lint` without importing the package. An import under
`if TYPE_CHECKING:` is an annotation, not a dependency, and is not counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fedeval"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"core"}),
    frozenset({"privacy"}),
    frozenset({"estimate"}),
    frozenset({"tables"}),
    frozenset({"documents"}),
    frozenset({"protocol"}),
    frozenset({"views"}),
    frozenset({"api", "multiclass", "audit", "flower"}),
    frozenset({"cli"}),
    frozenset({"", "__main__"}),  # the package's own __init__ (the public names) and -m entry
)
"""Low to high: a module may import its own layer's modules and those of earlier layers."""

SIBLINGS_APART = frozenset({"api", "multiclass", "audit", "flower"})
"""Packages of one layer that must not import each other (each stands on the layers below)."""

MAX_LINES = 600

LAZY_ALLOWED: dict[str, str] = {
    "fedeval.documents.files": "seals (cryptography) and tables.write (pyarrow) load when a "
    "document is written or verified, so the CLI's --version, --help and completion skip them",
}
"""Modules outside `cli/` that may import fedeval modules inside a function, and why."""


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(module: str) -> int:
    group = _group(module)
    for i, names in enumerate(LAYERS):
        if group in names:
            return i
    raise AssertionError(f"{module}: its folder {group!r} is in no layer of LAYERS")


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(module: str) -> list[tuple[str, int, bool]]:
    """(imported fedeval module, line, inside a function) for each import of `module`."""
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other, in_function)
                continue
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                if child.module.split(".")[0] == "fedeval":
                    for alias in child.names:
                        sub = f"{child.module}.{alias.name}"
                        target = sub if sub in MODULES else child.module
                        found.append((target, child.lineno, inner))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "fedeval":
                        found.append((alias.name, child.lineno, inner))
            visit(child, inner)

    visit(ast.parse(MODULES[module].read_text()), False)
    return found


GRAPH = {m: _imports(m) for m in MODULES}


def test_every_module_is_in_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_runs_up_the_layers():
    up = [
        f"{m}:{line} imports {t}"
        for m, found in GRAPH.items()
        for t, line, _ in found
        if t in MODULES and _layer(t) > _layer(m)
    ]
    assert up == [], "\n".join(up)


def test_packages_of_one_layer_stay_apart():
    across = [
        f"{m}:{line} imports {t}"
        for m, found in GRAPH.items()
        for t, line, _ in found
        if _group(m) in SIBLINGS_APART and _group(t) in SIBLINGS_APART and _group(t) != _group(m)
    ]
    assert across == [], "\n".join(across)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def test_no_import_circle():
    """Imports inside functions count too: a circle they close is still a circle."""
    graph = {m: {t for t, _, _ in found if t in MODULES and t != m} for m, found in GRAPH.items()}
    assert _cycles(graph) == []


def test_the_checker_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_over_the_size_limit():
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}


def test_imports_inside_functions_only_where_allowed():
    """The CLI loads the library lazily (start-up time); elsewhere an import belongs at the top,
    except where LAZY_ALLOWED says why not."""
    lazy = [
        f"{m}:{line} imports {t}"
        for m, found in GRAPH.items()
        for t, line, inside in found
        if inside and _group(m) != "cli" and m not in LAZY_ALLOWED
    ]
    assert lazy == [], "\n".join(lazy)


@pytest.mark.parametrize("module", sorted(LAZY_ALLOWED))
def test_allowed_exceptions_exist(module):
    assert module in MODULES
    assert any(inside for _, _, inside in GRAPH[module]), f"{module} needs no exception now"
