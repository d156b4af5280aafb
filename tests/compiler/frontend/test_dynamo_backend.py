"""The backend as users meet it: the entry point, training graphs, graphs we cannot generate code for."""
import subprocess
import sys

import pytest
import torch

from compiler import config
from compiler.machine import build
from tests.compiler.conftest import assert_same


def test_lens_is_registered_through_the_entry_point():
    # a fresh interpreter that never imported `compiler`: torch finds it through the entry point only
    code = "import torch; print('lens' in torch._dynamo.list_backends()); " \
           "f = torch.compile(lambda x: x * 2 + 1, backend='lens'); print(f(torch.ones(3)).tolist())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "[3.0,", "3.0,", "3.0]"]


TRAINED = [
    (lambda: torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                 torch.nn.Linear(16, 4)), (5, 8)),
    (lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 6 * 6, 3), torch.nn.LogSoftmax(-1)), (2, 3, 8, 8)),
    (lambda: torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), (2, 5, 16)),
]


@pytest.mark.parametrize("make, shape", TRAINED, ids=["mlp_layernorm", "conv_logsoftmax", "encoder"])
def test_training_compiles_forward_and_backward_and_gradients_match(make, shape, tmp_path):
    torch.manual_seed(0)
    model = make()
    x = torch.randn(shape)
    torch._dynamo.reset()
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        compiled = torch.compile(model, backend="lens")
        out = compiled(x)
        out.pow(2).sum().backward()
    finally:
        config.debug, config.debug_dir_root = old
    headers = [p.read_text().splitlines()[0] for p in tmp_path.glob("run_*/lens/*/output_code.py")]
    assert any("(forward)" in h for h in headers) and any("(backward)" in h for h in headers), headers
    backward = next(p.parent for p in tmp_path.glob("run_*/lens/*/output_code.py")
                    if "(backward)" in p.read_text().splitlines()[0])
    assert "cpp_fused_" in (backward / "output_code.py").read_text()  # generated kernels, not only ATen calls
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(x)
    expected.pow(2).sum().backward()
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, atol=1e-4, rtol=1e-4)


def test_backward_kernels_map_to_the_lines_they_differentiate(tmp_path):
    import inspect
    import json

    def f(x, w):
        y = torch.nn.functional.gelu(x @ w)
        return torch.nn.functional.layer_norm(y, (y.shape[-1],))

    first = inspect.getsourcelines(f)[1]
    w = torch.randn(8, 8, requires_grad=True)
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        torch._dynamo.reset()
        torch.compile(f, backend="lens")(torch.randn(4, 8), w).sum().backward()
    finally:
        config.debug, config.debug_dir_root = old
    (backward,) = [p.parent for p in tmp_path.glob("run_*/lens/*/output_code.py")
                   if "(backward)" in p.read_text().splitlines()[0]]
    kmap = json.loads((backward / "kernel_map.json").read_text())
    assert kmap["graph_kind"] == "backward"
    nodes = kmap["nodes"]
    lines = {n["source"]["line"] for n in nodes if n.get("source") and n["source"]["file"] == __file__}
    assert lines == {first + 1, first + 2}


def test_input_mutation_and_aliasing_outputs_follow_eager():
    def f(x, y):
        x.add_(1)
        return x * y, x.view(-1)[:3], x.t()

    a, b = torch.randn(4, 4), torch.full((4, 4), 2.0)
    a2 = a.clone()
    torch._dynamo.reset()
    got = torch.compile(f, backend="lens")(a, b)
    expected = f(a2, b)
    assert torch.equal(a, a2)
    for g, e in zip(got, expected):
        assert torch.equal(g, e) and g.stride() == e.stride()


