"""Compiler benchmark (design.md §6): each workload run eagerly, with Inductor, with `lens` and with a no-op
backend (torch.compile's own cost) in one process, against its same-traffic bound (a preallocated ATen op
moving the bytes that must cross DRAM). Prints run times (median ms), ratios, and cold/warm compile times.
Asserts nothing but correctness.

Usage: python benchmarks/compiler_bench.py [--rounds 15] [--only softmax,layernorm] [--no-inductor] [--dynamic]
       (--only bf16,fp16: the half-precision workloads of benchmarks/half_workloads.py; --dynamic: the dynamic
       suite of benchmarks/dynamic_workloads.py instead, --only choosing among its workloads)
"""
from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

import compiler  # noqa: F401  (registers the "lens" backend)
from compiler import config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import backend_compile_time
import dynamic_workloads  # noqa: E402
import half_workloads  # noqa: E402
from backend_compile_time import BACKEND_MS as _BACKEND_MS
from backend_compile_time import GRAPHS as _GRAPHS
from compiler_bench_report import print_table, target_lines  # noqa: E402,F401  (target_lines: tests/benchmarks)

try:
    from compiler.machine import memory
except ImportError:  # before the buffer pool existed: both lens columns are the same code
    memory = None


@dataclass
class Workload:
    name: str
    fn: Callable
    make_args: Callable[[], list]
    bound: Callable[[list], Callable[[], object]] | None  # args -> a preallocated same-traffic ATen op
    bound_desc: str
    atol: float = 1e-5
    rtol: float = 1.3e-6
    extra: dict[str, Callable[[list], Callable[[], object]]] = field(default_factory=dict)  # more rows to time
    memory_bound: bool = True  # judged against its bound (the MLP's bound is its GEMMs: compute)


def _pointwise(a0, a1, a2, a3, a4):
    return ((a0 + a1) + a2) * a3 + a4


def _softmax(x):
    return torch.softmax(x, dim=-1)


def _half_mask(n: int) -> torch.Tensor:
    mask = torch.zeros(1, n)
    mask[:, n // 2:] = float("-inf")  # an attention mask's -inf: exp must give 0 without slow paths
    return mask


def _masked_softmax(x, mask):
    return torch.softmax(x + mask, dim=-1)


def _mean(x):
    return x.mean(dim=-1)


def _copy_bound(args):
    x = args[0]
    y = torch.empty_like(x)
    return lambda: y.copy_(x)


def _pointwise_bound(args):
    a0, _, a2, _, a4 = args
    out = torch.empty_like(a0)
    return lambda: torch.addcmul(a0, a2, a4, out=out)  # three full inputs read, one output written


def _rowsum_bound(args):
    x = args[0]
    out = torch.empty(x.shape[0], dtype=x.dtype)
    return lambda: torch.sum(x, dim=1, out=out)


def _colsum_bound(args):
    x = args[0]
    out = torch.empty(x.shape[1], dtype=x.dtype)
    return lambda: torch.sum(x, dim=0, out=out)


def _mlp_bound(mlp: torch.nn.Sequential):
    def make(args):
        x = args[0]
        l1, l2 = mlp[0], mlp[2]
        h = torch.empty(x.shape[0], l1.out_features)
        y = torch.empty(x.shape[0], l2.out_features)
        return lambda: (torch.addmm(l1.bias, x, l1.weight.t(), out=h), torch.addmm(l2.bias, h, l2.weight.t(), out=y))
    return make


def _encoder(enc: torch.nn.Module):
    """The encoder layer as its aten graph (MHA fast path off, so eager, Inductor and lens run the same ops)."""
    def run(x):
        return enc(x)
    return run


def _fastpath_eager(enc: torch.nn.Module):
    def make(args):
        def run():
            torch.backends.mha.set_fastpath_enabled(True)
            try:
                return enc(args[0])
            finally:
                torch.backends.mha.set_fastpath_enabled(False)
        return run
    return make


def workloads() -> list[Workload]:
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)
    ln = torch.nn.LayerNorm(1024).eval()
    mlp = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).eval()
    enc = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True).eval()
    big = (16384, 512)
    float_workloads = [
        Workload("pointwise ((a0+a1)+a2)*a3+a4", _pointwise,
                 lambda: [torch.randn(big), torch.randn(1, 512), torch.randn(big), torch.randn(1, 512),
                          torch.randn(big)],
                 _pointwise_bound, "addcmul(out=) 3 in 1 out"),
        Workload("softmax (8192,1024)", _softmax, lambda: [torch.randn(8192, 1024)], _copy_bound, "copy_"),
        Workload("masked softmax (8192,1024)", _masked_softmax, lambda: [torch.randn(8192, 1024), _half_mask(1024)],
                 _copy_bound, "copy_"),
        Workload("layernorm (8192,1024)", lambda x: ln(x), lambda: [torch.randn(8192, 1024)], _copy_bound,
                 "copy_", atol=1e-4, rtol=1e-4),
        Workload("mean dim=-1 (8192,1024)", _mean, lambda: [torch.randn(8192, 1024)], _rowsum_bound,
                 "sum(dim=1,out=)"),
        Workload("sum dim=0 (8192,1024)", lambda x: x.sum(dim=0), lambda: [torch.randn(8192, 1024)],
                 _colsum_bound, "sum(dim=0,out=)", atol=1e-3, rtol=1e-4),
        Workload("mlp 512-2048-512 (4096)", lambda x: mlp(x), lambda: [torch.randn(4096, 512)], _mlp_bound(mlp),
                 "2x addmm(out=)", atol=1e-4, rtol=1e-4, memory_bound=False),
        Workload("encoder layer (8,256,512)", _encoder(enc), lambda: [torch.randn(8, 256, 512)], None, "-",
                 atol=1e-4, rtol=1e-4, extra={"eager fastpath": _fastpath_eager(enc)}),
    ]
    half_only = [Workload("gelu*2+1 layernorm (8192,1024)", half_workloads.gelu_layer_norm,
                          lambda: [torch.randn(8192, 1024)], _copy_bound, "copy_")]
    return (float_workloads + half_workloads.half_variants(float_workloads, half_only)
            + half_workloads.autocast_mlps(Workload, mlp, 4096)
            + half_workloads.autocast_encoders(Workload, enc, (8, 256, 512)))


