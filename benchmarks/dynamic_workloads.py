"""The compiler benchmark's dynamic suite (issue 30; `compiler_bench.py --dynamic`): design.md §6's workloads
compiled with `dynamic=True` and called at 3 sizes, a transformer encoder at 4 sequence lengths, and the MLP
scenario of a default `torch.compile` (automatic dynamic) called at batch 4096, 3000, 4096. Per workload: graphs
each backend compiled for all sizes, graphs lens ran eagerly, cold compile of the dynamic graph, and per size the
run-time ratios lens dynamic / Inductor dynamic and lens dynamic / lens static (compiled for that size)."""
from __future__ import annotations

import os
import statistics
import time
import types
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class DynamicWorkload:
    name: str
    fn: Callable
    make_args: Callable[[int], list]  # a size (rows, batch or sequence length) -> the inputs
    sizes: tuple[int, ...]
    atol: float = 1e-4
    rtol: float = 1e-4


def workloads() -> list[DynamicWorkload]:
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)
    ln = torch.nn.LayerNorm(1024).eval()
    mlp = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).eval()
    enc = torch.nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True).eval()
    row = (1, 512)
    return [
        DynamicWorkload("pointwise ((a0+a1)+a2)*a3+a4", lambda a0, a1, a2, a3, a4: ((a0 + a1) + a2) * a3 + a4,
                        lambda n: [torch.randn(n, 512), torch.randn(row), torch.randn(n, 512), torch.randn(row),
                                   torch.randn(n, 512)], (16384, 12000, 5000), 1e-5, 1.3e-6),
        DynamicWorkload("softmax (n,1024)", lambda x: torch.softmax(x, -1), lambda n: [torch.randn(n, 1024)],
                        (8192, 6000, 2500), 1e-5, 1.3e-6),
        DynamicWorkload("layernorm (n,1024)", lambda x: ln(x), lambda n: [torch.randn(n, 1024)], (8192, 6000, 2500)),
        DynamicWorkload("mean dim=-1 (n,1024)", lambda x: x.mean(-1), lambda n: [torch.randn(n, 1024)],
                        (8192, 6000, 2500), 1e-5, 1.3e-6),
        DynamicWorkload("sum dim=0 (n,1024)", lambda x: x.sum(0), lambda n: [torch.randn(n, 1024)],
                        (8192, 6000, 2500), 1e-3, 1e-4),
        DynamicWorkload("mlp 512-2048-512 (n)", lambda x: mlp(x), lambda n: [torch.randn(n, 512)], (4096, 3000, 1000)),
        DynamicWorkload("encoder layer (8,L,512)", lambda x: enc(x), lambda n: [torch.randn(8, n, 512)],
                        (256, 200, 128, 96)),
    ]


