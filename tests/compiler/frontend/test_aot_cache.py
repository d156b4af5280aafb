"""Warm starts of training graphs come from torch's AOTAutograd cache (compiler/frontend/aot_cache.py)."""
import os
import pathlib

import pytest
import torch
from torch._dynamo.utils import counters

from compiler import pipeline
from compiler import config
from compiler.frontend import aot_cache


@pytest.fixture
def compiles(monkeypatch, tmp_path):
    """Fresh caches (torch's and lens's); counts the graphs that go through lens's pipeline."""
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path / "lens"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torch"))
    monkeypatch.setattr(config, "graph_cache", True)
    monkeypatch.setattr(config, "debug", False)
    seen = []
    inner = pipeline.compile_to_graph

    def counting(gm, example_inputs, kind="inference"):
        seen.append(kind)
        return inner(gm, example_inputs, kind)

    monkeypatch.setattr(pipeline, "compile_to_graph", counting)
    counters.clear()
    return seen


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = torch.nn.Linear(12, 16), torch.nn.Linear(16, 3)
        self.scale = torch.nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x)) * self.scale
        h = torch.nn.functional.layer_norm(h, (16,))
        return torch.softmax(self.fc2(h), dim=-1) * torch.tensor([1.0, 2.0, 3.0])  # (a lifted constant)


def step(model, x):
    """One forward and backward of `model` compiled after a reset (a warm start when the caches hold it)."""
    torch._dynamo.reset()
    model.zero_grad(set_to_none=True)
    loss = torch.compile(model, backend="lens")(x).square().sum()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def eager_step(model, x):
    model.zero_grad(set_to_none=True)
    loss = model(x).square().sum()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def assert_step_equal(got, expected, **tol):
    torch.testing.assert_close(got[0], expected[0], **tol)
    for g, e in zip(got[1], expected[1]):
        torch.testing.assert_close(g, e, **tol)


def test_a_warm_start_loads_forward_and_backward_without_compiling(compiles):
    model, x = Net(), torch.randn(6, 12)
    cold = step(model, x)
    assert compiles == ["forward", "backward"]  # (the backward with the forward: torch saves both at once)
    assert counters["aot_autograd"]["autograd_cache_saved"] == 1
    warm = step(model, x)
    assert compiles == ["forward", "backward"]
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1
    assert counters["aot_autograd"]["autograd_cache_bypass"] == 0  # (torch's accounting of the hit went through)
    assert_step_equal(warm, cold, rtol=0, atol=0)
    assert_step_equal(warm, eager_step(model, x), rtol=1e-4, atol=1e-5)
    x2 = torch.randn(6, 12)
    assert_step_equal(step(model, x2), eager_step(model, x2), rtol=1e-4, atol=1e-5)  # other values: a hit
    assert compiles == ["forward", "backward"]


def test_the_backward_compiles_at_the_first_backward_pass_and_torchs_settings_come_back(compiles):
    import torch._functorch.config as functorch_config
    model, x = Net(), torch.randn(6, 12)
    torch._dynamo.reset()
    out = torch.compile(model, backend="lens")(x)
    assert compiles == ["forward"] and counters["aot_autograd"]["autograd_cache_saved"] == 0
    assert functorch_config.bundled_autograd_cache is False
    out.square().sum().backward()
    assert compiles == ["forward", "backward"] and counters["aot_autograd"]["autograd_cache_saved"] == 1
    assert functorch_config.bundled_autograd_cache is False and not aot_cache._UNBUNDLE  # (on only until saved)
    step(model, x)
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1 and len(compiles) == 2


def test_a_backward_that_runs_eagerly_saves_nothing_and_restores_torchs_settings(compiles, monkeypatch):
    import torch._functorch.config as functorch_config
    lower_graph = pipeline.lower_graph

    def forward_only(gm):
        if any(n.name.startswith("tangents") for n in gm.graph.nodes):
            raise RuntimeError("a lowering bug in the backward")
        return lower_graph(gm)

    monkeypatch.setattr(pipeline, "lower_graph", forward_only)
    model, x = Net(), torch.randn(6, 12)
    assert_step_equal(step(model, x), eager_step(model, x), rtol=1e-4, atol=1e-5)
    assert counters["aot_autograd"]["autograd_cache_saved"] == 0
    assert functorch_config.bundled_autograd_cache is False and not aot_cache._UNBUNDLE


