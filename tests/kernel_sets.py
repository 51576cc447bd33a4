"""The numerics tests under every CPU kernel set this machine can run (`make test`).

Another CPU makes torch pick other kernels, and other kernels round otherwise: the
last newcomer's Intel AVX-512 machine failed a float tolerance that passed here. So
after the full suite (run once, with torch's own choice), `make test` reruns the
tests marked ``numerics`` (equality up to rounding, see tests/rounding.py) under:

- every ``ATEN_CPU_CAPABILITY`` below the best this CPU supports (``default``,
  ``avx2``; the full run already used the best one), so ATen's vectorized kernels
  (softmax, norms, reductions) run in each width a CPU may pick;
- ``MKL_CBWR=COMPATIBLE`` where torch's BLAS is MKL: MKL's code path for matrix
  products depends on the CPU (Intel or not, AVX-512 or not) and cannot be forced to
  another CPU's path, but its compatible path sums in another order too.

    python -m tests.kernel_sets            # list the sets
    python -m tests.kernel_sets --run      # run the numerics tests under each
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

# x86-64 ATen kernel sets in increasing order; torch runs any set up to the best one.
LADDER = ("default", "avx2", "avx512")


def kernel_sets() -> list[dict[str, str]]:
    """Environment overrides, one dict per set to rerun (the best set, torch's own
    choice, is the full suite's)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR")}
    probe = ("import torch; print(torch.backends.cpu.get_cpu_capability().lower(), "
             "torch.backends.mkl.is_available())")
    best, mkl = subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                               capture_output=True, text=True).stdout.split()
    below = LADDER[: LADDER.index(best)] if best in LADDER else ()
    sets = [{"ATEN_CPU_CAPABILITY": name} for name in below]
    if mkl == "True":
        sets.append({"MKL_CBWR": "COMPATIBLE"})
    return sets


def run(pytest_args: list[str]) -> int:
    """pytest -m numerics under each set; the first failure's exit status, else 0."""
    for overrides in kernel_sets():
        label = " ".join(f"{k}={v}" for k, v in overrides.items())
        print(f"\n== numerics tests under {label}", flush=True)
        start = time.monotonic()
        status = subprocess.call([sys.executable, "-m", "pytest", "-m", "numerics", "-q",
                                  *pytest_args], env={**os.environ, **overrides})
        print(f"== {label}: exit {status} in {time.monotonic() - start:.0f} s", flush=True)
        if status:
            return status
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--run"]:
        sys.exit(run(sys.argv[2:]))
    for overrides in kernel_sets():
        print(" ".join(f"{k}={v}" for k, v in overrides.items()))
