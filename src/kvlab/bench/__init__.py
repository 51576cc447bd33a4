"""Sending load, the harness's middle layer: plan/ (what to send), client/ (HTTP),
workers/ (load beyond one process), drivers/ (what sends a run's requests), calibrate/
(checking the client itself). The records it makes are :mod:`kvlab.records`; judging
them is :mod:`kvlab.analysis`, running an experiment :mod:`kvlab.run`. See
CONTRIBUTING.md for what each folder may import."""

__all__ = ["calibrate", "client", "drivers", "plan", "workers"]
