"""Parses `accuracy.json` (result of an accuracy check: the first diverging node on a mismatch)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .json_contract import SourceRef, as_float, as_int, as_str, parse_source_ref, read_json_object


@dataclass
class AccuracyReport:
    path: Path
    graph_id: str
    status: str  # ok | mismatch
    node: str
    target: str
    readable_line: int | None
    kernel: str
    source: SourceRef | None
    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None
    rtol: float | None
    summary: str = ""  # the compiler's words for the failure (which tolerance, how many elements, the worst)


def parse_accuracy(path: Path) -> AccuracyReport:
    data = read_json_object(path)
    return AccuracyReport(
        path, as_str(data.get("graph_id")), as_str(data.get("status"), "ok"), as_str(data.get("node")),
        as_str(data.get("target")), as_int(data.get("readable_line")), as_str(data.get("kernel")),
        parse_source_ref(data.get("source")), as_float(data.get("max_abs_error")),
        as_float(data.get("max_rel_error")), as_float(data.get("atol")), as_float(data.get("rtol")),
        as_str(data.get("summary")))