def mlp_scenario_model() -> torch.nn.Module:
    """Issue 30's scenario: MLP 512-2048-512 + LayerNorm."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512),
                               torch.nn.LayerNorm(512)).eval()


def fresh_function(fn: Callable, tag: str) -> Callable:
    """A wrapper calling `fn` with a code object of its own: Dynamo keeps its compiled entries per code object,
    so each variant (dynamic, static, another backend) compiles and is looked up apart from the others."""
    def call(*args):
        return fn(*args)
    code = call.__code__.replace(co_name=f"bench_{tag}")
    return types.FunctionType(code, call.__globals__, code.co_name, None, call.__closure__)


@dataclass
class DynamicResult:
    times: dict[tuple[str, int], list[float]] = field(default_factory=dict)  # (variant, size) -> ms per round
    graphs: dict[str, int] = field(default_factory=dict)  # variant -> graphs compiled over all sizes
    eager_graphs: int = 0  # lens graphs of the dynamic variant that ran eagerly
    eager_reasons: list[str] = field(default_factory=list)
    cold_ms: dict[str, float] = field(default_factory=dict)  # dynamic variant -> first call minus a steady call
    # backend -> ms of that first call spent in its graph compiler (aten graph in, callable out: lens's
    # pipeline.compile_graph, Inductor's _compile_fx_inner), the part Dynamo and AOTAutograd leave to a backend
    compiler_ms: dict[str, float] = field(default_factory=dict)

    def median(self, variant: str, size: int) -> float:
        t = self.times.get((variant, size))
        return statistics.median(t) if t else float("nan")

    def ratio(self, a: str, b: str, size: int) -> float:
        pairs = [x / y for x, y in zip(self.times.get((a, size), []), self.times.get((b, size), [])) if y > 0]
        return statistics.median(pairs) if pairs else float("nan")


def _time(fn: Callable[[], object], iters: int) -> float:
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e3 / iters


def run_dynamic(w: DynamicWorkload, rounds: int, tmp: str, use_inductor: bool, graph_counts: dict,
                compiler_ms: dict | None = None) -> DynamicResult:
    """`graph_counts`: backend -> graphs its graph compiler compiled so far; `compiler_ms`: backend -> ms spent
    in its graph compiler so far (compiler_bench's counters)."""
    compiler_ms = {} if compiler_ms is None else compiler_ms
    from compiler import pipeline
    res = DynamicResult()
    args = {n: w.make_args(n) for n in w.sizes}
    with torch.no_grad():
        expected = {n: w.fn(*a) for n, a in args.items()}
        calls: dict[tuple[str, int], Callable[[], object]] = {}
        for n in w.sizes:
            calls[("eager", n)] = lambda a=args[n]: w.fn(*a)
        backends = (["inductor"] if use_inductor else []) + ["lens"]
        for backend in backends:
            tag = f"{abs(hash(w.name))}_{backend}"
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, f"inductor-dyn-{tag}")
            os.environ["LENS_CACHE_DIR"] = os.path.join(tmp, f"lens-dyn-{tag}")
            before, eager_before = graph_counts.get(backend, 0), len(pipeline.EAGER)
            dyn = torch.compile(fresh_function(w.fn, f"dyn_{tag}"), backend=backend, dynamic=True)
            ms_before = compiler_ms.get(backend, 0.0)
            for i, n in enumerate(w.sizes):
                t0 = time.perf_counter()
                got = dyn(*args[n])
                first = (time.perf_counter() - t0) * 1e3
                torch.testing.assert_close(got, expected[n], atol=w.atol, rtol=w.rtol)
                if i == 0:
                    steady = statistics.median(_time(lambda: dyn(*args[n]), 1) for _ in range(3))
                    res.cold_ms[backend] = max(0.0, first - steady)
                    if backend in compiler_ms:
                        res.compiler_ms[backend] = compiler_ms[backend] - ms_before
                calls[(f"{backend} dyn", n)] = lambda a=args[n], c=dyn: c(*a)
            res.graphs[f"{backend} dyn"] = graph_counts.get(backend, 0) - before
            if backend == "lens":
                res.eager_graphs = len(pipeline.EAGER) - eager_before
                res.eager_reasons = [why for _, why in pipeline.EAGER[eager_before:]]
        before = graph_counts.get("lens", 0)
        static = torch.compile(fresh_function(w.fn, f"static_{abs(hash(w.name))}"), backend="lens", dynamic=False)
        for n in w.sizes:
            torch.testing.assert_close(static(*args[n]), expected[n], atol=w.atol, rtol=w.rtol)
            calls[("lens static", n)] = lambda a=args[n], c=static: c(*a)
        res.graphs["lens static"] = graph_counts.get("lens", 0) - before
        from compiler.machine import pch
        pch.wait_for_builds()
        for fn in calls.values():
            fn(), fn()
        iters = {n: max(3, int(50 / max(0.05, _time(calls[("eager", n)], 2)))) for n in w.sizes}
        for _ in range(rounds):
            for (variant, n), fn in calls.items():
                fn()
                res.times.setdefault((variant, n), []).append(_time(fn, iters[n]))
    return res