def _time_once(fn: Callable[[], object], iters: int) -> float:
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e3 / iters


def _first_call_ms(fn: Callable, args: list) -> tuple[float, object]:
    gc.collect()  # (a full collection due mid-trace costs every backend ~250 ms: model_bench.py's _first_call)
    t0 = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t0) * 1e3, out


@dataclass
class Result:
    times: dict[str, list[float]] = field(default_factory=dict)
    compile_ms: dict[str, float] = field(default_factory=dict)
    graphs: dict[str, int] = field(default_factory=dict)  # graphs compiled at the cold first call

    def median(self, key: str) -> float:
        return statistics.median(self.times[key]) if self.times.get(key) else float("nan")

    def ratio(self, a: str, b: str) -> float:
        """Median over rounds of a's time / b's in the same round (a round's variants run back to back, so a
        shared host's slow minutes slow both sides of each ratio)."""
        pairs = [x / y for x, y in zip(self.times.get(a, []), self.times.get(b, [])) if y > 0]
        return statistics.median(pairs) if pairs else float("nan")


def _noop_backend(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    """Dynamo's graph run as it is (its Python code calling the ops eager calls): what torch.compile itself
    costs, per call (the compiled-function wrapper, guards, the graph call) and per compile (tracing)."""
    return gm.forward


_BACKENDS: dict[str, object] = {"dynamo": _noop_backend}  # + "lens" -> its callable (without the entry point)


def _time_backends() -> None:
    import compiler.frontend.dynamo_backend as frontend
    _BACKENDS["lens"] = frontend.lens_backend
    backend_compile_time.install()


def _fresh_cache_dirs(tmp: str, tag: str) -> None:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, f"inductor-{tag}")
    os.environ["LENS_CACHE_DIR"] = os.path.join(tmp, f"lens-{tag}")


def _with_only_toolchain_builds(tmp: str, tag: str) -> None:
    from compiler.machine import pch
    pch.wait_for_builds()
    cold = os.environ["LENS_CACHE_DIR"]
    os.environ["LENS_CACHE_DIR"] = os.path.join(tmp, f"lens-{tag}-pch")
    for kind in ("pch", "prebuilt"):  # what is built once per toolchain
        if os.path.isdir(os.path.join(cold, kind)):
            shutil.copytree(os.path.join(cold, kind), os.path.join(os.environ["LENS_CACHE_DIR"], kind))


def _check(w: Workload, expected, got, who: str) -> None:
    torch.testing.assert_close(got, expected, atol=w.atol, rtol=w.rtol, msg=lambda m: f"{w.name} {who}: {m}")


