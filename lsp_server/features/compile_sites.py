"""Where a user file hands a function to `torch.compile` and where it calls the compiled result, read from the
source text (ast): Dynamo's stacks stop at the compiled frame when it was called from a module's top level, so
a structured trace cannot say which `torch.compile` or which call started a compile there."""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Sequence


@dataclass
class CompileSites:
    """1-based lines: `torch.compile(function, ...)` calls and `@torch.compile` decorators of `def function`,
    and calls of the compiled callable (`compiled = torch.compile(f)` then `compiled(x)`, or `torch.compile(f)(x)`)."""

    wraps: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)


def is_torch_compile(node: ast.AST) -> bool:
    """`torch.compile` or `torch.compile(...)` (a decorator with options)."""
    if isinstance(node, ast.Call):
        node = node.func
    return isinstance(node, ast.Attribute) and node.attr == "compile" and isinstance(node.value, ast.Name) \
        and node.value.id == "torch"


def wraps_function(node: ast.AST, function: str) -> bool:
    """`torch.compile(function, ...)` (also `torch.compile(model.function)`)."""
    if not (isinstance(node, ast.Call) and is_torch_compile(node.func) and node.args):
        return False
    first = node.args[0]
    return (isinstance(first, ast.Name) and first.id == function) or (
        isinstance(first, ast.Attribute) and first.attr == function)


def compile_sites(lines: Sequence[str], function: str) -> CompileSites:
    try:
        tree = ast.parse("".join(lines))
    except SyntaxError:
        return CompileSites()
    sites = CompileSites()
    compiled: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            for decorator in node.decorator_list:
                if is_torch_compile(decorator):
                    sites.wraps.append(decorator.lineno)
                    compiled.add(function)
        elif isinstance(node, ast.Call) and wraps_function(node, function):
            sites.wraps.append(node.lineno)
        elif isinstance(node, ast.Assign) and wraps_function(node.value, function):
            compiled |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ((isinstance(node.func, ast.Name) and node.func.id in compiled)
                                           or wraps_function(node.func, function)):
            sites.calls.append(node.lineno)
    sites.wraps.sort()
    sites.calls.sort()
    return sites
