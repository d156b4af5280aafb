"""A training BatchNorm's activation runs in the statistics kernel's output pass (issue 49): the scheduler looks back
past BatchNorm's `num_batches_tracked + 1` and running statistics (compiler/scheduler.py `_row_kernel`), and the
activation is computed in the loop that writes the normalized output, from its value
(compiler/codegen/strategies/joint_loops.py). Training steps equal eager's; the forward's kernels, plan decisions and
loop are checked exactly."""
from __future__ import annotations

import copy
import json
import pathlib
import re

import pytest
import torch

from compiler import config
from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.conftest import assert_same, compile_with_debug, kernel_plans


class _NormAct(torch.nn.Module):
    def __init__(self, channels: int, act):
        super().__init__()
        self.bn, self.act = torch.nn.BatchNorm2d(channels), act

    def forward(self, x):
        return self.act(self.bn(x))


def _train_step(tmp_path, act, shape, dtype=torch.float32) -> pathlib.Path:
    """One forward and backward of BatchNorm2d + `act` (training) with lens against eager (output, gradients, running
    statistics); the forward's graph folder."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = _NormAct(shape[1], act).train().to(dtype)
    with torch.no_grad():
        model.bn.weight.uniform_(0.5, 1.5)
        model.bn.bias.uniform_(-0.5, 0.5)
    eager = copy.deepcopy(model)
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    x_eager = x.detach().clone().requires_grad_()
    grad = torch.randn(shape, dtype=dtype)
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        out = torch.compile(model, backend="lens")(x)
        out.backward(grad)
    finally:
        config.debug, config.debug_dir_root = old
    expected = eager(x_eager)
    expected.backward(grad)
    tol = {"atol": 4e-2, "rtol": 4e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    torch.testing.assert_close(out, expected, **tol)
    for got, want in ((x.grad, x_eager.grad), (model.bn.weight.grad, eager.bn.weight.grad),
                      (model.bn.bias.grad, eager.bn.bias.grad), (model.bn.running_mean, eager.bn.running_mean),
                      (model.bn.running_var, eager.bn.running_var)):
        torch.testing.assert_close(got, want, **tol)
    assert model.bn.num_batches_tracked.item() == eager.bn.num_batches_tracked.item() == 1
    (forward,) = [g for g in pathlib.Path(tmp_path).glob("run_*/lens/graph_*")
                  if "(forward)" in (g / "output_code.py").read_text().splitlines()[0]]
    return forward


ACTS = {"relu6": torch.nn.ReLU6(), "hardswish": torch.nn.Hardswish()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 16, 12, 12), (2, 16, 12, 12), (1, 24, 7, 7), (2, 8, 33, 5)])
@pytest.mark.parametrize("act", list(ACTS))
def test_batch_norm_activation_training_steps_equal_eager(tmp_path, act, shape, dtype):
    _train_step(tmp_path, ACTS[act], shape, dtype)


@pytest.mark.parametrize("act", list(ACTS))
def test_the_activation_is_computed_in_the_loop_writing_the_batch_norm_output(tmp_path, act):
    graph = _train_step(tmp_path, ACTS[act], (1, 16, 12, 12))
    kernels = json.loads((graph / "kernel_map.json").read_text())["kernels"]
    # one kernel for the statistics, the output and the activation; the scalar counter, then the running statistics
    assert [(k["name"], k["kind"]) for k in kernels] == \
        [(f"cpp_fused__native_batch_norm_legit_functional_{'hardtanh' if act == 'relu6' else 'hardswish'}_0",
          "reduction"), ("cpp_fused_add_1", "pointwise"), ("cpp_fused__native_batch_norm_legit_functional_2",
                                                            "pointwise")]
    (plan,) = [k for k in kernel_plans(graph).kernels if k.kernel == kernels[0]["name"]]
    assert [(d.subject, d.choice) for d in plan.decisions if d.pass_name == "joint loops"] == \
        [("buf7", "in buf3's loop, reading its value")]
    code = (graph / "output_code.py").read_text().split(PRELUDE_END, 1)[1]
    loops = re.findall(r"#pragma omp simd\n\s*for \(int64_t (\w+) = 0; \1 < 144; \1\+\+\)\n(.*?)\n {12}\}", code,
                       re.DOTALL)
    assert len(loops) == 1, loops  # the output pass: no other loop over the channel's elements
    var, body = loops[0]
    stores = re.findall(r"(out_ptr\d+)\[144\*x0 \+ " + var + r"\] = (\w+);", body)
    assert [p for p, _ in stores] == ["out_ptr3", "out_ptr4"]  # the batch norm output, then the activation
    normalized = stores[0][1]
    assert re.search(rf"\(\s*{normalized}\b", body.split(f"out_ptr3[144*x0 + {var}] = {normalized};")[1])
    assert not re.search(r"= out_ptr\d+\[", code)  # nothing reads an output back


def test_a_node_reading_its_producer_at_another_element_keeps_its_own_loop(tmp_path):
    def fn(x):
        a = x / x.sum(-1, keepdim=True)
        return a, a.flip(-1) + 1  # the second reads element 63 - j where the first writes j
    x = torch.rand(16, 64) + 0.5
    _, graph = compile_with_debug(tmp_path, fn, x)
    assert all(d.pass_name != "joint loops" for k in kernel_plans(graph).kernels for d in k.decisions)
    assert_same(fn, x)

