"""OpInfo samples compiled with their dimensions dynamic (`LensJudge(dynamic=True)`: each sample compiled with
`dynamic=True`, then called at a second size where the op allows) match eager, and the elementwise/reduction
ones are generated natively. `-m slow`: every OpInfo whose aten op has a lowering of ours."""
import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from opinfo_judge import LensJudge, _grown  # noqa: E402
from opinfo_samples import find_ops, op_key, prepare  # noqa: E402

QUICK_OPS = ["add", "mul", "div", "sigmoid", "softmax", "sum", "amax", "nn.functional.layer_norm", "where", "cat"]
DTYPES = (torch.float32, torch.int64)
_JUDGE: list = []


def _judge() -> LensJudge:
    if not _JUDGE:
        _JUDGE.append(LensJudge(dynamic=True))
    return _JUDGE[0]


def _ids(ops):
    return [op_key(op) for op in ops]


def _check(op, max_samples):
    report = _judge().check(op, dtypes=DTYPES, max_samples=max_samples)
    failures = [f"{r.dtype} sample {r.index}: {r.reason}" for r in report.results if r.status == "failure"]
    assert not failures, "\n".join(failures)
    return report


@pytest.mark.parametrize("op", find_ops(QUICK_OPS), ids=_ids(find_ops(QUICK_OPS)))
def test_dynamic_samples_match_eager_at_two_sizes_natively(op):
    report = _check(op, 4)
    judged = [r for r in report.results if r.status != "skipped"]
    assert judged and all(r.status == "native" for r in judged), [(r.dtype, r.index, r.reason) for r in judged]


def test_second_size_grows_the_shared_first_dimension_and_skips_what_eager_rejects():
    op, = find_ops(["add"])
    cases, _ = prepare(op, (torch.float32,), None)
    grown = {tuple(c.args[0].shape): _grown(op, c) for c in cases if isinstance(c.args[0], torch.Tensor)}
    (args, _), expected = grown[(5, 5)]
    assert args[0].shape == (6, 5) and expected.shape == (6, 5)
    assert grown[()] is None  # no first dimension to grow


@pytest.mark.slow
@pytest.mark.parametrize("op", find_ops(), ids=_ids(find_ops()))
def test_every_lowered_op_matches_eager_with_dynamic_dims(op):
    _check(op, None)
