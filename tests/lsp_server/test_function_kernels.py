"""A `def` owns the kernels of its own lines (issue 45), on real programs compiled by our backend, through the real
server: three classes with two `forward`s and one never called, graph breaks (Dynamo's resume functions), an entry
function that only calls a model (its calls' kernels, labelled apart), and transformers' GPT-2 modeling file.
Each answer is checked against the kernel_map.json files the compile wrote (real_programs.truth_*)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_workspaces import SERVER, program_workspace, start_session
from real_programs import (BREAKS, CLASSES, ENTRY, GPT2, LENS_RUN, def_span, line_of, truth_own, truth_via)


@pytest.fixture(scope="session")
def classes_ws(tmp_path_factory) -> Path:
    return program_workspace(tmp_path_factory, "classes", CLASSES, LENS_RUN)


@pytest.fixture(scope="session")
def breaks_ws(tmp_path_factory) -> Path:
    return program_workspace(tmp_path_factory, "breaks", BREAKS, LENS_RUN)


@pytest.fixture(scope="session")
def entry_ws(tmp_path_factory) -> Path:
    return program_workspace(tmp_path_factory, "entry", ENTRY, LENS_RUN)


@pytest.fixture(scope="session")
def gpt2_ws(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    return program_workspace(tmp_path_factory, "gpt2", GPT2, LENS_RUN)


def client_of(workspace_fixture: str):
    @pytest_lsp.fixture(config=SERVER)
    async def client(lsp_client: LanguageClient, request):
        await start_session(lsp_client, request.getfixturevalue(workspace_fixture))
        yield
        await lsp_client.shutdown_session()
    return client


classes_client = client_of("classes_ws")
breaks_client = client_of("breaks_ws")
entry_client = client_of("entry_ws")
gpt2_client = client_of("gpt2_ws")


async def kernels_at(client: LanguageClient, path: Path, line: int) -> list[tuple[str, str]]:
    """kernelLens.kernelsAt on 1-based `line`: (graph, kernel) in the answer's order."""
    found = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        "kernelLens.kernelsAt", [{"uri": path.as_uri(), "line": line - 1}]))
    return [(k["graph_id"], k["name"]) for k in found]


async def lens_titles(client: LanguageClient, path: Path) -> dict[int, list[str]]:
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(types.TextDocumentIdentifier(path.as_uri())))
    titles: dict[int, list[str]] = {}
    for lens in lenses or []:
        titles.setdefault(lens.range.start.line + 1, []).append(lens.command.title)
    return titles


async def hover(client: LanguageClient, path: Path, line: int) -> str:
    found = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(path.as_uri()),
                                                                     types.Position(line - 1, 8)))
    return "" if found is None else found.contents.value


GATE_KERNELS = [("graph_0", "extern_buf0_mm"), ("graph_0", "cpp_fused_addmm_mul_relu_sigmoid_sub_sum_0")]


async def test_methods_of_one_name_own_their_own_lines_and_a_never_called_one_owns_none(classes_client, classes_ws):
    prog = classes_ws / "prog.py"
    gate, unused, net = (def_span(CLASSES, name) for name in ("Gate.forward", "Unused.forward", "Net.forward"))
    assert await kernels_at(classes_client, prog, gate[0]) == GATE_KERNELS == truth_own(classes_ws, prog, *gate)
    assert await kernels_at(classes_client, prog, unused[0]) == [] == truth_own(classes_ws, prog, *unused)
    net_own = [("graph_0", "cpp_fused_addmm_mul_relu_sigmoid_sub_sum_0")]
    assert await kernels_at(classes_client, prog, net[0]) == net_own == truth_own(classes_ws, prog, *net)
    titles = await lens_titles(classes_client, prog)
    assert titles[gate[0]][0] == "2 kernels · extern_buf0_mm, cpp_fused_addmm_mul_relu_sigmoid_sub_sum_0"
    assert unused[0] not in titles  # it never ran
    assert titles[net[0]][0] == "1 kernel · cpp_fused_addmm_mul_relu_sigmoid_sub_sum_0"
    assert "via calls: 2 kernels" in titles[net[0]]  # `self.gate(x)` went into Gate.forward's two kernels
    assert truth_via(classes_ws, prog, *net) and set(truth_via(classes_ws, prog, *net)) == set(GATE_KERNELS)
    text = await hover(classes_client, prog, net[0])
    lines = f"lines {line_of(CLASSES, 's = h.sum(dim=-1, keepdim=True)')}-{net[1]}"
    assert f"`Net.forward` compiled into 1 kernel ({lines})" in text
    assert "**Via calls: 2 kernels**" in text and f"prog.py:{gate[0] + 1}" in text and f"prog.py:{gate[0] + 2}" in text
    assert await hover(classes_client, prog, unused[0]) == ""
    assert "Gate.forward` compiled into 2 kernels" in await hover(classes_client, prog, gate[0])


