"""Diagnostics from compile_error.json and accuracy.json, on the user's lines and on the kernel lines; from
why.json / notes.txt (nodes run as ATen calls, fusion refusals, scalar loops, on their lines; graphs that run
eagerly, on the function's `def`); functions whose graphs differ between the ranks of one
distributed job (features/ranks.py); plus the structured-trace findings (features/trace_diagnostics.py).

Recomputed after each index change; a file's diagnostics come from the run that answers for that file
(selected, else newest), so a newer clean run clears them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from lsprotocol import types

from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import def_line_above, uri_of
from lsp_server.features.ranks import function_divergences, rank_jobs
from lsp_server.features.source_lines import file_lines, trace_line_mover
from lsp_server.features.trace_diagnostics import trace_diagnostics_by_uri
from lsp_server.features.why_text import why_message
from lsp_server.index import Index, why_node
from lsp_server.model import Graph, Run, SourceLocation, normalize_path

log = logging.getLogger(__name__)
SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
            "information": types.DiagnosticSeverity.Information, "hint": types.DiagnosticSeverity.Hint}
SOURCE_NAME = "kernel-lens"
LINE_END = 1000  # clients clamp the range to the line's length
DefLineOf = Callable[[str, str, int], "int | None"]  # (file, function, a line in it) -> its `def` line
MovedLine = Callable[[str, int], "int | None"]  # (file, recorded line) -> where it is now (None: changed since)


@dataclass
class Finding:
    run: Run
    file: str
    line: int
    column: int
    message: str
    code: str
    severity: str | None = None  # None: the configured severity of compile errors and mismatches
    current: bool = False  # its line is the document's now (an eager graph's `def`), not a recorded one


def line_range(line: int, column: int = 0) -> types.Range:
    line0 = max(line - 1, 0)
    return types.Range(types.Position(line0, max(column - 1, 0)), types.Position(line0, LINE_END))


def _compiler_severity(severity: str) -> str | None:
    """g++'s own level: a note or warning beside the error is not an Error (None: the configured severity)."""
    return {"warning": "warning", "note": "information"}.get(severity)


def graph_findings(run: Run, graph: Graph) -> list[Finding]:
    found: list[Finding] = []
    error = graph.compile_error
    if error is not None:
        for d in error.diagnostics:
            where = f" (kernel `{d.kernel}`" + (f", node {', '.join(d.nodes)}" if d.nodes else "") + ")" if d.kernel else ""
            message = f"C++ compile error: {d.message}{where}"
            if d.source is not None:
                found.append(Finding(run, normalize_path(d.source.file), d.source.line, 0, message, "compile-error",
                                     _compiler_severity(d.severity)))
            if d.output_code_line:
                found.append(Finding(run, normalize_path(str(graph.output_code)), d.output_code_line, d.column or 0,
                                     message, "compile-error", _compiler_severity(d.severity)))
    report = graph.accuracy
    if report is not None and report.status == "mismatch":
        head = f"Accuracy mismatch: first diverging node `{report.node}` ({report.target})" + (
            f" in kernel `{report.kernel}`" if report.kernel else "")
        if report.summary:  # accuracy.json's own words: max_rel_error is null where no |expected| > atol
            message = f"{head}: {report.summary}"
        elif None not in (report.max_abs_error, report.max_rel_error, report.atol, report.rtol):
            message = (f"{head}: max abs error {report.max_abs_error:g}, max rel error {report.max_rel_error:g}"
                       f" (atol {report.atol:g}, rtol {report.rtol:g})")
        elif report.max_abs_error is not None:
            message = f"{head}: max abs error {report.max_abs_error:g}"
        else:
            message = head
        source: SourceLocation | None = None
        node = graph.nodes.get(report.node)
        if report.source is not None:
            source = SourceLocation(normalize_path(report.source.file), report.source.line)
        elif node is not None:
            source = node.source
        if source is not None:
            found.append(Finding(run, source.file, source.line, 0, message, "accuracy"))
        for kernel in graph.kernels:
            if kernel.name == report.kernel or (not report.kernel and report.node in kernel.nodes):
                lines = [kl.line for kl in kernel.lines if report.node in kl.nodes] or [kernel.start_line]
                found += [Finding(run, normalize_path(str(graph.output_code)), n, 0, message, "accuracy")
                          for n in lines]
    return found


WHY_CODES = {"aten_call": "extern-call", "not_fused": "not-fused", "not_vectorized": "not-vectorized",
             "eager_graph": "runs-eagerly", "reused": "computed-once"}


def note_findings(run: Run, graph: Graph, note_severity: str, def_line_of: DefLineOf | None,
                  moved: MovedLine | None = None) -> list[Finding]:
    """The graph's why-records (why.json, else notes.txt; g++'s scalar loops): each on its first node's line, an
    eager graph on its function's `def` line."""
    found = []
    for record in graph.why:
        code = WHY_CODES.get(record.kind)
        if code is None:
            continue
        if record.kind == "eager_graph":
            frame = next((n.frames[0] for n in graph.nodes.values() if n.frames), None)
            if frame is not None:
                now = moved(frame.file, frame.line) if moved is not None else frame.line
                if now is None:  # the line changed since the compile: its `def` is not known to be this one
                    continue
                line = (def_line_of(frame.file, frame.function, now) if def_line_of else None) or now
                found.append(Finding(run, frame.file, line, 0, record.message, code, note_severity, current=True))
            continue
        node = why_node(graph, record)
        if node is not None and node.source is not None:
            subject = record.nodes[0]  # the node the record is about (on the first line one of its nodes has)
            message = f"`{subject}` {why_message(graph, record)}"
            found.append(Finding(run, node.source.file, node.source.line, 0, message, code, note_severity))
    return found


