"""The import rules of CONTRIBUTING.md hold for every module of src/kvlab.

The table under "Layout and import rules" is read from CONTRIBUTING.md itself, so the
document and the check cannot drift apart. Every import is counted, including those
inside functions and under ``TYPE_CHECKING``: a lazy import still ties two layers.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kvlab"
ALWAYS = {"kvlab", "errors"}  # the version and the exception tree: importable anywhere


def read_rules() -> dict[str, set[str] | None]:
    """unit -> the units it may import (None: anything), from CONTRIBUTING.md's table."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("## Layout and import rules", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, set[str] | None] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        unit, may = cells[0].strip("`"), cells[3]
        rules[unit] = None if may == "anything" else set(re.findall(r"`([\w.]+)`", may))
    return rules


def unit_of(module: str) -> str:
    """The unit a dotted module belongs to: ``bench.<folder>`` inside bench (the one
    package split finer in the table), else the top-level name (``kvlab.report.html``
    -> ``report``, ``kvlab.rundir.run`` -> ``rundir``)."""
    parts = module.split(".")[1:]
    if not parts:
        return "kvlab"
    if parts[0] == "bench" and len(parts) > 1:
        return f"bench.{parts[1]}"
    return "cli" if parts[0] == "__main__" else parts[0]


def package_of(unit: str) -> str:
    """The top-level package of src/kvlab a unit is part of (``bench.plan`` -> ``bench``)."""
    return unit.split(".")[0]


def module_of(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


def _typing_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (never run)."""
    return {id(n) for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for stmt in block.body for n in ast.walk(stmt)}


def imported(path: Path, typing: bool = True) -> Iterator[tuple[str, int]]:
    """Every kvlab module ``path`` imports, with its line; ``typing`` False leaves out
    the imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set() if typing else _typing_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kvlab":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "kvlab":
                continue
            for alias in node.names:  # `from kvlab.analysis import metrics`
                sub = f"{node.module}.{alias.name}"
                is_module = (SRC.parent / Path(*sub.split("."))).with_suffix(".py").exists() \
                    or (SRC.parent / Path(*sub.split("."))).is_dir()
                yield (sub if is_module else node.module), node.lineno


def edges() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> where, for every import across units."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        here = unit_of(module_of(path))
        for target, line in imported(path):
            there = unit_of(target)
            if there != here:
                found.setdefault((here, there), []).append(
                    f"{path.relative_to(ROOT)}:{line} imports {target}")
    return found


def test_every_unit_is_in_the_table() -> None:
    rules = read_rules()
    units = {unit_of(module_of(p)) for p in SRC.rglob("*.py")} - {"kvlab", "bench"}
    assert units <= set(rules), f"units missing from CONTRIBUTING.md: {units - set(rules)}"
    assert set(rules) <= units | {"errors"}, f"table names no code: {set(rules) - units}"


def test_imports_follow_the_table() -> None:
    rules = read_rules()
    wrong = [where for (here, there), at in edges().items()
             if there not in ALWAYS and (allowed := rules.get(here, set())) is not None
             and there not in allowed for where in at]
    assert not wrong, "imports against CONTRIBUTING.md:\n" + "\n".join(wrong)


def test_the_engine_stands_on_memory_alone() -> None:
    """The reference engine is the bottom of the stack: it may import itself, ``memory``
    and ``errors``, nothing else. What studies it (proofs, timings, agreement with other
    servers) lives in ``studies``, which may use the servers and the workload."""
    assert read_rules()["engine"] == {"memory"}, "CONTRIBUTING.md's engine row changed"
    outside = [where for (here, there), at in edges().items()
               if here == "engine" and there not in ALWAYS | {"memory"} for where in at]
    assert not outside, "the engine imports above itself:\n" + "\n".join(outside)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (node -> the nodes it points to) as a closed path, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        if state.get(node) == 1:
            return [*path[path.index(node):], node]
        if state.get(node) == 2:
            return None
        state[node] = 1
        for nxt in sorted(graph.get(node, set()) - {node}):
            if (cycle := visit(nxt, [*path, node])) is not None:
                return cycle
        state[node] = 2
        return None

    for node in sorted(graph):
        if (cycle := visit(node, [])) is not None:
            return cycle
    return None


def test_the_table_has_no_cycle() -> None:
    rules = read_rules()
    graph = {u: (set(rules) if may is None else may) for u, may in rules.items()}
    cycle = find_cycle(graph)
    assert cycle is None, "cycle in CONTRIBUTING.md's table: " + " -> ".join(cycle or [])


def test_each_top_level_package_sits_on_one_layer() -> None:
    """Collapsed to the top-level packages of src/kvlab (``bench`` is one, whatever
    its folders), neither the imports nor the table have a cycle: no package is
    both above and below another. Imports under TYPE_CHECKING count: a type-only
    import still ties two packages."""
    imports: dict[str, set[str]] = {}
    for (here, there) in edges():
        imports.setdefault(package_of(here), set()).add(package_of(there))
    cycle = find_cycle(imports)
    assert cycle is None, "packages import each other: " + " -> ".join(cycle or [])
    rules = read_rules()
    table: dict[str, set[str]] = {}
    for unit, may in rules.items():
        if may is not None:
            table.setdefault(package_of(unit), set()).update(map(package_of, may))
    cycle = find_cycle(table)
    assert cycle is None, "the table lets packages import each other: " + " -> ".join(
        cycle or [])


MAX_LINES = 400  # CONTRIBUTING.md: one concept per module, at most this many lines


def test_no_module_is_over_400_lines() -> None:
    long = [f"{p.relative_to(ROOT)}: {n} lines" for p in sorted(SRC.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines (split by concept):\n" + "\n".join(long)


def test_no_module_is_in_an_import_cycle() -> None:
    """Within a unit too, modules import one way (runner uses the executor, the executor
    does not use runner; the executor uses the search, the search does not use the
    executor); only imports under TYPE_CHECKING are exempt, since they never run."""
    graph = {module_of(p): {m for m, _ in imported(p, typing=False)} for p in SRC.rglob("*.py")}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        if state.get(module) == 1:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(module):], module]))
        if state.get(module) == 2 or module not in graph:
            return
        state[module] = 1
        for nxt in sorted(graph[module] - {module}):
            visit(nxt, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        visit(module, [])
    executor = {m for m, _ in imported(SRC / "run" / "executor.py")}
    assert "kvlab.run.runner" not in executor
    search = {m for m, _ in imported(SRC / "run" / "search.py")}  # typing too
    assert not {"kvlab.run.executor", "kvlab.run.runner"} & search
