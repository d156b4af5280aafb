"""suite_bench.py's three modes: fp32 inference, bf16-autocast inference and a training step, each with the backends it
compares, the call it times, and its accuracy check as PyTorch's harness makes it; and the profiler pass that splits a
compiled call into GEMM/convolution calls, other ATen calls and the rest (generated kernels and their glue)."""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from suite_models import as_double, call, tensors, without_dropout


@dataclass(frozen=True)
class Mode:
    name: str
    backends: tuple[str, ...]  # the default columns, eager first (the accuracy reference)
    baseline: str  # the backend lens is judged against
    tol: float  # the harness's tolerance for its default models (torch/benchmarks/dynamo: common.py, timm_models.py)
    train: bool
    autocast: bool


MODES = {
    # inference: the harness's float32 default 1e-4 (its per-suite 1e-3 is looser)
    "infer": Mode("infer", ("eager", "inductor", "inductor_freezing", "lens"), "inductor_freezing", 1e-4, False, False),
    # bf16 autocast: huggingface.py and timm_models.py answer 1e-3 for amp inference
    "bf16": Mode("bf16", ("eager", "inductor_freezing", "lens"), "inductor_freezing", 1e-3, False, True),
    # a training step: both suites answer 1e-2 for training
    "train": Mode("train", ("eager", "inductor", "lens"), "inductor", 1e-2, True, False),
}
TRAIN_STEPS_CHECKED = 2  # parameters compared after this many steps (the first is the compile)


def accurate(ref: list, res: list, fp64: list, tol: float) -> bool:
    """PyTorch's harness rule: `torch._dynamo.utils.same` with a float64 reference; a tensor passes when it is allclose
    to eager's within tol, or when its RMSE against the float64 run is at most 3x eager's own RMSE plus tol/10."""
    from torch._dynamo.utils import same
    return bool(same(ref, res, fp64_ref=fp64, tol=tol, cos_similarity=False))


def freezing_flag(mode: Mode, backends: list[str]):
    """The context a model's backends compile and run in: `torch._inductor.config.freezing` set where Inductor with
    freezing is among them, as CPU users are told to set it and upstream's harness (`--freezing`) sets it. Dynamo
    reads it too, and hands the module's parameters to the backend as graph attributes, which Inductor's freezing
    folds; as a compile option alone it froze nothing (parameters stayed graph inputs: convolutions unpacked, Linear
    as `addmm`). Every backend compiled in it sees it (lens freezes either way; Inductor default is compiled with
    freezing off as an option)."""
    import torch._inductor.config as inductor_config
    wanted = not mode.train and "inductor_freezing" in backends
    return inductor_config.patch(freezing=True) if wanted else contextlib.nullcontext()


def compiled(backend: str, model: torch.nn.Module) -> torch.nn.Module | Callable:
    """The model under `backend`: eager, inductor (default), inductor_freezing, lens, or any registered Dynamo backend."""
    if backend == "eager":
        return model
    if backend == "inductor_freezing":  # (under `freezing_flag`: the global flag is what freezes)
        return torch.compile(model, backend="inductor")
    if backend == "inductor":
        return torch.compile(model, backend="inductor", options={"freezing": False})
    return torch.compile(model, backend=backend)


def _loss(out) -> torch.Tensor:
    """A scalar loss of every floating output (the harness's reduce_to_scalar_loss: each output's mean, averaged)."""
    floats = [t for t in tensors(out) if t.is_floating_point()]
    return sum(t.float().mean() for t in floats) / len(floats)


