"""Loads that read one element per outer iteration are printed before the innermost loop instead of in it
(codegen/expressions.py `_hoisted_load`): in the loop, a batch-norm backward's output pass (which reads the channel's
mean, invstd and weight) stayed scalar, g++'s "latch block not empty", 60% of the kernel's time (issue 49).
The training step's results equal eager's, every per-channel load of the backward kernel is printed before the `omp
simd` loop that uses it, and g++ reports no loop of the kernel left scalar for that reason."""
from __future__ import annotations

import pathlib
import re

import pytest
import torch
import torch.nn.functional as F

from compiler import config
from tests.compiler.conftest import norm_act_train_step


def _next_statement(lines: list[str], at: int) -> str:
    """The first line after `at` that is neither a per-channel load nor a comment."""
    return next(text for text in (line.strip() for line in lines[at + 1:])
                if not text.startswith("//") and not re.fullmatch(r"auto tmp\d+ = in_ptr\d+\[x0\];", text))


def _in_inner_loop(lines: list[str], at: int) -> bool:
    """Whether line `at` lies in the body of a loop other than the kernel's outer one over channels (`x0`)."""
    start = max(i for i in range(at) if lines[i].startswith('extern "C"'))
    blocks, pending = [], False
    for line in lines[start + 1:at]:
        text = line.strip()
        if text.startswith("for (int64_t ") and not text.endswith(";"):
            pending = not text.startswith("for (int64_t x0 ")
        elif text == "{":
            blocks.append(pending)
            pending = False
        elif text == "}":
            blocks.pop()
    return any(blocks)


@pytest.mark.parametrize("act", [F.relu6, F.hardswish], ids=["relu6", "hardswish"])
@pytest.mark.parametrize("shape", [(1, 24, 14, 14), (2, 16, 9, 9)], ids=["batch 1", "batch 2"])
def test_per_channel_loads_go_before_the_batch_norm_backward_loops(tmp_path, act, shape):
    backward = norm_act_train_step(tmp_path, act, shape)["backward"]
    lines = (backward / "output_code.py").read_text().splitlines()
    per_channel = [i for i, line in enumerate(lines) if re.search(r"in_ptr\d+\[x0\]", line)]
    assert per_channel and all(re.fullmatch(r"\s*auto tmp\d+ = in_ptr\d+\[x0\];", lines[i]) for i in per_channel)
    # each one outside the kernel's inner loops, or (in a loop over the batch) right before the innermost one
    before_loop = [i for i in per_channel if _next_statement(lines, i).startswith("#pragma omp simd")]
    assert before_loop
    assert not [lines[i] for i in per_channel if i not in before_loop and _in_inner_loop(lines, i)]
    vectorization = (backward / "vectorization.txt").read_text()
    assert "native_batch_norm_backward" in (backward / "output_code.py").read_text()
    assert "latch block not empty" not in vectorization


def test_loads_that_change_along_the_loop_stay_in_it(tmp_path):
    """A row's elements and a kernel's own outputs are read in the loop; only the per-row scale moves out."""
    def fn(x, scale):
        y = x * scale[:, None]
        return y.sum(1), torch.relu(y) + 1

    x, scale = torch.randn(8, 40), torch.randn(8)
    torch._dynamo.reset()
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        out = torch.compile(fn, backend="lens")(x, scale)
    finally:
        config.debug, config.debug_dir_root = old
    for got, want in zip(out, fn(x, scale)):
        torch.testing.assert_close(got, want)
    (graph,) = pathlib.Path(tmp_path).glob("run_*/lens/graph_*")
    code = (graph / "output_code.py").read_text()
    loads = re.findall(r"(\s*)auto (tmp\d+) = (in_ptr\d+)\[([^\]]+)\];", code)
    assert {(ptr, index) for _, _, ptr, index in loads if "x0" == index} == {("in_ptr1", "x0")}
    assert all(index != "x0" for _, _, ptr, index in loads if ptr == "in_ptr0")
