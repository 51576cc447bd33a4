"""kvlab: understand and measure LLM inference.

Parts: ``kvlab.engine`` (reference transformer with an explicit KV cache),
``kvlab.memory`` (KV-cache byte accounting), ``kvlab.serve`` (embedded HTTP server over
the engine), ``kvlab.servers`` (launch and stop real servers), and the benchmark
harness along its data path: ``kvlab.bench`` (sending load), ``kvlab.records`` (the raw
facts), ``kvlab.analysis`` (judging them), ``kvlab.store`` (a run directory),
``kvlab.report`` (rendering) and ``kvlab.run`` (running an experiment, on top).
CONTRIBUTING.md's layout table says what each may import.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
