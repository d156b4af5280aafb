"""Winograd's convolutions (compiler/machine/winograd.py) in the editor, on a real run of our `lens` backend: a frozen
conv net's 3x3 stride-1 convolutions with enough channels and tiles run by Winograd's transforms, rounded differently
from eager's, and each such line's `extern-call` diagnostic and hover say so; the stem (3 input channels), the strided
and the 1x1 convolutions' lines say a oneDNN convolution without Winograd, and a compile with LENS_WINOGRAD=0 says
Winograd nowhere. Ground truth: the path each call took (conv_packed._RECENT's packs after the run, by weight shape),
and the nodes' lines in the run's kernel_map.json, not the server."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import SERVER, program_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from real_programs import line_of
from test_diagnostics import wait_for_diagnostics

from compiler.machine import winograd

pytestmark = pytest.mark.skipif(not winograd.supported(), reason="no AVX-512: every convolution stays direct "
                                "(winograd.supported)")

PROGRAM = '''import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 48, 3, padding=1)
        self.conv = nn.Conv2d(48, 64, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(64)
        self.res = nn.Conv2d(64, 64, 3, padding=1)
        self.mid = nn.Conv2d(64, 80, 3, padding=1)
        self.down = nn.Conv2d(80, 96, 3, stride=2, padding=1)
        self.proj = nn.Conv2d(96, 128, 1)

    def forward(self, x):
        x = F.relu(self.stem(x))
        y = F.relu(self.bn(self.conv(x)))
        y = F.relu(self.res(y) + y)
        m = self.mid(y)
        m = F.relu(m)
        z = self.down(m)
        return self.proj(z)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net().eval()
    with torch.no_grad():
        torch.compile(model, backend="lens")(torch.randn(1, 3, 32, 32))
'''
# each convolution's statement (1-based) and its weight's shape (the folded batch norm keeps `conv`'s)
CONVS = {"stem": ("x = F.relu(self.stem(x))", (48, 3, 3, 3)),
         "conv": ("y = F.relu(self.bn(self.conv(x)))", (64, 48, 3, 3)),
         "res": ("y = F.relu(self.res(y) + y)", (64, 64, 3, 3)),
         "mid": ("m = self.mid(y)", (80, 64, 3, 3)),
         "down": ("z = self.down(m)", (96, 80, 3, 3)),
         "proj": ("return self.proj(z)", (128, 96, 1, 1))}
LINES = {name: line_of(PROGRAM, code) for name, (code, _) in CONVS.items()}
MID_RELU = line_of(PROGRAM, "m = F.relu(m)")
WINOGRAD = "Winograd's F(4x4, 3x3)"
# The program as the user runs it, after the transforms' library is built (until then calls run direct); then the
# module of each call's pack, by its weight's shape.
RUNNER = '''import json, runpy, sys
from compiler.machine import conv_packed, winograd
assert winograd.available(wait=True) or not winograd.config.cpp.winograd
runpy.run_path(sys.argv[1], run_name="__main__")
with open("packs.json", "w") as f:
    json.dump([[list(r.ref().shape), type(r.packed).__module__] for r in conv_packed._RECENT.values()], f)
'''


@dataclass(frozen=True)
class Conv:
    """One convolution call's why-record with the line kernel_map.json gives its node."""

    node: str
    line: int
    message: str


def conv_records(workspace: Path) -> list[Conv]:
    """Every `convolution` record of the run, read straight from why.json and kernel_map.json."""
    found = []
    for why in sorted(workspace.glob("torch_compile_debug/run_*/lens/graph_*/why.json")):
        nodes = {n["name"]: n for n in json.loads((why.parent / "kernel_map.json").read_text())["nodes"]}
        for r in json.loads(why.read_text())["records"]:
            if r["reason"] == "convolution":
                assert r["kind"] == "aten_call" and len(r["nodes"]) == 1
                found.append(Conv(r["nodes"][0], nodes[r["nodes"][0]]["source"]["line"], r["message"]))
    return found


def winograd_by_line(workspace: Path) -> dict[int, bool]:
    """Each convolution statement's line -> whether its call ran Winograd's transforms (the packs the run kept)."""
    packs = {tuple(shape): module for shape, module in json.loads((workspace / "packs.json").read_text())}
    assert sorted(packs) == sorted(shape for _, shape in CONVS.values())
    assert set(packs.values()) <= {"compiler.machine.winograd", "compiler.machine.onednn_direct"}
    return {LINES[name]: packs[shape] == "compiler.machine.winograd" for name, (_, shape) in CONVS.items()}


