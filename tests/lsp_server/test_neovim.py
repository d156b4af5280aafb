"""Neovim's built-in LSP client, headless, with the configuration docs/editors.md gives (read from the doc):
hover on a compiled `def`, code lenses and `kernelLens.getProfile` over the lens_foo1 run, as any plain LSP
client sees them. Skipped where `nvim` is not installed (Debian: the `neovim` package)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lens_foo1_fixture import KERNEL, KERNEL_START, KERNEL_TIMED
from lsp_workspaces import OK_RUN, lens_workspace_with

DOC = Path(__file__).resolve().parents[2] / "docs" / "editors.md"
NVIM = shutil.which("nvim")
DEF_LINE = 3  # 0-based line of `def foo1` in foo1.py

pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian/Ubuntu: apt-get install neovim)")

# Runs after the documented config, with foo1.py open: waits for the client, asks the server, writes the
# answers as JSON and quits (exit code 0 only when it got that far).
DRIVER = r"""
local out = vim.g.kernel_lens_test_out
local answers = { clients = {} }
local function client()
  for _, c in pairs(vim.lsp.buf_get_clients(0)) do
    if c.name == "kernel-lens" then return c end
  end
end
local ok = vim.wait(60000, function() local c = client(); return c ~= nil and c.initialized end, 50)
answers.attached = ok
if ok then
  local c = client()
  for _, each in pairs(vim.lsp.buf_get_clients(0)) do table.insert(answers.clients, each.name) end
  local params = { textDocument = vim.lsp.util.make_text_document_params(),
                   position = { line = %(def_line)d, character = 4 } }
  -- the server indexes after `initialized`: ask until the run is in
  vim.wait(60000, function()
    local reply = c.request_sync("textDocument/hover", params, 5000, 0)
    answers.hover = reply and reply.result or vim.NIL
    return reply ~= nil and reply.result ~= nil
  end, 200)
  local lenses = c.request_sync("textDocument/codeLens", { textDocument = params.textDocument }, 5000, 0)
  answers.code_lens = lenses and lenses.result or vim.NIL
  local profile = c.request_sync("workspace/executeCommand",
                                 { command = "kernelLens.getProfile", arguments = {} }, 5000, 0)
  answers.profile = profile and profile.result or vim.NIL
  answers.commands = c.server_capabilities.executeCommandProvider
end
local file = io.open(out, "w")
file:write(vim.fn.json_encode(answers))
file:close()
vim.cmd("qall!")
"""


def documented_config() -> str:
    """The Lua block of docs/editors.md marked as the Neovim configuration."""
    match = re.search(r"<!-- neovim-config[^>]*-->\s*```lua\n(.*?)```", DOC.read_text(), re.S)
    assert match, "docs/editors.md lost its marked Neovim configuration block"
    return match[1]


def run_nvim(workspace: Path, tmp_path: Path) -> dict:
    init = tmp_path / "init.lua"
    out = tmp_path / "answers.json"
    init.write_text(f"vim.g.kernel_lens_python = {json.dumps(sys.executable)}\n"
                    f"vim.g.kernel_lens_test_out = {json.dumps(str(out))}\n" + documented_config())
    driver = tmp_path / "driver.lua"
    driver.write_text(DRIVER % {"def_line": DEF_LINE})
    # --clean: no user config or plugins; -u: ours; -n: no swap files. The driver runs once foo1.py is loaded.
    done = subprocess.run([NVIM, "--headless", "--clean", "-n", "-u", str(init), "foo1.py",
                           "-c", f"luafile {driver}"], cwd=workspace, capture_output=True, text=True, timeout=180,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path)})
    assert out.is_file(), f"nvim wrote no answers (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
    return json.loads(out.read_text())


def test_neovim_hover_on_a_compiled_def_lists_its_kernels(tmp_path: Path):
    workspace = lens_workspace_with(tmp_path, OK_RUN)
    answers = run_nvim(workspace, tmp_path)

    assert answers["attached"] and answers["clients"] == ["kernel-lens"]
    hover = answers["hover"]
    assert isinstance(hover, dict), f"no hover on `def foo1`: {answers}"
    text = hover["contents"]["value"]
    assert "`foo1` compiled into 1 kernel" in text and KERNEL in text
    assert "max_propagate_nan(tmp0, tmp2)" in text  # the kernel's C++ source
    output_code = workspace / "torch_compile_debug" / OK_RUN / "lens" / "graph_0" / "output_code.py"
    assert f"{output_code.as_uri()}#L{KERNEL_START + 1}" in text

    titles = [(lens["range"]["start"]["line"], lens["command"]["title"]) for lens in answers["code_lens"]]
    assert (DEF_LINE, f"1 kernel · {KERNEL}") in titles

    # the profile view's data, through workspace/executeCommand from a client that is not VS Code
    assert "kernelLens.getProfile" in answers["commands"]["commands"]
    profile = answers["profile"]
    assert profile["run_id"] == OK_RUN
    [graph] = profile["graphs"]
    [kernel] = graph["kernels"]
    assert kernel["name"] == KERNEL
    # Neovim 0.7's json_encode keeps 7 or 8 significant digits of a float
    assert (kernel["total_ms"], kernel["percent"]) == pytest.approx((KERNEL_TIMED["total_ms"], KERNEL_TIMED["percent"]),
                                                                     rel=1e-6)
    assert kernel["source"] == {"uri": (workspace / "foo1.py").as_uri(), "line": 4}  # neg: foo1.py line 5