async def test_code_after_a_graph_break_counts_for_its_function_under_its_own_name(breaks_client, breaks_ws):
    prog = breaks_ws / "prog.py"
    block, step = def_span(BREAKS, "Block.forward"), def_span(BREAKS, "step")
    block_kernels = [("graph_0", "extern_buf0_mm"), ("graph_0", "cpp_fused_addmm_relu_0"),
                     ("graph_1", "cpp_fused_native_layer_norm_sub_sum_0")]  # graph_1: resume after the print()
    step_kernels = [("graph_2", "cpp_fused_abs_mul_sum_0"), ("graph_3", "cpp_fused_mean_sigmoid_0")]
    assert await kernels_at(breaks_client, prog, block[0]) == block_kernels == truth_own(breaks_ws, prog, *block)
    assert await kernels_at(breaks_client, prog, step[0]) == step_kernels == truth_own(breaks_ws, prog, *step)
    sigmoid = line_of(BREAKS, "z = torch.sigmoid(y).mean(dim=-1)")
    assert await kernels_at(breaks_client, prog, sigmoid) == [("graph_3", "cpp_fused_mean_sigmoid_0")]
    titles = await lens_titles(breaks_client, prog)
    assert titles[block[0]][0] == "3 kernels · extern_buf0_mm, cpp_fused_addmm_relu_0 …"
    assert titles[step[0]][0] == "2 kernels · cpp_fused_abs_mul_sum_0, cpp_fused_mean_sigmoid_0"
    texts = [await hover(breaks_client, prog, n) for n in range(1, len(BREAKS.splitlines()) + 1)]
    assert not any("torch_dynamo_resume" in t for t in texts)  # Dynamo's names never reach the user
    norm = line_of(BREAKS, "return self.norm(h - s)")
    assert f"in `forward (after its graph break at line {norm - 2})`" in texts[norm - 1]


async def test_an_entry_that_only_calls_a_model_shows_its_calls_kernels_apart(entry_client, entry_ws):
    prog = entry_ws / "prog.py"
    run, mlp = def_span(ENTRY, "run"), def_span(ENTRY, "Mlp.forward")
    mlp_kernels = [("graph_0", "extern_buf0_mm"), ("graph_0", "cpp_fused_addmm_gelu_0"),
                   ("graph_0", "extern_buf2_mm"), ("graph_0", "cpp_fused_add_addmm_1")]
    assert await kernels_at(entry_client, prog, mlp[0]) == mlp_kernels == truth_own(entry_ws, prog, *mlp)
    assert await kernels_at(entry_client, prog, run[0]) == [] == truth_own(entry_ws, prog, *run)
    assert set(truth_via(entry_ws, prog, *run)) == set(mlp_kernels)
    titles = await lens_titles(entry_client, prog)
    assert titles[run[0]] == ["via calls: 4 kernels"]
    text = await hover(entry_client, prog, run[0])
    assert "`run`: its own lines became no kernels; its calls did" in text and "**Via calls: 4 kernels**" in text
    assert all(f"[{name}]" in text for _, name in mlp_kernels)
    assert f"prog.py:{mlp[0] + 1}" in text and f"prog.py:{mlp[0] + 2}" in text  # the callee lines


GPT2_FORWARDS = ("GPT2Attention.forward", "GPT2MLP.forward", "GPT2Block.forward", "GPT2Model.forward")


async def test_gpt2_modeling_file_each_forward_its_own_kernels(gpt2_client, gpt2_ws):
    modeling = Path(importlib.util.find_spec("transformers.models.gpt2.modeling_gpt2").origin)
    text = modeling.read_text()
    answers = {}
    for name in GPT2_FORWARDS:
        span = def_span(text, name)
        own = await kernels_at(gpt2_client, modeling, span[0])
        assert own == truth_own(gpt2_ws, modeling, *span), name
        answers[name] = own
    assert answers["GPT2MLP.forward"] == []  # its lines call Conv1D and the activation: their kernels are via calls
    mlp = def_span(text, "GPT2MLP.forward")
    via = truth_via(gpt2_ws, modeling, *mlp)
    assert via and any("gelu" in name or "tanh" in name for _, name in via)
    assert not any("embedding" in name for _, name in via)
    titles = await lens_titles(gpt2_client, modeling)
    assert titles[mlp[0]] == [f"via calls: {len(set(via))} kernels"]
    model = answers["GPT2Model.forward"]
    assert any("embedding" in name for _, name in model)  # wte/wpe lookups are GPT2Model.forward's own lines
    assert not any("embedding" in name for _, name in answers["GPT2Attention.forward"])
    owning = [tuple(v) for v in answers.values() if v]  # (GPT2Attention.forward's own lines are views now: its
    assert len(owning) >= 2 and len(set(owning)) == len(owning)  # split is no kernel) no two forwards alike
