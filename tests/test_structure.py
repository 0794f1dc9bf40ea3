"""The Python package keeps the shape docs/architecture.md draws: wings on
layers, imports only downwards, no import cycles, no module reaching into
another's private names, and imports inside functions only where they put
off loading something heavy (each says so in a comment).

The import graph is read from the source (ast), not by importing it."""

import ast
import io
import tokenize
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "python" / "ccarena"

# Wings from the bottom up. A module may import its own wing and the ones
# below; `_engine` (the Rust extension) is below everything, the package's
# `__init__` (its public face, importing on demand) above everything.
LAYERS = {
    "_engine": -1,
    "errors": 0,
    "version": 0,
    "scenario": 1,
    "results": 2,
    "backends": 3,
    "experiments": 4,
    "present": 5,
    "cli": 6,
    "launch": 6,
    "": 7,
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _exists(module: str) -> bool:
    return module in MODULES or module == "_engine"


def _wing(module: str) -> str:
    return module.split(".")[0] if module else ""


class _Import:
    def __init__(self, source: str, target: str, names: list[str], line: int, runtime: bool, in_function: bool):
        self.source, self.target, self.names, self.line = source, target, names, line
        self.runtime, self.in_function = runtime, in_function

    def __repr__(self) -> str:
        return f"{self.source}:{self.line} -> {self.target}"


def _resolve(source: str, is_pkg: bool, level: int, module: str | None) -> str:
    base = source.split(".") if source else []
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([p for p in base + (module.split(".") if module else []) if p])


def _imports_of(name: str, path: Path) -> list[_Import]:
    tree = ast.parse(path.read_text(), str(path))
    out: list[_Import] = []

    def visit(node: ast.AST, runtime: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for n in child.body:
                    visit_stmt(n, False, in_function)
                for n in child.orelse:
                    visit_stmt(n, runtime, in_function)
                continue
            visit_stmt(child, runtime, in_function)

    def visit_stmt(child: ast.AST, runtime: bool, in_function: bool) -> None:
        if isinstance(child, ast.ImportFrom):
            if child.level == 0 and not (child.module or "").startswith("ccarena"):
                out.append(_Import(name, "<external>", [a.name for a in child.names], child.lineno, runtime, in_function))
                return
            base = _resolve(name, _is_package(path), child.level, child.module) if child.level else (child.module or "")[len("ccarena."):]
            if child.level == 0 and child.module == "ccarena":
                base = ""
            for a in child.names:
                sub = f"{base}.{a.name}" if base else a.name
                if _exists(sub):  # `from . import module`
                    out.append(_Import(name, sub, [], child.lineno, runtime, in_function))
                else:
                    out.append(_Import(name, base, [a.name], child.lineno, runtime, in_function))
        elif isinstance(child, ast.Import):
            for a in child.names:
                target = a.name[len("ccarena."):] if a.name.startswith("ccarena.") else ("" if a.name == "ccarena" else "<external>")
                out.append(_Import(name, target, [], child.lineno, runtime, in_function))
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            visit(child, runtime, True)
        else:
            visit(child, runtime, in_function)

    visit(tree, True, False)
    return out


IMPORTS = [i for name, path in MODULES.items() for i in _imports_of(name, path)]
INTERNAL = [i for i in IMPORTS if i.target != "<external>"]


def test_every_wing_has_a_layer():
    assert {_wing(m) for m in MODULES} <= set(LAYERS), "a new top-level module or wing: give it a layer here and in docs/architecture.md"


def test_no_upward_imports_between_wings():
    upward = [
        f"{i!r} ({_wing(i.source) or 'ccarena'} imports {_wing(i.target) or 'ccarena'})"
        for i in INTERNAL
        if _wing(i.source) != _wing(i.target) and LAYERS[_wing(i.target)] > LAYERS[_wing(i.source)]
    ]
    assert not upward, "imports that go up the layers:\n" + "\n".join(upward)


def test_no_import_cycles():
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in INTERNAL:
        if i.runtime and not i.in_function and i.target in MODULES and i.target != i.source:
            graph[i.source].add(i.target)
    # Tarjan's strongly connected components.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                cycles.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    assert not cycles, "modules that import each other (at module level): " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_module_imports_another_modules_private_names():
    private = [
        f"{i!r}: {n}"
        for i in INTERNAL
        for n in i.names
        if n.startswith("_") and not n.startswith("__") and i.target != i.source
    ]
    for name, path in MODULES.items():
        # `module._name` through an imported module
        tree = ast.parse(path.read_text())
        aliases = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level
                   for a in node.names if _exists(_resolve(name, _is_package(path), node.level, node.module) + "." + a.name)
                   and a.name != "_engine"}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                private.append(f"{name}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not private, "imports of another module's private names:\n" + "\n".join(private)


def _comment_lines(path: Path) -> set[int]:
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return {t.start[0] for t in tokens if t.type == tokenize.COMMENT}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_inside_functions_say_why(name):
    """Only deliberate lazy loading (of pandas, DuckDB, matplotlib, Dask ...)
    imports inside a function, with a comment on the line or just above the
    block of imports it belongs to."""
    path = MODULES[name]
    lines = path.read_text().splitlines()
    comments = _comment_lines(path)
    bare = []
    for i in (i for i in IMPORTS if i.source == name and i.in_function):
        k = i.line
        while k - 1 >= 1 and lines[k - 2].strip().startswith(("from ", "import ")):
            k -= 1  # the first import of the block
        if i.line not in comments and (k - 1) not in comments:
            bare.append(f"{name}:{i.line}: {lines[i.line - 1].strip()}")
    assert not bare, "imports inside functions without a comment saying why they are there:\n" + "\n".join(bare)


def test_every_module_has_a_docstring():
    missing = [name or "ccarena" for name, path in MODULES.items() if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"
