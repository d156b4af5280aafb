"""PyTorch's OpInfo database as the outside judge of the `lens` backend: every sample input of an OpInfo,
compiled with `backend="lens"` and compared with eager, classified native / extern-fallback / failure.

Usage: python benchmarks/opinfo_coverage.py [--all] [--ops NAME ...] [--max-samples N] [--workers N]
                                            [--json FILE]
Prints one row per OpInfo (samples, native, fallback, failures, skipped) and the totals.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import torch
import torch._dynamo
from torch.utils._pytree import tree_flatten, tree_map

# Samples compiled together as one graph (one g++ build); a failing chunk is redone sample by sample.
BATCH_SAMPLES = 32
DTYPES = (torch.float32, torch.float64, torch.int64, torch.bool)
STATUSES = ("native", "fallback", "failure", "skipped")
# OpInfos whose outputs are uninitialized memory: only dtypes and shapes are compared.
UNDEFINED_VALUES = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
aten = torch.ops.aten


@dataclass
class SampleResult:
    """The verdict on one sample input of one OpInfo in one dtype."""

    op: str
    dtype: str
    index: int
    status: str  # native | fallback | failure | skipped
    reason: str = ""


@dataclass
class OpReport:
    """All sample verdicts of one OpInfo, and the OpInfo's family (elementwise / reduction / other)."""

    op: str
    family: str
    results: list[SampleResult] = field(default_factory=list)
    seconds: float = 0.0

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def failures(self) -> list[SampleResult]:
        return [r for r in self.results if r.status == "failure"]


@dataclass
class _Case:
    """One sample ready to run: its arguments, eager's output, and the tolerances to compare with."""

    dtype: torch.dtype
    index: int
    args: tuple
    kwargs: dict
    expected: object
    deterministic: bool
    atol: float
    rtol: float


# -- which OpInfos ----------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def op_db() -> tuple:
    from torch.testing._internal.common_methods_invocations import op_db as db
    return tuple(db)


def op_key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def aten_packet(op):
    name = op.aten_name or op.name
    return getattr(aten, name, None) if name.isidentifier() and hasattr(aten, name) else None


def in_lowering_tables(op) -> bool:
    """The OpInfo's aten op has a lowering of its own (the default run's set)."""
    from compiler.lowering import LOWERINGS
    packets = {getattr(k, "overloadpacket", None) for k in LOWERINGS}
    return aten_packet(op) in packets


def family(op) -> str:
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo, ReductionOpInfo, UnaryUfuncInfo
    if isinstance(op, ReductionOpInfo):
        return "reduction"
    if isinstance(op, (UnaryUfuncInfo, BinaryUfuncInfo)):
        return "elementwise"
    return "other"


def find_ops(names: list[str] | None = None, everything: bool = False) -> list:
    ops = [op for op in op_db() if everything or in_lowering_tables(op)]
    if names:
        ops = [op for op in op_db() if op_key(op) in names or op.name in names]
    return ops


