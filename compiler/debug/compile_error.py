"""Maps g++ diagnostics on generated C++ back through output_code.py lines, kernels and FX nodes to
the user's source line; the error users see names that line."""
from __future__ import annotations

from dataclasses import dataclass, field

from compiler.codegen.wrapper import OutputCode
from compiler.debug.graph_source import ReadableGraph
from compiler.debug.kernel_map import KernelMap
from compiler.machine.build import CppCompileError
from lens_format.compile_error import CompileDiagnostic, CompileError


@dataclass
class CompileErrorReport:
    command: str
    stderr: str
    diagnostics: list[CompileDiagnostic] = field(default_factory=list)

    def to_json(self, graph_id: str) -> dict:
        return CompileError(graph_id, self.command, self.diagnostics, self.stderr).to_json()

    def first_error(self) -> CompileDiagnostic | None:
        return next((d for d in self.diagnostics if d.severity == "error"), None)


class LensCompileError(RuntimeError):
    """A generated kernel failed to compile; names the user's source line, the kernel and g++'s message."""

    def __init__(self, report: CompileErrorReport, debug_dir: str | None):
        self.report, self.debug_dir = report, debug_dir
        d = report.first_error()
        if d is None:
            msg = f"C++ compile error (no parsable diagnostic):\n{report.stderr[-2000:]}"
        else:
            where = f"{d.source.file}:{d.source.line} ({d.source.code})" if d.source else "an unknown source line"
            msg = (f"C++ compile error in kernel {d.kernel} (FX node {', '.join(d.nodes) or '?'}) generated "
                   f"from {where}: {d.message}\n  at {d.cpp_file}:{d.cpp_line}:{d.column}")
        if debug_dir:
            msg += f"\n  debug directory: {debug_dir} (compile_error.json)"
        super().__init__(msg)


def map_compile_error(err: CppCompileError, code: OutputCode, kmap: KernelMap,
                      readable: ReadableGraph) -> CompileErrorReport:
    report = CompileErrorReport(" ".join(err.command), err.stderr)
    for d in err.diagnostics:
        line = code.cpp_first_line + d.line - 1 if d.file == err.source_path else None
        kernel = kmap.kernel_at(line) if line else None
        nodes = kmap.nodes_at(line) if line else []
        source = None
        for n in nodes:
            if n in readable.sources:
                source = readable.sources[n]
                break
        report.diagnostics.append(CompileDiagnostic(d.severity, d.message, d.file, d.line, d.column, line,
                                                    kernel.name if kernel else "", nodes, source))
    return report
