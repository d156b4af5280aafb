"""Variants of compiler_bench's workloads a user would write (issue 49): a residual added, odd sizes, a strided input, a
transposed reduction, another dtype mix, a dequantize, RMSNorm. Each runs eagerly, with Inductor and with lens in one
process, interleaved round by round, timed by the calling thread's CPU time (with `--threads 1`: contention on a shared
machine barely moves it); reported as medians and the median of per-round ratios. `--profile` prints, for each
variant where lens is slower than Inductor, where both spend their time (torch.profiler, each kernel named: lens's
`cpp.enable_kernel_profile`, Inductor's `cpp.enable_kernel_profile`).

Usage: python benchmarks/compiler_variants.py [--threads 1] [--rounds 15] [--only rmsnorm,dequantize] [--profile]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compiler_bench import Workload, _check


def _residual_layer_norm(x, r, w, b):
    h = x + r  # the transformer's residual add before its norm, both returned (the next residual reads h)
    return h, F.layer_norm(h, x.shape[-1:], w, b)


def _rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w  # (Llama's, as users write it)


def _dequantize(q, scale, zero):
    return F.gelu((q.float() - zero) * scale)  # int8 rows, a float scale and zero point per row


def _mixed_dtype(x, y):
    return F.layer_norm(x.float() + y, y.shape[-1:]).to(torch.bfloat16)  # bf16 activations, float32 residual


def variants() -> list[Workload]:
    torch.manual_seed(0)
    n, d = 4096, 1024
    return [
        Workload("residual + layernorm (4096,1024)", _residual_layer_norm,
                 lambda: [torch.randn(n, d), torch.randn(n, d), torch.randn(d), torch.randn(d)], None, "-",
                 atol=1e-4, rtol=1e-4),
        Workload("odd-size softmax (4093,1021)", lambda x: torch.softmax(x, -1), lambda: [torch.randn(4093, 1021)],
                 None, "-"),
        Workload("strided-input gelu*y (4096,1024 of 2048)", lambda x, y: F.gelu(x) * y,
                 lambda: [torch.randn(n, 2 * d)[:, ::2], torch.randn(n, d)], None, "-"),
        Workload("transposed sum (16,1024,512).mT", lambda x: x.mT.sum(-1), lambda: [torch.randn(16, 1024, 512)],
                 None, "-", atol=1e-3, rtol=1e-4),
        Workload("bf16+fp32 layernorm -> bf16 (4096,1024)", _mixed_dtype,
                 lambda: [torch.randn(n, d, dtype=torch.bfloat16), torch.randn(n, d)], None, "-",
                 atol=2e-2, rtol=1e-2),
        Workload("dequantize int8 + gelu (4096,1024)", _dequantize,
                 lambda: [torch.randint(-128, 128, (n, d), dtype=torch.int8), torch.rand(n, 1) / 64,
                          torch.randint(-4, 4, (n, 1)).float()], None, "-", atol=1e-5, rtol=1e-5),
        Workload("rmsnorm (8192,1024)", _rms_norm, lambda: [torch.randn(2 * n, d), torch.randn(d)], None, "-",
                 atol=1e-5, rtol=1e-5),
    ]


def _time_round(fn: Callable[[], object], iters: int) -> float:
    fn()  # untimed: what the previous variant left in the caches is not this one's
    start = time.thread_time()
    for _ in range(iters):
        fn()
    return (time.thread_time() - start) * 1e3 / iters


def run_variant(w: Workload, rounds: int) -> dict[str, list[float]]:
    """ms per call of eager, Inductor and lens in each round (every round starts at another backend)."""
    args = w.make_args()
    with torch.no_grad():
        expected = w.fn(*args)
        calls: dict[str, Callable[[], object]] = {"eager": lambda: w.fn(*args)}
        for backend in ("inductor", "lens"):
            compiled = torch.compile(w.fn, backend=backend)
            _check(w, expected, compiled(*args), backend)
            calls[backend] = lambda c=compiled: c(*args)
        iters = max(3, int(20 / max(0.05, _time_round(calls["eager"], 2))))
        order, times = list(calls.items()), {}
        for r in range(rounds):
            for key, fn in order[r % 3:] + order[:r % 3]:
                times.setdefault(key, []).append(_time_round(fn, iters))
    return times


def ratio(times: dict[str, list[float]], a: str, b: str) -> float:
    return statistics.median(x / y for x, y in zip(times[a], times[b]))


def profile(w: Workload, reps: int = 20, top: int = 6) -> str:
    """The top self-time rows of lens's and Inductor's calls of `w`, kernels named."""
    import torch._inductor.config as inductor_config
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from compiler import config
    args, lines = w.make_args(), []
    config.cpp.enable_kernel_profile = inductor_config.cpp.enable_kernel_profile = True
    try:
        for backend in ("lens", "inductor"):
            torch._dynamo.reset()
            compiled = torch.compile(w.fn, backend=backend)
            with torch.no_grad():
                compiled(*args)
                with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
                    for _ in range(reps):
                        compiled(*args)
            rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
            lines.append(f"  {backend}: " + "; ".join(
                f"{e.key[:60]} {e.self_cpu_time_total / 1e3 / reps:.3f} ms x{e.count // reps}" for e in rows))
    finally:
        config.cpp.enable_kernel_profile = inductor_config.cpp.enable_kernel_profile = False
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--only", default="", help="comma-separated prefixes of variant names")
    p.add_argument("--profile", action="store_true", help="profile each variant where lens is slower than Inductor")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch._dynamo.config.cache_size_limit = 64
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, thread CPU time, medians of {a.rounds} rounds")
    print("| variant | eager ms | Inductor ms | lens ms | lens / Inductor | lens / eager |\n|---|---|---|---|---|---|")
    slower = []
    for w in variants():
        if a.only and not any(w.name.startswith(s) for s in a.only.split(",")):
            continue
        t = run_variant(w, a.rounds)
        r = ratio(t, "lens", "inductor")
        print(f"| {w.name} | " + " | ".join(f"{statistics.median(t[k]):.3f}" for k in ("eager", "inductor", "lens")) +
              f" | {r:.2f} | {ratio(t, 'lens', 'eager'):.2f} |", flush=True)
        if r > 1.0:
            slower.append(w)
    for w in slower if a.profile else ():
        print(f"\n{w.name}, self time per call:\n{profile(w)}", flush=True)


if __name__ == "__main__":
    main()
