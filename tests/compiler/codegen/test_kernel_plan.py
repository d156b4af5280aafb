"""Kernel plans (compiler/codegen/plan_passes.py): the decisions each planning pass takes, with their reasons,
as the debug directory's kernel_plans.json holds them, and the verifier that checks a plan after every pass."""
import pytest
import sympy
import torch

from compiler import config
from compiler.codegen.plan import DeferredPass, FlatBlocks, PlanError, SiblingPair
from compiler.codegen.plan_passes import PASSES, build_plan, plan_context
from compiler.ir.nodes import ComputedBuffer, Constant, Layout, Load, Op, index_vars
from compiler.scheduler import FusedKernel
from tests.compiler.conftest import compile_with_debug, kernel_plans, only_plan


def decisions(plan, pass_name):
    return [(d.subject, d.choice) for d in plan.decisions if d.pass_name == pass_name]


def test_softmax_rows_prefetch_the_next_row_and_defer_their_output_pass(tmp_path, stream_everything):
    _, graph = compile_with_debug(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    plan = only_plan(graph)
    assert plan.strategy == "nest" and plan.parallel and plan.loops == ("64",)
    assert plan.row_prefetch == "buf1" and plan.deferred == "buf3" and plan.streamed == ("buf3",)
    assert decisions(plan, "row prefetch") == [("buf1", "a line per block of its pass")]
    assert decisions(plan, "deferred output pass") == [("buf3", "runs a row late in buf1's pass")]
    assert decisions(plan, "sibling loops") == [("buf1", "one loop with buf2")]
    assert ("buf0", "lanes") in decisions(plan, "vectorize")  # the max: per-lane partials


def test_layer_norm_keeps_its_output_pass_and_says_why(tmp_path, stream_everything):
    ln = torch.nn.LayerNorm(512)
    _, graph = compile_with_debug(tmp_path, lambda x: ln(x).detach(), torch.randn(32, 512))
    plan = only_plan(graph)
    assert plan.row_prefetch and not plan.deferred
    (no,) = [d for d in plan.decisions if d.pass_name == "deferred output pass"]
    assert no.choice == "no" and "reads a row of an input again" in no.reason


def test_a_big_pointwise_output_streams_and_a_small_one_says_it_is_under_the_threshold(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 1 << 20)
    _, graph = compile_with_debug(tmp_path, lambda x: x * 3 + 1, torch.randn(1024, 1024))  # 4 MiB
    plan = only_plan(graph)
    assert plan.streamed == ("buf0",) and decisions(plan, "streaming") == [("buf0", "streamed")]
    _, graph = compile_with_debug(tmp_path, lambda x: x * 3 + 1, torch.randn(64, 1024))  # 256 KiB
    plan = only_plan(graph)
    (d,) = [d for d in plan.decisions if d.pass_name == "streaming"]
    assert plan.streamed == () and d.choice == "plain stores" and "streaming_store_min_bytes = 1048576" in d.reason


def test_a_column_sum_takes_the_column_strategy_and_a_row_sum_the_nest(tmp_path):
    _, graph = compile_with_debug(tmp_path, lambda x: x.sum(0), torch.randn(4096, 256))
    plan = only_plan(graph)
    assert plan.strategy == "column" and decisions(plan, "strategy")[0][1] == "column reduction"
    _, graph = compile_with_debug(tmp_path, lambda x: x.sum(-1), torch.randn(256, 4096))
    plan = only_plan(graph)
    (strategy,) = [d for d in plan.decisions if d.pass_name == "strategy"]
    assert plan.strategy == "nest" and strategy.reason.startswith("not a column reduction: ")
    assert decisions(plan, "vectorize") == [("buf0", "wide_sum")]


def test_a_column_sum_reading_one_value_per_row_takes_the_column_strategy(tmp_path):
    """Layer norm backward's weight gradient, sum over rows of dy * (x - mean) * rstd: the per-row mean and rstd
    are one value for a whole row of outputs, which the column strategy reads once per row (the nest read the
    columns with a 3 KiB stride: ViT's kernel 1.2 ms a step)."""
    x, dy = torch.randn(394, 768), torch.randn(394, 768)
    mean, rstd = x.mean(-1, keepdim=True), torch.rand(394, 1) + 0.5
    fn = lambda x, dy, mean, rstd: ((dy * ((x - mean) * rstd)).sum(0), dy.sum(0))  # noqa: E731
    out, graph = compile_with_debug(tmp_path, fn, x, dy, mean, rstd)
    plan = only_plan(graph)
    assert plan.strategy == "column" and decisions(plan, "strategy")[0][1] == "column reduction"
    for got, want in zip(out, fn(x, dy, mean, rstd)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_column_sum_of_a_split_view_reads_it_whole(tmp_path):
    """A (2, 197, 12, 64) gradient summed as (394, 768) over its rows (ViT's attention bias gradients): each dim
    of the load is simplified alone, and only the flat index shows the split dims to be one (768*r + x, not
    151296*(r / 197) + 768*(r % 197) + 64*(x / 64) + x % 64), so the column strategy takes it."""
    x = torch.randn(2, 197, 12, 64)
    out, graph = compile_with_debug(tmp_path, lambda x: x.reshape(394, 768).sum(0), x)
    plan = only_plan(graph)
    assert plan.strategy == "column", [d for d in plan.decisions if d.pass_name == "strategy"]
    code = (graph / "output_code.py").read_text()
    assert "768*r0_0 + x0" in code and "/ 197" not in code
    torch.testing.assert_close(out, x.reshape(394, 768).sum(0), rtol=1e-4, atol=1e-4)


def test_an_argmax_loop_says_why_it_is_not_vectorized(tmp_path):
    _, graph = compile_with_debug(tmp_path, lambda x: x.argmax(-1), torch.randn(64, 100))
    (d,) = [d for d in only_plan(graph).decisions if d.pass_name == "vectorize"]
    assert d.choice == "scalar" and d.reason.startswith("inner loop not vectorized") and "argmax" in d.reason


def test_a_dynamic_kernel_lists_its_generic_plan_and_its_size_variants_with_their_checks(tmp_path):
    torch._dynamo.reset()
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        torch.compile(lambda x: torch.softmax(x, -1), backend="lens", dynamic=True)(torch.randn(8192, 1024))
    finally:
        config.debug, config.debug_dir_root = old
    (graph,) = tmp_path.glob("run_*/lens/graph_*")
    plans = kernel_plans(graph).kernels
    generic = [p for p in plans if not p.size_variant]
    variants = [p for p in plans if p.size_variant]
    assert len(generic) == 1 and not generic[0].streamed and variants
    assert all(p.assumptions for p in variants) and any(p.deferred == "buf3" for p in variants)


# -- the verifier ----------------------------------------------------------------------------------------------
def _pointwise_kernel():
    f32 = torch.float32
    x = index_vars(2)
    body = Op(f32, "mul", "mul", (Load(f32, "mul", "in0", tuple(x)), Constant(f32, "mul", 2.0)))
    out = ComputedBuffer("out", f32, Layout((64, 1024), (1024, 1)), body, x, ["mul"], "mul")
    k = FusedKernel([out], (64, 1024), False, name="k", origins=["mul"], unread_outputs={"out"})
    layouts = {"in0": (f32, Layout((64, 1024), (1024, 1))), "out": (f32, out.layout)}
    return k, layouts


def test_the_verifier_passes_a_sound_plan(monkeypatch):
    monkeypatch.setattr(config, "verify_plan", True)
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 0)
    plan = build_plan(plan_context(*_pointwise_kernel()))
    assert plan.strategy == "nest" and plan.streamed == {"out"}
    assert [name for name, _ in PASSES][:5] == ["node bodies", "merge loops", "merge reduction loops", "threads",
                                                "choose strategy"]


def _broken(name, change):
    passes = list(PASSES)
    at = [n for n, _ in passes].index("row prefetch") + 1
    passes.insert(at, (name, change))
    return passes


@pytest.mark.parametrize("name, change, problem", [
    ("stream an input", lambda plan, ctx: plan.streamed.add("in0"), "streamed node in0 is not an output"),
    ("lose a size", lambda plan, ctx: plan.nest.sizes.pop(), "1 outer loop variables for 0 sizes"),
    ("rename a var", lambda plan, ctx: setattr(plan.bodies[0], "store", plan.bodies[0].store + sympy.Symbol("y9")),
     "body of out refers to unknown variables y9"),
    ("defer without prefetch", lambda plan, ctx: setattr(plan, "deferred", DeferredPass(
        ctx.kernel.nodes[0], plan.bodies[0], plan.nest.vars[0], [], [])),
     "deferred pass of out without a row prefetch by lines"),
    ("stage a line", lambda plan, ctx: setattr(plan, "flat_blocks", FlatBlocks(16, 65536, False, None, {"out": "l"})),
     "line blocks in a kernel that is not flat and streamed"),
    ("cut past the end", lambda plan, ctx: setattr(plan.nest, "splits", [plan.nest.sizes[-1] + 1]),
     "do not cut a flat nest's last loop"),
    ("pair with no next node", lambda plan, ctx: plan.pairs.__setitem__("out", SiblingPair(
        "in0", plan.bodies[0], "simd", "acc", op="+")), "sibling loop of out with in0, not the node after it"),
])
def test_the_verifier_names_the_pass_that_broke_the_plan(monkeypatch, name, change, problem):
    monkeypatch.setattr(config, "verify_plan", True)
    with pytest.raises(PlanError) as e:
        build_plan(plan_context(*_pointwise_kernel()), _broken(name, change))
    assert e.value.pass_name == name and problem in str(e.value) and f"after pass '{name}'" in str(e.value)
    monkeypatch.setattr(config, "verify_plan", False)  # off: nothing checks
    build_plan(plan_context(*_pointwise_kernel()), _broken(name, change))


def test_a_nodes_own_loops_are_merged_by_the_plan_and_printed_as_planned(tmp_path):
    """The loops of a node inside the outer ones (the epilogue of a row sum over (16, 64)) are planned, merged and
    with their pragmas, before printing (plan_passes.inner_loops); kernel_plans.json records the merge."""
    _, graph = compile_with_debug(tmp_path, lambda x: x - x.sum((1, 2), keepdim=True), torch.randn(4, 16, 64))
    plan = only_plan(graph)
    assert ("buf1", "inner loops 16×64 -> 1024") in decisions(plan, "merge loops")
    code = (graph / "output_code.py").read_text()
    assert "#pragma omp simd\n" in code and "< 1024; " in code


def test_the_printer_refuses_inner_loops_other_than_planned(tmp_path, monkeypatch):
    from compiler.codegen import plan_passes

    def unmerged(plan, ctx):
        plan_passes.inner_loops(plan, ctx)
        for name, loops in plan.inner.items():
            loops.sizes = [*loops.sizes, 1]  # a plan the body's indices do not call for
    monkeypatch.setattr(plan_passes, "PASSES", [(name, unmerged if name == "inner loops" else run)
                                                for name, run in plan_passes.PASSES])
    with pytest.raises(Exception, match="plan inconsistent after pass 'inner loops'"):  # (Dynamo wraps it)
        compile_with_debug(tmp_path, lambda x: x - x.sum((1, 2), keepdim=True), torch.randn(4, 16, 64))
