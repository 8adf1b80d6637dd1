"""The package's layering: its import graph has no cycle, and the backend registry names no backend.

The graph is built from the source, not from ``sys.modules``: every ``import`` statement counts,
at module level and inside functions (a lazy import still couples the two modules), except those
under ``if TYPE_CHECKING:``, which never run. ``from pkg import name`` is an edge to the module
``pkg.name`` when there is one, else to ``pkg``; importing a submodule is not counted as an edge
to its parent packages (every module would then depend on ``numba_cube/__init__.py``, which
re-exports the public names, and the graph would say nothing).
"""

from __future__ import annotations

import ast
import pathlib
import re

import numba_cube
import numba_cube.runtime.registry

PACKAGE_ROOT = pathlib.Path(numba_cube.__file__).parent


def _module_files(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> its file, for every ``.py`` file of the package at ``root``."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = (root.name,) + path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every import statement of ``tree``, at any depth, except under ``if TYPE_CHECKING:``."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))


def _nearest_module(name: str, modules) -> str | None:
    """``name`` if it is a module of the package, else its longest prefix that is one."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imported_modules(module: str, path: pathlib.Path, modules) -> set[str]:
    is_package = path.name == "__init__.py"
    targets = set()
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                # A package's own name is the base of `from . import x`; a module's is its parent.
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module
            names = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin
                     for alias in node.names]
        targets.update(t for t in (_nearest_module(n, modules) for n in names) if t is not None)
    targets.discard(module)
    return targets


def import_graph(root: pathlib.Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, as the module docstring counts them."""
    modules = _module_files(root)
    return {module: _imported_modules(module, path, modules) for module, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``None`` if it has none (iterative DFS)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path = [start], {start}
        iterators = [iter(sorted(graph[start]))]
        while iterators:
            nxt = next(iterators[-1], None)
            if nxt is None:
                iterators.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif nxt in on_path:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                iterators.append(iter(sorted(graph[nxt])))
    return None


def test_graph_builder_sees_function_level_and_package_imports(tmp_path):
    """The graph counts an import inside a function, resolves ``from . import mod`` to the module
    (and ``from . import name`` to the package), and skips ``if TYPE_CHECKING:`` blocks: the
    contract of the checker the next test relies on."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import thing\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                      "    from .. import a\nfrom .. import thing\n")
    graph = import_graph(pkg)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(), "pkg.sub.b": {"pkg"}}
    assert find_cycle(graph) == ["pkg", "pkg.a", "pkg.sub.b", "pkg"]


def test_package_has_no_import_cycle():
    """No module of numba_cube imports, directly or through others, a module that imports it back
    (lazy imports inside functions included): the layers stack, lower ones never reach up."""
    graph = import_graph()
    # The graph is the package's own (a builder that found nothing would pass vacuously).
    assert "numba_cube.runtime.registry" in graph["numba_cube.plugins"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


BUILTIN_BACKENDS = ("cpu", "cuda")


def backend_names_in(source: str) -> list[str]:
    """The built-in backend names that ``source``'s code mentions: in a string that is not a
    docstring (``"cpu"``, ``f"cuda:{i}"``, a message) or in an identifier (``cpu_options``)."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    words = re.compile(r"(?<![a-z])(" + "|".join(BUILTIN_BACKENDS) + r")(?![a-z])", re.IGNORECASE)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.update(m.lower() for m in words.findall(node.value))
        for identifier in (getattr(node, "id", None), getattr(node, "attr", None),
                           getattr(node, "arg", None), getattr(node, "name", None)):
            if isinstance(identifier, str):
                found.update(m.lower() for m in words.findall(identifier.replace("_", " ")))
    return sorted(found)


def test_backend_name_finder_sees_strings_and_identifiers():
    """The finder the next test relies on: a name in a string or an identifier counts, one in a
    docstring (prose, examples) does not."""
    assert backend_names_in('"""cube.client("cpu")."""\nx = 1\n') == []
    assert backend_names_in('if name == "cpu":\n    pass\n') == ["cpu"]
    assert backend_names_in('msg = f"no {dev}, try cuda:1"\n') == ["cuda"]
    assert backend_names_in('cuda_options = {}\n') == ["cuda"]


def test_registry_names_no_backend():
    """``runtime/registry.py`` is backend-agnostic: no built-in backend's name appears in its code
    (what a backend wants of its clients, such as the options the environment sets, comes with the
    backend's registration)."""
    named = backend_names_in(pathlib.Path(numba_cube.runtime.registry.__file__).read_text())
    assert not named, f"registry.py names backends {named}"


#: The CPU backend's stages (``numba_cube/backends/cpu/<stage>/``) and the stages each may import.
#: A kernel flows frontend -> lower -> analyze -> passes -> emit; ``kernel_runtime`` (what generated
#: code imports) and ``cache`` sit below every stage. ``translate.py``, ``server.py`` and
#: ``twin_choice.py`` at the top drive them and may import any.
CPU_STAGES = {
    "kernel_runtime": {"kernel_runtime", "cache"},
    "cache": {"cache"},
    "frontend": {"frontend", "kernel_runtime"},
    "lower": {"lower", "frontend", "kernel_runtime"},
    "analyze": {"analyze", "lower", "frontend"},
    "passes": {"passes", "analyze", "lower", "frontend", "kernel_runtime"},
    "emit": {"emit", "passes", "analyze", "lower", "frontend", "kernel_runtime"},
}

#: Edges against the stage rules that exist today, each to be removed: none are left (the passes
#: that printed their own pieces now hand their decisions to emitters: issue 31). The test below
#: fails when an edge not listed here appears, or a listed one disappears.
CPU_STAGE_DEBT: set = set()

_CPU = "numba_cube.backends.cpu."


def cpu_stage_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The imports between modules of two stages of the CPU backend that the stage rules do not
    allow, as (importer, imported) relative to ``numba_cube.backends.cpu``; and every import of
    ``kernel_runtime`` outside itself and ``cache`` (generated code must not pull the
    translator in)."""
    bad = set()
    for module, targets in graph.items():
        if not module.startswith(_CPU):
            continue
        stage = module[len(_CPU):].split(".")[0]
        allowed = CPU_STAGES.get(stage)
        if allowed is None:
            continue
        for target in targets:
            if not target.startswith(_CPU):
                continue
            if target[len(_CPU):].split(".")[0] not in allowed:
                bad.add((module[len(_CPU):], target[len(_CPU):]))
    return bad


def test_cpu_backend_stages_import_only_what_comes_before_them():
    """The CPU backend's folders are the translator's pipeline: a stage imports only the stages
    before it (``CPU_STAGES``), never a later one, apart from the listed debt; and the listed
    debt is all still there (a removed edge must leave the list)."""
    graph = import_graph()
    stages = {m[len(_CPU):].split(".")[0] for m in graph if m.startswith(_CPU)}
    assert set(CPU_STAGES) <= stages        # the folders exist: the test is not vacuous
    bad = cpu_stage_edges(graph)
    assert bad - CPU_STAGE_DEBT == set(), f"imports against the stage rules: {sorted(bad - CPU_STAGE_DEBT)}"
    assert CPU_STAGE_DEBT - bad == set(), f"debt paid, remove from CPU_STAGE_DEBT: {sorted(CPU_STAGE_DEBT - bad)}"


def test_kernel_runtime_imports_nothing_of_the_translator():
    """Generated modules import ``kernel_runtime`` only: its modules import nothing of numba_cube
    but each other, the caches of numba_cube's own helpers and the public errors, so loading a
    cached kernel never loads the translator."""
    graph = import_graph()
    runtime = [m for m in graph if m.startswith(_CPU + "kernel_runtime")]
    assert len(runtime) >= 10
    allowed = (_CPU + "kernel_runtime", _CPU + "cache", "numba_cube.errors")
    outside = {(m, t) for m in runtime for t in graph[m] if not t.startswith(allowed)}
    assert not outside, f"kernel_runtime imports: {sorted(outside)}"
