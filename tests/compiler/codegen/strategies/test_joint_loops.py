"""A training BatchNorm's activation runs in the statistics kernel's output pass (issue 49): the scheduler looks back
past BatchNorm's `num_batches_tracked + 1` and running statistics (compiler/scheduler.py `_row_kernel`), and the
activation is computed in the loop that writes the normalized output, from its value
(compiler/codegen/strategies/joint_loops.py). Training steps equal eager's; the forward's kernels, plan decisions and
loop are checked exactly."""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
import sympy
import torch

from compiler import scheduler
from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.conftest import assert_same, compile_with_debug, kernel_plans, norm_act_train_step


def _out_tol(dtype: torch.dtype) -> dict:
    return {"atol": 4e-2, "rtol": 4e-2} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}


ACTS = {"relu6": torch.nn.ReLU6(), "hardswish": torch.nn.Hardswish()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 16, 12, 12), (2, 16, 12, 12), (1, 24, 7, 7), (2, 8, 33, 5), (2, 8, 24, 24),
                                   (1, 8, 40, 13)])
@pytest.mark.parametrize("act", list(ACTS))
def test_batch_norm_activation_training_steps_equal_eager(tmp_path, act, shape, dtype):
    norm_act_train_step(tmp_path, ACTS[act], shape, dtype, _out_tol(dtype))


@pytest.mark.parametrize("act", list(ACTS))
def test_the_activation_is_computed_in_the_loop_writing_the_batch_norm_output(tmp_path, act):
    assert 24 * 24 >= scheduler.LOOK_BACK_MIN_RUN  # (a row above the floor)
    graph = norm_act_train_step(tmp_path, ACTS[act], (1, 16, 24, 24), out_tol=_out_tol(torch.float32))["forward"]
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
    loops = re.findall(r"#pragma omp simd\n\s*for \(int64_t (\w+) = 0; \1 < 576; \1\+\+\)\n(.*?)\n {12}\}", code,
                       re.DOTALL)
    assert len(loops) == 1, loops  # the output pass: no other loop over the channel's elements
    var, body = loops[0]
    stores = re.findall(r"(out_ptr\d+)\[576\*x0 \+ " + var + r"\] = (\w+);", body)
    assert [p for p, _ in stores] == ["out_ptr3", "out_ptr4"]  # the batch norm output, then the activation
    normalized = stores[0][1]
    assert re.search(rf"\(\s*{normalized}\b", body.split(f"out_ptr3[576*x0 + {var}] = {normalized};")[1])
    assert not re.search(r"= out_ptr\d+\[", code)  # nothing reads an output back


@pytest.mark.parametrize("shape", [(2, 16, 7, 7), (2, 8, 14, 14), (4, 8, 12, 12)])
def test_below_the_row_floor_the_activation_keeps_a_kernel_of_its_own(tmp_path, shape):
    # (rows of 49-196 elements: the joined kernel was slower than the two, docs/performance.md; at batch 1 the
    # activation joins the running statistics' kernel instead, as it did before the look-back)
    assert shape[2] * shape[3] < scheduler.LOOK_BACK_MIN_RUN
    graph = norm_act_train_step(tmp_path, ACTS["relu6"], shape, out_tol=_out_tol(torch.float32))["forward"]
    kernels = [(k["name"], k["kind"]) for k in json.loads((graph / "kernel_map.json").read_text())["kernels"]]
    assert kernels == [("cpp_fused__native_batch_norm_legit_functional_0", "reduction"),
                       ("cpp_fused_add_1", "pointwise"),
                       ("cpp_fused__native_batch_norm_legit_functional_2", "pointwise"),
                       ("cpp_fused_hardtanh_3", "pointwise"),
                       ("cpp_fused__native_batch_norm_legit_functional_4", "pointwise")]  # (the saved mean, after it)
    assert all(d.pass_name != "joint loops" for k in kernel_plans(graph).kernels for d in k.decisions)


def test_the_floor_takes_the_contiguous_run_and_a_size_unknown_at_compile_time_stays_apart(monkeypatch):
    s = sympy.Symbol("s0", positive=True, integer=True)
    layout = SimpleNamespace(size=(2, 16, s, s), stride=(16 * s * s, s * s, s, 1))
    node = SimpleNamespace(loop_order=None, layout=layout)
    assert not scheduler._long_run(node, 1)  # (unknown: the conservative path, no look-back join)
    node.layout = SimpleNamespace(size=(2, 16, 32, 32), stride=(16384, 1024, 32, 1))
    for order, run in ((None, 16 * 32 * 32), ((1, 0, 2, 3), 32 * 32)):  # (channels outermost: the batch's stride
        node.loop_order = order                                          # breaks the run)
        monkeypatch.setattr(scheduler, "LOOK_BACK_MIN_RUN", run)
        assert scheduler._long_run(node, 1) and not scheduler._long_run(node, 4)  # (inside all four: one element)
        monkeypatch.setattr(scheduler, "LOOK_BACK_MIN_RUN", run + 1)
        assert not scheduler._long_run(node, 1)


def test_a_node_reading_its_producer_at_another_element_keeps_its_own_loop(tmp_path):
    def fn(x):
        a = x / x.sum(-1, keepdim=True)
        return a, a.flip(-1) + 1  # the second reads element 63 - j where the first writes j
    x = torch.rand(16, 64) + 0.5
    _, graph = compile_with_debug(tmp_path, fn, x)
    assert all(d.pass_name != "joint loops" for k in kernel_plans(graph).kernels for d in k.decisions)
    assert_same(fn, x)

