"""compiler/hooks.py: the frontend runs an active tool's wrappers (the generated code's innermost, the Dynamo
graph's outermost), skips the graph cache when a tool says so, and runs nothing of an inactive tool."""
import torch

from compiler import hooks
from compiler import pipeline
from compiler.frontend import dynamo_backend as frontend
from compiler.frontend import graph_cache


def probe_tool(calls: list[str], active: bool = True, uses_graph_cache: bool = True) -> hooks.Tool:
    def wrapping(where: str, call):
        def run(*args):
            calls.append(where)
            return call(*args)

        run._boxed_call = True
        return run

    def wrap_dynamo_graph(eager, compiled, graphs):
        calls.append(f"wrapped {len(graphs)} graph(s), eager {callable(eager)}")
        return wrapping("dynamo graph", compiled)

    return hooks.Tool("probe", active=lambda: active, uses_graph_cache=uses_graph_cache,
                      wrap_code=lambda graph, call: wrapping(f"code of {graph.graph_id}", call),
                      wrap_graph=lambda graph, call: wrapping("graph", call), wrap_dynamo_graph=wrap_dynamo_graph)


def compile_and_call(x: torch.Tensor) -> torch.Tensor:
    torch._dynamo.reset()
    return torch.compile(lambda t: t * 2 + 1, backend=frontend.lens_backend)(x)


def test_an_active_tool_wraps_the_code_the_graph_and_the_dynamo_graph(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(hooks, "_TOOLS", {})
    hooks.register(probe_tool(calls))
    x = torch.randn(8)
    torch.testing.assert_close(compile_and_call(x), x * 2 + 1)
    graph_id = pipeline.COMPILED[-1].graph_id
    assert calls == ["wrapped 1 graph(s), eager True", "dynamo graph", "graph", f"code of {graph_id}"]


def test_an_inactive_tool_takes_no_part(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(hooks, "_TOOLS", {})
    hooks.register(probe_tool(calls, active=False))
    x = torch.randn(8)
    torch.testing.assert_close(compile_and_call(x), x * 2 + 1)
    assert calls == []


def test_a_tool_that_needs_the_compile_keeps_the_graph_cache_out(monkeypatch):
    lookups = []
    monkeypatch.setattr(graph_cache, "lookup", lambda gm, inputs: lookups.append(gm) or (None, None))
    monkeypatch.setattr(hooks, "_TOOLS", {})
    hooks.register(probe_tool([], uses_graph_cache=False))
    compile_and_call(torch.randn(8))
    assert lookups == []
    hooks.register(probe_tool([], active=False, uses_graph_cache=False))  # replaces it, inactive
    compile_and_call(torch.randn(8))
    assert len(lookups) == 1
