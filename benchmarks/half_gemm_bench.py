"""bfloat16/float16 products on this CPU (compiler/machine/gemm_half.py's measurement): eager's op in the dtype (ATen,
which calls oneDNN where it supports the dtype, its own loops elsewhere), oneDNN's linear in the dtype where it
runs, and the float32 product of the same values (gemm.py's library, casts in and out included or not).
Prints the best and median of `--reps` runs per row (ms); noisy neighbours move the medians, rarely the best.

Usage: python benchmarks/half_gemm_bench.py [--shapes 512,512,512 256,512,2048 ...] [--reps 7] [--threads N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

LINEAR = torch.ops.mkldnn._linear_pointwise.default


def _time(fn, reps: int) -> tuple[float, float]:
    fn()
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0) * 1e3)
    return min(runs), statistics.median(runs)


def rows(m: int, k: int, n: int, dtype: torch.dtype) -> dict:
    a, w = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype)
    af, wf = a.float(), w.float()
    out, outf = torch.empty(m, n, dtype=dtype), torch.empty(m, n)
    cases = {"eager mm in dtype": lambda: torch.mm(a, w.t(), out=out),
             "float32 mm, casts included": lambda: out.copy_(torch.mm(a.float(), w.t().float(), out=outf)),
             "float32 mm alone": lambda: torch.mm(af, wf.t(), out=outf),
             "float32 oneDNN linear alone": lambda: LINEAR(af, wf, None, "none", [], "")}
    try:
        LINEAR(a[:8], w[:8], None, "none", [], "")
        cases["oneDNN linear in dtype"] = lambda: LINEAR(a, w, None, "none", [], "")
    except RuntimeError:  # oneDNN has no kernel for the dtype on this CPU
        pass
    return cases


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="*", default=["32,64,128", "512,512,512", "256,512,2048", "2048,512,1536"])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--threads", type=int, default=None)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}, "
          f"threads {torch.get_num_threads()}, oneDNN bf16 {torch.ops.mkldnn._is_mkldnn_bf16_supported()}, "
          f"fp16 {torch.ops.mkldnn._is_mkldnn_fp16_supported()}")
    for dtype in (torch.bfloat16, torch.float16):
        for shape in a.shapes:
            m, k, n = (int(x) for x in shape.split(","))
            for name, fn in rows(m, k, n, dtype).items():
                best, median = _time(fn, a.reps)
                print(f"{str(dtype)[6:]:>8} ({m},{k})x({k},{n}) {name:<28} best {best:9.2f}  median {median:9.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
