"""Preflight: host facts, GPU parsing, and refusing an experiment that needs more GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kvlab.servers.preflight import Gpu, parse_nvidia_smi, run_preflight, visible_gpus
from tests.experiments import experiment, llamacpp

SMI = """\
NVIDIA H100 80GB HBM3, 81559 MiB, GPU-1111aaaa-0000-0000-0000-000000000000
NVIDIA H100 80GB HBM3, 81559 MiB, GPU-2222bbbb-0000-0000-0000-000000000000
"""


def test_parse_nvidia_smi_rows() -> None:
    gpus = parse_nvidia_smi(SMI)
    assert gpus[1] == Gpu(1, "NVIDIA H100 80GB HBM3", "81559 MiB",
                          "GPU-2222bbbb-0000-0000-0000-000000000000")


def test_cuda_visible_devices_filters_by_index_or_uuid() -> None:
    gpus = parse_nvidia_smi(SMI)
    assert [g.index for g in visible_gpus(gpus, "1")] == [1]
    assert [g.index for g in visible_gpus(gpus, "GPU-1111aaaa")] == [0]
    assert visible_gpus(gpus, "") == []
    assert len(visible_gpus(gpus, None)) == 2


def test_host_facts_are_collected() -> None:
    report = run_preflight(smoke=False)
    assert report.host.logical_cpus >= 1 and report.host.cpu_model
    assert report.to_json()["host"]["gpu_query"]




def test_experiment_needing_more_gpus_than_visible_is_refused(tmp_path: Path) -> None:
    path = experiment("needs-two", llamacpp("dual", gpus=64),
                      workload=dict(queries=2, capacities=[512])).write(tmp_path, "exp.toml")
    done = subprocess.run([sys.executable, "-m", "kvlab", "preflight", "--no-smoke", str(path)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 2
    assert "needs 64 distinct GPU(s) but" in done.stderr and "seen:" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "GPUs" in done.stdout  # the facts table is printed too


def test_cpu_flags_keep_the_simd_sets_in_a_fixed_order() -> None:
    from kvlab.servers.preflight import cpu_flags

    x86 = "processor\t: 0\nflags\t\t: fpu avx2 sse4_2 avx512f fma pni amx_tile\n"
    assert cpu_flags(x86) == ["sse4_2", "avx2", "fma", "avx512f", "amx_tile"]
    arm = "processor\t: 0\nFeatures\t: fp asimd asimddp sve i8mm\n"
    assert cpu_flags(arm) == ["asimd", "asimddp", "sve", "i8mm"]
    assert cpu_flags("processor\t: 0\n") is None
