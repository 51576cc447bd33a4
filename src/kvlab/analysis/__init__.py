"""Judging the numbers: validation, metrics, statistics, the one summary view, evaluation.json."""
