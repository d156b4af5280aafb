"""accuracy.json through the format package: what the compiler writes is what the server reads."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lens_format.accuracy import AccuracyReport, read_accuracy
from lens_format.errors import ParseError, UnsupportedVersionError
from lens_format.jsonio import SourceRef


def _mismatch() -> AccuracyReport:
    return AccuracyReport("graph_0", "mismatch", 1e-4, 1e-4, "neg", "aten.neg.default", 4,
                          "cpp_fused_neg_0", SourceRef("/w/foo1.py", 5, "foo1", "a = torch.neg(x1)"),
                          250.0, None, 32, 32, "atol",
                          {"index": [2, 2], "expected": 0.0, "got": 250.0, "abs_error": 250.0, "rel_error": None},
                          None, "32 of 32 element(s) ...")


def test_a_report_reads_back_as_written(tmp_path: Path):
    for report in (_mismatch(), AccuracyReport("graph_1", "ok", 1e-4, 1e-4)):
        path = tmp_path / "accuracy.json"
        path.write_text(json.dumps(report.to_json()))
        read = read_accuracy(path)
        assert read == report and read.path == path


def test_an_ok_report_carries_no_node_fields_and_null_rel_error_stays_null():
    assert set(AccuracyReport("g", "ok", 1e-4, 1e-4).to_json()) == {"version", "graph_id", "status", "atol", "rtol"}
    data = _mismatch().to_json()
    assert data["max_rel_error"] is None and data["source"]["line"] == 5 and data["version"] == 1


def test_bad_files_raise_parse_errors_naming_the_file(tmp_path: Path):
    path = tmp_path / "accuracy.json"
    path.write_text('{"version": 1, "status": "mism')  # cut short while written
    with pytest.raises(ParseError, match=r"accuracy.json:1: invalid JSON"):
        read_accuracy(path)
    path.write_text(json.dumps({"version": 2, "status": "ok"}))
    with pytest.raises(UnsupportedVersionError, match="unsupported version 2"):
        read_accuracy(path)
    path.write_text(json.dumps({"version": 1, "status": 3, "max_abs_error": "big", "worst": [1]}))
    read = read_accuracy(path)  # wrong types are dropped field by field, never raised
    assert (read.status, read.max_abs_error, read.worst) == ("ok", None, None)
