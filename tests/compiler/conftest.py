"""Helpers for compiler tests: compile with backend="lens" and compare with eager PyTorch."""
import os
import pathlib

import pytest
import torch

from compiler import config

# every kernel's plan is checked after each planning pass (compiler/codegen/plan_verify.py), here and in the
# processes the tests start
os.environ.setdefault("LENS_VERIFY_PLAN", "1")
config.verify_plan = True

torch._dynamo.config.cache_size_limit = 4096
torch._dynamo.config.accumulated_cache_size_limit = 1 << 20


def _flat(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return [x]


def significant_strides(t: torch.Tensor) -> tuple[int, ...] | None:
    """The strides that decide a dense tensor's memory layout: those of dimensions longer than 1 (a size-1
    dimension's stride is never used); None for a tensor that is not dense (a view with gaps or overlaps)."""
    if not torch._prims_common.is_non_overlapping_and_dense_or_false(t):
        return None
    return tuple(stride for size, stride in zip(t.shape, t.stride()) if size > 1)


def assert_same(fn, *args, atol=1e-5, rtol=1.3e-6, **kwargs):
    """fn compiled with lens gives what eager gives: same dtypes, shapes, strides of dense outputs,
    exactly equal integers/bools, floats within tolerance, NaN where eager has NaN."""
    torch._dynamo.reset()
    expected = fn(*args, **kwargs)
    got = torch.compile(fn, backend="lens")(*args, **kwargs)
    for e, g in zip(_flat(expected), _flat(got), strict=True):
        if isinstance(e, torch.Tensor):
            assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
            if significant_strides(e) is not None:
                assert g.stride() == e.stride() or significant_strides(g) == significant_strides(e), \
                    f"strides {g.stride()} where eager's are {e.stride()} (shape {tuple(e.shape)})"
            if e.dtype.is_floating_point:
                torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
            else:
                assert torch.equal(g, e), (g, e)
        else:
            assert g == e
    return got


@pytest.fixture
def stream_everything(monkeypatch):
    """Streaming stores for every output a kernel may stream, however small."""
    monkeypatch.setattr(config.cpp, "streaming_stores", True)
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 0)


@pytest.fixture
def same():
    return assert_same


def compile_with_debug(tmp_path, fn, *args):
    """Compile and run `fn` with lens, writing the debug directory under tmp_path; returns the output and
    the (last) graph folder."""
    torch._dynamo.reset()
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        out = torch.compile(fn, backend="lens")(*args)
    finally:
        config.debug, config.debug_dir_root = old
    graphs = sorted(pathlib.Path(tmp_path).glob("run_*/lens/graph_*"), key=lambda p: int(p.name.split("_")[1]))
    return out, graphs[-1]


def cpp_source(kernel: str) -> str:
    """A generated C++ source around `kernel` as compiler/codegen/wrapper.py lays it out: prelude, end marker,
    the definitions the kernel needs, the kernel."""
    from compiler.codegen.cpp_ops import PRELUDE
    from compiler.cpp_text import vector_math
    from compiler.cpp_text.math_prelude import PRELUDE_END
    return PRELUDE + vector_math.declarations() + PRELUDE_END + "\n" + vector_math.definitions(kernel) + kernel


@pytest.fixture
def build_cache(tmp_path, monkeypatch):
    """A fresh kernel cache with the precompiled prelude and the prebuilt objects turned on."""
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config.cpp, "precompiled_header", True)
    monkeypatch.setattr(config.cpp, "prebuilt_objects", True)
    return tmp_path


def kernel_plans(graph_dir: pathlib.Path):
    """The graph's kernel_plans.json (lens_format.kernel_plans.KernelPlansFile) as the compile wrote it."""
    from lens_format.kernel_plans import read_kernel_plans
    return read_kernel_plans(pathlib.Path(graph_dir) / "kernel_plans.json")


def only_plan(graph_dir: pathlib.Path):
    """The plan of the graph's one generated kernel (its generic plan when it has size variants)."""
    plans = [k for k in kernel_plans(graph_dir).kernels if not k.size_variant]
    assert len(plans) == 1, [k.kernel for k in plans]
    return plans[0]


