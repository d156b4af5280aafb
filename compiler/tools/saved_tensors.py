"""`config.save_tensors`: on a graph's first call, save its real inputs and outputs and each kernel's
inputs and outputs into `<graph folder>/tensors/` (torch.save), within `config.save_tensors_max_bytes`.

Kernel values are the FX graph's values at each kernel's boundary (kernel_subgraph.kernel_boundary),
computed by running the aten graph eagerly (torch.fx.Interpreter) on the saved graph inputs; the graph
outputs are what the compiled code returned. `manifest.json` and `README.txt` say what was skipped.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.fx

from compiler import config, hooks
from compiler.tools.kernel_subgraph import KernelBoundary, kernel_boundary
from lens_format.errors import ParseError
from lens_format.files import TENSORS_INPUTS, TENSORS_MANIFEST, TENSORS_OUTPUTS
from lens_format.kernel_map import MappedKernel
from lens_format.tensors import SavedFile, SkippedFile, TensorManifest, read_manifest

log = logging.getLogger(__name__)
TENSORS_DIR = "tensors"
GRAPH_INPUTS_FILE = TENSORS_INPUTS  # relative to the graph folder
GRAPH_OUTPUTS_FILE = TENSORS_OUTPUTS
MANIFEST_FILE = TENSORS_MANIFEST
_saved_bytes = 0  # bytes saved by this process so far, across graphs (the cap is per process)


@dataclass
class KernelTensors:
    """A kernel's saved boundary values (`tensors/kernels/<kernel>.pt`)."""

    input_names: list[str]
    inputs: list
    output_names: list[str]
    outputs: list


def saved_bytes() -> int:
    """Bytes this process has saved so far (what counts against config.save_tensors_max_bytes)."""
    return _saved_bytes


def kernel_file(kernel: str) -> str:
    return f"{TENSORS_DIR}/kernels/{kernel}.pt"


def _compact(value):
    """A tensor whose storage holds only its own elements (torch.save writes the whole storage)."""
    if not isinstance(value, torch.Tensor):
        return value
    value = value.detach()
    if value.untyped_storage().nbytes() > value.numel() * value.element_size():
        value = value.clone()
    return value


def _nbytes(values: list) -> int:
    return sum(v.untyped_storage().nbytes() for v in values if isinstance(v, torch.Tensor))


class _Writer:
    """Saves files under the cap, recording each in the manifest."""

    def __init__(self, debug, manifest: TensorManifest):
        self.debug = debug
        self.manifest = manifest

    def save(self, file: str, what: str, obj, tensors: list) -> bool:
        global _saved_bytes
        size = _nbytes(tensors)
        if _saved_bytes + size > self.manifest.max_bytes:
            reason = (f"over config.save_tensors_max_bytes ({self.manifest.max_bytes} bytes per process; "
                      f"{_saved_bytes} already saved)")
            self.manifest.skipped.append(SkippedFile(file, what, size, reason))
            return False
        if self.debug.tensors(file, obj) is None:
            self.manifest.skipped.append(SkippedFile(file, what, size, "could not be written"))
            return False
        _saved_bytes += size
        self.manifest.files.append(SavedFile(file, what, size))
        return True


def boundary_values(gm: torch.fx.GraphModule, inputs: list, boundaries: list[KernelBoundary]) -> dict[str, object]:
    """Eager values of every node at some kernel's boundary, running `gm` on (a copy of) `inputs`."""
    wanted = {name for b in boundaries for name in (*b.inputs, *b.outputs)}
    values: dict[str, object] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.name in wanted:
                values[n.name] = _compact(out)
            return out

    with torch.no_grad():
        Recorder(gm).run(*[a.clone() if isinstance(a, torch.Tensor) else a for a in inputs])
    return values


