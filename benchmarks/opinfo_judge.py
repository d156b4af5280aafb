"""Compiles OpInfo samples with backend="lens" (debug directories on) and judges each one: native (no extern
call for it), fallback (extern ATen call, or Dynamo ran it eagerly) or failure (error or mismatch with eager).
`LensJudge(dynamic=True)`: every sample compiled with its dimensions dynamic, then called again at a second size
where the op allows (its tensors one row longer; a sample eager rejects that way keeps its size)."""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field

import torch
import torch._dynamo

from opinfo_samples import (DTYPES, DTYPES_ORDER, OpReport, SampleResult, Case, clone_args, same_outputs, family, op_key,
                            prepare)

# Samples compiled together as one graph (one g++ build); a failing chunk is redone sample by sample.
BATCH_SAMPLES = 32
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


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]


class LensJudge:
    """Compiles OpInfo samples with backend="lens" (debug on, into its own folder) and judges them."""

    def __init__(self, work_dir: str | None = None, dynamic: bool = False):
        self.dynamic = dynamic
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

    def _compile_run(self, fn, args_list: list, fullgraph: bool, second: list | None = None):
        """Compiled outputs of `args_list` (and of `second`, the same call at other sizes, when given), and the
        graph folders the compiles wrote."""
        from compiler import config
        old = (config.debug, config.debug_dir_root, config.emulate_precision_casts)
        # bfloat16/float16 ops rounded as eager rounds each one (the mode whose promise is eager's values; lens's
        # default keeps float intermediates in a kernel, closer to the exact result, as Inductor does)
        config.debug, config.debug_dir_root, config.emulate_precision_casts = True, self.debug_root, True
        before = _graph_dirs(self.debug_root)
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend="lens", dynamic=self.dynamic, fullgraph=fullgraph)
            torch.manual_seed(0)
            out = compiled(clone_args(args_list))
            if second is not None:
                torch.manual_seed(0)
                out = (out, compiled(clone_args(second)))
        finally:
            config.debug, config.debug_dir_root, config.emulate_precision_casts = old
        return out, _graph_dirs(self.debug_root) - before

    def _judge(self, op, cases: list[Case]) -> list[SampleResult]:
        fns, calls_file = _call_lambdas(op, len(cases), self.work_dir)
        results = []
        for lo in range(0, len(cases), BATCH_SAMPLES):  # one graph per chunk keeps each g++ build small
            chunk = list(range(lo, min(lo + BATCH_SAMPLES, len(cases))))

            def batch(S, chunk=chunk):
                return [fns[k](*S[j][0], **S[j][1]) for j, k in enumerate(chunk)]

            grown = [_grown(op, cases[k]) if self.dynamic else None for k in chunk]
            second = [g[0] if g else (cases[k].args, cases[k].kwargs) for g, k in zip(grown, chunk)]
            try:
                outs, dirs = self._compile_run(batch, [(cases[k].args, cases[k].kwargs) for k in chunk], True,
                                               second if self.dynamic else None)
            except Exception:  # noqa: BLE001  (one bad sample: judge them one at a time)
                results += [self._judge_one(op, cases[k], fns[k], calls_file, _CALLS_HEADER + 1 + k, g)
                            for g, k in zip(grown, chunk)]
                continue
            use = _read_graphs(dirs, calls_file)
            firsts, seconds = outs if self.dynamic else (outs, [None] * len(chunk))
            results += [self._verdict(op, cases[k], firsts[j], use, _CALLS_HEADER + 1 + k, "", (grown[j], seconds[j]))
                        for j, k in enumerate(chunk)]
        return results

    def _judge_one(self, op, case: Case, fn, calls_file: str, line: int, grown=None) -> SampleResult:
        def single(S):
            return fn(*S[0][0], **S[0][1])

        note, first = "", [(case.args, case.kwargs)]
        second = [grown[0]] if grown else first if self.dynamic else None
        try:
            out, dirs = self._compile_run(single, first, True, second)
        except Exception as e:  # noqa: BLE001
            if _backend_error(e):
                return SampleResult(op_key(op), str(case.dtype), case.index, "failure", error_text(e))
            note = f"graph break: {error_text(e)}"
            try:
                out, dirs = self._compile_run(single, first, False, second)
            except Exception as e2:  # noqa: BLE001
                return SampleResult(op_key(op), str(case.dtype), case.index, "failure", error_text(e2))
        use = _read_graphs(dirs, calls_file)
        if note and line not in use.seen:
            use.eager.add(line)
        out, again = out if self.dynamic else (out, None)
        return self._verdict(op, case, out, use, line, note, (grown, again))

    def _verdict(self, op, case: Case, out, use: _GraphUse, line: int, note: str,
                 second: tuple = (None, None)) -> SampleResult:
        verdict = SampleResult(op_key(op), str(case.dtype), case.index, "native")
        mismatch = same_outputs(out, case.expected, case.atol, case.rtol, values=case.deterministic)
        grown, again = second
        if not mismatch and grown is not None:  # the dynamic graph called at the second size
            mismatch = same_outputs(again, grown[1], case.atol, case.rtol, values=case.deterministic)
            mismatch = mismatch and f"at the second size: {mismatch}"
        if mismatch and grown is None and (dynamos := self._dynamos_difference(op, case, out)):
            verdict.status, verdict.reason = "skipped", f"{dynamos}: {mismatch}"
        elif mismatch:
            verdict.status, verdict.reason = "failure", mismatch
        elif line in use.eager:
            verdict.status, verdict.reason = "fallback", note or "graph ran eagerly"
        elif line in use.extern:
            verdict.status, verdict.reason = "fallback", "extern " + ", ".join(sorted(use.extern[line]))
        if not case.deterministic:
            verdict.reason = (verdict.reason + "; " if verdict.reason else "") + "nondeterministic: values not compared"
        return verdict


    @staticmethod
    def _dynamos_difference(op, case: Case, out) -> str | None:
        """Why a sample lens computes unlike eager is Dynamo's, not lens's: the graph Dynamo hands every backend,
        run op by op (aot_eager: AOTAutograd, no compiler), gives lens's result bit for bit and differs from eager
        as well (torch.addcdiv with a value reaches backends as div, mul and add, rounded each, where eager's kernel
        rounds once). None where aot_eager gives eager's result, fails, or differs from lens's."""
        try:
            torch._dynamo.reset()
            compiled = torch.compile(lambda S: op.op(*S[0][0], **S[0][1]), backend="aot_eager")
            torch.manual_seed(0)
            ref = compiled(clone_args([(case.args, case.kwargs)]))
        except Exception:  # noqa: BLE001  (no verdict of Dynamo's: the sample stays lens's failure)
            return None
        if same_outputs(ref, case.expected, case.atol, case.rtol, values=case.deterministic) is None:
            return None
        if same_outputs(out, ref, values=case.deterministic) is not None:
            return None
        return "Dynamo's graph differs from eager (aot_eager computes lens's result exactly)"


def _grown(op, case: Case):
    """((args, kwargs) with every tensor of the sample's first dimension one row longer, eager's output on them),
    or None where the sample has no such dimension or eager rejects the longer tensors."""
    from torch.utils._pytree import tree_flatten, tree_map
    tensors = [t for t in tree_flatten((case.args, case.kwargs))[0] if isinstance(t, torch.Tensor)]
    lead = {t.shape[0] for t in tensors if t.dim() >= 1}
    if len(lead) != 1 or lead == {0}:
        return None
    n = lead.pop()

    def grow(t):
        if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == n:
            return torch.cat([t, t[:1]]).detach().requires_grad_(t.requires_grad)
        return t

    args, kwargs = tree_map(grow, (case.args, case.kwargs))
    try:
        torch.manual_seed(0)
        expected = op.op(*clone_args(args), **clone_args(kwargs))
    except Exception:  # noqa: BLE001  (the op does not allow another size: the sample keeps its own)
        return None
    return (args, kwargs), expected
