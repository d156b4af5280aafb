"""`accuracy.json`: the result of an accuracy check of one graph (the first diverging node on a mismatch)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import (SourceRef, as_float, as_int, as_str, parse_source_ref, read_json_object,
                                source_ref_json)

VERSION = 1


@dataclass
class AccuracyReport:
    graph_id: str
    status: str  # ok | mismatch
    atol: float | None
    rtol: float | None
    node: str = ""  # the first diverging FX node ("" when none was found or the graph matched)
    target: str = ""
    readable_line: int | None = None
    kernel: str = ""
    source: SourceRef | None = None
    max_abs_error: float | None = None
    # null when no failing element has |expected| > atol (relative error judged as assert_close judges it)
    max_rel_error: float | None = None
    mismatched_elements: int | None = None
    elements: int | None = None
    failed_tolerance: str = ""  # atol | rtol | both | exact | infinity | "" (a structural difference)
    worst: dict[str, Any] | None = None  # index, expected, got, abs_error, rel_error
    output: int | None = None  # which element of a list of outputs differs
    summary: str = ""  # the sentence the CLI prints and the editor shows
    path: Path | None = field(default=None, compare=False)  # where it was read from

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": VERSION, "graph_id": self.graph_id, "status": self.status,
                                "atol": self.atol, "rtol": self.rtol}
        if self.status != "mismatch":
            return data
        data.update({"node": self.node or None, "target": self.target or None,
                     "readable_line": self.readable_line, "kernel": self.kernel or None,
                     "source": source_ref_json(self.source), "max_abs_error": self.max_abs_error,
                     "max_rel_error": self.max_rel_error, "mismatched_elements": self.mismatched_elements,
                     "elements": self.elements, "failed_tolerance": self.failed_tolerance, "worst": self.worst,
                     "output": self.output, "summary": self.summary})
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path | None = None) -> AccuracyReport:
        worst = data.get("worst")
        return cls(as_str(data.get("graph_id")), as_str(data.get("status"), "ok"), as_float(data.get("atol")),
                   as_float(data.get("rtol")), as_str(data.get("node")), as_str(data.get("target")),
                   as_int(data.get("readable_line")), as_str(data.get("kernel")),
                   parse_source_ref(data.get("source")), as_float(data.get("max_abs_error")),
                   as_float(data.get("max_rel_error")), as_int(data.get("mismatched_elements")),
                   as_int(data.get("elements")), as_str(data.get("failed_tolerance")),
                   worst if isinstance(worst, dict) else None, as_int(data.get("output")),
                   as_str(data.get("summary")), path)


def read_accuracy(path: Path) -> AccuracyReport:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not accuracy.json."""
    return AccuracyReport.from_json(read_json_object(path), path)
