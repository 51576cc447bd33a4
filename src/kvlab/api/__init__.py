"""API dialects: what each HTTP API kvlab speaks means, one object per API.

:mod:`kvlab.api.dialects` is the registry (``ApiKind`` and the dialect of each);
:mod:`kvlab.api.dialect` the interface every dialect meets; one module per dialect
(:mod:`~kvlab.api.llamacpp`, :mod:`~kvlab.api.openai_chat`,
:mod:`~kvlab.api.openai_completion`, :mod:`~kvlab.api.openai_responses`,
:mod:`~kvlab.api.anthropic_messages`, :mod:`~kvlab.api.openai_embeddings`), and what
names an answer of the wrong API (:mod:`~kvlab.api.sniff`). The benchmark client,
prompt sizing, calibration, ``kvlab serve`` and the synthetic server all go through it,
so this package imports nothing else of kvlab.
"""
