"""Each run-directory file is named once (rundir/files.py), and only kvlab.rundir opens
one: no other module of src/kvlab spells a run file's name, imports the names, or reads
or writes a file through a run directory's path."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from kvlab.rundir import RunDir, files

SRC = Path(files.__file__).resolve().parents[1]
RUNDIR = SRC / "rundir"
NAMES = {v for k, v in vars(files).items() if k.endswith(("_FILE", "_CSV"))}
#: RunDir's paths of run files (records_path, manifest_path, ...)
RUN_PATHS = {name for name, member in inspect.getmembers(RunDir)
             if isinstance(member, property) and name.endswith("_path")}
OPENERS = {"open", "read_text", "read_bytes", "write_text", "write_bytes"}


def outside() -> list[tuple[str, ast.AST]]:
    """(path relative to src/kvlab, its syntax tree) of every module outside rundir/."""
    return [(str(p.relative_to(SRC)), ast.parse(p.read_text(encoding="utf-8")))
            for p in sorted(SRC.rglob("*.py")) if RUNDIR not in p.parents]


def spelled(tree: ast.AST) -> set[str]:
    """The run-file names a module writes as string constants."""
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in NAMES}


def opened(tree: ast.AST) -> list[str]:
    """Each read or write of a run file through a RunDir path: ``x.records_path.open()``,
    ``x.report_path.write_text(...)``, ``open(x.manifest_path)``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        method = isinstance(f, ast.Attribute) and f.attr in OPENERS \
            and isinstance(f.value, ast.Attribute) and f.value.attr in RUN_PATHS
        builtin = isinstance(f, ast.Name) and f.id == "open" and any(
            isinstance(a, ast.Attribute) and a.attr in RUN_PATHS for a in node.args)
        if method or builtin:
            found.append(f"{ast.unparse(node)}:{node.lineno}")
    return found


def test_every_run_file_has_one_name() -> None:
    assert len(NAMES) == 12 and "evaluation.json" in NAMES and "gauges.jsonl" in NAMES
    assert "ab.json" in NAMES and "process_memory.jsonl" in NAMES
    assert {"records_path", "manifest_path", "evaluation_path", "prepared_path",
            "gauges_path", "memory_path", "experiment_path"} <= RUN_PATHS


def test_no_module_outside_rundir_spells_a_run_file_name() -> None:
    assert {rel: sorted(names) for rel, tree in outside() if (names := spelled(tree))} == {}
    inside = {str(p.relative_to(SRC)): spelled(ast.parse(p.read_text(encoding="utf-8")))
              for p in sorted(RUNDIR.glob("*.py")) if p.name != "files.py"}
    assert {rel: sorted(names) for rel, names in inside.items() if names} == {}


def test_only_rundir_imports_the_names() -> None:
    found = []
    for rel, tree in outside():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = {f"{node.module}.{a.name}" for a in node.names} | {node.module or ""}
            elif isinstance(node, ast.Import):
                names = {a.name for a in node.names}
            else:
                continue
            if "kvlab.rundir.files" in names:
                found.append(f"{rel}:{node.lineno}")
    assert found == []


def test_no_module_outside_rundir_opens_a_run_file() -> None:
    assert {rel: hits for rel, tree in outside() if (hits := opened(tree))} == {}


def test_the_checks_catch_what_they_look_for() -> None:
    """Each check finds its offence in a made-up module (so none passes by finding
    nothing to look at)."""
    tree = ast.parse('run.report_path.write_text("x")\nopen(run.records_path)\n'
                     'name = "records.jsonl"\n')
    assert len(opened(tree)) == 2
    assert spelled(tree) == {"records.jsonl"}