def tolerances(op, dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol): the OpInfo's own CPU tolerance overrides for samples of `dtype` (0 where none); each
    output is compared with the larger of these and assert_close's defaults for the output's dtype."""
    from torch.testing._internal.common_device_type import toleranceOverride
    atol = rtol = 0.0
    for info in op.decorators:
        if getattr(info, "device_type", None) not in (None, "cpu"):
            continue
        for dec in getattr(info, "decorators", ()):
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                atol, rtol = max(atol, dec.d[dtype].atol), max(rtol, dec.d[dtype].rtol)
    return atol, rtol


# -- preparing samples --------------------------------------------------------------------------------
def _clone(tree):
    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _out_of_scope(args, kwargs, out) -> str | None:
    if "out" in kwargs:
        return "uses out="
    if any(t.is_complex() for t in _tensors((args, kwargs))):
        return "complex input"
    leaves = tree_flatten(out)[0]
    if not leaves or any(not isinstance(v, torch.Tensor) and v is not None for v in leaves):
        return "returns non-tensors"
    if any(v.is_complex() for v in leaves if isinstance(v, torch.Tensor)):
        return "complex output"
    if any(v.layout != torch.strided for v in leaves if isinstance(v, torch.Tensor)):
        return "sparse output"
    return None


def _run_eager(fn, args, kwargs, seed: int):
    torch.manual_seed(seed)
    return fn(*_clone(args), **_clone(kwargs))


def _same(got, expected, atol: float | None = None, rtol: float | None = None, values: bool = True) -> str | None:
    """None when equal: dtypes, shapes, values (exactly without tolerances, else within the larger of these
    and assert_close's defaults for each output's dtype), NaN and inf at the same places."""
    from torch.testing._comparison import default_tolerances
    g, e = tree_flatten(got)[0], tree_flatten(expected)[0]
    if len(g) != len(e):
        return f"{len(g)} outputs, eager has {len(e)}"
    for k, (a, b) in enumerate(zip(g, e)):
        if not isinstance(b, torch.Tensor):
            if a != b:
                return f"output {k}: {a!r} != {b!r}"
            continue
        if not isinstance(a, torch.Tensor):
            return f"output {k}: got {type(a).__name__}, eager gives a tensor"
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"output {k}: {a.dtype}{list(a.shape)} vs eager {b.dtype}{list(b.shape)}"
        if not values:
            continue
        at, rt = 0.0, 0.0
        if atol is not None:
            rt, at = default_tolerances(b.dtype)
            at, rt = max(at, atol), max(rt, rtol or 0.0)
        try:
            torch.testing.assert_close(a, b, atol=at, rtol=rt, equal_nan=True)
        except AssertionError as err:
            return f"output {k}: " + " ".join(str(err).split())[:300]
    return None


def prepare(op, dtypes=DTYPES, max_samples: int | None = None) -> tuple[list[_Case], list[SampleResult]]:
    """Eager results of the samples in scope, and verdicts for those out of scope."""
    cases, skipped = [], []
    supported = op.supported_dtypes("cpu")
    fn = op.op
    for dtype in dtypes:
        if dtype not in supported:
            continue
        try:
            samples = list(op.sample_inputs("cpu", dtype))
        except Exception as e:  # noqa: BLE001  (OpInfo's own generator failed)
            skipped.append(SampleResult(op_key(op), str(dtype), -1, "skipped", f"sample_inputs raised {e!r}"[:200]))
            continue
        picked = _spread(len(samples), max_samples)
        atol, rtol = tolerances(op, dtype)
        for i in picked:
            s = samples[i]
            args, kwargs = (s.input, *s.args), dict(s.kwargs)
            verdict = SampleResult(op_key(op), str(dtype), i, "skipped")
            try:
                out = _run_eager(fn, args, kwargs, 0)
            except Exception as e:  # noqa: BLE001  (eager rejects the sample: not ours to judge)
                verdict.reason = f"eager raises {type(e).__name__}"
                skipped.append(verdict)
                continue
            why = _out_of_scope(args, kwargs, out)
            if why:
                verdict.reason = why
                skipped.append(verdict)
                continue
            try:
                again = _run_eager(fn, args, kwargs, 1)
                deterministic = op.name not in UNDEFINED_VALUES and _same(again, out) is None
            except Exception:  # noqa: BLE001
                deterministic = False
            cases.append(_Case(dtype, i, args, kwargs, out, deterministic, atol, rtol))
    return cases, skipped


def _spread(n: int, limit: int | None) -> list[int]:
    """`limit` indices spread evenly over range(n) (all of them without a limit)."""
    if limit is None or n <= limit:
        return list(range(n))
    return sorted({round(k * (n - 1) / (limit - 1)) for k in range(limit)}) if limit > 1 else [0]


# -- compiling and classifying -----------------------------------------------------------------------
_CALLS_HEADER = 2  # lines before the first lambda in the generated calls file
_FILE_LINE = re.compile(r"# File: (?P<file>.+?):(?P<line>\d+) in ")


def _call_lambdas(op, n: int, folder: str) -> tuple[list, str]:
    """n copies of `lambda *a, **k: op(*a, **k)`, each on its own line of a real file, so the kernel map's
    source line of every FX node names the sample it comes from."""
    path = os.path.join(folder, f"opinfo_calls_{n}.py")
    text = "def make(op):\n    return [\n" + "        lambda *a, **k: op(*a, **k),\n" * n + "    ]\n"
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    scope: dict = {}
    exec(compile(text, path, "exec"), scope)  # noqa: S102  (our own generated lambdas)
    return scope["make"](op.op), path


@dataclass
class _GraphUse:
    """What the compiled graphs did with each line of the calls file."""

    seen: set[int] = field(default_factory=set)
    extern: dict[int, set[str]] = field(default_factory=dict)
    eager: set[int] = field(default_factory=set)


def _graph_dirs(root: str) -> set[str]:
    out = set()
    for run in os.listdir(root) if os.path.isdir(root) else ():
        lens = os.path.join(root, run, "lens")
        if os.path.isdir(lens):
            out.update(os.path.join(lens, g) for g in os.listdir(lens))
    return out


def _read_graphs(dirs, calls_file: str) -> _GraphUse:
    use = _GraphUse()
    for d in dirs:
        kmap = os.path.join(d, "kernel_map.json")
        if not os.path.exists(kmap):  # the graph ran eagerly (no generated code)
            readable = os.path.join(d, "fx_graph_readable.py")
            if os.path.exists(readable):
                with open(readable) as f:
                    use.eager.update(int(m["line"]) for m in _FILE_LINE.finditer(f.read())
                                     if os.path.abspath(m["file"]) == calls_file)
            continue
        with open(kmap) as f:
            data = json.load(f)
        reasons = _extern_reasons(os.path.join(d, "notes.txt"))
        line_of = {n["name"]: n["source"]["line"] for n in data["nodes"]
                   if n.get("source") and os.path.abspath(n["source"]["file"]) == calls_file}
        target_of = {n["name"]: n["target"] for n in data["nodes"]}
        use.seen.update(line_of.values())
        for k in data["kernels"]:
            if k["kind"] != "extern":
                continue
            for name in k["nodes"]:
                if name in line_of:
                    why = reasons.get(name, "")
                    use.extern.setdefault(line_of[name], set()).add(
                        target_of.get(name, name) + (f" ({why})" if why else ""))
    return use


_NOTE = re.compile(r"^(?P<node>\S+): extern call to \S+ \((?P<why>.*)\)$", re.M)


def _extern_reasons(path: str) -> dict[str, str]:
    """FX node -> why the lowering sent it to ATen (from notes.txt)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {m["node"]: m["why"][:200] for m in _NOTE.finditer(f.read())}


