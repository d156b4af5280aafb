"""Structured-trace findings as LSP diagnostics: graph breaks, recompiles, compile failures and rank divergences
on the user's lines, with Dynamo's explanation, hints and failed guards as related information.

Published together with the debug-directory diagnostics (features/diagnostics.py registers the publisher).
"""
from __future__ import annotations

from lsprotocol import types

from lsp_server.features.lookup import uri_of
from lsp_server.index import Index
from lsp_server.model import TraceDiagnostic
from lsp_server.settings import Settings

SEVERITY = {"error": types.DiagnosticSeverity.Error, "warning": types.DiagnosticSeverity.Warning,
            "information": types.DiagnosticSeverity.Information, "hint": types.DiagnosticSeverity.Hint}
SOURCE_NAME = "kernel-lens"
LINE_END = 1000  # clients clamp the range to the line's length
CODES = {"graph_break": "graph-break", "recompile": "recompile", "compile_failure": "compile-failure",
         "rank_divergence": "rank-divergence"}


def line_range(line: int) -> types.Range:
    line0 = max(line - 1, 0)
    return types.Range(types.Position(line0, 0), types.Position(line0, LINE_END))


def ranks_note(ranks: list[int | None]) -> str:
    named = sorted(r for r in ranks if r is not None)
    if not named:
        return ""
    return f" (rank{'s' if len(named) > 1 else ''} {', '.join(map(str, named))})"


def to_diagnostic(finding: TraceDiagnostic, settings: Settings) -> types.Diagnostic:
    related = [types.DiagnosticRelatedInformation(types.Location(uri_of(r.file), line_range(r.line)), r.message)
               for r in finding.related if r.message]
    message = finding.message if finding.kind == "rank_divergence" else finding.message + ranks_note(finding.ranks)
    severity = SEVERITY.get(settings.trace_severity(finding.kind), types.DiagnosticSeverity.Warning)
    return types.Diagnostic(line_range(finding.line), message, severity=severity,
                            code=CODES.get(finding.kind, finding.kind), source=SOURCE_NAME,
                            related_information=related or None)


def trace_diagnostics_by_uri(index: Index, settings: Settings) -> dict[str, list[types.Diagnostic]]:
    by_uri: dict[str, list[types.Diagnostic]] = {}
    for finding in index.trace.findings:
        if finding.file.startswith("<"):
            continue  # `<unknown>` / `<string>`: no document to put it on
        by_uri.setdefault(uri_of(finding.file), []).append(to_diagnostic(finding, settings))
    return by_uri
