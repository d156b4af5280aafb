"""Duplicate nodes folded before lowering (compiler/lowering/cse.py): exactly the nodes computing the same op on
the same arguments, never random or mutating ones, never constants that only compare equal; each fold a `reused`
why-record; results eager's."""
from __future__ import annotations

import json

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from compiler import config
from compiler.lowering.cse import fold_duplicates
from tests.compiler.conftest import compile_with_debug

aten = torch.ops.aten


def _graph(fn, *args) -> torch.fx.GraphModule:
    return make_fx(fn)(*args)


def _targets(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_exactly_the_same_op_on_the_same_arguments_folds():
    def fn(x):
        a, b = x.to(torch.bfloat16), x.to(torch.bfloat16)  # the same: folds
        c = x.to(torch.float16)  # another dtype: stays
        d, e = x + 0.0, x + -0.0  # equal constants of other signs: both stay (x + -0.0 keeps x's -0.0)
        f, g = x * 2, x * True  # 2 and True: another type, both stay
        h, i = a.float() * 3, b.float() * 3  # the same once a and b are one: folds too
        return a.float() - b.float(), c.float(), d.signbit(), e.signbit(), f - g, h - i

    x = torch.tensor([-0.0, 1.5, -2.25])
    gm = _graph(fn, x)
    expected = gm(x)
    folded = fold_duplicates(gm)
    names = {n.name: n for n in gm.graph.nodes}
    assert set(folded.values()) <= set(names) and not set(folded) & set(names)
    assert _targets(gm).count("aten._to_copy.default") == 4  # bf16 once, its float() once, f16 and its float()
    assert len(folded) == 5  # the second bf16 cast, the three float()s of a cast alike, the second * 3
    for got, want in zip(gm(x), expected):
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert gm(x)[3].tolist() == [True, False, True]  # (x + -0.0 kept x's -0.0, x + 0.0 did not)
    assert gm(x)[2].tolist() == [False, False, True]


def test_what_an_output_holds_never_folds():
    """Two outputs computed alike stay two tensors (a caller writing one must not change the other), and so does a
    node an output views."""
    def fn(x):
        return x.clone(), x.clone(), (x * 2).view(-1), (x * 2).view(-1)

    gm = _graph(fn, torch.randn(2, 3))
    assert fold_duplicates(gm) == {}
    x = torch.randn(2, 3)
    torch._dynamo.reset()
    with torch.no_grad():
        a, b, c, d = torch.compile(fn, backend="lens")(x)
    original = x.clone()
    a.add_(1)
    c.add_(1)
    assert torch.equal(x, original) and torch.equal(b, original) and torch.equal(d, (original * 2).view(-1))


def test_random_and_mutating_ops_never_fold():
    def fn(x):
        r1, r2 = torch.rand_like(x), torch.rand_like(x)
        d1, d2 = aten.native_dropout(x, 0.5, True), aten.native_dropout(x, 0.5, True)
        y = x.clone()
        y.add_(1)
        z = x.clone()
        z.add_(1)
        return r1, r2, d1[0], d2[0], y, z

    gm = _graph(fn, torch.randn(4))
    before = _targets(gm)
    folded = fold_duplicates(gm)
    assert all("rand" not in k and "dropout" not in k and "add_" not in k for k in folded)
    assert _targets(gm).count("aten.rand_like.default") == before.count("aten.rand_like.default") == 2
    assert _targets(gm).count("aten.native_dropout.default") == 2


def test_autocast_casts_of_one_layer_norm_output_are_computed_once(tmp_path):
    """Q/K/V-like products of one layer norm's output under bf16 autocast: one cast kernel, the folded casts named
    in why.json as `reused` with the kept cast and its kernel; results eager's bit for bit."""
    x = torch.randn(8, 32, generator=torch.Generator().manual_seed(0))
    ws = [torch.randn(16, 32, generator=torch.Generator().manual_seed(i)) for i in (1, 2, 3)]

    def fn(x, w1, w2, w3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = F.layer_norm(x, (32,))
            return F.linear(y, w1), F.linear(y, w2), F.linear(y, w3)

    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, fn, x, *ws)
        expected = fn(x, *ws)
    for g, e in zip(got, expected):
        assert torch.equal(g, e)
    readable = (graph / "fx_graph_readable.py").read_text()
    casts_of_norm = [line.split(":")[0].strip() for line in readable.splitlines()
                     if "_to_copy.default(mul" in line]
    assert len(casts_of_norm) == 3  # the graph as traced: one cast per product
    records = [r for r in json.loads((graph / "why.json").read_text())["records"] if r["kind"] == "reused"]
    kept = casts_of_norm[0]
    assert sorted(r["nodes"][0] for r in records) == sorted(casts_of_norm[1:])
    assert all(r["nodes"][1] == kept and r["reason"] == "duplicate" and f"`{kept}`" in r["message"] for r in records)
    kernels = json.loads((graph / "kernel_map.json").read_text())["kernels"]
    holding = {n: k["name"] for k in kernels for n in k["nodes"]}
    assert all(r["kernel"] == holding[kept] for r in records)
    assert not set(casts_of_norm[1:]) & set(holding)  # the folded casts have no code of their own


def test_switched_off_every_cast_is_lowered(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "fold_duplicates", False)
    x = torch.randn(4, 8)

    def fn(x):
        return x.to(torch.bfloat16) * 2, x.to(torch.bfloat16) + 1

    with torch.no_grad():
        got, graph = compile_with_debug(tmp_path, fn, x)
    for g, e in zip(got, fn(x)):
        assert torch.equal(g, e)
    assert not [r for r in json.loads((graph / "why.json").read_text())["records"] if r["kind"] == "reused"]
