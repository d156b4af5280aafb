"""Parses `compile_error.json` (a C++ build failure mapped to kernel, nodes and source)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lens_format.jsonio import (SourceRef, as_dict_list, as_int, as_str, as_str_list, parse_source_ref,
                            read_json_object)


@dataclass
class CompileDiagnostic:
    severity: str
    message: str
    cpp_file: str
    cpp_line: int | None
    column: int | None
    output_code_line: int | None
    kernel: str
    nodes: list[str]
    source: SourceRef | None


@dataclass
class CompileError:
    path: Path
    graph_id: str
    command: str
    diagnostics: list[CompileDiagnostic] = field(default_factory=list)


def parse_compile_error(path: Path) -> CompileError:
    data = read_json_object(path)
    diagnostics = [
        CompileDiagnostic(as_str(d.get("severity"), "error"), as_str(d.get("message"), "C++ compile error"),
                          as_str(d.get("cpp_file")), as_int(d.get("cpp_line")), as_int(d.get("column")),
                          as_int(d.get("output_code_line")), as_str(d.get("kernel")), as_str_list(d.get("nodes")),
                          parse_source_ref(d.get("source")))
        for d in as_dict_list(data.get("diagnostics"))
    ]
    return CompileError(path, as_str(data.get("graph_id")), as_str(data.get("command")), diagnostics)
