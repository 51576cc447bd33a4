"""No module outside src/kvlab/servers/ decides anything by comparing a server kind's
name (issue 38: a new kind must not be skipped without a word by code that lists the
old ones). The kinds are read from the registry, so a new kind is covered at once."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

from kvlab.servers import kinds

SRC = Path(kinds.__file__).resolve().parents[1]
KINDS = {typing.get_args(c.model_fields["kind"].annotation)[0]
         for c in typing.get_args(typing.get_args(kinds.ServerSettingsUnion)[0])}
NAMES = KINDS | {"kvlab"}  # memory.served's old name for the embedded kind
# Comparisons that name something else spelled like a kind: --numerics llamacpp is
# llama.cpp's CPU arithmetic (engine-check); kvlab beside the peers is a client and a
# definition set; vllm among the peers is `vllm bench serve`'s result file.
NOT_KINDS = {("cli/engine_cmds.py", "llamacpp"), ("analysis/definition_cells.py", "kvlab"),
             ("bench/calibrate/check.py", "kvlab"), ("peers/__init__.py", "vllm")}


def _names(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names(e) for e in node.elts))
    return set()


def compared(path: Path) -> set[tuple[int, str]]:
    """(line, name) of each ``==``, ``!=``, ``in`` or ``not in`` with a kind's name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
            for side in (node.left, *node.comparators):
                found |= {(node.lineno, n) for n in _names(side) & NAMES}
    return found


def test_the_registry_lists_every_kind() -> None:
    assert {"embedded", "llamacpp", "vllm", "external"} <= KINDS  # and any kind added


def test_the_check_sees_a_comparison(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('if mode.server == "vllm" or kind in ("embedded", "x"):\n    pass\n')
    assert compared(probe) == {(1, "vllm"), (1, "embedded")}


def test_no_module_outside_servers_compares_a_kind_name() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if rel.startswith("servers/"):
            continue
        hits = {(line, name) for line, name in compared(path) if (rel, name) not in NOT_KINDS}
        if hits:
            found[rel] = sorted(hits)
    assert found == {}
