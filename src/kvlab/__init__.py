"""kvlab: understand and measure LLM inference.

Parts: ``kvlab.engine`` (reference transformer with an explicit KV cache),
``kvlab.memory`` (KV-cache byte accounting), ``kvlab.bench`` (benchmark harness),
``kvlab.serve`` (embedded HTTP server over the engine), ``kvlab.servers`` (launch and
stop real servers).
"""

__version__ = "0.1.0"
