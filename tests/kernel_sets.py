"""The CPU kernel sets torch can run here, one per line, for `make test`'s numerics
sweep: every ``ATEN_CPU_CAPABILITY`` up to the best this CPU supports.

Another CPU makes torch pick other kernels, and other kernels round otherwise; running
the equality-up-to-rounding tests (marker ``numerics``) under each set this machine
can run is how CI sees what a newcomer's CPU will pick.

    python -m tests.kernel_sets        # e.g. "default avx2 avx512"
"""

from __future__ import annotations

import os

# x86-64 kernel sets in increasing order; torch runs any set up to the best one.
LADDER = ("default", "avx2", "avx512")


def kernel_sets() -> list[str]:
    """The sets up to the best this CPU supports (ATEN_CPU_CAPABILITY ignored)."""
    os.environ.pop("ATEN_CPU_CAPABILITY", None)
    import torch

    best = torch.backends.cpu.get_cpu_capability().lower()  # e.g. "AVX512"
    if best not in LADDER:  # another architecture (e.g. ARM's SVE): its default only
        return ["default"]
    return list(LADDER[: LADDER.index(best) + 1])


if __name__ == "__main__":
    print(" ".join(kernel_sets()))
