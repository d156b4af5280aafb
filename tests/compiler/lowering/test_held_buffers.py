"""A lazy value reading large buffers is realized where it is made (lowering/graph.py, HELD_BYTES_BOUND): a weight
applied many times gets one gradient product per use in the backward, each added as soon as it is made, as eager
adds them, instead of all kept alive for one kernel at the end (issue 49: Albert's training step, 11 GiB against
eager's 3.2). Memory is measured from the profiler's record of every allocation and free."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from compiler import config, pipeline
from compiler.lowering import graph

SIZE, USES, ROWS = 128, 12, 32
PRODUCT_BYTES = SIZE * SIZE * 4  # one gradient product of the shared weight: 64 KiB
DEFAULT_BOUND = graph.HELD_BYTES_BOUND


class SharedLinear(torch.nn.Module):
    """One Linear applied USES times (Albert's layer sharing, small)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(SIZE, SIZE, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(USES):
            x = torch.tanh(self.lin(x))
        return x


def _peak_bytes(fn) -> int:
    """The most bytes allocated at once while `fn` runs, over what was live when it started: the running sum of
    the profiler's allocation (+) and free (-) records in time order."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]")
    live = peak = 0
    for _, nbytes in records:
        live += nbytes
        peak = max(peak, live)
    return peak


def _backward(model: torch.nn.Module, fn, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The weight's gradient and the backward's peak bytes (second step: the first one compiles)."""
    fn(x).sum().backward()
    model.zero_grad(set_to_none=True)
    loss = fn(x).sum()
    peak = _peak_bytes(loss.backward)
    return model.lin.weight.grad.clone(), peak


def _compiled_backward(monkeypatch, bound: int) -> tuple[torch.Tensor, int, str]:
    monkeypatch.setattr(graph, "HELD_BYTES_BOUND", bound)
    monkeypatch.setattr(config, "graph_cache", False)  # (it keys on the compiler's source, not the patched bound)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, x = SharedLinear(), torch.randn(ROWS, SIZE)
    grad, peak = _backward(model, torch.compile(model, backend="lens"), x)
    backward = pipeline.COMPILED[-1]
    assert backward.graph_id != pipeline.COMPILED[-2].graph_id
    return grad, peak, backward.code.text


def _add_calls(code: str) -> list[str]:
    """call()'s lines launching a kernel of adds."""
    lines = [line.strip() for line in code[code.index("def call(args):"):].splitlines()]
    return [line for line in lines if line.startswith("cpp_fused_add_")]


@pytest.fixture(scope="module")
def eager() -> tuple[torch.Tensor, int]:
    torch.manual_seed(0)
    model, x = SharedLinear(), torch.randn(ROWS, SIZE)
    return _backward(model, model, x)


def test_a_shared_weights_gradient_products_are_added_as_they_come(monkeypatch, eager):
    grad, peak, code = _compiled_backward(monkeypatch, 2 * PRODUCT_BYTES)  # (Albert's FFN products: 256 MiB each)
    eager_grad, eager_peak = eager
    torch.testing.assert_close(grad, eager_grad)
    # eager holds the running sum, the new product and the sum it makes; all 12 products at once were 786 KiB
    assert peak <= eager_peak, (peak, eager_peak)
    assert peak < 3 * PRODUCT_BYTES
    # the 11 adds are 11 kernels, each adding one product to the running sum (written over it)
    adds = _add_calls(code)
    assert len(adds) == USES - 1
    assert all(line.count(".data_ptr()") == 2 for line in adds), adds
    # each alone in its kernel (ComputedBuffer.alone): the tanh backward kernels around it are as they were
    kernels = [line.strip() for line in code.splitlines() if line.strip().startswith("# Topologically Sorted")]
    assert [k for k in kernels if "add" in k] == [f"# Topologically Sorted Source Nodes: [add{f'_{i}' if i else ''}]"
                                                   for i in range(USES - 1)]


def test_the_gradient_is_bitwise_what_one_fused_sum_gives(monkeypatch):
    """Realized one add at a time, the sum is added in the same order as the one fused kernel added it; under the
    default bound these 64 KiB products stay lazy, as before."""
    chained, chained_peak, _ = _compiled_backward(monkeypatch, 2 * PRODUCT_BYTES)
    fused, fused_peak, code = _compiled_backward(monkeypatch, DEFAULT_BOUND)
    assert torch.equal(chained, fused)
    assert [line.count(".data_ptr()") for line in _add_calls(code)] == [USES]  # (one kernel, in place)
    assert fused_peak >= (USES - 1) * PRODUCT_BYTES > 2 * chained_peak  # (the products alive together)