def linear_block_follows_weight_changes(m: int, k: int, n: int, after_first, after_change) -> None:
    """A Linear-GELU-Linear block compiled by lens under no_grad equals eager's before and after an in-place change of
    both weights; `after_first()` and `after_change()` check what served its products (packs, by the GEMM tests)."""
    torch.manual_seed(0)
    up, down = torch.nn.Linear(k, n), torch.nn.Linear(n, k)

    def block(x):
        return down(torch.nn.functional.gelu(up(x)))
    x = torch.randn(m, k)
    with torch.no_grad():
        torch._dynamo.reset()
        compiled = torch.compile(block, backend="lens")
        torch.testing.assert_close(compiled(x), block(x), atol=1e-4, rtol=1e-4)
        after_first()
        up.weight.mul_(0.5)
        down.weight.add_(1.0)
        torch.testing.assert_close(compiled(x), block(x), atol=1e-4, rtol=1e-4)
        after_change()


def record_results(monkeypatch, module, name: str) -> list:
    """`module.name` wrapped so that each call's result is appended to the returned list (which of a library's
    paths ran, where the call itself is what is tested)."""
    seen = []
    real = getattr(module, name)

    def recorded(*args, **kwargs):
        result = real(*args, **kwargs)
        seen.append(result)
        return result
    monkeypatch.setattr(module, name, recorded)
    return seen


def finite_float_spread(step: int = 4099) -> torch.Tensor:
    """Every `step`-th float32 bit pattern that is finite: a spread over all magnitudes and both signs."""
    bits = torch.arange(0, 2 ** 32, step, dtype=torch.int64)
    spread = (bits - 2 ** 31 * (bits >= 2 ** 31)).to(torch.int32).view(torch.float32)
    return spread[torch.isfinite(spread)]


def floats_between(got: torch.Tensor, rounded: torch.Tensor) -> torch.Tensor:
    """How many float32 values lie between `got` and `rounded` (0: the same value); both of one sign."""
    bits = lambda t: t.view(torch.int32).to(torch.int64)  # noqa: E731 (same-sign floats order as their bits)
    return (bits(got) - bits(rounded)).abs()


def scalar_tail_and_vector_body(fn, values: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """`fn` compiled over `values` (16 of them: one 16-lane vector) and a 17th, a copy of the 6th, which the loop's
    scalar tail computes; asserts both give the 6th the same bits. Returns (input, output)."""
    x = torch.tensor(values + values[5:6])
    torch._dynamo.reset()
    out = torch.compile(fn, backend="lens")(x)
    assert out[16].view(torch.int32) == out[5].view(torch.int32)
    return x, out


def disassembly(tmp_path, fn, x: torch.Tensor) -> str:
    """`objdump -d` of the library lens builds for `fn` on `x` (its debug source rebuilt: a cache hit)."""
    import subprocess

    from compiler.machine import build
    _, graph = compile_with_debug(tmp_path, fn, x)
    text = (graph / "output_code.py").read_text()
    so = build.build_shared_library(text.split("cpp_source = r'''", 1)[1].split("'''", 1)[0])  # (a cache hit)
    return subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True, text=True).stdout


def function_of(asm: str, symbol: str) -> str:
    """The disassembled body of `symbol` in `asm` (objdump's output)."""
    return asm.split(f"<{symbol}>:", 1)[1].split("\n\n", 1)[0]


class NormAct(torch.nn.Module):
    """BatchNorm2d then an activation: the block whose training kernels tests/compiler/codegen checks."""

    def __init__(self, channels: int, act):
        super().__init__()
        self.bn, self.act = torch.nn.BatchNorm2d(channels), act

    def forward(self, x):
        return self.act(self.bn(x))


def norm_act_train_step(tmp_path, act, shape, dtype=torch.float32, out_tol: dict | None = None) -> dict:
    """One forward and backward of NormAct (training) with lens against eager: the output (`out_tol`, default
    assert_close's), the input and parameter gradients and the running statistics (1e-4; 4e-2 in bfloat16), the
    batch counter; {"forward": its graph folder, "backward": its graph folder}."""
    import copy
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = NormAct(shape[1], act).train().to(dtype)
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
    torch.testing.assert_close(out, expected, **(out_tol if out_tol is not None else {}))
    for got, want in ((x.grad, x_eager.grad), (model.bn.weight.grad, eager.bn.weight.grad),
                      (model.bn.bias.grad, eager.bn.bias.grad), (model.bn.running_mean, eager.bn.running_mean),
                      (model.bn.running_var, eager.bn.running_var)):
        torch.testing.assert_close(got, want, **tol)
    assert model.bn.num_batches_tracked.item() == eager.bn.num_batches_tracked.item() == 1
    graphs = {}
    for g in pathlib.Path(tmp_path).glob("run_*/lens/graph_*"):
        first = (g / "output_code.py").read_text().splitlines()[0]
        for kind in ("forward", "backward"):
            if f"({kind})" in first:
                assert kind not in graphs, f"two {kind} graphs"
                graphs[kind] = g
    return graphs
