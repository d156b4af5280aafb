"""The pipeline's promise that a compile eager runs never fails (compiler/pipeline.py): a failure of generated code at
its first call runs the graph eagerly instead, with a note, as a failure at compile time does."""
import os

import pytest
import torch

from compiler import config, pipeline
from compiler.lowering import extern_calls


class ConvGroupNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.GroupNorm(1, 8)

    def forward(self, x):
        y = self.conv(x)
        return y + self.norm(y * 2)


@pytest.mark.parametrize("grad", [False, True])
def test_a_failure_of_generated_code_at_its_first_call_runs_the_graph_eagerly_with_a_note(tmp_path, monkeypatch,
                                                                                         grad):
    # a real failure of generated code: size-1 dims' strides left as the buffer has them (the layout bug this
    # guard first met: native_group_norm refuses a batch-1 channels-last buffer with stride 1 on its batch dim)
    monkeypatch.setattr(extern_calls, "eager_strides", lambda size, stride: tuple(stride))
    monkeypatch.setattr(config, "decompose_group_norm", False)  # (ATen's group norm, whose layout check fails)
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path))
    torch.manual_seed(0)
    model = ConvGroupNorm().eval()
    # (a channels-last input: the training graph's convolution computes channels-last as the frozen one does)
    x = torch.randn(1, 3, 10, 10).contiguous(memory_format=torch.channels_last).requires_grad_(grad)
    compiled_before, eager_before = len(pipeline.COMPILED), len(pipeline.EAGER)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="lens")
    with torch.set_grad_enabled(grad):
        expected = model(x)
        got = compiled(x)
        again = compiled(x)  # later calls run the graph eagerly too, without trying the code again
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(again, expected, atol=1e-5, rtol=1e-5)
    failed = [(g, why) for g, why in pipeline.EAGER[eager_before:] if "failed at its first call" in why]
    assert len(failed) == 1 and "is_contiguous(memory_format)" in failed[0][1]
    notes = "".join(p.read_text() for p in tmp_path.glob("run_*/lens/*/notes.txt"))
    assert "failed at its first call" in notes
    if grad:  # the backward of a forward that ran eagerly is eager's too
        got.sum().backward()
        grad_got = x.grad.clone()
        x.grad = None
        expected.sum().backward()
        torch.testing.assert_close(grad_got, x.grad, atol=1e-5, rtol=1e-5)
    # the failed code is gone from the output-code cache, so no warm start loads it again
    graph = next(c for c in pipeline.COMPILED[compiled_before:] if c.graph_id == failed[0][0])
    assert graph.output_code_path and not os.path.exists(graph.output_code_path)


def test_code_that_runs_is_not_called_twice_on_its_first_call():
    # the guard runs the generated code once per call: a graph with a side effect visible in its output (an
    # in-place update of an input) updates it once
    def step(buf, x):
        buf.add_(x)
        return buf * 2

    buf, x = torch.zeros(5), torch.ones(5)
    torch._dynamo.reset()
    out = torch.compile(step, backend="lens")(buf, x)
    assert torch.equal(buf, torch.ones(5)) and torch.equal(out, torch.full((5,), 2.0))
