"""OpInfo samples in scope for the lens judge: which OpInfos, their sample inputs per dtype run in eager,
the tolerances to compare with, and the comparison itself (dtypes, shapes, values, NaN/inf positions)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import torch
from torch.utils._pytree import tree_flatten, tree_map

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
class Case:
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
def clone_args(tree):
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
    return fn(*clone_args(args), **clone_args(kwargs))


def same_outputs(got, expected, atol: float | None = None, rtol: float | None = None, values: bool = True) -> str | None:
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


def prepare(op, dtypes=DTYPES, max_samples: int | None = None) -> tuple[list[Case], list[SampleResult]]:
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
                deterministic = op.name not in UNDEFINED_VALUES and same_outputs(again, out) is None
            except Exception:  # noqa: BLE001
                deterministic = False
            cases.append(Case(dtype, i, args, kwargs, out, deterministic, atol, rtol))
    return cases, skipped


def _spread(n: int, limit: int | None) -> list[int]:
    """`limit` indices spread evenly over range(n) (all of them without a limit)."""
    if limit is None or n <= limit:
        return list(range(n))
    return sorted({round(k * (n - 1) / (limit - 1)) for k in range(limit)}) if limit > 1 else [0]


DTYPES_ORDER = {str(d): k for k, d in enumerate((*DTYPES, torch.bfloat16, torch.float16))}
