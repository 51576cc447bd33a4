"""Every third-party module src/kvlab imports is declared in pyproject.toml: in the base
dependencies, or in the extra of the part that imports it.

Imports are read from the source (function-level ones included); a module is mapped to
the distribution that installs it with ``importlib.metadata.packages_distributions``
(so this test needs the full test environment, where every extra is installed).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from kvlab.cli.extras import ENGINE_MODULES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "kvlab"

# The parts that may import an extra's packages (path under src/kvlab -> extras): the
# commands that use them ask for the extra by name (kvlab.cli.extras for the engine).
# Everything else may import the base dependencies only.
EXTRAS_BY_PATH = {
    "engine/": {"engine"},
    "studies/": {"engine"},
    "serve/": {"engine"},  # kvlab serve; serve-synthetic's modules import none of it
    "cli/engine_cmds.py": {"engine"},
    "cli/speed_cmds.py": {"engine"},
    "cli/profile_cmd.py": {"engine"},
    "bench/plan/sizing.py": {"engine"},  # a GGUF's vocabulary read by Transformers
    "bench/workers/ray_pool.py": {"ray"},
    "servers/binary.py": {"llamacpp"},
    "servers/fetch.py": {"llamacpp"},
}
# Modules that run in another environment than kvlab's, and where their imports come from.
ELSEWHERE = {
    "servers/gguf_to_hf.py": "vLLM's own environment (kvlab.servers.vllm_env installs it)",
}


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(specs: list[str]) -> set[str]:
    return {normalize(re.match(r"[A-Za-z0-9._-]+", spec).group(0)) for spec in specs}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(base dependencies, extra -> its dependencies), names normalized."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {extra: requirement_names(specs)
              for extra, specs in project["optional-dependencies"].items()}
    return requirement_names(project["dependencies"]), extras


def third_party_imports(path: Path) -> dict[str, int]:
    """Top-level third-party module -> first line importing it, in ``path``."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top != "kvlab" and top not in sys.stdlib_module_names:
                found.setdefault(top, node.lineno)
    return found


def extras_of(relative: str) -> set[str]:
    return set().union(*(extras for prefix, extras in EXTRAS_BY_PATH.items()
                         if relative.startswith(prefix)))


def test_every_import_is_declared_where_it_is_used() -> None:
    base, extras = declared()
    distributions = packages_distributions()
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative in ELSEWHERE:
            continue
        allowed = base.union(*(extras[e] for e in extras_of(relative)))
        for module, line in third_party_imports(path).items():
            dists = {normalize(d) for d in distributions.get(module, [])}
            if not dists & allowed:
                where = sorted(e for e, names in extras.items() if dists & names)
                wrong.append(f"src/kvlab/{relative}:{line} imports {module} "
                             f"({', '.join(sorted(dists)) or 'not installed'}), declared "
                             f"{'in ' + ', '.join(where) if where else 'nowhere'}")
    assert not wrong, "imports not declared for the part that uses them:\n" + "\n".join(wrong)


def test_the_table_names_real_paths_and_extras() -> None:
    _, extras = declared()
    for prefix, names in EXTRAS_BY_PATH.items():
        assert (SRC / prefix).exists(), prefix
        assert names <= set(extras), names
    for relative in ELSEWHERE:
        assert (SRC / relative).is_file(), relative


def test_the_engine_check_names_the_engine_extra_exactly() -> None:
    """kvlab.cli.extras.ENGINE_MODULES (what an engine command looks for) are the
    modules of the engine extra's distributions: one at least of each, none other."""
    _, extras = declared()
    distributions = packages_distributions()
    owners = {module: {normalize(d) for d in distributions.get(module, [])}
              for module in ENGINE_MODULES}
    assert all(owners[m] & extras["engine"] for m in ENGINE_MODULES), owners
    assert set().union(*owners.values()) >= extras["engine"], owners
    # and none of them is a base dependency: a plain install would not miss it
    base, _ = declared()
    assert not set().union(*owners.values()) & base


def test_the_harness_needs_none_of_the_engine_extra() -> None:
    """The base dependencies and the engine extra share nothing, and torch and
    Transformers are in the engine extra only."""
    base, extras = declared()
    assert {"torch", "transformers"} <= extras["engine"]
    assert not base & extras["engine"]
