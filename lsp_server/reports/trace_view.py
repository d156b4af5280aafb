"""The `kernel-lens trace DIR [--json]` view of a structured trace: graph breaks, recompiles and failures
per rank, function and frame compile, as text or as a JSON-ready dict.
"""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lsp_server.parsers.torch_trace.findings import find_divergences, trace_diagnostics
from lsp_server.parsers.torch_trace.logs_dir import load_trace_dir
from lsp_server.parsers.torch_trace.summary import FrameCompile, FunctionSummary, TraceSummary

__all__ = ["load_trace_dir", "render_text", "render_json", "trace_report", "print_trace"]
JSON_VERSION = 1


def _rank_name(rank: int | None) -> str:
    return "-" if rank is None else str(rank)


def _compile_line(fc: FrameCompile) -> str:
    figures = []
    if fc.graph_op_count is not None:
        figures.append(f"{fc.graph_op_count} ops")
    if fc.guard_count is not None:
        figures.append(f"{fc.guard_count} guards")
    if fc.compile_time_s is not None:
        figures.append(f"{fc.compile_time_s:.2f} s")
    if not fc.finished:
        figures.append("in progress")
    figures.extend(f"code {g.output_code_path}" for g in fc.inductor_graphs if g.output_code_path)
    return f"    frame {fc.compile_id:<7} {fc.co_name or '?'}  " + " · ".join(figures)


def _entry(head: str, text: str, shown_hints: set[str] = frozenset()) -> list[str]:
    """`head` and a message of Dynamo's that may run over several lines: its first line beside the head, the
    others indented under it, blank lines and hints already shown left out."""
    first, *rest = text.strip().splitlines() or [""]
    indent = " " * (len(head) - len(head.lstrip()) + 4)
    lines = [f"{head}{first.strip()}"]
    for line in rest:
        line = line.strip()
        if line and not (line.startswith("Hint:") and line[len("Hint:"):].strip() in shown_hints):
            lines.append(f"{indent}{line}")
    return lines


def _function_lines(f: FunctionSummary) -> list[str]:
    lines = [f"  {f.name}  {f.file}:{f.def_line}  {f.lens_text()}"]
    hinted: set[tuple[str | None, int | None]] = set()  # a recompile logs the same break again
    for fc in f.compiles:
        lines.append(_compile_line(fc))
        for guard in fc.recompile_reasons:
            lines.append(f"      recompile: {guard.reason}" + (f"  (guard of {guard.cache_entry})"
                                                               if guard.cache_entry else ""))
        shown: set[str] = set()  # each hint once per compile (the break and its restart both carry them)
        for gb in fc.graph_breaks:
            lines.extend(_entry(f"      graph break at {gb.file}:{gb.line}: ", gb.reason))
            hints = list(dict.fromkeys(h.strip() for h in gb.hints))
            if (gb.file, gb.line) not in hinted:
                lines.extend(f"        hint: {h}" for h in hints)
                hinted.add((gb.file, gb.line))
            shown.update(hints)
        if fc.failed:
            where = f" at {fc.fail_file}:{fc.fail_line}" if fc.fail_file else ""
            lines.append(f"      FAILED{where}: {fc.failure_headline()}")
        for reason in fc.restart_reasons:
            lines.extend(_entry("      restart: ", reason, shown))
    return lines


