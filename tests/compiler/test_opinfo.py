"""PyTorch's OpInfo database judges `backend="lens"`: each sample input (float32, float64, int64, bool)
compiled and compared with eager, with the OpInfo's tolerances. Default run: the OpInfos whose aten op has
a lowering of ours (a spread subset of samples); `-m slow`: every OpInfo, every sample, and again in bfloat16
and float16 (the OpInfo's own per-dtype tolerances, compiled with emulate_precision_casts so that each half op
rounds as eager's does; the summary gives each dtype's native share and pass rate). The judge itself lives in benchmarks/opinfo_*.py (also a CLI: benchmarks/opinfo_coverage.py)."""
import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
import opinfo_coverage as coverage  # noqa: E402
from opinfo_judge import LensJudge  # noqa: E402
from opinfo_samples import family, find_ops, op_db, op_key  # noqa: E402

# Samples per OpInfo and dtype in the default run (spread over the OpInfo's list); the slow run takes all.
DEFAULT_MAX_SAMPLES = 24
NATIVE_TARGET = 0.90  # share of judged elementwise/reduction samples generated without an extern call
HALF_DTYPES = (torch.bfloat16, torch.float16)

DEFAULT_OPS = find_ops()
ALL_OPS = list(op_db())
_REPORTS: dict = {}


def _ids(ops):
    seen: dict[str, int] = {}
    out = []
    for op in ops:
        key = op_key(op)
        seen[key] = seen.get(key, 0) + 1
        out.append(key if seen[key] == 1 else f"{key}#{seen[key]}")
    return out


class _CoverageTable:
    """Prints the coverage table of the OpInfos judged in this session in pytest's terminal summary."""

    def pytest_terminal_summary(self, terminalreporter):
        if _REPORTS:
            terminalreporter.write_sep("-", "lens vs eager on OpInfo samples")
            terminalreporter.write_line(coverage.format_table(list(_REPORTS.values())))
            for line in coverage.per_dtype_lines(list(_REPORTS.values())):
                terminalreporter.write_line(line)


@pytest.fixture(scope="module")
def judge(tmp_path_factory, request):
    if not request.config.pluginmanager.has_plugin("lens-opinfo-table"):
        request.config.pluginmanager.register(_CoverageTable(), "lens-opinfo-table")
    return LensJudge(str(tmp_path_factory.mktemp("opinfo")))


def _check(judge, op, max_samples, dtypes=None):
    report = judge.check(op, max_samples=max_samples, **({"dtypes": dtypes} if dtypes else {}))
    _REPORTS[op_key(op) + (" (half)" if dtypes else "")] = report
    return report


@pytest.mark.parametrize("op", DEFAULT_OPS, ids=_ids(DEFAULT_OPS))
def test_lowered_op_matches_eager(judge, op):
    report = _check(judge, op, DEFAULT_MAX_SAMPLES)
    assert not report.failures, coverage.format_failures([report])


def test_elementwise_and_reduction_samples_are_mostly_native(judge):
    """Runs after the per-op tests (file order) and reuses their reports; checks what they did not run."""
    reports = []
    for op in DEFAULT_OPS:
        if family(op) in ("elementwise", "reduction"):
            key = op_key(op)
            reports.append(_REPORTS.get(key) or _check(judge, op, DEFAULT_MAX_SAMPLES))
    t = coverage.totals(reports)
    assert t.judged > 0
    assert t.native / t.judged >= NATIVE_TARGET, coverage.format_table(reports)


@pytest.mark.slow
@pytest.mark.parametrize("op", ALL_OPS, ids=_ids(ALL_OPS))
def test_every_op_every_sample_matches_eager(judge, op):
    report = _check(judge, op, None)
    assert not report.failures, coverage.format_failures([report])


@pytest.mark.slow
@pytest.mark.parametrize("op", ALL_OPS, ids=_ids(ALL_OPS))
def test_every_op_every_sample_matches_eager_in_half_precision(judge, op):
    report = _check(judge, op, None, HALF_DTYPES)
    assert not report.failures, coverage.format_failures([report])
