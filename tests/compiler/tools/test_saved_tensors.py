"""config.save_tensors: real lens compiles save graph and kernel tensors; they reload and reproduce the
compiled output bit for bit; the size cap skips files and says so."""
import json
import os

import pytest
import torch

import compiler.config as config
from compiler.pipeline import compile_graph_module
from compiler.tools import saved_tensors
from compiler.tools.kernel_subgraph import load_named_graph


def scaled_softmax(x, scale):
    s = x * scale
    p = torch.softmax(s, dim=-1)
    return p.sum(dim=0)


def compile_saving(root, fn, *args, max_bytes=None):
    """Compile and call `fn` with lens, debug dirs under `root` and tensors saved; its graph folder."""
    old = (config.debug, config.debug_dir_root, config.save_tensors, config.save_tensors_max_bytes)
    config.debug, config.debug_dir_root, config.save_tensors = True, str(root), True
    if max_bytes is not None:
        config.save_tensors_max_bytes = max_bytes
    try:
        torch._dynamo.reset()
        out = torch.compile(fn, backend="lens")(*args)
    finally:
        config.debug, config.debug_dir_root, config.save_tensors, config.save_tensors_max_bytes = old
    (graph,) = list(root.glob("run_*/lens/graph_*"))
    return graph, out


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
    torch.manual_seed(0)
    x = torch.randn(64, 32)
    graph, out = compile_saving(tmp_path_factory.mktemp("saved"), scaled_softmax, x, 0.5)
    return graph, x, out


def test_first_call_saves_inputs_outputs_and_each_kernel(softmax_run):
    graph, x, out = softmax_run
    inputs = torch.load(graph / "tensors/inputs.pt")
    outputs = torch.load(graph / "tensors/outputs.pt")
    assert len(inputs) == 1 and torch.equal(inputs[0], x)
    assert len(outputs) == 1 and torch.equal(outputs[0], out)
    kmap = json.loads((graph / "kernel_map.json").read_text())
    first, second = (saved_tensors.load_kernel_tensors(str(graph), k["name"]) for k in kmap["kernels"])
    assert first.input_names == ["arg0_1"] and torch.equal(first.inputs[0], x)
    assert first.output_names == ["exp", "sum_1"]  # what the second kernel reads from the first
    assert second.input_names == ["exp", "sum_1"] and second.output_names == ["sum_2"]
    for a, b in zip(first.outputs, second.inputs):
        assert torch.equal(a, b)
    torch.testing.assert_close(second.outputs[0], out)  # eager boundary value vs the compiled output
    manifest = saved_tensors.load_manifest(str(graph))
    assert {f.file for f in manifest.files} == {"tensors/inputs.pt", "tensors/outputs.pt",
                                                *(f"tensors/kernels/{k['name']}.pt" for k in kmap["kernels"])}
    assert manifest.skipped == []
    assert "SKIPPED" not in (graph / "tensors/README.txt").read_text()


def test_saved_inputs_reproduce_the_output_bit_for_bit(softmax_run):
    graph, x, out = softmax_run
    assert "_SAVED_INPUTS = 'tensors/inputs.pt'" in (graph / "fx_graph_runnable.py").read_text()
    gm, inputs = load_named_graph(str(graph))  # fx_graph_runnable.py's load_args()
    assert torch.equal(inputs[0], x)
    got = compile_graph_module(gm, inputs)(list(inputs))
    saved_out = torch.load(graph / "tensors/outputs.pt")
    assert torch.equal(got[0], saved_out[0])


def test_cap_keeps_what_fits_and_notes_what_it_skipped(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(64, 32)
    cap = saved_tensors.saved_bytes() + x.numel() * x.element_size()  # the inputs fit, nothing else
    graph, _ = compile_saving(tmp_path, scaled_softmax, x, 0.5, max_bytes=cap)
    manifest = saved_tensors.load_manifest(str(graph))
    assert [f.file for f in manifest.files] == ["tensors/inputs.pt"]
    skipped = {s.file for s in manifest.skipped}
    assert "tensors/outputs.pt" in skipped and len(skipped) == 3
    assert all("save_tensors_max_bytes" in s.reason and s.bytes > 0 for s in manifest.skipped)
    readme = (graph / "tensors/README.txt").read_text()
    assert "SKIPPED" in readme and "outputs.pt" in readme.split("SKIPPED")[1]
    assert not (graph / "tensors/outputs.pt").exists()
    _, inputs = load_named_graph(str(graph))
    assert torch.equal(inputs[0], x)


def test_inputs_over_the_cap_fall_back_to_random_inputs_of_the_same_layout(tmp_path):
    x = torch.randn(32, 64).t()  # a transposed input: the fallback keeps its strides
    graph, _ = compile_saving(tmp_path, scaled_softmax, x, 0.5, max_bytes=saved_tensors.saved_bytes())
    manifest = saved_tensors.load_manifest(str(graph))
    assert manifest.files == [] and "tensors/inputs.pt" in {s.file for s in manifest.skipped}
    assert not os.path.exists(graph / "tensors/inputs.pt")
    _, inputs = load_named_graph(str(graph))
    assert inputs[0].shape == x.shape and inputs[0].stride() == x.stride() and inputs[0].dtype == x.dtype
    assert not torch.equal(inputs[0], x)
