"""compile_error.json through the format package: lens's and real Inductor's failures read back as written."""
from __future__ import annotations

import json
from pathlib import Path

from lens_format.compile_error import CompileDiagnostic, CompileError, read_compile_error
from lens_format.jsonio import SourceRef


def test_a_failure_reads_back_as_written_with_g_plus_plus_levels(tmp_path: Path):
    error = CompileDiagnostic("error", "no matching function", "/c/x.cpp", 24, 58, 40, "cpp_fused_neg_0", ["neg"],
                              SourceRef("/w/foo1.py", 5, "foo1", "a = torch.neg(x1)"))
    note = CompileDiagnostic("note", "candidate: template", "/c/x.cpp", 3, 1, None, "", [], None)
    for record in (CompileError("graph_0", "g++ x.cpp", [error, note], "x" * 30000),
                   CompileError("model__0_inference_0.0", "g++ y.cpp", [error], backend="inductor")):
        path = tmp_path / "compile_error.json"
        path.write_text(json.dumps(record.to_json()))
        read = read_compile_error(path)
        assert read.diagnostics == record.diagnostics and read.backend == record.backend
        assert len(read.stderr) == min(len(record.stderr), 20000)  # the tail of g++'s output only
        assert read.first_error() == error and read.path == path
    assert note.to_json()["kernel"] is None and note.to_json()["source"] is None  # nulls where nothing is known


def test_unusable_entries_are_dropped_not_raised(tmp_path: Path):
    path = tmp_path / "compile_error.json"
    path.write_text(json.dumps({"version": 1, "graph_id": "g", "diagnostics": [
        "not an object", {"cpp_line": "24", "nodes": ["a", 3], "source": {"file": "x.py"}}]}))
    (d,) = read_compile_error(path).diagnostics
    assert (d.severity, d.message, d.cpp_line, d.nodes, d.source) == ("error", "C++ compile error", None, ["a"], None)
