"""End-to-end diagnostics: compile_error.json / accuracy.json published on the user's and the kernel's
lines when a run is indexed, and cleared when a newer run no longer has them."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest_lsp
from lsp_workspaces import ACCURACY_RUN, COMPILE_ERROR_RUN, OK_RUN, SERVER, copy_run, lens_workspace_with, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient


async def wait_for_diagnostics(client: LanguageClient, uri: str, predicate, timeout: float = 30.0):
    """Poll the diagnostics the client received for `uri` until `predicate` holds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        current = client.diagnostics.get(uri)
        if current is not None and predicate(current):
            return current
        assert asyncio.get_running_loop().time() < deadline, f"diagnostics for {uri}: {current}"
        await asyncio.sleep(0.02)


@pytest_lsp.fixture(config=SERVER)
async def error_client(lsp_client: LanguageClient, tmp_path: Path):
    await start_session(lsp_client, lens_workspace_with(tmp_path, COMPILE_ERROR_RUN))
    yield
    await lsp_client.shutdown_session()


async def test_compile_error_on_source_and_kernel_line_then_cleared_by_newer_run(error_client: LanguageClient,
                                                                                 tmp_path: Path):
    workspace = tmp_path / "ws"
    source_uri = (workspace / "foo1.py").as_uri()
    await error_client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    on_source = await wait_for_diagnostics(error_client, source_uri, lambda d: len(d) == 1)
    diagnostic = on_source[0]
    assert diagnostic.range.start.line == 5  # `b = torch.maximum(x2, a)`
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert "no matching function for call to 'max_propagate_nan(unsigned char&, int&)'" in diagnostic.message
    assert "cpp_fused_cat_maximum_neg_0" in diagnostic.message and "maximum" in diagnostic.message
    kernel_uri = (workspace / "torch_compile_debug" / COMPILE_ERROR_RUN / "lens" / "graph_0" / "output_code.py").as_uri()
    on_kernel = await wait_for_diagnostics(error_client, kernel_uri, lambda d: len(d) == 1)
    assert [(d.range.start.line, d.range.start.character) for d in on_kernel] == [(20, 20)]

    copy_run(OK_RUN, workspace)  # a newer, clean run lands: the watcher indexes it, the error goes away
    await wait_for_diagnostics(error_client, source_uri, lambda d: len(d) == 0)


@pytest_lsp.fixture(config=SERVER)
async def accuracy_client(lsp_client: LanguageClient, tmp_path: Path):
    await start_session(lsp_client, lens_workspace_with(tmp_path, ACCURACY_RUN),
                        {"kernelLens": {"diagnosticSeverity": "warning"}})
    yield
    await lsp_client.shutdown_session()


async def test_accuracy_mismatch_on_user_line(accuracy_client: LanguageClient, tmp_path: Path):
    source_uri = (tmp_path / "ws" / "foo1.py").as_uri()
    found = await wait_for_diagnostics(accuracy_client, source_uri, lambda d: len(d) == 1)
    assert found[0].range.start.line == 4  # `a = torch.neg(x1)`
    assert found[0].severity == types.DiagnosticSeverity.Warning
    assert "first diverging node `neg` (aten.neg.default)" in found[0].message
    assert "max abs error 127, max rel error 1" in found[0].message


@pytest_lsp.fixture(config=SERVER)
async def bad_settings_client(lsp_client: LanguageClient, tmp_path: Path):
    await start_session(lsp_client, lens_workspace_with(tmp_path, OK_RUN),
                        {"kernelLens": {"diagnosticSeverity": "loud", "debugRoots": "not-a-list"}})
    yield
    await lsp_client.shutdown_session()


async def test_invalid_settings_show_a_message_and_fall_back(bad_settings_client: LanguageClient, tmp_path: Path):
    messages = [m.message for m in bad_settings_client.messages]
    assert any("kernelLens.diagnosticSeverity: invalid value 'loud'" in m for m in messages)
    assert any("kernelLens.debugRoots" in m for m in messages)
    hover = await bad_settings_client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier((tmp_path / "ws" / "foo1.py").as_uri()), types.Position(3, 4)))
    assert hover is not None and "cpp_fused_cat_maximum_neg_0" in hover.contents.value