def rank_findings(index: Index, def_line_of: DefLineOf | None, moved: MovedLine | None = None) -> list[Finding]:
    """Functions whose compiled graphs differ between the ranks of one distributed job, on their `def` line in the
    answering rank's files (ranks that agree say nothing)."""
    found = []
    for job in rank_jobs(index):
        for run in job:
            view = index.views[run.id]
            for other in job:
                for d in function_divergences(view, index.views[other.id]) if other is not run else ():
                    if index.view_for_file(d.file) is not view:
                        continue
                    now = moved(d.file, d.line) if moved is not None else d.line
                    if now is None:  # the line changed since the compile
                        continue
                    line = (def_line_of(d.file, d.function, now) if def_line_of else None) or now
                    found.append(Finding(run, d.file, line, 0, d.message, "rank-divergence", "warning", current=True))
    return found


def compute_diagnostics(index: Index, severity: str, note_severity: str = "information",
                        def_line_of: DefLineOf | None = None,
                        moved: MovedLine | None = None) -> dict[str, list[types.Diagnostic]]:
    """Each file's diagnostics from the run answering for it; `moved` re-anchors a user file's recorded lines to
    the document's text now (a finding on a line that changed since the compile is left out)."""
    findings = [f for view in index.views.values() for g in view.run.graphs
                for f in graph_findings(view.run, g) + note_findings(view.run, g, note_severity, def_line_of, moved)]
    findings += rank_findings(index, def_line_of, moved)
    newest: dict[str, Run] = {}
    for finding in findings:
        if finding.file not in newest or finding.run.time > newest[finding.file].time:
            newest[finding.file] = finding.run
    level = SEVERITY.get(severity, types.DiagnosticSeverity.Error)
    by_uri: dict[str, list[types.Diagnostic]] = {}
    seen: set[tuple] = set()
    answering_of: dict[str, object] = {}  # file -> the view answering for it (asked once per file)
    for finding in findings:
        if finding.file not in answering_of:
            answering_of[finding.file] = index.view_for_file(finding.file)
        answering = answering_of[finding.file]
        owner = answering.run if answering is not None else None
        generated = index.generated_file(finding.file)
        if generated is not None:
            owner = generated.run  # a kernel file belongs to its own run
        if owner is None:
            owner = newest[finding.file]
        if owner is not finding.run:
            continue
        line = finding.line
        if moved is not None and generated is None and not finding.current:
            line = moved(finding.file, finding.line)
            if line is None:
                continue
        diagnostic = types.Diagnostic(line_range(line, finding.column), finding.message,
                                      severity=SEVERITY.get(finding.severity or "", level), code=finding.code,
                                      source=SOURCE_NAME)
        key = (finding.file, line, finding.column, finding.message, finding.code, diagnostic.severity)
        if key not in seen:  # the same note from each recompiled graph
            seen.add(key)
            by_uri.setdefault(uri_of(finding.file), []).append(diagnostic)
    return by_uri


class DiagnosticsPublisher:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.published: dict[str, list[types.Diagnostic]] = {}

    def def_line_of(self, file: str, function: str, line: int) -> int | None:
        return def_line_above(self.server, uri_of(file), function, line)

    def moved(self, file: str, line: int) -> int | None:
        """Where recorded line `line` of a user file is in the document now (None: changed since the compile)."""
        lines = file_lines(self.server, self.server.index, uri_of(file))
        return line if lines is None else lines.moved_line(line)

    def publish(self) -> None:
        settings = self.server.settings
        current = compute_diagnostics(self.server.index, settings.diagnostic_severity, settings.note_severity,
                                      self.def_line_of, self.moved)
        try:
            for uri, found in trace_diagnostics_by_uri(self.server.index, self.server.settings).items():
                current.setdefault(uri, []).extend(d for d in map(self.trace_moved(uri), found) if d is not None)
        except Exception:  # the debug-directory diagnostics are still published
            log.exception("trace diagnostics failed")
        for uri in set(self.published) - set(current):
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))
        for uri, diagnostics in current.items():
            if self.published.get(uri) != diagnostics:
                self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, diagnostics))
        self.published = current

    def trace_moved(self, uri: str) -> Callable[[types.Diagnostic], "types.Diagnostic | None"]:
        """A trace finding's line re-anchored as the debug directory's lines are; in a file no debug directory
        recorded, through the line texts of the trace's own stack frames."""
        lines = file_lines(self.server, self.server.index, uri)
        mover = lines.moved_line if lines is not None else trace_line_mover(self.server, self.server.index, uri)

        def move(diagnostic: types.Diagnostic) -> types.Diagnostic | None:
            if mover is None:
                return diagnostic
            line = mover(diagnostic.range.start.line + 1)
            if line is None:
                return None
            shift = line - 1 - diagnostic.range.start.line
            if shift:
                diagnostic.range = types.Range(types.Position(line - 1, diagnostic.range.start.character),
                                               types.Position(diagnostic.range.end.line + shift,
                                                              diagnostic.range.end.character))
            return diagnostic
        return move


def register(server: Any) -> None:
    publisher = DiagnosticsPublisher(server)
    server.index_changed_hooks.append(publisher.publish)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @failsafe(server, "didChange")
    def republish(params: types.DidChangeTextDocumentParams) -> None:
        """An edit (saved or not) moves the lines the diagnostics sit on: they follow the document's text."""
        publisher.publish()
