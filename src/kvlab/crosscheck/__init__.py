"""kvlab beside the peers' own clients: their environments and the cross-check.

GuideLLM, AIPerf and vLLM's ``bench serve`` are installed in environments of their own
(:mod:`.envs`, ``kvlab peers setup``), never in kvlab's. The cross-check
(:mod:`.rounds`, ``kvlab peers crosscheck``) has all four clients, kvlab's included,
measure the synthetic server on one known schedule, in rounds, and states each one's
TTFT and ITL error against that schedule (:mod:`.accuracy`); each peer's result file is
read back by :mod:`kvlab.peers` and checked against what the peer printed.
"""
