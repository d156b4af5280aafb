"""PyTorch's OpInfo database as the outside judge of the `lens` backend: every sample input of an OpInfo,
compiled with `backend="lens"` and compared with eager, classified native / extern-fallback / failure.

Usage: python benchmarks/opinfo_coverage.py [--all] [--ops NAME ...] [--max-samples N] [--workers N]
                                            [--dtypes bfloat16,float16] [--dynamic] [--json FILE]
Prints one row per OpInfo (samples, native, fallback, failures, skipped) and the totals.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import asdict, dataclass

from opinfo_judge import LensJudge, error_text
from opinfo_samples import DTYPES, STATUSES, OpReport, SampleResult, family, find_ops, op_db, op_key


# -- the table ---------------------------------------------------------------------------------------------
@dataclass
class Totals:
    ops: int = 0
    samples: int = 0
    native: int = 0
    fallback: int = 0
    failure: int = 0
    skipped: int = 0

    @property
    def judged(self) -> int:
        return self.native + self.fallback + self.failure

    def pct(self, n: int) -> str:
        return f"{100.0 * n / self.judged:.1f}%" if self.judged else "-"


def totals(reports: list[OpReport], families: tuple[str, ...] | None = None) -> Totals:
    t = Totals()
    for r in reports:
        if families and r.family not in families:
            continue
        t.ops += 1
        t.samples += len(r.results)
        for s in STATUSES:
            setattr(t, s, getattr(t, s) + r.count(s))
    return t


def format_table(reports: list[OpReport]) -> str:
    rows = [f"{'op':<44} {'family':<11} {'samples':>7} {'native':>6} {'fallback':>8} {'failures':>8} "
            f"{'skipped':>7} {'sec':>6}"]
    for r in reports:
        rows.append(f"{r.op:<44} {r.family:<11} {len(r.results):>7} {r.count('native'):>6} "
                    f"{r.count('fallback'):>8} {r.count('failure'):>8} {r.count('skipped'):>7} {r.seconds:>6.1f}")
    for label, fams in (("TOTAL", None), ("elementwise+reduction", ("elementwise", "reduction"))):
        t = totals(reports, fams)
        rows.append(f"{label}: {t.ops} ops, {t.samples} samples, {t.judged} judged "
                    f"(skipped {t.skipped}): native {t.native} ({t.pct(t.native)}), fallback {t.fallback} "
                    f"({t.pct(t.fallback)}), failures {t.failure} ({t.pct(t.failure)})")
    return "\n".join(rows)


def per_dtype_lines(reports) -> list[str]:
    """Per sample dtype: the share of judged samples generated natively (no extern call) and the pass rate
    (native or fallback, i.e. not a failure), over all OpInfos and over the elementwise/reduction ones."""
    lines = []
    for dtype in dict.fromkeys(r.dtype for report in reports for r in report.results if r.dtype != "-"):
        for label, fams in (("all", None), ("elementwise+reduction", ("elementwise", "reduction"))):
            judged = [r for report in reports if not fams or report.family in fams for r in report.results
                      if r.dtype == dtype and r.status != "skipped"]
            if judged:
                native = sum(r.status == "native" for r in judged)
                passed = sum(r.status != "failure" for r in judged)
                lines.append(f"{dtype} {label}: {len(judged)} judged samples, "
                             f"native {100 * native / len(judged):.1f}%, pass {100 * passed / len(judged):.1f}%")
    return lines


def format_failures(reports: list[OpReport]) -> str:
    return "\n".join(f"FAIL {f.op} {f.dtype} sample {f.index}: {f.reason}" for r in reports for f in r.failures)


def parse_dtypes(text: str | None) -> tuple:
    """`--dtypes bfloat16,float16` -> torch dtypes; None keeps the judge's default (float32, float64, int64, bool)."""
    import torch
    if not text:
        return DTYPES
    dtypes = tuple(getattr(torch, name.strip(), None) for name in text.split(","))
    if not all(isinstance(d, torch.dtype) for d in dtypes):
        raise SystemExit(f"--dtypes {text!r}: expected torch dtype names separated by commas")
    return dtypes


def _check_by_key(key: str, max_samples: int | None, dtypes: tuple = DTYPES, dynamic: bool = False) -> OpReport:
    import warnings
    warnings.filterwarnings("ignore")
    op = next(o for o in op_db() if op_key(o) == key)
    global _JUDGE
    if "_JUDGE" not in globals() or _JUDGE.dynamic != dynamic:
        _JUDGE = LensJudge(dynamic=dynamic)
    try:
        return _JUDGE.check(op, dtypes=dtypes, max_samples=max_samples)
    except Exception as e:  # noqa: BLE001  (the harness itself must not lose the other ops)
        traceback.print_exc()
        return OpReport(key, family(op), [SampleResult(key, "-", -1, "failure", f"harness: {error_text(e)}")])


def load_reports(path: str) -> list[OpReport]:
    """The OpInfos a (possibly interrupted) earlier run wrote to `path`; a torn last line is dropped."""
    import os
    if not os.path.exists(path):
        return []
    reports = []
    with open(path) as f:
        for line in f:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            reports.append(OpReport(d["op"], d["family"], [SampleResult(**s) for s in d["results"]], d["seconds"]))
    return reports


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--all", action="store_true", help="every OpInfo, not only those with a lowering")
    p.add_argument("--ops", nargs="*", help="only these OpInfos (name or name.variant)")
    p.add_argument("--max-samples", type=int, default=None, help="per OpInfo and dtype (default: all)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--dtypes", help="sample dtypes, comma-separated (default: float32,float64,int64,bool)")
    p.add_argument("--dynamic", action="store_true",
                   help="samples compiled with dynamic=True, then called again one row longer (LensJudge(dynamic=True))")
    p.add_argument("--json", help="write every sample verdict here (one JSON line per OpInfo, as it finishes)")
    p.add_argument("--resume", action="store_true",
                   help="keep the OpInfos already in --json, append the others (a long sweep over sessions)")
    a = p.parse_args(argv)
    dtypes = parse_dtypes(a.dtypes)
    keys = list(dict.fromkeys(op_key(o) for o in find_ops(a.ops, a.all)))
    start = time.perf_counter()
    earlier = load_reports(a.json) if a.resume and a.json else []
    finished = {r.op for r in earlier}
    keys = [k for k in keys if k not in finished]
    if earlier:
        print(f"resuming: {len(finished)} OpInfos already in {a.json}, {len(keys)} to go", file=sys.stderr)
    sink = open(a.json, "w") if a.json else None

    def save(report: OpReport) -> None:
        if sink:
            sink.write(json.dumps({"op": report.op, "family": report.family, "seconds": report.seconds,
                                   "results": [asdict(s) for s in report.results]}) + "\n")
            sink.flush()

    for report in earlier:  # rewritten, so a line torn by the interruption is gone
        save(report)

    def done(report: OpReport) -> OpReport:
        print(format_table([report]).splitlines()[1], flush=True, file=sys.stderr)
        save(report)
        return report

    if a.workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(a.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_check_by_key, k, a.max_samples, dtypes, a.dynamic) for k in keys]
            for fut in as_completed(futures):
                done(fut.result())
            reports = [f.result() for f in futures]
    else:
        reports = [done(_check_by_key(k, a.max_samples, dtypes, a.dynamic)) for k in keys]
    reports = earlier + reports
    print(format_table(reports))
    print("\n".join(per_dtype_lines(reports)))
    print(format_failures(reports))
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return 1 if any(r.failures for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())