def test_an_entry_whose_kernels_left_the_build_cache_builds_them_again(compiles, monkeypatch, tmp_path):
    model, x = Net(), torch.randn(6, 12)
    cold = step(model, x)
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path / "lens-emptied"))
    warm = step(model, x)
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1 and len(compiles) == 2
    assert list((tmp_path / "lens-emptied").rglob("output_code_*.py"))  # (rebuilt from the entry's text)
    assert_step_equal(warm, cold, rtol=0, atol=0)


def test_other_settings_shapes_and_no_grad_do_not_hit(compiles, monkeypatch):
    model, x = Net(), torch.randn(6, 12)
    step(model, x)
    keys = config.attention_max_keys
    monkeypatch.setattr(config, "attention_max_keys", keys + 1)  # (any lens setting)
    step(model, x)
    assert len(compiles) == 4 and counters["aot_autograd"]["autograd_cache_hit"] == 0
    monkeypatch.setattr(config, "attention_max_keys", keys)
    step(model, torch.randn(5, 12))  # another shape
    assert len(compiles) == 6 and counters["aot_autograd"]["autograd_cache_hit"] == 0
    with torch.no_grad():  # (an inference graph: not this cache's)
        step_fn = torch.compile(model, backend="lens")
        torch._dynamo.reset()
        step_fn(x)
    assert compiles[-1] == "inference" and counters["aot_autograd"]["autograd_cache_hit"] == 0


def test_inductors_entries_and_ours_never_meet(compiles):
    model, x = Net(), torch.randn(6, 12)
    torch._dynamo.reset()
    model.zero_grad(set_to_none=True)
    torch.compile(model, backend="inductor")(x).square().sum().backward()
    assert counters["aot_autograd"]["autograd_cache_saved"] == 1  # Inductor's
    assert_step_equal(step(model, x), eager_step(model, x), rtol=1e-4, atol=1e-5)
    assert compiles == ["forward", "backward"] and counters["aot_autograd"]["autograd_cache_hit"] == 0
    torch._dynamo.reset()
    torch.compile(model, backend="inductor")(x).square().sum().backward()
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1 and len(compiles) == 2  # Inductor's own entry


def test_a_graph_that_runs_eagerly_is_not_saved(compiles, monkeypatch):
    def failing(gm):
        raise RuntimeError("a lowering bug")

    lower_graph = pipeline.lower_graph
    monkeypatch.setattr(pipeline, "lower_graph", failing)
    model, x = Net(), torch.randn(6, 12)
    assert_step_equal(step(model, x), eager_step(model, x), rtol=1e-4, atol=1e-5)
    assert counters["aot_autograd"]["autograd_cache_saved"] == 0
    monkeypatch.setattr(pipeline, "lower_graph", lower_graph)
    compiles.clear()
    step(model, x)
    assert len(compiles) == 2 and counters["aot_autograd"]["autograd_cache_hit"] == 0


def test_debug_runs_and_lens_graph_cache_off_compile_every_time(compiles, monkeypatch, tmp_path):
    model, x = Net(), torch.randn(6, 12)
    step(model, x)
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path / "debug"))
    step(model, x)
    assert len(compiles) == 4  # (a debug directory needs every graph's files)
    monkeypatch.setattr(config, "debug", False)
    monkeypatch.setattr(config, "graph_cache", False)
    step(model, x)
    assert len(compiles) == 6 and counters["aot_autograd"]["autograd_cache_hit"] == 0


def test_a_broken_entry_compiles_again(compiles, tmp_path):
    model, x = Net(), torch.randn(6, 12)
    step(model, x)
    entries = [p for p in pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"], "aotautograd").rglob("*")
               if p.is_file()]
    assert entries
    for p in entries:
        p.write_bytes(b"not a pickle")
    assert_step_equal(step(model, x), eager_step(model, x), rtol=1e-4, atol=1e-5)
    assert len(compiles) == 4


