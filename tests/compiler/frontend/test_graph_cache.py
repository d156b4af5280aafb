"""Warm starts skip AOTAutograd for inference graphs called directly (compiler/frontend/graph_cache.py)."""
import json
import logging
import pathlib

import pytest
import torch

from compiler import pipeline
from compiler import config
from compiler.frontend import graph_cache


@pytest.fixture
def traced(monkeypatch, tmp_path):
    """A fresh cache; counts the graphs that go through AOTAutograd into lens's pipeline."""
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "graph_cache", True)
    monkeypatch.setattr(config, "debug", False)
    count = {"n": 0}
    inner = pipeline.compile_to_graph

    def counting(*args, **kwargs):
        count["n"] += 1
        return inner(*args, **kwargs)

    monkeypatch.setattr(pipeline, "compile_to_graph", counting)
    return count


def run(fn, *args, grad=False):
    torch._dynamo.reset()
    with torch.set_grad_enabled(grad):
        compiled = torch.compile(fn, backend="lens")
        return compiled(*args)


def fn(x, w):
    return torch.softmax(x @ w, dim=-1) * 2 + 1


def test_a_warm_start_reuses_the_generated_code_without_tracing(traced, tmp_path):
    x, w = torch.randn(16, 32), torch.randn(32, 24)
    first = run(fn, x, w)
    assert traced["n"] == 1
    assert len(list((tmp_path / "graphs").rglob("*.json"))) == 1
    again = run(fn, x, w)
    assert traced["n"] == 1  # served from the cache
    torch.testing.assert_close(again, fn(x, w))
    torch.testing.assert_close(again, first, rtol=0, atol=0)
    x2 = torch.randn(16, 32)
    torch.testing.assert_close(run(fn, x2, w), fn(x2, w))  # new values, same layouts: still a hit
    assert traced["n"] == 1


def with_literal(x):
    return x * torch.tensor([1.0, 2.0, 3.0]) + 1  # (AOTAutograd lifts the literal out of the graph)


def test_a_graph_with_lifted_constants_is_served_with_them(traced, tmp_path):
    x = torch.randn(4, 3)
    run(with_literal, x)
    (entry,) = (tmp_path / "graphs").rglob("*.json")
    assert pathlib.Path(json.loads(entry.read_text())["constants"]).exists()
    torch.testing.assert_close(run(with_literal, x), with_literal(x))
    assert traced["n"] == 1  # served from the cache, the constant appended to every call
    pathlib.Path(json.loads(entry.read_text())["constants"]).write_bytes(b"not a tensor file")
    torch.testing.assert_close(run(with_literal, x), with_literal(x))
    assert traced["n"] == 2  # a broken constants file: compiled again


def test_other_layouts_dtypes_and_settings_compile_again(traced, monkeypatch):
    x, w = torch.randn(16, 32), torch.randn(32, 24)
    run(fn, x, w)
    cases = [
        (torch.randn(8, 32), w),  # shape
        (torch.randn(32, 16).t(), w),  # strides
        (x.double(), w.double()),  # dtype
    ]
    for i, args in enumerate(cases, start=2):
        torch.testing.assert_close(run(fn, *args), fn(*args))
        assert traced["n"] == i
    monkeypatch.setattr(config.cpp, "min_chunk_size", 1024)  # any setting is part of the key
    run(fn, x, w)
    assert traced["n"] == len(cases) + 2
    run(lambda x, w: torch.softmax(x @ w, dim=-1) * 3 + 1, x, w)  # another graph
    assert traced["n"] == len(cases) + 3


def test_what_needs_the_aten_graph_or_autograd_is_never_served_from_the_cache(traced, monkeypatch, tmp_path):
    x, w = torch.randn(16, 32), torch.randn(32, 24)
    run(fn, x, w)
    run(fn, x, w, grad=True)  # grad mode: AOTAutograd's wrappers
    assert traced["n"] == 2
    monkeypatch.setattr(config, "debug", True)  # a debug directory is written from the aten graph
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path / "debug"))
    run(fn, x, w)
    assert traced["n"] == 3
    monkeypatch.setattr(config, "debug", False)
    run(lambda x: x.add_(1).relu(), torch.randn(8))  # mutates its input
    run(lambda x: x.add_(1).relu(), torch.randn(8))
    assert traced["n"] == 5
    base = torch.randn(32, 16)  # two views of one storage: AOTAutograd's wrappers handle the aliasing
    run(lambda a, b: a @ b.t() + 1, base[:16], base[16:])
    run(lambda a, b: a @ b.t() + 1, base[:16], base[16:])
    assert traced["n"] == 7


def test_a_broken_entry_is_dropped_and_the_graph_compiled_again(traced, tmp_path, caplog):
    x, w = torch.randn(16, 32), torch.randn(32, 24)
    run(fn, x, w)
    (entry,) = (tmp_path / "graphs").rglob("*.json")
    entry.write_text("{\"output_code\": ")  # half-written
    with caplog.at_level(logging.WARNING, logger="compiler.frontend.graph_cache"):
        torch.testing.assert_close(run(fn, x, w), fn(x, w))
    assert traced["n"] == 2 and "unusable" in caplog.text
    code = pathlib.Path(json.loads(entry.read_text())["output_code"])  # rewritten by that compile
    code.unlink()  # the generated module gone from the cache
    torch.testing.assert_close(run(fn, x, w), fn(x, w))
    assert traced["n"] == 3
    torch.testing.assert_close(run(fn, x, w), fn(x, w))
    assert traced["n"] == 3  # and cached again


def test_graphs_calling_user_functions_are_not_cached(traced):
    @torch._dynamo.allow_in_graph
    def scale(t):
        return t * 3

    key, hit = None, None
    gm_seen = []

    def backend(gm, example_inputs):
        gm_seen.append(graph_cache.lookup(gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(lambda x: scale(x) + 1, backend=backend)(torch.randn(4))
        torch.compile(lambda x: x * 3 + 1, backend=backend)(torch.randn(4))
    assert gm_seen[0] == (None, None)
    key, hit = gm_seen[1]
    assert key is not None and hit is None
