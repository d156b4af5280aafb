"""The strategies print a planned piece through the narrow printing interface (compiler/codegen/printer.py
`NodePrinter`), never through the whole renderer: every printer parameter of a strategy's function is typed
`NodePrinter` and only its members are used; no strategy imports the renderer or reads the plan or the renderer's
state through it (issue 44: the printer prints, the planner plans)."""
from __future__ import annotations

import ast
import pathlib

import pytest

from compiler.codegen import printer
from compiler.codegen.cpp import KernelRenderer

STRATEGIES = pathlib.Path(printer.__file__).parent / "strategies"
MEMBERS = {name for name, value in vars(printer.NodePrinter).items() if callable(value) and not name.startswith("_")}


def printer_uses(tree: ast.Module) -> list[tuple[str, str, int]]:
    """(function, attribute, line) of each attribute a function reads of a parameter typed `NodePrinter`."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        names = {a.arg for a in fn.args.args if isinstance(a.annotation, ast.Name) and a.annotation.id == "NodePrinter"
                 or isinstance(a.annotation, ast.Constant) and a.annotation.value == "NodePrinter"}
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
                out.append((fn.name, node.attr, node.lineno))
    return out


def untyped_printers(tree: ast.Module) -> list[tuple[str, str]]:
    """Parameters named like a renderer (`r`, `renderer`, `self.renderer`) without the NodePrinter type."""
    return [(fn.name, a.arg) for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) for a in fn.args.args
            if a.arg in ("r", "renderer", "p") and not (isinstance(a.annotation, ast.Name)
                                                        and a.annotation.id == "NodePrinter")]


@pytest.mark.parametrize("path", sorted(STRATEGIES.glob("*.py")), ids=lambda p: p.name)
def test_a_strategy_prints_through_the_printing_interface_only(path):
    tree = ast.parse(path.read_text())
    assert untyped_printers(tree) == []
    outside = [(fn, attr, line) for fn, attr, line in printer_uses(tree) if attr not in MEMBERS]
    assert outside == [], f"{path.name} reaches past NodePrinter: {outside}"
    imports = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "compiler.codegen.cpp" not in imports and "compiler.codegen.expressions" not in imports


def test_the_checker_sees_a_call_back_into_the_renderer():
    tree = ast.parse("def f(r: NodePrinter, n):\n    r.emit('x')\n    r.plan.streamed\n    r.locals[n] = 1\n"
                     "def g(r, n):\n    r.k\n")
    assert [(fn, attr) for fn, attr, _ in printer_uses(tree) if attr not in MEMBERS] == [("f", "plan"), ("f", "locals")]
    assert untyped_printers(tree) == [("g", "r")]


def test_the_renderer_implements_the_interface():
    assert MEMBERS >= {"emit", "statement", "open_loop", "open_lanes", "close", "combine", "node_block"}
    assert all(callable(getattr(KernelRenderer, name, None)) for name in MEMBERS), \
        sorted(m for m in MEMBERS if not callable(getattr(KernelRenderer, m, None)))
