"""Inference graphs called without AOTAutograd's runtime wrappers (compiler/frontend/direct_call.py) when those have
nothing to do; every case where they do keeps them, and results (values, aliasing, mutations) stay eager's."""
import pytest
import torch

import compiler.frontend.dynamo_backend as frontend
from compiler import config

CONST = torch.arange(8.0)


def compiled(fn):
    """`fn` compiled with lens, and the list of callables the backend handed to Dynamo."""
    returned = []

    def backend(gm, example_inputs, **kwargs):
        returned.append(frontend.lens_backend(gm, example_inputs, **kwargs))
        return returned[-1]

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, dynamic=False), returned


def is_direct(returned) -> bool:
    assert returned, "the backend was not called"
    return all(getattr(r, "_lens_direct", False) for r in returned)


@pytest.mark.parametrize("name, fn", [
    ("row mean", lambda x: x.mean(-1)),
    ("two outputs", lambda x: (x.softmax(-1), x.sum(0) * 2)),
    ("captured constant", lambda x: x * CONST + 1),
    ("reduction to a scalar", lambda x: (x - 1).abs().sum()),
    ("operator.and_ / or_ (not in place)", lambda x: (((x > 0) & (x < 1)) | (x < -2)).float().sum(-1)),
])
def test_plain_inference_graphs_are_called_directly(name, fn):
    x = torch.randn(6, 8)
    f, returned = compiled(fn)
    with torch.no_grad():
        got, again = f(x), f(x)
    assert is_direct(returned), name
    torch.testing.assert_close(got, fn(x))
    torch.testing.assert_close(again, got)


def test_module_parameters_are_inputs_of_the_direct_call():
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(5, 8)
    f, returned = compiled(mlp)
    with torch.no_grad():
        got = f(x)
        assert is_direct(returned)
        torch.testing.assert_close(got, mlp(x))
        mlp[0].weight.add_(1)  # the parameters are read at each call, not baked in
        torch.testing.assert_close(f(x), mlp(x))


@pytest.mark.parametrize("name, fn", [
    ("input mutated", lambda x: x.add_(1).sum(-1)),
    ("setitem", lambda x: (x.__setitem__(0, 5.0), x.sum())[1]),
    ("view of the input", lambda x: x.view(-1)),
    ("select of the input", lambda x: x[1]),
])
def test_graphs_the_wrappers_have_work_for_keep_them(name, fn):
    x, ref = torch.randn(6, 6), None
    ref_x = x.clone()
    f, returned = compiled(fn)
    with torch.no_grad():
        got = f(x)
        ref = fn(ref_x)
    assert not is_direct(returned), name
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(x, ref_x)  # the same mutations as eager
    if name.endswith("of the input"):
        assert got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()  # still a view, as in eager


@pytest.mark.parametrize("name, fn", [
    ("metadata mutated (Dynamo runs it outside the graph)", lambda x: x.t_().sum(0) + x[0]),
    ("the same tensor twice (Dynamo passes it once)", lambda x: torch.mul(*(x, x)) + x),
    ("an input returned as is", lambda x: (x.sum(), x)),
])
def test_other_calling_conventions_keep_eager_results(name, fn):
    x = torch.randn(5, 5)
    ref_x = x.clone()
    f, _ = compiled(fn)
    with torch.no_grad():
        got, expected = f(x), fn(ref_x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x, ref_x)


def test_grad_mode_compiles_through_aot_autograd_and_gradients_flow():
    w = torch.randn(8, requires_grad=True)
    x = torch.randn(3, 8)
    f, returned = compiled(lambda a, b: (a * b).sum())
    with torch.no_grad():
        f(x, w)
    assert is_direct(returned)
    loss = f(x, w)  # grad mode on: Dynamo recompiles, AOTAutograd's wrappers come back
    assert len(returned) == 2 and not getattr(returned[1], "_lens_direct", False)
    loss.backward()
    torch.testing.assert_close(w.grad, x.sum(0))


def test_turned_off(monkeypatch):
    monkeypatch.setattr(config, "direct_inference_calls", False)
    f, returned = compiled(lambda x: x.mean(-1))
    with torch.no_grad():
        f(torch.randn(4, 4))
    assert not is_direct(returned)


def _profiled_events(fn, *args) -> list[str]:
    from torch.profiler import ProfilerActivity, profile
    fn(*args)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args)
    return [e.name for e in prof.events()]


@pytest.mark.parametrize("grad", [False, True])
def test_lens_frames_are_generated_without_dynamo_pregraph_markers_and_the_setting_comes_back(grad, monkeypatch):
    x = torch.randn(8, 8, requires_grad=grad)
    before = torch._dynamo.config.record_runtime_overhead
    with torch.set_grad_enabled(grad):
        fn, _ = compiled(lambda x: x.mean(-1) * 2)
        assert "Pregraph bytecode" not in _profiled_events(fn, x)
        assert torch._dynamo.config.record_runtime_overhead == before  # restored after the frame compiled
        monkeypatch.setattr(config, "pregraph_markers", True)
        fn, _ = compiled(lambda x: x.mean(-1) * 3)
        assert "Pregraph bytecode" in _profiled_events(fn, x)
    # frames other backends compile keep Dynamo's setting
    monkeypatch.setattr(config, "pregraph_markers", False)
    torch._dynamo.reset()
    other = torch.compile(lambda x: x.mean(-1) * 4, backend="aot_eager")
    assert ("Pregraph bytecode" in _profiled_events(other, x)) == before


@pytest.mark.skipif(not hasattr(torch._dynamo.guards, "profile_guard_manager"), reason="no guard timing in this torch")
def test_lens_frames_skip_dynamos_guard_timing_and_other_backends_keep_it(monkeypatch):
    calls = []
    real = torch._dynamo.guards.profile_guard_manager
    monkeypatch.setattr(torch._dynamo.guards, "profile_guard_manager", lambda *a: calls.append(1) or real(*a))
    x, y = torch.randn(8, 8), torch.randn(4, 16)
    torch._dynamo.reset()
    fn = torch.compile(lambda x: x.mean(-1) * 5, backend="lens")
    assert torch.equal(fn(x), x.mean(-1) * 5) and not calls
    torch.testing.assert_close(fn(y), y.mean(-1) * 5)  # guards are there: another shape compiles again
    assert not calls
    monkeypatch.setattr(config, "guard_check", True)
    torch._dynamo.reset()
    torch.compile(lambda x: x.mean(-1) * 6, backend="lens")(x)
    assert len(calls) == 1
    monkeypatch.setattr(config, "guard_check", False)
    torch._dynamo.reset()
    torch.compile(lambda x: x.mean(-1) * 7, backend="aot_eager")(x)
    assert len(calls) == 2
