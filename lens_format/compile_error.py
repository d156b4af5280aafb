"""`compile_error.json`: a C++ build failure mapped to output_code.py line, kernel, FX nodes and user source
(written by lens for its own graphs, and beside a real Inductor run's graph folder with `backend: inductor`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import (SourceRef, as_dict_list, as_int, as_str, as_str_list, parse_source_ref,
                                read_json_object, source_ref_json)

VERSION = 1
STDERR_KEPT = 20000  # the tail of g++'s output kept in the file


@dataclass
class CompileDiagnostic:
    severity: str  # error | warning | note (g++'s own level)
    message: str
    cpp_file: str
    cpp_line: int | None
    column: int | None
    output_code_line: int | None  # None where the C++ line is not part of output_code.py (a header, a cache file)
    kernel: str  # "" where no kernel holds the line
    nodes: list[str]
    source: SourceRef | None

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "message": self.message, "cpp_file": self.cpp_file,
                "cpp_line": self.cpp_line, "column": self.column, "output_code_line": self.output_code_line,
                "kernel": self.kernel or None, "nodes": list(self.nodes), "source": source_ref_json(self.source)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CompileDiagnostic:
        return cls(as_str(d.get("severity"), "error"), as_str(d.get("message"), "C++ compile error"),
                   as_str(d.get("cpp_file")), as_int(d.get("cpp_line")), as_int(d.get("column")),
                   as_int(d.get("output_code_line")), as_str(d.get("kernel")), as_str_list(d.get("nodes")),
                   parse_source_ref(d.get("source")))


@dataclass
class CompileError:
    graph_id: str
    command: str
    diagnostics: list[CompileDiagnostic] = field(default_factory=list)
    stderr: str = ""
    backend: str = ""  # "" for lens's own graphs, "inductor" beside a real Inductor graph folder
    path: Path | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"version": VERSION, "graph_id": self.graph_id, "command": self.command,
                                "diagnostics": [d.to_json() for d in self.diagnostics]}
        if self.stderr:
            data["stderr"] = self.stderr[-STDERR_KEPT:]
        if self.backend:
            data["backend"] = self.backend
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path | None = None) -> CompileError:
        return cls(as_str(data.get("graph_id")), as_str(data.get("command")),
                   [CompileDiagnostic.from_json(d) for d in as_dict_list(data.get("diagnostics"))],
                   as_str(data.get("stderr")), as_str(data.get("backend")), path)

    def first_error(self) -> CompileDiagnostic | None:
        return next((d for d in self.diagnostics if d.severity == "error"), None)


def read_compile_error(path: Path) -> CompileError:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not compile_error.json."""
    return CompileError.from_json(read_json_object(path), path)