class Runner:
    """One backend's callable of one model in one mode: `step()` is the call that is timed."""

    def __init__(self, mode: Mode, backend: str, model: torch.nn.Module, inputs, optimizer: str = "sgd") -> None:
        self.mode, self.backend, self.inputs = mode, backend, inputs
        # a copy each: a training step changes it, and lens and Inductor with freezing fold its weights
        self.model = without_dropout(copy.deepcopy(model).train()) if mode.train else copy.deepcopy(model)
        self.fn = compiled(backend, self.model)
        self.opt = _optimizer(optimizer, self.model) if mode.train else None

    def context(self):
        stack = contextlib.ExitStack()
        stack.enter_context(torch.enable_grad() if self.mode.train else torch.no_grad())
        if self.mode.autocast:
            stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16))
        return stack

    def step(self):
        with self.context():
            if not self.mode.train:
                return call(self.fn, self.inputs)
            self.opt.zero_grad(set_to_none=True)
            loss = _loss(call(self.fn, self.inputs))
            loss.backward()
            self.opt.step()
            return loss

    def results(self, first_out) -> list[torch.Tensor]:
        """What the accuracy check compares: inference, the first call's outputs; training, after TRAIN_STEPS_CHECKED
        steps (the first already run), the last loss and gradients (what the harness compares) and the parameters."""
        if not self.mode.train:
            return tensors(first_out)
        loss = first_out
        for _ in range(TRAIN_STEPS_CHECKED - 1):
            loss = self.step()
        params = list(self.model.parameters())
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        return [loss.detach(), *(g.detach().clone() for g in grads), *(p.detach().clone() for p in params)]


def _optimizer(name: str, model: torch.nn.Module) -> torch.optim.Optimizer:
    if name == "sgd":  # the harness's (lr 1e-2, foreach)
        return torch.optim.SGD(model.parameters(), lr=1e-2, foreach=True)
    if name == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    raise ValueError(f"unknown optimizer {name!r} (sgd or adamw)")


def fp64_reference(mode: Mode, model: torch.nn.Module, inputs, optimizer: str) -> list[torch.Tensor]:
    """The same results from a float64 copy run eagerly without autocast."""
    double = Runner(Mode(mode.name, (), "", mode.tol, mode.train, False), "eager", copy.deepcopy(model).double(),
                    as_double(inputs), optimizer)
    out = double.step()
    return double.results(out)


# ops whose self time counts as GEMM/convolution (ATen's, oneDNN's, MKL's, lens's own ops that call oneDNN)
_GEMM_NAMES = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "linear_onednn", "_addmm_activation",
               "mkldnn_linear", "_linear_pointwise", "_mkl_linear", "mkl_linear")


def is_gemm_or_conv(key: str) -> bool:
    op = key.split("::", 1)[1] if "::" in key else key
    return "conv" in op or op in _GEMM_NAMES or op.endswith(("_mm", "gemm"))


def profile_split(step: Callable[[], object], reps: int = 3) -> dict[str, float]:
    """ms per step under torch.profiler: self time of GEMM/convolution calls, of other ATen calls (copies,
    optimizer's foreach ops, ATen fallbacks), and of the rest (generated kernels, their Python, autograd glue)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            step()
    gemm = other = rest = 0.0
    for e in prof.key_averages():
        ms = e.self_cpu_time_total / 1e3 / reps
        if e.key.startswith(("aten::", "mkldnn::", "lens::", "mkl::", "quantized::")):
            gemm, other = (gemm + ms, other) if is_gemm_or_conv(e.key) else (gemm, other + ms)
        else:
            rest += ms
    return {"gemm_conv": round(gemm, 3), "other_aten": round(other, 3), "generated": round(rest, 3)}


def native_share(graphs: list) -> float | None:
    """Of the nodes lens's compiled graphs (pipeline.COMPILED entries: graphs that ran eagerly are not among them, and
    a graph served by the cache is not compiled again) placed, the share inside generated kernels rather than extern
    ATen calls."""
    native = extern = 0
    for g in graphs:
        kernel_nodes = {n for k in g.code.kernels if k.kind != "extern" for n in k.nodes}
        extern_nodes = {n for k in g.code.kernels if k.kind == "extern" for n in k.nodes}
        native += len(kernel_nodes - extern_nodes)
        extern += len(extern_nodes)
    return round(native / (native + extern), 3) if native + extern else None
