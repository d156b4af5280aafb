"""Code lens above each compiled function: its kernels, and after profiling its time and speedup."""
from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_server.features.describe import count_label, newest_eager, node_split, short_kernel_names, trace_lens_titles
from lsp_server.features.failsafe import failsafe
from lsp_server.features.function_kernels import function_kernels
from lsp_server.features.lookup import def_lines, path_of, trace_functions_at
from lsp_server.features.source_lines import file_lines
from lsp_server.index import Index, KernelRef

SHOW_KERNELS_COMMAND = "kernelLens.showKernelsForFunction"  # the extension's command: opens the kernels beside
MAX_TITLE = 100


def profile_label(refs: list[KernelRef]) -> str | None:
    """"1.84 ms · 3.1× vs eager" over the profiled graphs the function's kernels belong to; for a real
    Inductor `-p` profile (no eager time): "kernels 0.0047 ms of 0.055 ms wall · cuda busy 8.6%"."""
    graphs = {id(r.graph): r.graph for r in refs if r.graph.profile is not None}.values()
    compiled = sum(g.profile.compiled_ms or 0.0 for g in graphs)
    eager = sum(g.profile.eager_ms or 0.0 for g in graphs)
    if not graphs or compiled <= 0:
        return None
    if eager > 0:
        return f"{compiled:.2f} ms · {eager / compiled:.1f}× vs eager"
    devices = sorted({g.profile.device for g in graphs if g.profile.device})
    kernel_ms = sum(r.kernel.time_ms or 0.0 for r in refs)
    if not devices or kernel_ms <= 0:
        return f"{compiled:.2f} ms"
    busy = [g.profile.busy_percent for g in graphs if g.profile.busy_percent is not None]
    busy_text = f" · {devices[0]} busy {busy[0]:.1f}%" if len(busy) == 1 == len(devices) else ""
    return f"kernels {kernel_ms:.4f} ms of {compiled:.3f} ms wall{busy_text}"


def code_lenses(server: Any, index: Index, uri: str) -> list[types.CodeLens]:
    path = path_of(uri)
    lines = file_lines(server, index, uri)
    spans = {span.line - 1: span for span in lines.spans} if lines is not None else {}
    lenses = []
    for line0, name, column in def_lines(server, uri):
        where = types.Range(types.Position(line0, column), types.Position(line0, column + len(name)))
        argument = {"uri": uri, "line": line0}
        traced = trace_functions_at(index, path, name, line0 + 1)
        if traced:
            lenses += [types.CodeLens(where, types.Command(title=title, command=SHOW_KERNELS_COMMAND,
                                                           arguments=[argument]))
                       for title in trace_lens_titles(traced)]
        span = spans.get(line0)
        if lines is None or span is None:
            continue
        owned = function_kernels(lines, span)
        refs, graphs = owned.refs, owned.graphs
        eager = newest_eager(graphs)
        if eager is not None:  # every later call runs eagerly: say so before any older graph's kernels
            title = f"runs eagerly: {eager.eager}"
            title = title if len(title) <= MAX_TITLE else title[:MAX_TITLE - 1] + "…"
            lenses.append(types.CodeLens(where, types.Command(title=title, command=SHOW_KERNELS_COMMAND,
                                                              arguments=[argument])))
        if refs:
            title = f"{count_label(len(refs), 'kernel')} · {short_kernel_names(refs)}"
            lenses.append(types.CodeLens(where, types.Command(title=title, command=SHOW_KERNELS_COMMAND,
                                                              arguments=[argument])))
            split = node_split(graphs)
            if split is not None:  # beside the kernels: "2 kernels · ... | 5 nodes native, 2 ATen"
                lenses.append(types.CodeLens(where, types.Command(title=split, command=SHOW_KERNELS_COMMAND,
                                                                  arguments=[argument])))
        if owned.via_calls or owned.unrecorded:
            title = f"via calls: {count_label(len(owned.via_calls), 'kernel')}"
            if owned.unrecorded:  # what its calls became in these graphs is unknown: never a silent total
                title = f"{title} (+ {count_label(len(owned.unrecorded), 'graph')} not recorded)" \
                    if owned.via_calls else "via calls: not recorded in this run"
            lenses.append(types.CodeLens(where, types.Command(title=title, command=SHOW_KERNELS_COMMAND,
                                                              arguments=[argument])))
        timing = profile_label(refs) if refs else None
        if timing is not None:
            lenses.append(types.CodeLens(where, types.Command(title=timing, command=SHOW_KERNELS_COMMAND,
                                                              arguments=[argument])))
    return lenses


def refresh_on_trace_change(server: Any) -> Any:
    """Index hook: a growing trace changes lens titles with no edit in the editor; ask the client to re-ask."""
    last: list[Any] = [[]]

    def refresh() -> None:
        titles = [(f.file, f.name, f.rank, f.lens) for f in server.index.trace.functions]
        if titles == last[0]:
            return
        last[0] = titles
        capabilities = server.client_capabilities.workspace
        if capabilities and capabilities.code_lens and capabilities.code_lens.refresh_support:
            server.workspace_code_lens_refresh(None)
    return refresh


def register(server: Any) -> None:
    server.index_changed_hooks.append(refresh_on_trace_change(server))

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    @failsafe(server, "codeLens")
    def code_lens(params: types.CodeLensParams) -> list[types.CodeLens] | None:
        if not server.settings.code_lens:
            return None
        return code_lenses(server, server.index, params.text_document.uri) or None
