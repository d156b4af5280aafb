"""Parses `accuracy.json` (result of an accuracy check: the first diverging node on a mismatch) through the
format package, which owns its fields."""
from __future__ import annotations

from lens_format.accuracy import AccuracyReport, read_accuracy

parse_accuracy = read_accuracy
__all__ = ["AccuracyReport", "parse_accuracy"]