def run_mlp_scenario(batches: tuple[int, ...], rounds: int, use_inductor: bool) -> dict[str, list[float]]:
    """Each backend's default torch.compile (automatic dynamic) called at `batches` in turn (4096, 3000, 4096:
    a static graph, then the recompile with symbols, which then serves 4096 too); per phase the median ms of a
    call, every phase of every backend timed round-robin in each round (a shared host's slow minutes hit all)."""
    model = mlp_scenario_model()
    inputs = {b: torch.randn(b, 512) for b in set(batches)}
    calls: dict[tuple[str, int], Callable[[], object]] = {}
    with torch.no_grad():
        for backend in (["inductor"] if use_inductor else []) + ["lens", "eager"]:
            for phase in range(len(batches)):
                if backend == "eager":
                    calls[(backend, phase)] = lambda b=batches[phase]: model(inputs[b])
                    continue
                fn = torch.compile(fresh_function(model, f"mlp_{backend}_{phase}"), backend=backend)
                for b in batches[:phase + 1]:  # the calls before this phase: its graph is the one they left
                    fn(inputs[b])
                calls[(backend, phase)] = lambda f=fn, b=batches[phase]: f(inputs[b])
        for fn in calls.values():
            fn()
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(rounds):
            for key, fn in calls.items():
                fn()
                times.setdefault(key, []).append(_time(fn, 2))
    out: dict[str, list[float]] = {}
    for (backend, phase), t in times.items():
        out.setdefault(backend, []).append(statistics.median(t))
    return out


def _ratio(a: float, b: float) -> float:
    return a / b if b == b and b > 0 else float("nan")


def print_dynamic(results: list[tuple[DynamicWorkload, DynamicResult]], scenario: dict[str, list[float]],
                  batches: tuple[int, ...]) -> None:
    nan = float("nan")
    head = (f"{'dynamic workload':30} {'size':>6} {'eager':>7} {'ind dyn':>7} {'l dyn':>7} {'l stat':>7} "
            f"{'ld/id':>6} {'ld/ls':>6} {'ld/eag':>6}")
    print(head)
    print("-" * len(head))
    for w, r in results:
        for n in w.sizes:
            print(f"{w.name:30} {n:6d} {r.median('eager', n):7.2f} {r.median('inductor dyn', n):7.2f} "
                  f"{r.median('lens dyn', n):7.2f} {r.median('lens static', n):7.2f} "
                  f"{r.ratio('lens dyn', 'inductor dyn', n):6.2f} {r.ratio('lens dyn', 'lens static', n):6.2f} "
                  f"{r.ratio('lens dyn', 'eager', n):6.2f}")
    print()
    print(f"{'dynamic workload':30} {'lens graphs':>11} {'ind graphs':>10} {'static graphs':>13} {'eager':>5} "
          f"{'cold l':>7} {'cold i':>7} {'c l/i':>6} {'gc l':>6} {'gc i':>6} {'gc l/i':>6}")
    for w, r in results:
        cl, ci = r.cold_ms.get("lens", nan), r.cold_ms.get("inductor", nan)
        gl, gi = r.compiler_ms.get("lens", nan), r.compiler_ms.get("inductor", nan)
        print(f"{w.name:30} {r.graphs.get('lens dyn', 0):11d} {r.graphs.get('inductor dyn', 0):10d} "
              f"{r.graphs.get('lens static', 0):13d} {r.eager_graphs:5d} {cl:7.0f} {ci:7.0f} "
              f"{_ratio(cl, ci):6.3f} {gl:6.0f} {gi:6.0f} {_ratio(gl, gi):6.3f}")
    total = sum(r.eager_graphs for _, r in results)
    print(f"lens graphs run eagerly in the dynamic suite: {total}")
    for w, r in results:
        for why in r.eager_reasons:
            print(f"  {w.name}: {why}")
    if scenario:
        print()
        print(f"MLP 512-2048-512 + LayerNorm, default torch.compile (automatic dynamic), batch "
              f"{' -> '.join(map(str, batches))}, ms per call in each phase (timed round-robin):")
        for backend, phases in scenario.items():
            print(f"  {backend:9} " + " -> ".join(f"{ms:.1f}" for ms in phases))
    print("graphs: aten graphs each backend's graph compiler compiled for all sizes (a forward-only suite: one per "
          "Dynamo graph); l stat: lens compiled for that size alone (dynamic=False); ratios: median over rounds "
          "of the ratio within a round. cold: the first call (fresh cache dirs) minus a steady call, Dynamo's "
          "trace and AOTAutograd included; gc: the part of it in the backend's graph compiler (aten graph in, "
          "callable out: lens's pipeline.compile_graph, Inductor's _compile_fx_inner).")
