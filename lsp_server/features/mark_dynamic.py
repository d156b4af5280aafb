"""The quick fix for a recompile caused by a size specialization (`tensor 'x' size mismatch at index 0`):
`torch._dynamo.mark_dynamic(<argument>, <dim>)` before the call that made the frame's first compile.

Before the call, not inside the function: Dynamo refuses to trace `mark_dynamic` ("Attempt to trace forbidden
callable"), and marking the tensor the first call passes makes that first compile dynamic, so the later size
reuses it. An argument that is an expression (`f(torch.randn(10))`) becomes a variable first.
"""
from __future__ import annotations

import ast
import re
from typing import Any, Sequence

from lsprotocol import types

from lsp_server.features.compile_sites import compile_sites
from lsp_server.features.lookup import MAX_DECORATOR_LINES, document_lines, path_of, uri_of
from lsp_server.index import Index
from lsp_server.model import CompileFact, SizeGuard


def parameters(lines: Sequence[str], def_line: int, function: str) -> list[str] | None:
    """The positional parameters of `def function(` at or just below `def_line` (1-based; decorators first)."""
    for start in range(def_line - 1, min(def_line - 1 + MAX_DECORATOR_LINES + 1, len(lines))):
        if not re.match(rf"\s*(?:async\s+)?def\s+{re.escape(function)}\s*\(", lines[start]):
            continue
        for end in range(start, min(start + 30, len(lines))):
            text = "".join(line.strip() + "\n" for line in lines[start:end + 1])
            try:
                tree = ast.parse(text + "  pass\n")
            except SyntaxError:
                continue
            args = tree.body[0].args  # type: ignore[attr-defined]
            return [a.arg for a in args.posonlyargs + args.args]
    return None


def statement_at(tree: ast.Module, line: int) -> tuple[ast.stmt, ast.AST] | None:
    """The simple statement on one line that starts at `line`, and the scope (function or module) holding it."""
    found = None
    scopes: list[tuple[ast.AST, list[ast.stmt]]] = [(tree, tree.body)]
    while scopes:
        scope, body = scopes.pop()
        for statement in body:
            if statement.lineno == line and statement.end_lineno == line and not hasattr(statement, "body"):
                found = (statement, scope)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list) and inner:
                    is_function = isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
                    scopes.append((statement if is_function else scope, inner))
    return found


def argument_for(statement: ast.stmt, params: list[str], guard: SizeGuard) -> ast.expr | None:
    """The expression a call in `statement` passes for the parameter (a bound method's `self` is implicit)."""
    index = params.index(guard.name)
    for call in (n for n in ast.walk(statement) if isinstance(n, ast.Call)):
        keyword = next((k.value for k in call.keywords if k.arg == guard.name), None)
        if keyword is not None:
            return keyword
        positional = index - 1 if params and params[0] == "self" else index
        if 0 <= positional < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:positional + 1]):
            return call.args[positional]
    return None


def edits_for(lines: Sequence[str], call_line: int, params: list[str], guards: list[SizeGuard]) -> list[types.TextEdit]:
    """Edits marking each guarded argument of the call on `call_line` (1-based) dynamic, or [] when it is not
    one call on one line whose arguments can be named."""
    text = "".join(lines)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = statement_at(tree, call_line)
    if found is None:
        return []
    statement, scope = found
    taken = names_in(scope)
    line = lines[call_line - 1]
    indent = line[:len(line) - len(line.lstrip())]
    before, replaced = [], []
    for guard in guards:
        if guard.name not in params:
            continue
        argument = argument_for(statement, params, guard)
        if argument is None:
            continue
        source = ast.get_source_segment(text, argument) or ast.unparse(argument)
        if isinstance(argument, (ast.Name, ast.Attribute)):
            expression = source
        else:  # an expression: evaluated once, into a variable the call then passes
            expression = guard.name if guard.name not in taken else f"{guard.name}_dynamic"
            taken.add(expression)
            segment = types.Range(types.Position(call_line - 1, utf16_column(line, argument.col_offset)),
                                  types.Position(call_line - 1, utf16_column(line, argument.end_col_offset or 0)))
            before.append(f"{indent}{expression} = {source}\n")
            replaced.append(types.TextEdit(segment, expression))
        before.append(f"{indent}torch._dynamo.mark_dynamic({expression}, {guard.dim})\n")
    if not before:
        return []
    at = types.Position(call_line - 1, 0)
    imports = [] if any(re.match(r"import torch\b", ln) for ln in lines) else [
        types.TextEdit(types.Range(types.Position(0, 0), types.Position(0, 0)), "import torch\n")]
    return [*imports, types.TextEdit(types.Range(at, at), "".join(before)), *replaced]


def names_in(scope: ast.AST) -> set[str]:
    """The names a scope uses, not looking into the functions and classes it defines."""
    names, todo = set(), list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name):
            names.add(node.id)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo += ast.iter_child_nodes(node)
        else:
            names.add(getattr(node, "name", ""))
    return names


def utf16_column(line: str, byte_offset: int) -> int:
    """An LSP column (UTF-16 units) from an ast column (UTF-8 bytes)."""
    prefix = line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")
    return len(prefix.encode("utf-16-le")) // 2


def first_call(server: Any, index: Index, fact: CompileFact, uri: str) -> tuple[str, int] | None:
    """(uri, 1-based line) of the call that made the frame's first compile (`N/0`), as its stack says; else the
    first call of the compiled function in its own file (a call from a module's top level leaves no stack)."""
    frame = fact.compile_id.split("/")[0]
    same_frame = (fact.file, fact.def_line, fact.rank, f"{frame}/0")
    first = next((c for c in index.trace.compiles
                  if (c.file, c.def_line, c.rank, c.compile_id) == same_frame and c.call_file and c.call_line), None)
    if first is not None and first.call_file and first.call_line:
        return uri_of(first.call_file), first.call_line
    calls = compile_sites(document_lines(server, uri), fact.function).calls
    return (uri, calls[0]) if calls else None


def mark_dynamic_fixes(server: Any, index: Index, uri: str, rng: types.Range,
                       published: list[types.Diagnostic]) -> list[types.CodeAction]:
    """A quick fix per recompiled function on the lines of `rng` whose failed guards are size specializations."""
    path = path_of(uri)
    actions, done = [], set()
    for fact in index.trace.compiles:
        on_range = fact.file == path and rng.start.line <= fact.def_line - 1 <= rng.end.line
        if not on_range or (fact.def_line, fact.function) in done:
            continue
        guards = list(fact.size_guards)
        params = parameters(document_lines(server, uri), fact.def_line, fact.function) if guards else None
        call = first_call(server, index, fact, uri) if params else None
        if not guards or params is None or call is None:
            continue
        call_uri, call_line = call
        edits = edits_for(document_lines(server, call_uri), call_line, params, guards)
        if not edits:
            continue
        done.add((fact.def_line, fact.function))
        marked = ", ".join(f"{g.name}[{g.dim}]" for g in guards if g.name in params)
        matching = [d for d in published if d.code == "recompile" and d.range.start.line == fact.def_line - 1]
        actions.append(types.CodeAction(
            f"Mark {marked} dynamic before the call (torch._dynamo.mark_dynamic)", kind=types.CodeActionKind.QuickFix,
            diagnostics=matching or None, edit=types.WorkspaceEdit(changes={call_uri: edits}), is_preferred=True))
    return actions