def test_dynamic_shapes_compile_natively_once_and_stay_correct(tmp_path):
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        torch._dynamo.reset()
        f = torch.compile(lambda x: torch.relu(x) + 1, backend="lens", dynamic=True)
        for n in (5, 9, 13):
            x = torch.randn(n, 3)
            torch.testing.assert_close(f(x), torch.relu(x) + 1)
    finally:
        config.debug, config.debug_dir_root = old
    graphs = [p for p in tmp_path.glob("run_*/lens/*") if p.is_dir()]  # (lens/run.json beside them)
    assert len(graphs) == 1 and (graphs[0] / "output_code.py").exists()
    assert (graphs[0] / "symbols.json").exists()
    assert "runs eagerly" not in "".join(p.read_text() for p in graphs[0].glob("notes.txt"))


def test_graph_needing_tensor_values_to_trace_runs_eagerly_even_with_fullgraph(tmp_path):
    # take's decomposition asks for the index tensor's values: AOT tracing raises a data-dependent guard
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    x, idx = torch.randn(5, 5), torch.tensor(3)
    try:
        torch._dynamo.reset()
        got = torch.compile(lambda a, i: torch.take(a, i) * 2, backend="lens", fullgraph=True)(x, idx)
    finally:
        config.debug, config.debug_dir_root = old
    assert torch.equal(got, torch.take(x, idx) * 2)
    notes = "".join(p.read_text() for p in tmp_path.glob("run_*/lens/*/notes.txt"))
    assert "runs eagerly" in notes and "data-dependent" in notes
    assert list(tmp_path.glob("run_*/lens/*/fx_graph_readable.py"))


def test_effectful_op_with_effects_token_is_called_and_still_raises_like_eager():
    # linalg.inv checks its info output through with_effects(_linalg_check_errors): a higher-order op
    f = torch.compile(lambda a: torch.linalg.inv(a) * 2, backend="lens")
    a = torch.randn(4, 4, dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    torch._dynamo.reset()
    torch.testing.assert_close(f(a), torch.linalg.inv(a) * 2)
    with pytest.raises(torch.linalg.LinAlgError):
        f(torch.zeros(4, 4, dtype=torch.float64))


def test_extern_outputs_nobody_reads_keep_the_sizes_aten_gave_them(same):
    # _embedding_bag's meta function sizes its unused max_indices output differently from the CPU kernel
    def bag(w, i, o):
        return torch.nn.functional.embedding_bag(i, w, o, mode="sum", include_last_offset=True) * 2

    same(bag, torch.randn(5, 5), torch.tensor([0, 1, 1, 0, 1, 4]), torch.tensor([0, 3, 6]))


def test_constants_in_the_graph_are_inputs():
    assert_same(lambda x: torch.maximum(x, torch.tensor([0.5, float("nan"), 2.0])), torch.tensor([1.0, 2.0, 3.0]))


def test_unsupported_dtype_and_op_fall_back_to_aten_with_a_note(tmp_path):
    old = config.debug, config.debug_dir_root
    config.debug, config.debug_dir_root = True, str(tmp_path)
    try:
        x = torch.randn(6, 4)
        # complex64 has no generated code (bfloat16 and float16 do: test_half_precision.py)
        assert_same(lambda x, i: (x.to(torch.complex64) * 2).real + x[i].sum(), x, torch.tensor([0, 3, 5]))
    finally:
        config.debug, config.debug_dir_root = old
    notes = next(tmp_path.glob("run_*/lens/*/notes.txt")).read_text()
    assert "dtype torch.complex64 has no generated code" in notes
    assert "extern call to aten.index.Tensor" in notes


def test_transformer_encoder_with_attention_as_one_aten_call_matches_eager(tmp_path, monkeypatch):
    # ATen's CPU flash attention returns a layout other than its fake tensor's: the wrapper must re-lay it
    # (attention kept whole: test_attention.py covers it decomposed)
    monkeypatch.setattr(config, "attention_scores_max_bytes", 0)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
        x = torch.randn(2, 10, 64)
        old = config.debug, config.debug_dir_root
        config.debug, config.debug_dir_root = True, str(tmp_path)
        try:
            with torch.no_grad():
                assert_same(layer, x, atol=1e-5, rtol=1e-5)
        finally:
            config.debug, config.debug_dir_root = old
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    notes = next(tmp_path.glob("run_*/lens/*/notes.txt")).read_text()
    assert "_scaled_dot_product_flash_attention_for_cpu" in notes


def test_extern_inputs_keep_their_traced_layout_so_sdpa_needs_no_copy(tmp_path, monkeypatch):
    """A computed query permuted (B, L, H, E) -> (B, H, L, E) is written in that dense layout (computed in its
    memory order), not made contiguous: SDPA's output follows its query's strides, so it comes back in the
    traced layout. (Attention kept whole as one ATen call here.)"""
    from torch.profiler import ProfilerActivity, profile

    monkeypatch.setattr(config, "attention_scores_max_bytes", 0)

    from tests.compiler.conftest import compile_with_debug

    def fn(x, k, v):
        q = (x * 0.5 + 1).permute(0, 2, 1, 3)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).permute(0, 2, 1, 3).reshape(2, 16, 64)

    x = torch.randn(2, 16, 4, 16)
    k, v = torch.randn(2, 4, 16, 16), torch.randn(2, 4, 16, 16)
    with torch.no_grad():
        out, graph = compile_with_debug(tmp_path, fn, x, k, v)
        torch.testing.assert_close(out, fn(x, k, v), atol=1e-5, rtol=1e-5)
        code = (graph / "output_code.py").read_text()
        assert "empty_strided_cpu((2, 16, 4, 16), (1024, 64, 16, 1)" in code  # the query, in memory order
        assert "(2, 4, 16, 16), (1024, 16, 64, 1), 0)" in code  # passed to SDPA as traced
        compiled = torch.compile(fn, backend="lens")
        compiled(x, k, v)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            compiled(x, k, v)
    ran = [e.name for e in prof.events()]
    assert any("scaled_dot_product" in n for n in ran) and "aten::copy_" not in ran, ran