def _backend_error(e: BaseException) -> bool:
    while e is not None:
        if isinstance(e, torch._dynamo.exc.BackendCompilerFailed):
            return True
        e = e.__cause__ or e.__context__
    return False


def _error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


class LensJudge:
    """Compiles OpInfo samples with backend="lens" (debug on, into its own folder) and judges them."""

    def __init__(self, work_dir: str | None = None):
        self.work_dir = os.path.abspath(work_dir or tempfile.mkdtemp(prefix="lens-opinfo-"))
        self.debug_root = os.path.join(self.work_dir, "debug")
        torch._dynamo.config.cache_size_limit = 4096
        torch._dynamo.config.accumulated_cache_size_limit = 1 << 20

    def check(self, op, dtypes=DTYPES, max_samples: int | None = None) -> OpReport:
        start = time.perf_counter()
        report = OpReport(op_key(op), family(op))
        cases, skipped = prepare(op, dtypes, max_samples)
        report.results.extend(skipped)
        if cases:
            report.results.extend(self._judge(op, cases))
        report.results.sort(key=lambda r: (DTYPES_ORDER.get(r.dtype, 9), r.index))
        report.seconds = time.perf_counter() - start
        return report

    def _compile_run(self, fn, args_list: list, fullgraph: bool):
        from compiler import config
        old = (config.debug, config.debug_dir_root)
        config.debug, config.debug_dir_root = True, self.debug_root
        before = _graph_dirs(self.debug_root)
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="lens", dynamic=False, fullgraph=fullgraph)
            torch.manual_seed(0)
            out = compiled(_clone(args_list))
        finally:
            config.debug, config.debug_dir_root = old
        return out, _graph_dirs(self.debug_root) - before

    def _judge(self, op, cases: list[_Case]) -> list[SampleResult]:
        fns, calls_file = _call_lambdas(op, len(cases), self.work_dir)
        results = []
        for lo in range(0, len(cases), BATCH_SAMPLES):  # one graph per chunk keeps each g++ build small
            chunk = list(range(lo, min(lo + BATCH_SAMPLES, len(cases))))

            def batch(S, chunk=chunk):
                return [fns[k](*S[j][0], **S[j][1]) for j, k in enumerate(chunk)]

            try:
                outs, dirs = self._compile_run(batch, [(cases[k].args, cases[k].kwargs) for k in chunk], True)
            except Exception:  # noqa: BLE001  (one bad sample: judge them one at a time)
                results += [self._judge_one(op, cases[k], fns[k], calls_file, _CALLS_HEADER + 1 + k) for k in chunk]
                continue
            use = _read_graphs(dirs, calls_file)
            results += [self._verdict(op, cases[k], outs[j], use, _CALLS_HEADER + 1 + k, "")
                        for j, k in enumerate(chunk)]
        return results

    def _judge_one(self, op, case: _Case, fn, calls_file: str, line: int) -> SampleResult:
        def single(S):
            return fn(*S[0][0], **S[0][1])

        note = ""
        try:
            out, dirs = self._compile_run(single, [(case.args, case.kwargs)], True)
        except Exception as e:  # noqa: BLE001
            if _backend_error(e):
                return SampleResult(op_key(op), str(case.dtype), case.index, "failure", _error_text(e))
            note = f"graph break: {_error_text(e)}"
            try:
                out, dirs = self._compile_run(single, [(case.args, case.kwargs)], False)
            except Exception as e2:  # noqa: BLE001
                return SampleResult(op_key(op), str(case.dtype), case.index, "failure", _error_text(e2))
        use = _read_graphs(dirs, calls_file)
        if note and line not in use.seen:
            use.eager.add(line)
        return self._verdict(op, case, out, use, line, note)

    def _verdict(self, op, case: _Case, out, use: _GraphUse, line: int, note: str) -> SampleResult:
        verdict = SampleResult(op_key(op), str(case.dtype), case.index, "native")
        mismatch = _same(out, case.expected, case.atol, case.rtol, values=case.deterministic)
        if mismatch:
            verdict.status, verdict.reason = "failure", mismatch
        elif line in use.eager:
            verdict.status, verdict.reason = "fallback", note or "graph ran eagerly"
        elif line in use.extern:
            verdict.status, verdict.reason = "fallback", "extern " + ", ".join(sorted(use.extern[line]))
        if not case.deterministic:
            verdict.reason = (verdict.reason + "; " if verdict.reason else "") + "nondeterministic: values not compared"
        return verdict


