"""Real Inductor's C++ build failures as a plain `TORCH_COMPILE_DEBUG=1 python x.py` leaves them on disk.

The run folder itself has no error file (its `output_code.py` is there, the provenance JSON is not); the
error text is in the structured trace the same run writes to `torch_compile_debug/tlparse/*.log`: the
`compilation_metrics` record of the failed frame has `fail_type` (`InductorError`) and `fail_reason`, which
holds `CppCompileError`, the g++ command and g++'s output (`file.cpp:LINE:COL: error: ...`, each followed by
the source line g++ echoes as `   LINE | code`). Unknown lines are skipped; nothing here raises.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lsp_server.parsers.torch_trace.reader import TraceRecord

GXX_LINE = re.compile(r"^(?P<file>[^:\n]+\.(?:cpp|cc|cxx|h|hpp)):(?P<line>\d+):(?P<col>\d+): "
                      r"(?P<sev>error|warning|note|fatal error): (?P<msg>.*)$")
ECHOED_LINE = re.compile(r"^\s*(?P<line>\d+) \| (?P<code>.*)$")
COMMAND = re.compile(r"Command:\n(?P<cmd>.+)")
BUILD_ERROR_MARK = "CppCompileError"


@dataclass(frozen=True)
class GxxDiagnostic:
    file: str
    line: int
    column: int
    severity: str  # error | warning | note
    message: str
    code: str = ""  # the source line as g++ echoed it ("" when it did not)


@dataclass(frozen=True)
class BuildFailure:
    """One frame whose compile failed building C++ (`CppCompileError` in its `fail_reason`)."""

    pid: int | None
    compile_id: str
    function: str
    file: str
    def_line: int | None
    command: str
    diagnostics: tuple[GxxDiagnostic, ...] = field(default_factory=tuple)


def parse_gxx_output(text: str) -> list[GxxDiagnostic]:
    """g++'s diagnostics in `text`, each with the source line it echoed after it (if any)."""
    found: list[GxxDiagnostic] = []
    lines = text.splitlines()
    for number, raw in enumerate(lines):
        match = GXX_LINE.match(raw.strip())
        if match is None:
            continue
        line = int(match["line"])
        code = ""
        for follow in lines[number + 1:number + 3]:
            echoed = ECHOED_LINE.match(follow)
            if echoed is not None and int(echoed["line"]) == line:
                code = echoed["code"]
                break
        severity = "error" if match["sev"] == "fatal error" else match["sev"]
        found.append(GxxDiagnostic(match["file"], line, int(match["col"]), severity, match["msg"], code))
    return found


def build_failure(record: TraceRecord) -> BuildFailure | None:
    """The build failure a `compilation_metrics` record reports, or None (another kind of record or failure)."""
    meta = record.meta
    if record.tag != "compilation_metrics" or not isinstance(meta, dict):
        return None
    reason = meta.get("fail_reason")
    if not isinstance(reason, str) or BUILD_ERROR_MARK not in reason:
        return None
    command = COMMAND.search(reason)
    first_line = meta.get("co_firstlineno")
    return BuildFailure(record.pid, str(meta.get("compile_id") or ""), str(meta.get("co_name") or ""),
                        str(meta.get("co_filename") or ""), first_line if isinstance(first_line, int) else None,
                        command["cmd"].strip() if command else "", tuple(parse_gxx_output(reason)))
