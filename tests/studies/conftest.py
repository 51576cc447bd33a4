"""Studies run torch on one thread, as the engine's tests do (tests/engine/conftest.py);
the real Gemma 3 270M fixtures come from tests/conftest.py."""

from tests.engine.conftest import _one_thread  # noqa: F401  (autouse: one torch thread)
