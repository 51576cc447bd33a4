"""Studies of the reference engine: what it is checked and measured against.

The engine (:mod:`kvlab.engine`) computes; these modules put it beside something else
and keep the figures, each behind one command (docs: Studies). Proofs that cached
generation equals recomputation (prove: :func:`run_proof`, ``kvlab prove``); its logits
against Transformers' (reference) and its tokens against llama-server's (agreement:
:func:`run_agreement`, with llama.cpp's CPU numerics emulated: llamacpp_numerics;
``kvlab engine-check``); naive against cached timing (timing: :func:`run_kv_bench`, and
kv-bench's files: bench_files; ``kvlab kv-bench``); tokens/s beside Transformers and
llama-server (speed, ``kvlab engine-speed``); the decode step's roofline (roofline,
``kvlab engine-batch``) and its phases (step_profile: :func:`profile_steps`,
``kvlab engine-profile``); and the KV bytes of real tensors against the formula
(kv_measure: :func:`measure_kv_bytes`, ``kvlab memory --measure``). They may use the
servers and the workload's prompts; the engine itself uses neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvlab.studies.agreement import run_agreement
    from kvlab.studies.kv_measure import measure_kv_bytes
    from kvlab.studies.prove import run_proof
    from kvlab.studies.step_profile import profile_steps
    from kvlab.studies.timing import BenchSettings, run_kv_bench

__all__ = [
    "BenchSettings",
    "measure_kv_bytes",
    "profile_steps",
    "run_agreement",
    "run_kv_bench",
    "run_proof",
]

# Each name's module, imported on first use: importing one module of the package
# never imports its siblings (nor the libraries they need).
_HOMES = {
    "run_agreement": "kvlab.studies.agreement",
    "measure_kv_bytes": "kvlab.studies.kv_measure",
    "run_proof": "kvlab.studies.prove",
    "profile_steps": "kvlab.studies.step_profile",
    "BenchSettings": "kvlab.studies.timing",
    "run_kv_bench": "kvlab.studies.timing",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_HOMES[name]), name)
