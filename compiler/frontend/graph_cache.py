"""Dynamo graph -> generated code, on disk, for inference graphs called directly (compiler/frontend/direct_call.py).

A warm start (`torch._dynamo.reset()` or a new process, same cache) otherwise traces every graph through
AOTAutograd again before the disk cache of built kernels is even asked: on a TransformerEncoderLayer that
tracing took 65 of the 200 ms first call here (Dynamo's own tracing ~80, lens's lowering and cache hit ~16),
on `((a0+a1)+a2)*a3+a4` 14 of 49 ms. Inductor skips it with its AOTAutograd cache. This cache does the same
for the graphs that need nothing of AOTAutograd at run time: under no_grad, a graph whose generated code was
handed to Dynamo as a direct call is stored under a key of

- the Dynamo graph's Python code (its ops, constants and argument order),
- each input's type, shape, strides, dtype and requires_grad (inputs sharing storage are never cached); in a
  graph over Dynamo's size symbols the shapes and strides as Dynamo traced them (`s77`, `512`) and each size
  argument's symbol, so one entry serves every size (its code reads the sizes from its arguments),
- the torch version, a hash of the compiler's own source files, and every setting in `compiler.config`,

and a later compile of the same key loads that output_code.py (its kernels from the build cache) and the
tensors AOTAutograd lifted out of the graph as constants (saved beside the entry, up to `_MAX_CONSTANT_BYTES`;
GPT-2's attention has four) without tracing. Graphs that call anything but torch's and the standard library's
functions, hold tensor attributes, call submodules or change their inputs are not cached; nor are compiles
that write a debug directory, profile, check accuracy or save tensors (they need the aten graph).
`config.graph_cache` (LENS_GRAPH_CACHE=0) turns it off. A broken entry is dropped and the graph compiled again.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import pathlib
from typing import Callable, Sequence

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.multiprocessing.reductions import StorageWeakRef

from compiler import config
from compiler.compiled_graph import with_constants
from compiler.debug.directory import write_atomic
from compiler.frontend.direct_call import direct_run
from compiler.machine.runtime import import_output_code

log = logging.getLogger(__name__)

_TARGET_MODULES = ("torch", "operator", "_operator", "builtins", "math")
_MAX_CONSTANT_BYTES = 16 << 20  # (a graph lifting more is compiled at each start rather than copied to disk)


@functools.lru_cache(maxsize=1)
def _compiler_source_hash() -> str:
    h = hashlib.sha256()
    root = pathlib.Path(__file__).parent.parent  # compiler/ (this module lives in compiler/frontend/)
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _settings() -> str:
    def plain(ns) -> dict:
        return {k: repr(v) for k, v in sorted(vars(ns).items())
                if not k.startswith("_") and isinstance(v, (bool, int, float, str, tuple, dict, type(None)))}
    return json.dumps({"config": plain(config), "cpp": plain(config.cpp)}, sort_keys=True)


def compiler_key() -> str:
    """What, besides a graph and its inputs, decides the code lens generates: the torch version, the compiler's
    source, every setting."""
    h = hashlib.sha256()
    for part in (torch.__version__, _compiler_source_hash(), _settings()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def settings_allow() -> bool:
    """Whether the settings let a compile be served from a cache (this one's or compiler/frontend/aot_cache.py's): caching
    on, and no debug directory or saved tensors, which need every graph compiled."""
    return config.graph_cache and not config.debug and not config.save_tensors


def _cacheable(gm: torch.fx.GraphModule, inputs: Sequence) -> bool:
    if not settings_allow() or torch.is_grad_enabled():
        return False
    if not all(type(t) in (torch.Tensor, torch.nn.Parameter, int, torch.SymInt) for t in inputs):
        return False
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    if len({StorageWeakRef(t.untyped_storage()) for t in tensors}) != len(tensors):
        return False
    for n in gm.graph.nodes:
        if n.op in ("get_attr", "call_module"):
            return False
        if n.op == "call_function":
            module = getattr(n.target, "__module__", None) or ""
            if not (isinstance(n.target, torch._ops.OpOverload) or module.split(".")[0] in _TARGET_MODULES):
                return False
    return True


def _key(gm: torch.fx.GraphModule, inputs: Sequence) -> str:
    h = hashlib.sha256()
    for part in (compiler_key(), gm.code):
        h.update(part.encode())
        h.update(b"\0")
    traced = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    for t, v in zip(inputs, traced + [None] * (len(inputs) - len(traced))):
        h.update(repr(_signature(t, v)).encode())
    return h.hexdigest()[:40]


def _signature(t, traced) -> tuple:
    """An input as the key holds it: a tensor's layout (symbolic where Dynamo traced it so), a size argument's
    symbol (its value where Dynamo made it a constant)."""
    if not isinstance(t, torch.Tensor):  # (a SymInt printed, never compared: that would add a guard)
        return ("size", str(t) if isinstance(t, torch.SymInt) else str(traced) if isinstance(traced, torch.SymInt)
                else int(t))
    layout = traced if isinstance(traced, torch.Tensor) else t
    sizes = tuple(str(s) for s in (*layout.shape, "/", *layout.stride(), "/", layout.storage_offset()))
    return (type(t).__name__, sizes, str(t.dtype), t.requires_grad, t.device.type)


def _entry(key: str) -> str:
    return os.path.join(config.cache_dir(), "graphs", key[:2], f"{key}.json")


def lookup(gm: torch.fx.GraphModule, inputs: Sequence) -> tuple[str | None, Callable | None]:
    """(key, a direct call of the cached generated code) on a hit; (key, None) on a miss; (None, None) when
    this graph is not cached. (The caller leaves out profiling and accuracy runs.)"""
    if not _cacheable(gm, inputs):
        return None, None
    key = _key(gm, inputs)
    path = _entry(key)
    try:
        with open(path) as f:
            entry = json.load(f)
        if entry.get("num_inputs") != len(inputs):
            raise ValueError(f"entry for {entry.get('num_inputs')} inputs, graph has {len(inputs)}")
        call = import_output_code(entry["output_code"]).call
        if entry.get("constants"):
            with _real_tensors():
                consts = torch.load(entry["constants"], weights_only=True)
            if not isinstance(consts, list) or not all(isinstance(t, torch.Tensor) and t.device.type == "cpu"
                                                       for t in consts):
                raise ValueError("its constants file holds no list of CPU tensors")
            call = with_constants(call, consts)
    except FileNotFoundError:
        return key, None
    except Exception as e:  # a half-written or stale entry: compile again, and replace it
        log.warning("kernel-lens: graph cache entry %s unusable (%s: %s); compiling again", path,
                    type(e).__name__, e)
        try:
            os.remove(path)
        except OSError:
            pass
        return key, None
    return key, direct_run(call)


def store(key: str, output_code_path: str, num_inputs: int, constants: Sequence[torch.Tensor] = ()) -> None:
    """Write the entry (and its lifted constants, when the graph has any and they are small enough)."""
    if sum(t.untyped_storage().nbytes() for t in constants) > _MAX_CONSTANT_BYTES:
        return
    path = _entry(key)
    entry = {"output_code": output_code_path, "num_inputs": num_inputs}
    try:
        if constants:
            entry["constants"] = f"{path[:-len('.json')]}.pt"
            saved = io.BytesIO()
            with _real_tensors():
                torch.save(list(constants), saved)
            write_atomic(entry["constants"], saved.getvalue())
        write_atomic(path, json.dumps(entry))
    except OSError as e:
        log.warning("kernel-lens: could not write graph cache entry %s: %s", path, e)


@contextlib.contextmanager
def _real_tensors():
    """Outside Dynamo's tracing context and fake mode, where the backend runs (torch.load would give meta
    tensors there)."""
    with torch._guards.tracing(None), unset_fake_temporarily():
        yield