def save_graph_tensors(graph_id: str, gm: torch.fx.GraphModule, kernels: list[MappedKernel], debug,
                       inputs: list, outputs) -> TensorManifest:
    """Write `tensors/` for one graph: inputs.pt, outputs.pt, kernels/<name>.pt, manifest.json, README.txt."""
    manifest = TensorManifest(graph_id, config.save_tensors_max_bytes)
    writer = _Writer(debug, manifest)
    inputs = [_compact(a) for a in inputs]
    outputs = [_compact(o) for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs])]
    writer.save(GRAPH_INPUTS_FILE, "graph inputs (placeholder order)", inputs, inputs)
    writer.save(GRAPH_OUTPUTS_FILE, "graph outputs, as the compiled code returned them", outputs, outputs)
    boundaries = [kernel_boundary(gm, k.name, k.nodes) for k in kernels]
    values = boundary_values(gm, inputs, boundaries) if boundaries else {}
    for b in boundaries:
        ins = [values.get(n) for n in b.inputs]
        outs = [values.get(n) for n in b.outputs]
        obj = {"input_names": b.inputs, "inputs": ins, "output_names": b.outputs, "outputs": outs}
        writer.save(kernel_file(b.kernel), f"kernel {b.kernel}: inputs and outputs", obj, ins + outs)
    debug.tensors_manifest(manifest.to_json(), readme_text(manifest))
    for s in manifest.skipped:
        log.warning("kernel-lens: %s: not saved %s (%s, %d bytes): %s", graph_id, s.file, s.what, s.bytes, s.reason)
    return manifest


def readme_text(m: TensorManifest) -> str:
    lines = [f"Tensors saved by Kernel Lens (config.save_tensors) for {m.graph_id}, in torch.save format.",
             "inputs.pt: the graph's real inputs on its first call (fx_graph_runnable.py loads them).",
             "outputs.pt: what the compiled graph returned on that call.",
             f"kernels/<kernel>.pt: dict of input_names, inputs, output_names, outputs: {m.kernel_values}.",
             "", "Saved:"]
    lines += [f"  {f.file[len(TENSORS_DIR) + 1:]}  {f.bytes} bytes  ({f.what})" for f in m.files] or ["  nothing"]
    if m.skipped:
        lines += ["", f"SKIPPED (cap: config.save_tensors_max_bytes = {m.max_bytes} bytes per process):"]
        lines += [f"  {s.file[len(TENSORS_DIR) + 1:]}  {s.bytes} bytes  ({s.what}): {s.reason}" for s in m.skipped]
    return "\n".join(lines) + "\n"


def saving_tensors_on_first_call(graph_id: str, gm: torch.fx.GraphModule, kernels: list[MappedKernel], debug,
                                 call: Callable) -> Callable:
    """Wrap a boxed compiled `call` so its first call saves the graph's tensors; never breaks the call."""
    done = False

    def run(args):
        nonlocal done
        if done:
            return call(args)
        done = True
        inputs = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = call(args)
        try:
            save_graph_tensors(graph_id, gm, kernels, debug, inputs, out)
        except Exception as e:  # saving is a debugging aid: it must never break the user's program
            log.warning("kernel-lens: could not save tensors of %s: %s: %s", graph_id, type(e).__name__, e)
        return out

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def load_manifest(graph_dir: str) -> TensorManifest | None:
    try:
        return read_manifest(Path(graph_dir) / MANIFEST_FILE)
    except ParseError:
        return None


def _load(path: str):
    return torch.load(path) if os.path.exists(path) else None


def load_graph_tensors(graph_dir: str) -> tuple[list | None, list | None]:
    """(inputs, outputs) saved for a graph folder; None for a file that is not there."""
    return _load(os.path.join(graph_dir, GRAPH_INPUTS_FILE)), _load(os.path.join(graph_dir, GRAPH_OUTPUTS_FILE))


def load_kernel_tensors(graph_dir: str, kernel: str) -> KernelTensors | None:
    data = _load(os.path.join(graph_dir, kernel_file(kernel)))
    if data is None:
        return None
    return KernelTensors(list(data["input_names"]), list(data["inputs"]), list(data["output_names"]),
                         list(data["outputs"]))


def _saving_tensors(graph, call: Callable) -> Callable:
    if not graph.debug:  # tensors go into the graph's debug folder
        return call
    return saving_tensors_on_first_call(graph.graph_id, graph.gm, graph.kernel_map.kernels, graph.debug, call)


# (the generated code's own call: the inputs it saves include the graph's lifted constants)
TOOL = hooks.Tool("saved tensors", active=lambda: config.save_tensors, wrap_code=_saving_tensors)