DTYPES_ORDER = {str(d): k for k, d in enumerate(DTYPES)}


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


def format_failures(reports: list[OpReport]) -> str:
    return "\n".join(f"FAIL {f.op} {f.dtype} sample {f.index}: {f.reason}" for r in reports for f in r.failures)


def _check_by_key(key: str, max_samples: int | None) -> OpReport:
    import warnings
    warnings.filterwarnings("ignore")
    op = next(o for o in op_db() if op_key(o) == key)
    global _JUDGE
    if "_JUDGE" not in globals():
        _JUDGE = LensJudge()
    try:
        return _JUDGE.check(op, max_samples=max_samples)
    except Exception as e:  # noqa: BLE001  (the harness itself must not lose the other ops)
        traceback.print_exc()
        return OpReport(key, family(op), [SampleResult(key, "-", -1, "failure", f"harness: {_error_text(e)}")])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--all", action="store_true", help="every OpInfo, not only those with a lowering")
    p.add_argument("--ops", nargs="*", help="only these OpInfos (name or name.variant)")
    p.add_argument("--max-samples", type=int, default=None, help="per OpInfo and dtype (default: all)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--json", help="write every sample verdict here (one JSON line per OpInfo, as it finishes)")
    a = p.parse_args(argv)
    keys = list(dict.fromkeys(op_key(o) for o in find_ops(a.ops, a.all)))
    start = time.perf_counter()
    sink = open(a.json, "w") if a.json else None

    def done(report: OpReport) -> OpReport:
        print(format_table([report]).splitlines()[1], flush=True, file=sys.stderr)
        if sink:
            sink.write(json.dumps({"op": report.op, "family": report.family, "seconds": report.seconds,
                                   "results": [asdict(s) for s in report.results]}) + "\n")
            sink.flush()
        return report

    if a.workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(a.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_check_by_key, k, a.max_samples) for k in keys]
            for fut in as_completed(futures):
                done(fut.result())
            reports = [f.result() for f in futures]
    else:
        reports = [done(_check_by_key(k, a.max_samples)) for k in keys]
    print(format_table(reports))
    print(format_failures(reports))
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return 1 if any(r.failures for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
