"""Fuzz: truncated and garbled versions of every file type never raise anything but our ParseError,
the run loader never raises, and a live server keeps answering while reading garbage."""
from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsp_workspaces import ACCURACY_RUN, COMPILE_ERROR_RUN, LENS_FOO1, OK_RUN, copy_run
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_server.loading.run_loader import load_run
from lsp_server.parsers import PARSERS, ParseError


def sample_files() -> dict[str, list[str]]:
    """Every file type the parsers read, from our fixture runs and a small real-Inductor sample."""
    samples: dict[str, list[str]] = {name: [] for name in PARSERS}
    for run in (OK_RUN, COMPILE_ERROR_RUN, ACCURACY_RUN):
        for path in (LENS_FOO1 / "runs" / run / "lens" / "graph_0").iterdir():
            if path.name in samples:  # a real run also holds files no parser reads (fx_graph_runnable.py, ...)
                samples[path.name].append(path.read_text())
    samples["inductor_provenance_tracking_node_mappings.json"].append(
        '{"preToPost": {"h": ["mm"]}, "postToPre": {"mm": ["h"]}, "cppCodeToPost": {"extern_kernels.mm:1": ["mm"],'
        ' "cpp_fused_mul_relu_sum_0:2": ["sum_1", "relu", "mul"]}, "postToCppCode": {"mm": ["extern_kernels.mm:1"]}}')
    samples["output_code.py"].append(
        "triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''\n@triton.jit\ndef k(x):\n"
        "    tmp0 = tl.load(x)\n''', device_str='cuda')\n\ndef call(args):\n"
        "    # Topologically Sorted Source Nodes: [add], Original ATen: [aten.add]\n"
        "    # [Provenance debug handles] triton_poi_fused_add_0:1\n    triton_poi_fused_add_0.run(buf0)\n")
    samples["symbols.json"].append(
        '{"version": 1, "symbols": [{"name": "s0", "source": "L[\'x\'].size()[0]", "range": [2, null], "hint": 8,'
        ' "guards": ["Ne(s0, 1)"]}]}')
    samples["why.json"].append(
        '{"version": 1, "graph_id": "graph_0", "records": [{"kind": "not_fused", "nodes": ["amax", "add"], "kernel":'
        ' "cpp_fused_add_amax_1", "reason": "max_fusion_size", "message": "did not join", "fix": {"title": "Set",'
        ' "setting": "max_fusion_size", "value": 4}, "related": ["mul"]}]}')
    return {name: texts for name, texts in samples.items() if texts}


SAMPLES = sample_files()
GARBAGE = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from(
    ["'''", "// Corresponding FX code line: 999999", "# File: :x in , code:", '{"version": 2}', "\x00", "[[[[",
     "cpp_fused_x = async_compile.cpp_pybinding([], r'''", "# [Provenance debug handles] k:", "op0: X(", "\"version\""])


@st.composite
def garbled(draw) -> tuple[str, str]:
    name = draw(st.sampled_from(sorted(SAMPLES)))
    text = draw(st.sampled_from(SAMPLES[name]))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["truncate", "insert", "delete", "replace"]))
        if action == "truncate":
            text = text[:at]
        elif action == "insert":
            text = text[:at] + draw(GARBAGE) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 50)):]
        else:
            text = text[:at] + draw(GARBAGE) + text[at + draw(st.integers(1, 20)):]
    return name, text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbled())
def test_parsers_raise_only_parse_errors(case: tuple[str, str]) -> None:
    name, text = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            PARSERS[name](path)
        except ParseError as exc:
            assert str(path) in str(exc)  # errors name their file


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(garbled(), min_size=1, max_size=6))
def test_run_loader_never_raises_on_garbled_runs(cases: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / OK_RUN
        shutil.copytree(LENS_FOO1 / "runs" / OK_RUN, run_dir)
        for name, text in cases:
            (run_dir / "lens" / "graph_0" / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        run = load_run(run_dir)
        assert run is not None and [g.id for g in run.graphs] == ["graph_0"]


async def test_server_keeps_answering_on_garbage(lens_client: LanguageClient, lens_workspace: Path):
    graph = lens_workspace / "torch_compile_debug" / OK_RUN / "lens" / "graph_0"
    generator = random.Random(1234)
    for round_number in range(5):
        for path in sorted(graph.iterdir()):
            data = bytearray(path.read_bytes())
            del data[generator.randrange(len(data) + 1):]
            data += bytes(generator.randrange(256) for _ in range(20))
            path.write_bytes(bytes(data))
        hover = await lens_client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier((lens_workspace / "foo1.py").as_uri()), types.Position(3, 4)))
        assert hover is None or "Kernel Lens" in hover.contents.value
        runs = await lens_client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.listRuns"))
        assert [r["id"] for r in runs] == [OK_RUN]
    copy_run(ACCURACY_RUN, lens_workspace)  # a clean run still gets indexed after all that garbage
    result = await lens_client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.reindex"))
    assert result == {"runs": 2}
