"""The output half's census (issue 38), the same command before and after a change.

    python tools/output_half_census.py [--json]

Prints, for the tree it sits in:

- the import table: each unit of CONTRIBUTING.md's layer table with the units it may
  import, and the top-level packages each package actually imports (from the sources);
- package sizes: lines per top-level package of src/kvlab (a module counts as its own
  package: ``records.py`` -> ``records``);
- ``.get("literal")`` reads: every ``.get("...")`` call with a string literal key, per
  module that reads run-directory data (every module of rundir/, and those that read
  evaluation.json, manifest.json or prepared.json back), and in all of src/kvlab; the
  figure issue 38's bar asks for is the readers' count outside migration code (the
  lines of a function named ``migrate``), each remaining read listed with its line;
- run-file names written as literals outside the module that defines them;
- ``Any`` mentions in src/ (lines holding the word, and occurrences);
- the parameter count of ``analysis/evaluate.py:evaluate``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kvlab"
sys.path.insert(0, str(ROOT))

from tests.test_layout import imported, read_rules  # noqa: E402  (the layout test's reader)

#: modules that read a run directory's data back (evaluation, manifest, prepared prompts),
#: besides every module of rundir/ (the package of a run's files) and of store/ (before
#: it moved there, store/ held the files' reader and writer)
RUN_READERS = (
    "report/results_page.py", "report/results_runs.py", "report/results_steps.py",
    "history/facts.py", "report/across_runs.py", "report/results_peers.py",
    "history/ingest.py", "report/compare_runs.py", "report/manifest.py", "report/html.py",
    "report/csv_export.py", "analysis/evaluation_file.py", "analysis/knee_check.py",
    "records.py",
    # the report sections that read manifest.json's data (a dict before ReportInput.state
    # typed it), and the command that prints prepared.json's sizing
    "report/protocol.py", "report/kv_check.py", "report/workers.py", "report/prompts.py",
    "report/section.py", "cli/bench_cmds.py",
    # prepared.json's readers before they moved into rundir/
    "bench/plan/workload.py", "bench/plan/sessions/turn.py",
    # the manifest's server facts: its KV budget and its counters' names, and the run
    # view that reads them
    "memory/served.py", "metric_names.py", "analysis/run_view.py",
)
READER_PACKAGES = ("rundir/", "store/")
#: the files of a run directory (rundir/files.py defines them once)
RUN_FILES = ("experiment.toml", "manifest.json", "prepared.json", "records.jsonl",
             "gauges.jsonl", "process_memory.jsonl", "evaluation.json", "report.md",
             "report.html", "records.csv", "summaries.csv", "ab.json")
NAMES_MODULES = ("rundir/files.py", "store/files.py")  # after and before the move
GET_LITERAL = re.compile(r"""\.get\(\s*["'][^"']*["']""")


def package(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0].removesuffix(".py")


def modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def import_table() -> dict[str, object]:
    rules = read_rules()
    actual: dict[str, set[str]] = defaultdict(set)
    for path in modules():
        own = package(path)
        for module, _ in imported(path):
            parts = module.split(".")
            if len(parts) > 1 and parts[1] not in (own, "errors"):
                actual[own].add(parts[1])
    return {"table": {u: sorted(m) if m is not None else "anything"
                      for u, m in rules.items()},
            "actual": {p: sorted(m) for p, m in sorted(actual.items())}}


def sizes() -> dict[str, int]:
    lines: Counter[str] = Counter()
    for path in modules():
        lines[package(path)] += len(path.read_text(encoding="utf-8").splitlines())
    return dict(sorted(lines.items()))


def migration_lines(text: str) -> set[int]:
    """The line numbers of every function named ``migrate`` (an older file's layout
    brought to the current one: the one place a missing key is expected)."""
    return {n for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef) and node.name == "migrate"
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)}


def get_literals() -> dict[str, object]:
    per: dict[str, int] = {}
    migration: dict[str, int] = {}
    outside: list[str] = []  # each reader's read outside migration code, with its line
    total = 0
    for path in modules():
        text = path.read_text(encoding="utf-8")
        total += len(GET_LITERAL.findall(text))
        rel = str(path.relative_to(SRC))
        if rel not in RUN_READERS and not rel.startswith(READER_PACKAGES):
            continue
        hits = [i for i, line in enumerate(text.splitlines(), start=1)
                for _ in GET_LITERAL.findall(line)]
        per[rel] = len(hits)
        migrating = migration_lines(text)
        migration[rel] = sum(i in migrating for i in hits)
        lines = text.splitlines()
        outside += [f"{rel}:{i}: {lines[i - 1].strip()}" for i in hits if i not in migrating]
    return {"run_readers": per, "run_readers_total": sum(per.values()),
            "in_migration": sum(migration.values()),
            "outside_migration": len(outside), "outside_migration_reads": outside,
            "all_src": total}


def literal_file_names() -> dict[str, list[str]]:
    """Each run-file name written as a string constant outside the module naming them."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in modules():
        rel = str(path.relative_to(SRC))
        if rel in NAMES_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in RUN_FILES:
                found[rel].append(f"{node.value}:{node.lineno}")
    return dict(sorted(found.items()))


def any_mentions() -> dict[str, int]:
    lines = occurrences = 0
    for path in sorted((ROOT / "src").rglob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            n = len(re.findall(r"\bAny\b", line))
            lines += n > 0
            occurrences += n
    return {"lines": lines, "occurrences": occurrences}


def evaluate_parameters() -> int:
    tree = ast.parse((SRC / "analysis" / "evaluate.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "evaluate":
            a = node.args
            return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
    raise SystemExit("analysis/evaluate.py has no evaluate()")


def census() -> dict[str, object]:
    return {"import_table": import_table(), "package_lines": sizes(),
            "get_literal": get_literals(), "literal_run_file_names": literal_file_names(),
            "any_in_src": any_mentions(), "evaluate_parameters": evaluate_parameters()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON document")
    data = census()
    if parser.parse_args().json:
        print(json.dumps(data, indent=1))
        return
    table = data["import_table"]
    assert isinstance(table, dict)
    print("import table (CONTRIBUTING.md: unit -> may import)")
    for unit, may in table["table"].items():
        print(f"  {unit:16} {may if isinstance(may, str) else ', '.join(may) or '-'}")
    print("imports found (package -> packages)")
    for pkg, used in table["actual"].items():
        print(f"  {pkg:16} {', '.join(used)}")
    print("lines per package")
    for pkg, n in data["package_lines"].items():  # type: ignore[attr-defined]
        print(f"  {pkg:16} {n}")
    gets = data["get_literal"]
    assert isinstance(gets, dict)
    print('.get("literal") in run-file readers')
    for rel, n in gets["run_readers"].items():
        print(f"  {rel:28} {n}")
    print(f"  {'total (readers)':28} {gets['run_readers_total']}")
    print(f"  {'in migration code':28} {gets['in_migration']}")
    print(f"  {'outside migration (the bar)':28} {gets['outside_migration']}")
    for read in gets["outside_migration_reads"]:
        print(f"    {read}")
    print(f"  {'total (all src/kvlab)':28} {gets['all_src']}")
    names = data["literal_run_file_names"]
    assert isinstance(names, dict)
    print(f"run-file names as literals outside {' / '.join(NAMES_MODULES)}: "
          f"{sum(len(v) for v in names.values())} in {len(names)} modules")
    for rel, hits in names.items():
        print(f"  {rel:28} {' '.join(hits)}")
    anys = data["any_in_src"]
    assert isinstance(anys, dict)
    print(f"Any in src/: {anys['lines']} lines, {anys['occurrences']} occurrences")
    print(f"evaluate() parameters: {data['evaluate_parameters']}")


if __name__ == "__main__":
    main()
