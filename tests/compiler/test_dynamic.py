"""Graphs over Dynamo's size symbols compile natively, once for every size, and match eager at each size:
`dynamic=True`, `mark_dynamic`, automatic dynamic, backward graphs of dynamic forwards, data-dependent sizes."""
import json

import pytest
import torch
import torch.nn.functional as F

from compiler import config
from compiler import pipeline


def _flat(x):
    return [t for v in x for t in _flat(v)] if isinstance(x, (list, tuple)) else [x]


def _compiled_since(mark):
    c0, e0 = mark
    graphs = pipeline.COMPILED[c0:]
    externs = [n for g in graphs for k in g.kernel_map.kernels if k.kind == "extern" for n in k.nodes]
    return graphs, pipeline.EAGER[e0:], externs


def check_dynamic(fn, make_args, sizes=(7, 13, 40), graphs=1, externs=(), atol=1e-5, rtol=1e-5, **compile_kw):
    """fn compiled with dynamic sizes matches eager at every size, in `graphs` compiles, none eager, with
    no extern calls but `externs` (node names)."""
    torch._dynamo.reset()
    mark = len(pipeline.COMPILED), len(pipeline.EAGER)
    compiled = torch.compile(fn, backend="lens", **({"dynamic": True} | compile_kw))
    for n in sizes:
        torch.manual_seed(n)
        args = make_args(n)
        expected, got = fn(*args), compiled(*args)
        for e, g in zip(_flat(expected), _flat(got), strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype, (n, g.shape, e.shape)
            if e.dtype.is_floating_point:
                torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
            else:
                assert torch.equal(g, e), n
    done, eager, ext = _compiled_since(mark)
    assert not eager, eager
    assert len(done) == graphs, [g.graph_id for g in done]
    assert sorted(ext) == sorted(externs), ext
    return done


CASES = {
    "pointwise_broadcast": (lambda a, b: ((a + b) * 2).sigmoid() - b,
                            lambda n: (torch.randn(n, 37), torch.randn(1, 37))),
    "column_broadcast": (lambda a, b: a * b + 1, lambda n: (torch.randn(n, 64), torch.randn(n, 1))),
    "softmax_rows": (lambda x: torch.softmax(x, -1), lambda n: (torch.randn(n, 100),)),
    "softmax_dim0": (lambda x: torch.softmax(x, 0), lambda n: (torch.randn(n, 33),)),
    "log_softmax_dynamic_row": (lambda x: torch.log_softmax(x, -1), lambda n: (torch.randn(5, n),)),
    "sum_all": (lambda x: x.sum(), lambda n: (torch.randn(n, 19),)),
    "mean_dim0": (lambda x: x.mean(0), lambda n: (torch.randn(n, 130),)),
    "var_dim0_blocks_of_outputs": (lambda x: x.var(0), lambda n: (torch.randn(n, 70),)),
    "sum_dim0_dynamic_columns": (lambda x: x.sum(0) * 2, lambda n: (torch.randn(33, 20 * n),)),
    "mean_long_dynamic_rows": (lambda x: x.mean(-1), lambda n: (torch.randn(3, 50 * n),)),
    "var_dynamic_row": (lambda x: x.var(1), lambda n: (torch.randn(5, n),)),
    "amax_long_rows": (lambda x: x.amax(-1), lambda n: (torch.randn(n, 300),)),
    "argmax_flat": (lambda x: x.argmax(), lambda n: (torch.randn(n, 3),)),
    "transpose_contiguous": (lambda x: x.t().contiguous() + 1, lambda n: (torch.randn(n, 9),)),
    "flatten_3d": (lambda x: x.flatten() * 2, lambda n: (torch.randn(n, 3, 5),)),
    "cat_dim0": (lambda a, b: torch.cat([a, b], 0) * 2, lambda n: (torch.randn(n, 4), torch.randn(3, 4))),
    "slice_step": (lambda a: a[1:-1, ::2] + 1, lambda n: (torch.randn(n, 10),)),
    "pad": (lambda a: F.pad(a, (1, 2)) * 3, lambda n: (torch.randn(n, 10),)),
    "int64_floor_div": (lambda a: (a * 3) // 2 + a.sum(), lambda n: (torch.randint(-50, 50, (n, 6)),)),
    "float64_exp": (lambda a: torch.exp(a) * 2, lambda n: (torch.randn(n, 6, dtype=torch.float64),)),
    "bool_and": (lambda a: (a > 0) & (a < 1), lambda n: (torch.randn(n, 6),)),
    "layer_norm_of_dynamic_width": (lambda x: F.layer_norm(x * 2, (x.shape[-1],)), lambda n: (torch.randn(4, n),)),
    "arange_between_size_arguments": (lambda x: x + torch.arange(x.shape[0] - 3, 2 * x.shape[0] - 3),
                                      lambda n: (torch.randn(n),)),
    "arange_by_size": (lambda a: a + torch.arange(a.shape[0]).unsqueeze(1), lambda n: (torch.randn(n, 5),)),
    # select/slice at a symbolic start (lowering/views.py): the sign from the ranges, else end less output size
    "slice_from_half": (lambda x: x[x.shape[0] // 2:] * 2, lambda n: (torch.randn(n, 6),)),
    "slice_last_rows": (lambda x: x[x.shape[0] - 3:] * 2, lambda n: (torch.randn(n, 6),)),
    "narrow_before_the_end": (lambda x: x.narrow(0, x.shape[0] - 4, 2) * 2, lambda n: (torch.randn(n, 6),)),
    "slice_between_symbolic_bounds": (lambda x: x[:, x.shape[1] // 3: x.shape[1] - 1] + 1,
                                      lambda n: (torch.randn(4, n),)),
    "slice_symbolic_start_by_two": (lambda x: x[x.shape[0] // 3::2] + 1, lambda n: (torch.randn(n, 5),)),
    "select_last_row": (lambda x: x.select(0, x.shape[0] - 1) * 2, lambda n: (torch.randn(n, 6),)),
    "select_middle_row": (lambda x: x[x.shape[0] // 2] * 2, lambda n: (torch.randn(n, 5),)),
    "select_from_the_end": (lambda x: x.select(1, -(x.shape[1] // 2)) + 1, lambda n: (torch.randn(3, n + 2),)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_dynamic_graph_is_native_and_matches_eager_at_every_size(name):
    fn, make = CASES[name]
    check_dynamic(fn, make, atol=1e-4, rtol=1e-4)


def test_mlp_with_layer_norm_runs_one_compile_for_every_batch():
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32), torch.nn.LayerNorm(32))
    with torch.no_grad():
        check_dynamic(m, lambda n: (torch.randn(n, 32),), sizes=(7, 300, 4100, 9), externs=("addmm", "addmm_1"),
                      atol=1e-4, rtol=1e-4)


def test_threads_are_chosen_at_run_time_in_one_kernel():
    graph, = check_dynamic(lambda x: torch.relu(x) * 3, lambda n: (torch.randn(n, 64),), sizes=(3, 5000))
    assert "if(parallel: " in graph.code.text and "int64_t s" in graph.code.text


def test_mark_dynamic_compiles_the_marked_dim_once():
    check_dynamic(lambda x: torch.softmax(x, -1) + x.mean(0), lambda n: _marked(torch.randn(n, 40)), dynamic=None)


def _marked(x):
    torch._dynamo.mark_dynamic(x, 0)
    return (x,)


def test_automatic_dynamic_second_size_compiles_natively_and_serves_later_sizes():
    with torch.no_grad():
        check_dynamic(lambda x: F.layer_norm(x * 2, (40,)) + 1, lambda n: (torch.randn(n, 40),), sizes=(7, 11, 29, 64),
                      graphs=2, dynamic=None)


def test_backward_of_a_dynamic_forward_compiles_natively():
    def step(x, w):
        y = torch.softmax(x @ w, -1) * x.sum(-1, keepdim=True)
        return torch.autograd.grad(y.square().sum(), (x, w))

    torch._dynamo.reset()
    mark = len(pipeline.COMPILED), len(pipeline.EAGER)
    compiled = torch.compile(lambda x, w: torch.softmax(x @ w, -1) * x.sum(-1, keepdim=True), backend="lens",
                             dynamic=True)
    for n in (7, 13, 40):
        x, w = torch.randn(n, 16, requires_grad=True), torch.randn(16, 24, requires_grad=True)
        got = torch.autograd.grad(compiled(x, w).square().sum(), (x, w))
        for g, e in zip(got, step(x, w)):
            torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    done, eager, _ = _compiled_since(mark)
    assert not eager
    assert len(done) == 2 and {g.kernel_map.graph_kind for g in done} == {"forward", "backward"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norm_training_over_changing_batch_sizes_compiles_natively(dtype):
    """BatchNorm's training forward divides the element count by the channels (`IntTrueDiv`) and scales the
    running variance by n / (n - 1) (`FloatTrueDiv`): float expressions of the batch size, computed in the kernels
    (symbols.FloatSize), not an eager graph at every batch size after the first."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(6).to(dtype)
    ref = torch.nn.BatchNorm2d(6).to(dtype)
    ref.load_state_dict(bn.state_dict())
    torch._dynamo.reset()
    mark = len(pipeline.COMPILED), len(pipeline.EAGER)
    compiled = torch.compile(lambda x: torch.relu(bn(x)), backend="lens", dynamic=True)
    for n in (3, 5, 8):
        x = torch.randn(n, 6, 5, 7, dtype=dtype)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = compiled(xa), torch.relu(ref(xb))
        got.square().sum().backward()
        want.square().sum().backward()
        for g, e in ((got, want), (xa.grad, xb.grad), (bn.weight.grad, ref.weight.grad),
                     (bn.running_mean, ref.running_mean), (bn.running_var, ref.running_var)):
            torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    done, eager, _ = _compiled_since(mark)
    assert not eager, eager
    assert {g.kernel_map.graph_kind for g in done} == {"forward", "backward"}


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True, capture_scalar_outputs=True)
def test_data_dependent_output_sizes_compile_with_extern_producers():
    check_dynamic(lambda x: torch.nonzero(x > 0).float().sum(0) * 2 + torch.masked_select(x, x > 0).exp().sum(),
                  lambda n: (torch.randn(n, 5),), externs=("nonzero", "masked_select"), atol=1e-4, rtol=1e-4)

    def first_k(x, k):
        return x[:k.item()] * 2

    check_dynamic(first_k, lambda n: (torch.randn(n, 5), torch.tensor(n // 2)),
                  externs=("_local_scalar_dense", "slice_1"))


def test_symbols_json_names_each_symbol_with_source_range_and_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path))
    check_dynamic(lambda x, w: F.layer_norm(torch.relu(x @ w) * 2 + 1, (w.shape[1],)),
                  lambda n: (torch.randn(n, 32), torch.randn(32, 48)), externs=("mm",), atol=1e-4, rtol=1e-4)
    path, = tmp_path.glob("run_*/lens/graph_*/symbols.json")
    data = json.loads(path.read_text())
    assert data["version"] == 1
    by_source = {s["source"]: s for s in data["symbols"]}
    batch = by_source["L['x'].size()[0]"]
    assert batch["name"].startswith("s") and batch["range"] == [2, None] and batch["hint"] == 7
    assert by_source["L['w'].size()[1]"]["hint"] == 48 and isinstance(batch["guards"], list)
    assert "runs eagerly" not in "".join(p.read_text() for p in tmp_path.glob("run_*/lens/*/notes.txt"))


def test_one_graph_cache_entry_serves_every_size_after_a_warm_start(monkeypatch, tmp_path):
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "graph_cache", True)
    monkeypatch.setattr(config, "debug", False)

    def fn(x):
        return torch.softmax(x * 2, -1) + 1

    with torch.no_grad():
        check_dynamic(fn, lambda n: (torch.randn(n, 40),))
        assert len(list((tmp_path / "graphs").rglob("*.json"))) == 1
        check_dynamic(fn, lambda n: (torch.randn(n, 40),), sizes=(9, 300), graphs=0)  # no tracing: a cache hit
    assert len(list((tmp_path / "graphs").rglob("*.json"))) == 1


def _with_nans(n):
    x = torch.randn(n, n + 3)
    x[1, n] = float("nan")  # in the row's tail (past its whole registers of lanes) for the sizes below
    x[2, 0] = float("nan")  # in its lanes
    x[3, :] = float("-inf")
    return (x,)


@pytest.mark.parametrize("op", ["amax", "amin", "softmax"])
def test_symbolic_rows_reduce_in_lanes_and_propagate_nan_like_eager(op):
    fn = {"amax": lambda x: x.amax(-1), "amin": lambda x: x.amin(-1), "softmax": lambda x: torch.softmax(x, -1)}[op]
    graph, = check_dynamic(fn, _with_nans, sizes=(5, 17, 40))
    assert "_lanes[" in graph.code.text  # per-lane partials over a row of s0 + 3 elements


def test_attention_over_dynamic_sequence_lengths_is_one_graph_across_the_key_limit():
    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v) * 2

    make = lambda n: tuple(torch.randn(2, 4, n, 16) for _ in range(3))  # noqa: E731
    with torch.no_grad():
        check_dynamic(attend, make, sizes=(config.attention_max_keys * 2, 40, config.attention_max_keys + 1),
                      externs=("_scaled_dot_product_flash_attention_for_cpu",), atol=1e-4, rtol=1e-4)


def test_rows_of_static_length_are_prefetched_up_to_a_symbolic_row_count():
    ln = torch.nn.LayerNorm(1024).eval()
    with torch.no_grad():
        graph, = check_dynamic(lambda x: ln(x) * 2, lambda n: (torch.randn(n, 1024),), sizes=(7, 30, 65),
                               atol=1e-4, rtol=1e-4)
    prefetches = [line for line in graph.code.text.splitlines() if "__builtin_prefetch" in line]
    assert prefetches and all(" + 1 < s" in line for line in prefetches)


def test_views_from_a_clamped_start_compute_their_offset_in_python():
    """A slice whose start is a symbolic integer counted from the end starts at max(0, s0 + s1): the view returned
    (and the one an extern op reads) computes that offset with Python's max in call() (sympy's `Max` there was a
    NameError, found by the dynamic OpInfo sweep's `slice`)."""
    w = torch.randn(40, 8)
    check_dynamic(lambda x, start: torch.ops.aten.slice.Tensor(x, 0, start, -2, 2),
                  lambda n: (torch.randn(n, 30, 40), -10), sizes=(20, 21, 13))
    check_dynamic(lambda x, start: torch.mm(torch.ops.aten.slice.Tensor(x, 0, start)[:, 0], w),
                  lambda n: (torch.randn(n, 3, 40), -4), sizes=(20, 21, 5), externs=("mm",))
