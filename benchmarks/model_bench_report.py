"""The model benchmark's report (benchmarks/model_bench.py): run time table and ratios, cold compile time by stage,
warm starts, and the verdict on each whole-network target."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

NAN = float("nan")
STAGES = ("dynamo", "aot+other", "lower+codegen", "g++", "total")


@dataclass
class Result:
    """One model's measurements: per-round times of each variant, and per backend its cold compile stages (ms),
    warm first call (ms), graphs compiled, and any mismatch against eager."""

    times: dict[str, list[float]] = field(default_factory=dict)
    stages: dict[str, dict[str, float]] = field(default_factory=dict)  # backend -> stage -> ms (cold)
    warm_ms: dict[str, float] = field(default_factory=dict)
    # torch.compile's own floor: the first call through Dynamo with backend="eager" (Dynamo's trace, the graph run
    # as is: no graph compiler at all) after torch._dynamo.reset(), minus a steady call; nan where not measured
    dynamo_ms: float = NAN
    graphs: dict[str, int] = field(default_factory=dict)
    mismatches: dict[str, str] = field(default_factory=dict)  # variant -> what differed from eager
    skipped: str = ""  # why the model did not run (a package missing)

    def median(self, key: str) -> float:
        return statistics.median(self.times[key]) if self.times.get(key) else NAN

    def ratio(self, a: str, b: str) -> float:
        """Median over rounds of a's time / b's in the same round (a round's variants run back to back)."""
        pairs = [x / y for x, y in zip(self.times.get(a, []), self.times.get(b, [])) if y > 0]
        return statistics.median(pairs) if pairs else NAN

    def cold_ms(self, backend: str) -> float:
        return self.stages.get(backend, {}).get("total", NAN)


def _div(a: float, b: float) -> float:
    return a / b if b == b and b > 0 else NAN


def row_line(name: str, r: Result, lens_variants: list[str]) -> str:
    """One model's row of the run time table (also printed as each model finishes, so a run cut short keeps
    what it measured)."""
    if r.skipped:
        return f"{name:11} skipped: {r.skipped}"
    cells = "".join(f" {r.median(v):10.2f} {r.ratio(v, 'inductor'):5.2f}" for v in lens_variants)
    lc, ic = r.cold_ms("lens"), r.cold_ms("inductor")
    return (f"{name:11} {r.median('eager'):8.2f} {r.median('inductor'):8.2f} {r.median('lens'):8.2f}{cells} "
            f"{r.ratio('lens', 'inductor'):6.2f} {r.ratio('lens', 'eager'):6.2f} {r.ratio('inductor', 'eager'):7.2f} "
            f"{lc:7.0f} {ic:7.0f} {_div(lc, ic):6.3f} {r.warm_ms.get('lens', NAN):7.0f} "
            f"{r.warm_ms.get('inductor', NAN):7.0f} {_div(r.warm_ms.get('lens', NAN), lc):6.3f}")


def print_report(rows: list[tuple[str, Result]], lens_variants: list[str], tolerance: float = 1e-3,
                 run_target: float = 0.9) -> None:
    extra = "".join(f" {v[:10]:>10} {'/ind':>5}" for v in lens_variants)
    head = (f"{'model':11} {'eager':>8} {'induct':>8} {'lens':>8}{extra} {'l/ind':>6} {'l/eag':>6} {'ind/eag':>7} "
            f"{'cold l':>7} {'cold i':>7} {'c l/i':>6} {'warm l':>7} {'warm i':>7} {'w/cold':>6}")
    print(head)
    print("-" * len(head))
    for name, r in rows:
        print(row_line(name, r, lens_variants))
    print()
    print("Cold first call by stage, ms (dynamo: Dynamo's tracing; aot+other: AOTAutograd and what is left of the "
          "first call; lower+codegen: the graph compiler without its C++ builds; g++: lens's builds / Inductor's "
          "compile_file; total: first call minus a steady call; dyn alone: torch.compile's first call with "
          "backend='eager' after torch._dynamo.reset(), Dynamo's trace without any graph compiler, the floor of every "
          "backend's warm start):")
    print(f"{'model':11} {'backend':9} " + " ".join(f"{s:>13}" for s in STAGES) + f" {'graphs':>6}")
    for name, r in rows:
        for backend, st in r.stages.items():
            print(f"{name:11} {backend:9} " + " ".join(f"{st.get(s, NAN):13.0f}" for s in STAGES)
                  + f" {r.graphs.get(backend, 0):6d}")
        if r.dynamo_ms == r.dynamo_ms:
            print(f"{name:11} {'dyn alone':9} " + " ".join(f"{NAN:13.0f}" for _ in STAGES[:-1])
                  + f" {r.dynamo_ms:13.0f}")
    bad = [(name, v, why) for name, r in rows for v, why in r.mismatches.items()]
    for name, v, why in bad:
        print(f"MISMATCH {name} {v}: {why}")
    print()
    for line in target_lines(rows, tolerance, run_target):
        print(line)


def target_lines(rows: list[tuple[str, Result]], tolerance: float = 1e-3, run_target: float = 0.9) -> list[str]:
    """The whole-network targets (lens <= `run_target` x Inductor: 0.9 for inference, 1.0 for a training step;
    faster than eager, cold first call <= 0.2x Inductor's, warm first call <= 0.1x lens's cold one, results equal
    eager's), each judged on this run: met, or the models that miss it with their figure."""
    def warm_over_cold(r: Result) -> float:
        return _div(r.warm_ms.get("lens", NAN), r.cold_ms("lens"))

    # (title, lens's figure, its floor: the same ratio with Dynamo alone in lens's place, or None, the bound)
    checks = [(f"run time <= {run_target:g}x Inductor's", lambda r: r.ratio("lens", "inductor"), None,
               lambda v: v <= run_target),
              ("faster than eager", lambda r: r.ratio("lens", "eager"), None, lambda v: v < 1.0),
              ("cold first call <= 0.2x Inductor's", lambda r: _div(r.cold_ms("lens"), r.cold_ms("inductor")),
               lambda r: _div(r.dynamo_ms, r.cold_ms("inductor")), lambda v: v <= 0.2),
              ("warm first call <= 0.1x lens cold", warm_over_cold, lambda r: _div(r.dynamo_ms, r.cold_ms("lens")),
               lambda v: v <= 0.1),
              (f"results equal eager's ({tolerance:g})",
               lambda r: 0.0 if "lens" in r.times and "lens" not in r.mismatches
               else (1.0 if "lens" in r.mismatches else NAN), None, lambda v: v == 0.0)]
    lines = ["Targets in this run (nan: not measured here; 'Dynamo alone': the same ratio for torch.compile's own "
             "first call, backend='eager', which lens's includes):"]
    ran = [(name, r) for name, r in rows if not r.skipped]
    for title, value, floor, ok in checks:
        judged = [(name, r, v) for name, r in ran for v in [value(r)] if v == v]
        missed = [(name, v, floor(r) if floor else NAN) for name, r, v in judged if not ok(v)]
        verdict = ("met" if judged else "nan") if not missed else "MISSED by " + "; ".join(
            f"{name} {v:.3g}" + (f" (Dynamo alone {f:.3g})" if f == f else "") for name, v, f in missed)
        lines.append(f"  {title:36} {verdict} ({len(judged) - len(missed)}/{len(judged)} models)")
        under_floor = [name for name, v, f in missed if f == f and not ok(f)]
        if under_floor:
            lines.append(f"  {'':36} out of any backend's reach (Dynamo alone misses it too): "
                         f"{', '.join(under_floor)}")
    skipped = [f"{name} ({r.skipped})" for name, r in rows if r.skipped]
    if skipped:
        lines.append(f"  not run: {', '.join(skipped)}")
    return lines
