"""The OpInfo judge (benchmarks/opinfo_judge.py) on samples whose difference from eager is Dynamo's graph's."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from opinfo_judge import LensJudge  # noqa: E402
from opinfo_samples import op_db  # noqa: E402


def _addcdiv():
    return next(op for op in op_db() if op.name == "addcdiv" and not op.variant_test_name)


def test_addcdiv_with_a_value_is_dynamos_difference_not_a_failure(tmp_path):
    """Dynamo hands every backend torch.addcdiv(..., value=v) as div, mul and add: in bfloat16 aot_eager differs
    from eager's kernel (one rounding) exactly as lens does, so those samples are skipped with that reason; the
    samples without a value are judged and equal eager."""
    report = LensJudge(str(tmp_path)).check(_addcdiv(), dtypes=(torch.bfloat16,))
    skipped = [r for r in report.results if r.status == "skipped"]
    assert skipped and all("Dynamo's graph differs from eager" in r.reason for r in skipped)
    assert not report.failures
    assert report.count("native") > 0


def test_a_difference_of_lens_alone_stays_a_failure(tmp_path, monkeypatch):
    """Where aot_eager gives eager's result the sample is lens's failure, whatever lens computed."""
    import opinfo_judge
    op = _addcdiv()
    judge = LensJudge(str(tmp_path))
    real = opinfo_judge.same_outputs
    calls = []

    def lens_differs_first(got, expected, *args, **kwargs):  # the first comparison (lens against eager) fails
        calls.append(1)
        return "lens differs" if len(calls) == 1 else real(got, expected, *args, **kwargs)

    monkeypatch.setattr(opinfo_judge, "same_outputs", lens_differs_first)
    report = judge.check(op, dtypes=(torch.float32,), max_samples=1)
    assert [r.status for r in report.results] == ["failure"] and report.results[0].reason == "lens differs"
