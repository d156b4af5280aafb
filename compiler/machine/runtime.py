"""Loads built kernels (ctypes) and generated modules, and the helpers generated code calls at run time."""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import importlib.util
import logging
import os
import threading
import types
from typing import Callable

import torch

from compiler import config
from compiler.cpp_text.variant_text import generic_only
from compiler.dynamo_skip import skip_dynamo_in
from compiler.machine import pch
from compiler.machine.build import build_shared_library, cached_library
from compiler.machine.kernel_timer import profiled as _profiled
from compiler.machine.memory import empty_strided, empty_strided_cpu  # noqa: F401  (generated code allocates: the pool,

# and torch's allocation without the dispatcher for buffers the pool does not serve)

_LIBS: dict[str, ctypes.CDLL] = {}
log = logging.getLogger(__name__)


try:  # (a view of `t`'s storage at its offset + `offset`: torch's C++ helper, 0.5 us against as_strided's 1.2)
    from torch._C._dynamo.guards import _reinterpret_tensor as reinterpret
except ImportError:
    def reinterpret(t: torch.Tensor, size, stride, offset: int) -> torch.Tensor:
        return torch.as_strided(t, size, stride, t.storage_offset() + offset)


def with_layout(t: torch.Tensor, size, stride, dtype: torch.dtype | None = None) -> torch.Tensor:
    """`t` itself when it has this layout (strides of size-1 dims don't matter) and dtype, else a copy that has
    them. (An ATen op's meta function may name another dtype than its kernel returns: batch norm's saved mean of
    a bfloat16 input is float32 in the kernel, bfloat16 in its meta; the kernels after it read the traced dtype.)"""
    if dtype is not None and t.dtype != dtype:
        t = t.to(dtype)
    if t.stride() == stride and t.shape == size:  # (the usual case, in a third of the general check's 0.9 us)
        return t
    if tuple(t.shape) == tuple(size) and all(a == b for a, b, n in zip(t.stride(), stride, size) if n > 1):
        return t
    return torch.empty_strided(size, stride, dtype=t.dtype, device=t.device).copy_(t)


def rand_strided(size, stride, dtype: torch.dtype) -> torch.Tensor:
    """A random tensor with this layout (like Inductor's rand_strided)."""
    needed = 1 + sum((s - 1) * st for s, st in zip(size, stride) if s > 0) if all(s > 0 for s in size) else 0
    if dtype == torch.bool:
        base = torch.randint(0, 2, (needed,), dtype=torch.bool)
    elif dtype.is_floating_point:
        base = torch.randn(needed, dtype=dtype)
    else:
        base = torch.randint(0, 100, (needed,), dtype=dtype)
    return torch.as_strided(base, size, stride)


def load_cpp_module(source: str, kernels: dict[str, int], name: str = "kernels",
                    profile: bool = False, namespace: dict | None = None) -> dict[str, Callable]:
    """Build (or fetch from the cache) `source` and return its kernels as callables taking data pointers.
    With profiling on, each call is recorded in torch.profiler under the kernel's name.

    Given the `namespace` the kernels are bound in (the generated module's globals), a cold build of a source
    whose kernels have size variants builds their generic bodies first and returns those; the whole source
    builds in a background thread and its kernels replace them in `namespace` when loaded (`deferred`)."""
    profile = profile or config.cpp.enable_kernel_profile
    if namespace is not None and config.cpp.deferred_size_variants and not config.debug and not profile \
            and cached_library(source) is None:
        generic = generic_only(source)
        if generic is not None:
            out = _kernels(build_shared_library(generic, name), kernels, False)
            _start_deferred(source, name, kernels, namespace, out)
            return out
    return _kernels(build_shared_library(source, name), kernels, profile)


def _kernels(path: str, kernels: dict[str, int], profile: bool) -> dict[str, Callable]:
    lib = _LIBS.get(path)
    if lib is None:
        lib = _LIBS[path] = ctypes.CDLL(path)
    out: dict[str, Callable] = {}
    for kname, nargs in kernels.items():
        fn = getattr(lib, kname)
        fn.argtypes = [ctypes.c_void_p] * nargs
        fn.restype = None
        out[kname] = _profiled(kname, fn) if profile else fn
    return out


class _DeferredBuild(threading.Thread):
    """A background build of size variants, which pch.wait_for_builds waits for with the others."""

    def wait(self) -> None:
        self.join()


def _start_deferred(source: str, name: str, kernels: dict[str, int], namespace: dict,
                    out: dict[str, Callable]) -> None:
    """Build `source` in a thread, then put its kernels in `out` (the dict load_cpp_module returned, which the
    module binds its names from) and in `namespace` where the generic ones are (or not bound yet). Benchmarks,
    profiles and tests wait for it with pch.wait_for_builds; so does the interpreter's exit."""
    generic = dict(out)

    def build() -> None:
        try:
            full = _kernels(build_shared_library(source, name), kernels, False)
        except Exception as e:  # (a variant that does not compile: the generic bodies serve every size)
            log.warning("kernel-lens: %s keeps its kernels' generic bodies; building their size variants "
                        "failed: %s", name, str(e).strip()[:500])
            return
        for kname, fn in full.items():
            out[kname] = fn
            if namespace.get(kname, generic[kname]) is generic[kname]:
                namespace[kname] = fn
    thread = _DeferredBuild(target=build, name=f"kernel-lens size variants of {name}", daemon=True)
    pch.add_pending(thread)
    thread.start()


atexit.register(pch.wait_for_builds)


def load_output_code(text: str) -> types.ModuleType:
    """Import generated output_code.py text as a module (kept in the cache so tracebacks show lines)."""
    key = hashlib.sha256(text.encode()).hexdigest()[:40]
    folder = os.path.join(config.cache_dir(), "py", key[:2])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"output_code_{key}.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return import_output_code(path)


def import_output_code(path: str) -> types.ModuleType:
    """Import an output_code.py that is already in the cache (`load_output_code` wrote it)."""
    key = os.path.basename(path)[len("output_code_"):-len(".py")]
    skip_dynamo_in(os.path.dirname(path))
    spec = importlib.util.spec_from_file_location(f"lens_output_code_{key}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