def test_a_build_failure_runs_the_graph_eagerly_with_a_note(tmp_path, monkeypatch):
    # no C++ compiler at all: loading the generated code fails, and torch.compile still answers eager's result
    monkeypatch.setattr(config.cpp, "cxx", "no-such-compiler-g++")
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path))
    build.compiler_version.cache_clear()
    x = torch.randn(7, 3)
    try:
        torch._dynamo.reset()
        got = torch.compile(lambda a: torch.sin(a) * 2 + 1, backend="lens")(x)
    finally:
        build.compiler_version.cache_clear()
    assert torch.equal(got, torch.sin(x) * 2 + 1)
    notes = "".join(p.read_text() for p in tmp_path.glob("run_*/lens/*/notes.txt"))
    assert "runs eagerly" in notes and "CompilerNotFoundError" in notes


@pytest.mark.parametrize("flag", ["inductor_freezing", "prepare_freezing"])
def test_parameters_dynamo_installs_as_graph_attributes_are_still_frozen(flag):
    """With `torch._inductor.config.freezing` (what CPU users are told to set) or Dynamo's `prepare_freezing`, Dynamo
    hands the backend a module's parameters and buffers as `get_attr` attributes, not inputs: lens still freezes them
    (batch norm folded, convolutions through oneDNN over packed weights), matches eager, and follows a change."""
    import torch._inductor.config as inductor_config
    from compiler.graph_passes import freezing
    from compiler.machine import conv_packed
    if not conv_packed.available():
        pytest.skip("torch without oneDNN")
    setting = inductor_config.patch(freezing=True) if flag == "inductor_freezing" else \
        torch._dynamo.config.patch(prepare_freezing=True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 1)).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 10, 10)
    torch._dynamo.reset()
    before = len(freezing.FROZEN)
    with torch.no_grad(), setting:
        compiled = torch.compile(model, backend="lens")
        torch.testing.assert_close(compiled(x), model(x), atol=2e-5, rtol=1e-4)
        (frozen,) = freezing.FROZEN[before:]
        assert frozen.folds["batch_norm"] == 1
        assert frozen.folds["conv as oneDNN over a prepacked weight"] == 2
        model[0].weight.mul_(-1)  # (an in-place change: the constants are computed again)
        torch.testing.assert_close(compiled(x), model(x), atol=2e-5, rtol=1e-4)
    torch._dynamo.reset()