def run_workload(w: Workload, rounds: int, tmp: str, use_inductor: bool) -> Result:
    res = Result()
    args = w.make_args()
    with torch.no_grad():
        expected = w.fn(*args)
        variants: dict[str, Callable[[], object]] = {"eager": lambda: w.fn(*args)}
        pool_off: set[str] = set()  # variants timed with lens's buffer pool off
        backends = (["inductor"] if use_inductor else []) + ["dynamo", "lens"]
        tag = re.sub(r"\W+", "_", w.name)  # (cache folders of their own: names may share a first word)
        for backend in backends:
            steady = None
            for phase in ("cold", "pch", "warm") if backend == "lens" else ("cold", "warm"):
                if phase == "cold":
                    _fresh_cache_dirs(tmp, f"{tag}-{backend}")
                elif phase == "pch":  # a new graph in a cache that has only the precompiled prelude
                    _with_only_toolchain_builds(tmp, f"{tag}-{backend}")
                torch._dynamo.reset()
                compiled = torch.compile(w.fn, backend=_BACKENDS.get(backend, backend))
                if backend in _BACKEND_MS:
                    _BACKEND_MS[backend], _GRAPHS[backend] = 0.0, 0
                ms, got = _first_call_ms(compiled, args)
                if backend in _BACKEND_MS:
                    res.compile_ms[f"{backend} backend {phase}"] = _BACKEND_MS[backend]
                    if phase == "cold":
                        res.graphs[backend] = _GRAPHS[backend]
                _check(w, expected, got, backend)
                steady = steady or statistics.median(_time_once(lambda: compiled(*args), 1) for _ in range(5))
                res.compile_ms[f"{backend} {phase}"] = max(0.0, ms - steady)
            variants[backend] = lambda c=compiled: c(*args)
        if "lens" in variants:
            variants["lens nopool"] = variants["lens"]
            pool_off.add("lens nopool")
        if w.bound is not None:
            variants["bound"] = w.bound(args)
        for key, make in w.extra.items():
            variants[key] = make(args)
        from compiler.machine import pch
        pch.wait_for_builds()  # no background g++ while timing
        for key, fn in variants.items():  # warm up every variant (pools, caches)
            _with_pool(key not in pool_off, lambda: (fn(), fn()))
        iters = max(3, int(50 / max(0.05, _time_once(variants["eager"], 2))))
        order = list(variants.items())
        for r in range(rounds):
            # each round starts at another variant: what a variant leaves behind (Inductor's dirty output lines,
            # its threads' state) slowed the one run after it by up to 40% (lens's bf16 pointwise kernel read
            # 2.0-2.2 ms right after Inductor and 1.5-1.6 ms after another variant in one process), so no variant
            # always follows the same one
            for key, fn in order[r % len(order):] + order[:r % len(order)]:
                # the pool switch is set around a variant's calls, not inside each (no harness cost per call)
                res.times.setdefault(key, []).append(_with_pool(key not in pool_off, lambda: _round(fn, iters)))
    return res


def _round(fn: Callable[[], object], iters: int) -> float:
    fn()  # untimed: the previous variant's page faults and cache misses are not this one's
    return _time_once(fn, iters)


def _with_pool(enabled: bool, fn: Callable[[], object]):
    if memory is None:
        return fn()
    old = config.cpp.buffer_pool
    config.cpp.buffer_pool = enabled
    try:
        return fn()
    finally:
        config.cpp.buffer_pool = old


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--only", default="", help="comma-separated prefixes of workload names")
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--dynamic", action="store_true", help="the dynamic-shapes suite (benchmarks/dynamic_workloads.py)")
    a = p.parse_args()
    torch._dynamo.config.cache_size_limit = 64
    _time_backends()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"cpu {torch.backends.cpu.get_cpu_capability()}", file=sys.stderr)
    if a.dynamic:
        return _main_dynamic(a)
    results = []
    with tempfile.TemporaryDirectory(prefix="compiler-bench-") as tmp:
        for w in workloads():
            if a.only and not any(w.name.startswith(s) for s in a.only.split(",")):
                continue
            print(f"... {w.name}", file=sys.stderr, flush=True)
            results.append((w, run_workload(w, a.rounds, tmp, not a.no_inductor)))
    print_table(results)


def _main_dynamic(a) -> None:
    results = []
    with tempfile.TemporaryDirectory(prefix="compiler-bench-dyn-") as tmp:
        for w in dynamic_workloads.workloads():
            if a.only and not any(w.name.startswith(s) for s in a.only.split(",")):
                continue
            print(f"... {w.name} (dynamic)", file=sys.stderr, flush=True)
            results.append((w, dynamic_workloads.run_dynamic(w, a.rounds, tmp, not a.no_inductor, _GRAPHS,
                                                             _BACKEND_MS)))
    batches = (4096, 3000, 4096)
    scenario = {} if a.only and "mlp scenario" not in a.only else \
        dynamic_workloads.run_mlp_scenario(batches, max(5, a.rounds), not a.no_inductor)
    dynamic_workloads.print_dynamic(results, scenario, batches)


if __name__ == "__main__":
    main()