def render_text(summary: TraceSummary) -> str:
    """A plain-text report, one section per rank (log), then where ranks diverge."""
    logs = sorted(summary.logs.values(), key=lambda lg: (lg.rank is None, lg.rank or 0, lg.path))
    records = sum(lg.record_count for lg in logs)
    ranks = ", ".join(_rank_name(r) for r in summary.rank_logs())
    out = [f"Structured trace: {len(logs)} log(s) · ranks {ranks or '-'} · {records} records · "
           f"{summary.skipped_records} skipped"]
    functions = summary.functions()
    for log in logs:
        out.append("")
        out.append(f"rank {_rank_name(log.rank)}  {log.path}  (pid {log.pid or '?'}, {log.record_count} records"
                   f", {log.skipped_count} skipped)")
        for s in log.skipped[:5]:
            out.append(f"  skipped line {s.line}: {s.reason}")
        mine = [f for f in functions if f.compiles and f.compiles[0].source == log.path]
        if not mine:
            out.append("  no frame compiles")
        for f in mine:
            out.extend(_function_lines(f))
    divergences = find_divergences(summary)
    if divergences:
        out.append("")
        out.append("Ranks diverge:")
        for d in divergences:
            out.append(f"  {d.kind.replace('_', ' ')} in {d.function} at {d.file}:{d.line}: ranks {d.ranks_with} "
                       f"vs {d.ranks_without} ({d.detail})")
    return "\n".join(out) + "\n"


def _compile_json(fc: FrameCompile) -> dict[str, Any]:
    return {
        "compile_id": fc.compile_id, "frame_id": fc.frame_id, "frame_compile_id": fc.frame_compile_id,
        "attempt": fc.attempt, "co_name": fc.co_name, "co_filename": fc.co_filename,
        "co_firstlineno": fc.co_firstlineno, "graph_op_count": fc.graph_op_count,
        "guard_count": fc.guard_count, "compile_time_s": fc.compile_time_s, "finished": fc.finished,
        "recompile_reasons": [asdict(g) for g in fc.recompile_reasons],
        "restart_reasons": fc.restart_reasons,
        "graph_breaks": [asdict(gb) for gb in fc.graph_breaks],
        "fail_type": fc.fail_type, "fail_reason": fc.fail_reason,
        "fail_file": fc.fail_file, "fail_line": fc.fail_line,
        "inductor_graphs": [{"output_code_path": g.output_code_path, "artifacts": sorted(g.artifacts)}
                            for g in fc.inductor_graphs],
        "artifacts": sorted(fc.artifacts),
    }


def _function_json(f: FunctionSummary) -> dict[str, Any]:
    return {
        "rank": f.rank, "file": f.file, "name": f.name, "def_line": f.def_line, "frames": f.frames,
        "graphs": f.graphs, "ops": f.ops, "guards": f.guards, "graph_breaks": len(f.graph_breaks),
        "recompiles": f.recompiles, "failures": len(f.failures), "compile_time_s": f.compile_time_s,
        "lens": f.lens_text(), "compiles": [_compile_json(fc) for fc in f.compiles],
    }


def render_json(summary: TraceSummary) -> dict[str, Any]:
    """The same report as a JSON-serialisable dict (`version` bumps on incompatible changes)."""
    return {
        "version": JSON_VERSION,
        "skipped_records": summary.skipped_records,
        "logs": [{"path": lg.path, "rank": lg.rank, "pid": lg.pid, "records": lg.record_count,
                  "skipped": lg.skipped_count, "skipped_examples": [asdict(s) for s in lg.skipped[:5]],
                  "kinds": dict(sorted(lg.kind_counts.items()))}
                 for lg in sorted(summary.logs.values(), key=lambda lg: lg.path)],
        "functions": [_function_json(f) for f in summary.functions()],
        "diagnostics": [asdict(d) for d in trace_diagnostics(summary)],
        "divergences": [asdict(d) for d in find_divergences(summary)],
    }


def trace_report(directory: str | Path, as_json: bool = False) -> str | dict[str, Any]:
    """Load DIR and render it: what `kernel-lens trace DIR [--json]` prints."""
    summary = load_trace_dir(directory)
    return render_json(summary) if as_json else render_text(summary)


def print_trace(directory: str | Path, as_json: bool = False) -> int:
    """`python -m lsp_server trace DIR [--json]`: print the report; exit code 0, or 2 if DIR is missing."""
    if not Path(directory).exists():
        print(f"kernel-lens trace: no such file or folder: {directory}", file=sys.stderr)
        return 2
    report = trace_report(directory, as_json)
    sys.stdout.write(json.dumps(report, indent=1) + "\n" if as_json else str(report))
    return 0
