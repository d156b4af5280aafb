"""Quick fixes for graph breaks whose Dynamo hint names an API or config (e.g. "Use `torch.cond` ..."), or whose
reason a setting removes (`.item()`: capture_scalar_outputs; data-dependent sizes: capture_dynamic_output_shape_ops):
a setting gets a value of its own type after the file's imports (a flag True, `reorderable_logging_functions` the
breaking call's function added); an API is noted above the breaking line with the hint.
And for the compiler's own decisions whose why-record names a fix: `compiler.config.<setting> = <value>`
after the imports (with `import compiler` where the file has none)."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from lsprotocol import types

from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import document_lines, path_of
from lsp_server.features.mark_dynamic import mark_dynamic_fixes
from lsp_server.features.source_lines import file_lines
from lsp_server.features.trace_diagnostics import CODES
from lsp_server.index import Index
from lsp_server.model import TraceDiagnostic

CONFIG_PREFIXES = ("torch._dynamo.config.", "torch._inductor.config.", "torch.fx.experimental._config.")
IMPORT_LINE = re.compile(r"^(?:import|from)\s+\S")
IMPORTS_COMPILER = re.compile(r"^import\s+compiler\b|^from\s+compiler\s+import\s+.*\bconfig\b")


def last_import_line0(lines: list[str]) -> int:
    """0-based line after the last top-level import (0 when there is none)."""
    after = 0
    for number, text in enumerate(lines):
        if IMPORT_LINE.match(text):
            after = number + 1
    return after


# Dynamo's settings by the type of their value: a set of functions gets the breaking call's function added, a
# flag is switched on; a setting not named here is never assigned a guessed value (the hint becomes a note).
SET_SETTINGS = frozenset({"torch._dynamo.config.reorderable_logging_functions"})
FLAG_SETTINGS = frozenset({"torch._dynamo.config.capture_scalar_outputs",
                           "torch._dynamo.config.capture_dynamic_output_shape_ops",
                           "torch._dynamo.config.capture_func_transforms",
                           "torch._dynamo.config.trace_numpy", "torch._dynamo.config.inline_inbuilt_nn_modules"})
# Breaks whose reason names the setting that removes them, where Dynamo's hint names none: `.item()` and ops whose
# output size depends on the data (nonzero, unique, boolean masks).
SETTING_FOR_REASON = (("Tensor.item()", "torch._dynamo.config.capture_scalar_outputs"),
                      ("capture_scalar_outputs=False", "torch._dynamo.config.capture_scalar_outputs"),
                      ("Dynamic shape operator", "torch._dynamo.config.capture_dynamic_output_shape_ops"))
CALLED = re.compile(r"^\s*(?:[\w.,\s]+=\s*)?(?P<function>[A-Za-z_][\w.]*)\s*\(")
LOGGING_CALLS = re.compile(r"^(?:print|logging\.\w+|warnings\.warn)$")


def setting_edit(setting: str, finding: TraceDiagnostic, lines: list[str]) -> tuple[str, types.TextEdit] | None:
    """`setting = True` / `setting.add(function)` after the file's imports, as the setting's type wants."""
    at = types.Position(last_import_line0(lines), 0)
    where = types.Range(at, at)
    if setting in FLAG_SETTINGS:
        return f"Set {setting} = True", types.TextEdit(where, f"{setting} = True\n")
    if setting in SET_SETTINGS:
        line0 = finding.line - 1
        called = CALLED.match(lines[line0]) if 0 <= line0 < len(lines) else None
        if called is None or not LOGGING_CALLS.match(called["function"]):
            return None
        function = called["function"]
        return (f"Let Dynamo move `{function}` after the graph ({setting}.add({function}))",
                types.TextEdit(where, f"{setting}.add({function})\n"))
    return None


def fix_edit(finding: TraceDiagnostic, lines: list[str]) -> tuple[str, types.TextEdit] | None:
    fix = finding.quick_fix
    for words, setting in SETTING_FOR_REASON:
        if words in finding.message:
            return setting_edit(setting, finding, lines)
    if fix is None:
        return None
    if fix.symbol.startswith(CONFIG_PREFIXES) and "(" not in fix.symbol:
        made = setting_edit(fix.symbol, finding, lines)
        if made is not None:
            return made
    line0 = finding.line - 1
    if not 0 <= line0 < len(lines):
        return None
    indent = re.match(r"\s*", lines[line0]).group(0)
    at = types.Position(line0, 0)
    note = f"{indent}# TODO(kernel-lens): graph break here; Dynamo suggests {fix.symbol}: {fix.title}\n"
    return f"Use {fix.symbol} here (Dynamo's hint: {fix.title})", types.TextEdit(types.Range(at, at), note)


def quick_fixes(server: Any, index: Index, uri: str, rng: types.Range,
                published: list[types.Diagnostic]) -> list[types.CodeAction]:
    lines = document_lines(server, uri)
    anchored = file_lines(server, index, uri)
    actions = []
    for finding in index.trace.findings_in(path_of(uri)):
        now = anchored.moved_line(finding.line) if anchored is not None else finding.line
        if now is None:
            continue  # its line changed since the compile: the break may be gone
        finding = replace(finding, line=now)  # where the user's edits moved it, as its diagnostic is
        if finding.kind != "graph_break" or not rng.start.line <= finding.line - 1 <= rng.end.line:
            continue
        made = fix_edit(finding, lines)
        if made is None:
            continue
        title, edit = made
        matching = [d for d in published if d.code == CODES["graph_break"] and d.range.start.line == finding.line - 1]
        actions.append(types.CodeAction(title, kind=types.CodeActionKind.QuickFix, diagnostics=matching or None,
                                        edit=types.WorkspaceEdit(changes={uri: [edit]}), is_preferred=True))
    return actions


def why_fixes(index: Index, uri: str, rng: types.Range, lines: list[str],
              published: list[types.Diagnostic]) -> list[types.CodeAction]:
    """`compiler.config.<setting> = <value>` for the why-records with a fix on the lines of `rng`."""
    actions, seen = [], set()
    path = path_of(uri)
    for line0 in range(rng.start.line, rng.end.line + 1):
        for hit in index.why_at(path, line0 + 1):
            fix = hit.record.fix
            if fix is None or (fix.setting, fix.value) in seen:
                continue
            seen.add((fix.setting, fix.value))
            assignment = f"compiler.config.{fix.setting} = {fix.value!r}"
            already = next((n for n, text in enumerate(lines)
                            if re.match(rf"^compiler\.config\.{re.escape(fix.setting)}\s*=", text)), None)
            if already is not None:  # the file sets it: that line changes (a second one above would lose)
                where = types.Range(types.Position(already, 0), types.Position(already, len(lines[already].rstrip("\r\n"))))
                text = assignment
            else:
                at = types.Position(last_import_line0(lines), 0)
                where = types.Range(at, at)
                needs_import = not any(IMPORTS_COMPILER.match(text) for text in lines)
                text = ("import compiler\n" if needs_import else "") + assignment + "\n"
            matching = [d for d in published if d.range.start.line == line0 and d.code == "not-fused"]
            actions.append(types.CodeAction(fix.title or f"Set compiler.config.{fix.setting} = {fix.value!r}",
                                            kind=types.CodeActionKind.QuickFix, diagnostics=matching or None,
                                            edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(where, text)]}),
                                            is_preferred=True))
    return actions


def register(server: Any) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    @failsafe(server, "codeAction")
    def code_action(params: types.CodeActionParams) -> list[types.CodeAction] | None:
        published = list(params.context.diagnostics)
        uri = params.text_document.uri
        return (quick_fixes(server, server.index, uri, params.range, published)
                + mark_dynamic_fixes(server, server.index, uri, params.range, published)
                + why_fixes(server.index, uri, params.range, document_lines(server, uri), published)) or None