def test_a_dynamic_graph_and_an_autocast_one_are_served_at_every_size(compiles):
    """A graph over Dynamo's size symbols is one entry for every batch size (torch keeps its guards with it), and
    autocast's state is part of the key."""
    model = Net()
    for autocast in (False, True):
        tol = dict(rtol=2e-2, atol=2e-2) if autocast else dict(rtol=1e-4, atol=1e-5)
        for phase in ("cold", "warm"):
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="lens", dynamic=True)
            for rows in (8, 13, 5):
                x = torch.randn(rows, 12)
                results = []
                for fn in (compiled, model):
                    model.zero_grad(set_to_none=True)
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                        loss = fn(x).float().square().sum()
                    loss.backward()
                    results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
                assert_step_equal(*results, **tol)
        assert compiles[-2:] == ["forward", "backward"] and len(compiles) == (2 if not autocast else 4)
    assert counters["aot_autograd"]["autograd_cache_hit"] == 2


def test_a_conv_net_training_under_autocast_is_served_warm(compiles):
    """The channels-last convolution lens puts in half training graphs (compiler/graph_passes/conv_layout.py) is a function
    torch's check does not know: marked cacheable, the step is served warm, bit for bit."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    x = torch.randn(2, 3, 8, 8)

    def loss(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return model(x).float().square().sum()
    results = []
    for phase in ("cold", "warm"):
        torch._dynamo.reset()
        model.zero_grad(set_to_none=True)
        torch.compile(loss, backend="lens")(x).backward()
        results.append((torch.zeros(()), [p.grad.clone() for p in model.parameters()]))
    assert_step_equal(results[1], results[0], rtol=0, atol=0)
    assert compiles == ["forward", "backward"]
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1
    assert counters["aot_autograd"]["autograd_cache_bypass"] == 0


def test_a_function_entering_autocast_is_served_warm_and_each_dtype_is_its_own_entry(compiles):
    """autocast entered inside the compiled function puts its markers in Dynamo's graph, which torch's check
    bypassed as unknown functions (bf16 zoo training steps compiled again at every warm start); their arguments
    are graph constants of the key, so bf16 and fp16 are separate entries."""
    model, x = Net(), torch.randn(6, 12)

    def loss_in(dtype):
        def loss(x):
            with torch.autocast("cpu", dtype=dtype):
                return model(x).float().square().sum()
        return loss

    for dtype in (torch.bfloat16, torch.float16):
        results = []
        for phase in ("cold", "warm", "eager"):
            torch._dynamo.reset()
            model.zero_grad(set_to_none=True)
            fn = loss_in(dtype) if phase == "eager" else torch.compile(loss_in(dtype), backend="lens")
            fn(x).backward()
            results.append((fn(x).detach(), [p.grad.clone() for p in model.parameters()]))
        assert_step_equal(results[1], results[0], rtol=0, atol=0)
        assert_step_equal(results[1], results[2], rtol=2e-2, atol=2e-2)
    assert compiles == ["forward", "backward"] * 2  # one cold compile per dtype, none warm
    assert counters["aot_autograd"]["autograd_cache_hit"] == 2
    assert counters["aot_autograd"]["autograd_cache_bypass"] == 0


@torch._dynamo.allow_in_graph
def _user_op(x):
    return x * 2 + 1


def test_a_graph_torch_will_not_cache_runs_and_leaves_torchs_settings_as_they_were(compiles):
    """A function of the user's in Dynamo's graph (allow_in_graph): torch's key refuses it (nothing saved); its
    backward, compiled lazily, turns torch's bundled setting on until its first call."""
    import torch._functorch.config as functorch_config

    def fn(x, w):
        return _user_op(x @ w).square().sum()

    x, w = torch.randn(4, 5), torch.randn(5, 3, requires_grad=True)
    torch._dynamo.reset()
    torch.compile(fn, backend="lens")(x, w).backward()
    grad = w.grad.clone()
    w.grad = None
    fn(x, w).backward()
    torch.testing.assert_close(grad, w.grad)
    assert compiles == ["forward", "backward"] and counters["aot_autograd"]["autograd_cache_saved"] == 0
    assert counters["aot_autograd"]["autograd_cache_bypass"] == 1
    assert functorch_config.bundled_autograd_cache is False and not aot_cache._UNBUNDLE
