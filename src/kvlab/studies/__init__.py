"""Studies of the reference engine: what it is checked and measured against.

The engine (:mod:`kvlab.engine`) computes; these modules put it beside something else
and keep the figures. Proofs that cached generation equals recomputation (prove), its
logits against Transformers' (reference) and its tokens against llama-server's
(agreement, with llama.cpp's CPU numerics emulated: llamacpp_numerics); naive against
cached timing (timing, and kv-bench's files: bench_files), tokens/s beside Transformers
and llama-server (speed), the decode step's roofline (roofline), and the KV bytes of
real tensors against the formula (kv_measure). They may use the servers and the
workload's prompts; the engine itself uses neither.
"""
