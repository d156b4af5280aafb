"""End-to-end diagnostics: compile_error.json / accuracy.json published on the user's and the kernel's
lines when a run is indexed, and cleared when a newer run no longer has them."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest_lsp
from lens_foo1_fixture import KERNEL, code_line, output_lines
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
    # g++'s error and its notes each become a diagnostic: on the user's line where the note names a kernel
    # line, on output_code.py wherever g++ pointed (the prelude's template too).
    on_source = await wait_for_diagnostics(error_client, source_uri, lambda d: len(d) == 2)
    where = f" (kernel `{KERNEL}`, node maximum)"
    no_match = "C++ compile error: no matching function for call to 'max_propagate_nan(unsigned char&, int&)'" + where
    deduced = "C++ compile error:   deduced conflicting types for parameter 'T' ('unsigned char' and 'int')" + where
    assert [(d.range.start.line, d.message) for d in on_source] == [(5, no_match), (5, deduced)]  # `b = torch.maximum(x2, a)`
    assert on_source[0].severity == types.DiagnosticSeverity.Error
    assert on_source[1].severity == types.DiagnosticSeverity.Information  # g++'s note, not a second error
    kernel_uri = (workspace / "torch_compile_debug" / COMPILE_ERROR_RUN / "lens" / "graph_0" / "output_code.py").as_uri()
    on_kernel = await wait_for_diagnostics(error_client, kernel_uri, lambda d: len(d) == 4)
    call = code_line("auto tmp3 = max_propagate_nan(tmp0, tmp2);", COMPILE_ERROR_RUN)
    template = code_line("T max_propagate_nan(T a, T b)", COMPILE_ERROR_RUN)
    call_column = output_lines(COMPILE_ERROR_RUN)[call].index("(tmp0")  # g++ points at the call's parenthesis
    template_column = output_lines(COMPILE_ERROR_RUN)[template].index("max_propagate_nan")
    assert sorted((d.range.start.line, d.range.start.character, d.message) for d in on_kernel) == sorted([
        (call, call_column, no_match), (call, call_column, deduced),
        (template, template_column, "C++ compile error: candidate: 'template<class T> T max_propagate_nan(T, T)'"),
        (template, template_column, "C++ compile error:   template argument deduction/substitution failed:")])

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
    assert "max abs error 250, max rel error 125" in found[0].message  # foo1.py's seeded inputs
    assert "32 of 32 element(s) differ (compared exactly)" in found[0].message  # accuracy.json's summary


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