def compile_in(tmp_path_factory, name: str, winograd: str) -> Path:
    return program_workspace(tmp_path_factory, name, PROGRAM, ([sys.executable, "-c", RUNNER, "PROG"],
                                                               {"LENS_DEBUG": "1", "LENS_WINOGRAD": winograd,
                                                                "OMP_NUM_THREADS": "1"}))


@pytest.fixture(scope="module")
def winograd_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_in(tmp_path_factory, "winograd_ws", "1")


@pytest.fixture(scope="module")
def direct_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_in(tmp_path_factory, "direct_ws", "0")


def test_ground_truth_the_3x3_stride_1_convolutions_with_enough_channels_ran_winograd(winograd_workspace: Path):
    ran = winograd_by_line(winograd_workspace)
    assert ran == {LINES["stem"]: False, LINES["conv"]: True, LINES["res"]: True, LINES["mid"]: True,
                   LINES["down"]: False, LINES["proj"]: False}
    # what why.json says of each call is what it ran, on the convolution's own line (`mid`'s ReLU, fused into its
    # call, is a later statement: the call stays on the convolution's line)
    records = conv_records(winograd_workspace)
    where = {r.line: WINOGRAD in r.message for r in records}
    assert where == ran and MID_RELU not in where
    assert all(r.message.startswith("runs as a oneDNN convolution (lens.conv2d_onednn") for r in records)


def test_ground_truth_with_lens_winograd_0_every_convolution_ran_direct(direct_workspace: Path):
    assert not any(winograd_by_line(direct_workspace).values())
    records = conv_records(direct_workspace)
    assert len(records) == len(CONVS) and not any("Winograd" in r.message for r in records)


async def started(client: LanguageClient, workspace: Path) -> str:
    await start_session(client, workspace)
    uri = (workspace / "prog.py").as_uri()
    await wait_for_diagnostics(client, uri, lambda ds: sum(d.code == "extern-call" for d in ds) >= len(CONVS))
    return uri


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def hover_text(client: LanguageClient, uri: str, line: int) -> str:
    result = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(uri),
                                                                      types.Position(line - 1, 8)))
    return result.contents.value if result is not None else ""


async def says_each_record_on_its_line(client: LanguageClient, workspace: Path) -> dict[int, str]:
    """The server's extern-call diagnostics and hovers are exactly the run's convolution records, each on its node's
    line, whole; the hover of each line that has one."""
    uri = await started(client, workspace)
    records = conv_records(workspace)
    found = sorted((d.range.start.line + 1, d.message, d.severity) for d in client.diagnostics[uri]
                   if d.code == "extern-call")
    assert found == sorted((r.line, f"`{r.node}` {r.message}", types.DiagnosticSeverity.Information)
                           for r in records)
    hovers = {}
    for r in records:
        hovers[r.line] = await hover_text(client, uri, r.line)
        assert f"- ATen call: `{r.node}` {r.message}" in hovers[r.line], hovers[r.line]
        assert hovers[r.line].count("oneDNN convolution") == 1
    return hovers


async def test_each_winograd_line_says_so_and_the_direct_ones_do_not(client: LanguageClient,
                                                                     winograd_workspace: Path):
    hovers = await says_each_record_on_its_line(client, winograd_workspace)
    for name in ("conv", "res", "mid"):
        assert f"computed by {WINOGRAD}" in hovers[LINES[name]] and "LENS_WINOGRAD=0" in hovers[LINES[name]]
    assert MID_RELU not in hovers
    for name in ("stem", "down", "proj"):
        assert "runs as a oneDNN convolution" in hovers[LINES[name]] and "Winograd" not in hovers[LINES[name]]


async def test_with_lens_winograd_0_no_line_mentions_winograd(client: LanguageClient, direct_workspace: Path):
    hovers = await says_each_record_on_its_line(client, direct_workspace)
    assert sorted(hovers) == sorted(LINES.values())
    uri = (direct_workspace / "prog.py").as_uri()
    assert not [d for ds in client.diagnostics.values() for d in ds if "Winograd" in d.message]
    for line in range(1, PROGRAM.count("\n") + 1):
        assert "Winograd" not in await hover_text(client, uri, line)


async def test_a_convolution_whose_activation_is_a_later_statement_says_so_on_its_own_line(
        client: LanguageClient, winograd_workspace: Path):
    uri = await started(client, winograd_workspace)
    assert WINOGRAD in await hover_text(client, uri, LINES["mid"])
