"""``evaluation.json`` on disk: written whole, read back as the current layout's data.

:func:`kvlab.analysis.evaluate.evaluate` makes the data (``Evaluation.to_json``) and
:class:`kvlab.analysis.evaluation_file.StoredEvaluation` types what
:func:`read_evaluation` returns. Files of every schema version on disk read:
:func:`migrate` brings an older layout to the current one, and is the one place that
tolerates a missing key.
"""

from __future__ import annotations

import json
from pathlib import Path

from kvlab.errors import ConfigError

JsonObject = dict[str, object]
_NO_COUNT: JsonObject = {"valid": 0, "measured": 0, "refused": {}, "flags": []}


class EvaluationFileError(ConfigError):
    """An evaluation.json that does not read (a hand edit, a cut copy)."""


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _dict(value: object) -> JsonObject:
    return dict(value) if isinstance(value, dict) else {}


def migrate(data: JsonObject) -> JsonObject:
    """``data`` (evaluation.json of any version) in the current layout. Version 1
    (no ``schema_version``) kept no "n valid of m" counts: they read as 0 of 0 (its load
    figures counted refused rows). Keys added within a version default to empty."""
    out = dict(data)
    version = data.get("schema_version")
    out["schema_version"] = (int(version) if isinstance(version, int | float | str)
                             and version else 1)
    for key in ("summaries", "load", "comparisons", "violations", "prefix_reuse"):
        out[key] = _list(data.get(key))
    out["valid"] = data.get("valid") or _NO_COUNT
    out["counts"] = _dict(data.get("counts"))
    out["run_id"], out["experiment"] = data.get("run_id") or "", data.get("experiment") or ""
    out["summaries"] = [{"valid": _NO_COUNT, "mean_intervals": {}, **_dict(s)}
                        for s in _list(out["summaries"])]
    out["load"] = [{"count": _NO_COUNT, "slo": {}, **_dict(p)} for p in _list(out["load"])]
    pairs = _list(_dict(data.get("intervals")).get("pairs"))
    out["intervals"] = {"pairs": [{"count_a": _NO_COUNT, "count_b": _NO_COUNT, **_dict(p)}
                                  for p in pairs]}
    out["comparisons"] = [{"reasons": [], "load": None, **_dict(c), "metrics": {
        name: {"interval": None, "verdict": None, **_dict(m)}
        for name, m in _dict(_dict(c).get("metrics")).items()}}
        for c in _list(out["comparisons"])]
    out["violations"] = [{"other_mode": None, "load": None, "detail": "", **_dict(v)}
                         for v in _list(out["violations"])]
    return out


def read_evaluation(path: Path) -> JsonObject:
    """The evaluation.json at ``path``, migrated to the current layout;
    EvaluationFileError (one line) when it is missing or not a JSON object."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        return migrate(data)
    except OSError as exc:
        raise EvaluationFileError(f"{path}: cannot read it ({exc.strerror})") from None
    except (ValueError, TypeError) as exc:
        raise unreadable(path, exc) from None


def unreadable(path: Path, exc: Exception) -> EvaluationFileError:
    """The one line for an evaluation.json whose data does not read as the current
    layout (``exc``: what failed, naming the key)."""
    return EvaluationFileError(f"{path}: not an evaluation.json this kvlab reads "
                               f"({type(exc).__name__}: {exc}); rerun kvlab evaluate on "
                               "the run")


def write_evaluation(path: Path, data: JsonObject) -> None:
    """Write evaluation.json's ``data`` (indented, in its key order)."""
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
