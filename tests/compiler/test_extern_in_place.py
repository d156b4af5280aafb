"""Functional scatter-style ATen calls (index_put, index_add, scatter_add, scatter) run in place where their first
argument's buffer is computed for the call alone (compiler/lowering/graph.py: `_IN_PLACE_FORMS`): an embedding's
backward no longer copies its zero table before adding into it. Results stay eager's; a graph input, or a buffer
another op still reads, is never written."""
import pathlib

import pytest
import torch

from compiler import config


def _compile_and_read(tmp_path, fn, *args, backward: bool = False):
    torch._dynamo.reset()
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        out = torch.compile(fn, backend="lens")(*args)
        if backward:
            out.sum().backward()
    finally:
        config.debug, config.debug_dir_root = old
    code = "\n".join(p.read_text() for p in sorted(pathlib.Path(tmp_path).glob("run_*/lens/graph_*/output_code.py")))
    return out, code


def test_embedding_backward_adds_into_its_zeros_in_place(tmp_path):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(1000, 32)
    ids = torch.randint(0, 1000, (4, 16))
    ids[0, :4] = 7  # (repeated ids: their gradients accumulate)
    out, code = _compile_and_read(tmp_path, lambda i: emb(i) * 2, ids, backward=True)
    grad = emb.weight.grad.clone()
    emb.weight.grad = None
    (emb(ids) * 2).sum().backward()
    torch.testing.assert_close(grad, emb.weight.grad)
    assert "aten.index_put_.default(" in code and "aten.index_put.default(" not in code


@pytest.mark.parametrize("op", ["index_put", "index_add", "scatter_add", "scatter"])
def test_a_graph_input_is_never_written(tmp_path, op):
    base, index = torch.randn(8, 5), torch.tensor([1, 3, 3])
    src = torch.randn(3, 5)
    calls = {
        "index_put": lambda b: torch.index_put(b, (index,), src, accumulate=True),
        "index_add": lambda b: torch.index_add(b, 0, index, src),
        "scatter_add": lambda b: torch.scatter_add(b, 0, index[:, None].expand(3, 5), src),
        "scatter": lambda b: torch.scatter(b, 0, index[:, None].expand(3, 5), src),
    }
    kept = base.clone()
    out, code = _compile_and_read(tmp_path, calls[op], base)
    torch.testing.assert_close(out, calls[op](kept))
    torch.testing.assert_close(base, kept)  # (the input itself: unchanged)
    assert not any(f"aten.{name}_." in code for name in ("index_put", "index_add", "scatter_add", "scatter"))


@pytest.mark.parametrize("op", ["index_put", "index_add", "scatter_add", "scatter"])
def test_a_computed_first_argument_is_written_in_place_and_a_shared_one_is_not(tmp_path, op):
    index, src = torch.tensor([1, 3, 3]), torch.randn(3, 5)
    calls = {
        "index_put": lambda b: torch.index_put(b, (index,), src, accumulate=True),
        "index_add": lambda b: torch.index_add(b, 0, index, src),
        "scatter_add": lambda b: torch.scatter_add(b, 0, index[:, None].expand(3, 5), src),
        "scatter": lambda b: torch.scatter(b, 0, index[:, None].expand(3, 5), src),
    }

    def alone(x):
        return calls[op](x * 2 + 1)

    def shared(x):
        y = torch.sin(x) * 2  # (in a buffer of its own, read again after the call)
        z = y.sum(0)  # (forces y into a buffer before the call)
        return calls[op](y), y * 3, z

    x = torch.randn(8, 5)
    out, code = _compile_and_read(tmp_path / "alone", alone, x)
    torch.testing.assert_close(out, alone(x))
    assert any(f"aten.{name}_." in code for name in calls)  # (index_add reaches lowering as index_put)
    out, code = _compile_and_read(tmp_path / "shared", shared, x)
    for got, expected in zip(out, shared(x)):
        torch.testing.assert_close(got, expected)


def _kernels_computing(tmp_path, node_name: str) -> list[str]:
    import json
    return [k["name"] for p in pathlib.Path(tmp_path).glob("run_*/lens/graph_*/kernel_map.json")
            for k in json.loads(p.read_text())["kernels"] if k["kind"] != "extern" and node_name in k["nodes"]]


def test_an_input_several_extern_calls_and_the_output_read_is_computed_once(tmp_path):
    """A value no kernel has put in a buffer yet, read by two products and returned: one kernel computes it and
    all three read that buffer (each used to compute it into a buffer of its own: lowering/graph.py,
    `_share_extern_inputs`)."""
    w, a, b = torch.randn(16, 16), torch.randn(4, 16), torch.randn(4, 16)

    def f(w, a, b):
        v = w * 3  # (one cheap op: recomputing it in a reader would be free, realizing it per reader is not)
        return a @ v, b @ v, v
    out, _ = _compile_and_read(tmp_path, f, w, a, b)
    for got, expected in zip(out, f(w, a, b), strict=True):
        torch.testing.assert_close(got, expected)
    assert len(_kernels_computing(tmp_path, "mul")) == 1, _kernels_computing(tmp_path, "mul")


def test_a_first_argument_run_in_place_is_not_shared(tmp_path):
    """The in-place call's first argument stays computed for it alone, though another node reads the value too:
    that reader computes it again rather than reading a buffer the call overwrote."""
    index, src = torch.tensor([1, 3, 3]), torch.randn(3, 5)

    def f(x):
        y = x * 2 + 1
        return torch.index_add(y, 0, index, src), torch.mm(y, y.t())
    x = torch.randn(8, 5)
    out, code = _compile_and_read(tmp_path, f, x)
    for got, expected in zip(out, f(x), strict=True):
        torch.testing.assert_close(got, expected)
    assert "aten.index_put_." in code
