"""The reference engine: a small causal transformer with an explicit KV cache."""
