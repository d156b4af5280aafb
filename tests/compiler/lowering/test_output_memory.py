"""Which outputs share memory, against eager, seen as a caller sees it (writing one output, what else changes): a
clone of an input, or two equal clones, are fresh tensors; a view of an input, or two views of one result, share it
as eager's do (compiler/lowering/graph.py `_may_hold`, compiler/lowering/aliases.py)."""
from __future__ import annotations

import pytest
import torch


def _write_effects(call, x0: torch.Tensor) -> list[list[bool]]:
    """For each output, written on a fresh call: whether the input changed, then whether each other output did."""
    effects = []
    for i in range(len(call(x0.clone()))):
        x = x0.clone()
        outs = call(x)
        before = [o.clone() for o in outs]
        outs[i].add_(100)
        effects.append([not torch.equal(x, x0)] + [not torch.equal(o, b) for j, (o, b) in enumerate(zip(outs, before))
                                                    if j != i])
    return effects


def _two_views(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return y.view(-1), y.t()


CASES = {
    "clone of the input": lambda x: (x.clone(), x * 1),
    "two equal clones": lambda x: (x.clone(), x.clone()),
    "a result and its clone": lambda x: ((x * 2), (x * 2).clone()),
    "two views of one result": lambda x: _two_views(x + 1),
    "a view of the input and a clone": lambda x: (x.view(-1), x.clone().view(-1)),
    "contiguous copies": lambda x: (x.t().contiguous(), x.t().clone()),
    "split of a result": lambda x: (x * 3).split(1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_writing_an_output_changes_what_it_changes_in_eager(name):
    fn = CASES[name]
    x = torch.arange(6.0).view(2, 3)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="lens")
    with torch.no_grad():
        for g, e in zip(compiled(x.clone()), fn(x.clone())):
            assert torch.equal(g, e)
        assert _write_effects(compiled, x) == _write_effects(fn, x)
