"""Graphs with a backward (training steps) through torch's AOTAutograd cache.

A warm start (`torch._dynamo.reset()` or a new process, same caches) of a training step otherwise traces
AOTAutograd's joint graph again, partitions it and lowers, schedules and generates both graphs before the
build cache is asked: BERT's (2 layers) training step spent 1.8 s of its warm first call so, Inductor 0.5 s
with this cache. torch's cache (`torch._functorch._aot_autograd.autograd_cache`) keeps, per Dynamo graph, what
AOTAutograd needs at run time (the forward's and backward's metadata, its runtime wrappers) with the compiled
graphs, which it pickles when they are `OutputCode`s handed out by a `SerializableAOTDispatchCompiler` and the
cache is "bundled". `LensOutputCode` is ours: a generated graph's output_code.py text and lifted constants;
loading it builds (or finds in the build cache) its kernels. torch keys an entry on the Dynamo graph, its
inputs, grad mode, autocast state and torch's settings; `torch.compiler.config.cache_key_tag` adds the
compiler's own key (graph_cache.compiler_key: its source and every setting), so Inductor's entries and ours
never meet. Entries live where torch keeps its own (TORCHINDUCTOR_CACHE_DIR's `aotautograd/`).

torch saves an entry when both graphs are compiled; it compiles the backward lazily, at the first backward
pass, outside the compile that set the cache up, and saves an entry of ours only "bundled": that setting of
torch's is on from the end of such a backward's compile until torch has pickled the entry or the backward
first runs (`_bundle_until_saved`), so a forward never run backward compiles no backward. A graph that runs
eagerly (lowering failed, g++ failed) is not saved; nor are compiles under a tool (profiling, accuracy, saved
tensors), with a debug directory, or with `config.graph_cache` off (LENS_GRAPH_CACHE=0). A broken entry is
torch's to drop: it compiles again. Inference graphs stay with graph_cache.py.
"""
from __future__ import annotations

import contextlib
import hashlib
import time
from typing import Any, Callable, Sequence

import torch
from torch._functorch._aot_autograd.autograd_cache import BypassAOTAutogradCache
from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
from torch._inductor.output_code import OutputCode

from compiler.compiled_graph import with_constants
from compiler.frontend.graph_cache import settings_allow
from compiler.graph_passes.conv_layout import conv2d_channels_last, has_backward


class LensOutputCode(OutputCode):
    """A compiled graph as AOTAutograd's cache stores it: the generated output_code.py's text and the graph's
    lifted constants (None text: it runs eagerly, not cached). After loading from the cache, `post_compile`
    imports the text again (its kernels from the build cache, or built)."""

    def __init__(self, call: Callable, text: str | None, constants: Sequence[torch.Tensor]):
        super().__init__()
        self._call: Callable | None = call
        self._text = text
        self._constants = list(constants)
        self._boxed_call = True

    def __call__(self, inputs: Sequence[Any]) -> Any:
        if _UNBUNDLE:  # (the first call of a backward compiled lazily: torch has saved it, or never will)
            _unbundle()
        assert self._call is not None, "LensOutputCode loaded from the cache without post_compile"
        return self._call(inputs)

    def prepare_for_serialization(self) -> None:  # (on a copy: the live graph keeps running)
        _unbundle()
        if self._text is None:
            raise BypassAOTAutogradCache("kernel-lens: a graph of this compile runs eagerly")
        self._call = None

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        if self._call is not None:
            return
        from compiler.machine.runtime import load_output_code
        call = load_output_code(self._text).call
        call._boxed_call = True
        self._call = with_constants(call, self._constants)

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass


def serializable(compile_fn: Callable) -> SerializableAOTDispatchCompiler:
    """AOTAutograd's compiler hook whose results the cache can pickle: `compile_fn(gm, example_inputs)` returns
    (call, output_code text or None, lifted constants)."""
    def compile_output_code(gm, example_inputs) -> LensOutputCode:
        start = time.time_ns()
        code = LensOutputCode(*compile_fn(gm, example_inputs))
        code._time_taken_ns = time.time_ns() - start  # (torch's hit accounting reads it: None fails the hit's log)
        if not _CACHING:  # a backward compiled lazily, outside `caching`: torch saves the entry right after
            _bundle_until_saved()
        return code
    return SerializableAOTDispatchCompiler(LensOutputCode, compile_output_code)


_CACHING: list[bool] = []  # (one item per `caching` context entered and not left)
_UNBUNDLE: list[bool] = []  # torch's bundled_autograd_cache as it was before _bundle_until_saved set it


def _bundle_until_saved() -> None:
    """torch saves a training graph's entry when its backward is compiled, at the first backward pass, in the
    frame that called our compiler and outside `caching`; an entry of ours is saved only bundled. So torch's
    setting is on from the end of that compile until torch pickles the entry (`prepare_for_serialization`) or,
    where it saves none, until the backward's first call, which follows in the same backward pass (torch's
    settings are context variables: the autograd engine's context holds it)."""
    import torch._functorch.config as functorch_config
    if not _UNBUNDLE:
        _UNBUNDLE.append(functorch_config.bundled_autograd_cache)
        functorch_config.bundled_autograd_cache = True


def _unbundle() -> None:
    import torch._functorch.config as functorch_config
    if _UNBUNDLE:
        functorch_config.bundled_autograd_cache = _UNBUNDLE.pop()


def usable(example_inputs: Sequence, uses_tools: bool) -> bool:
    """Whether this compile goes through the cache: graphs with a backward (grad mode, an input requiring grad).
    Inference graphs keep lens's own cache (graph_cache.py, without torch's key, whose first computation in a
    process imports Inductor's lowerings: ~0.6 s here)."""
    return settings_allow() and not uses_tools and has_backward(example_inputs)


_AUTOCAST_MARKERS = {f"torch.amp.autocast_mode.{name}": torch.__version__ for name in ("_enter_autocast",
                                                                                         "_exit_autocast")}
_OUR_FUNCTIONS = {f"{f.__module__}.{f.__name__}": "lens" for f in (conv2d_channels_last,)}


@contextlib.contextmanager
def caching(compiler_key: str):
    """torch's settings under which AOTAutograd looks our graph up (and saves it after a miss)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    tag = hashlib.sha256(f"kernel-lens\0{compiler_key}\0{torch.compiler.config.cache_key_tag}".encode())
    # (a Dynamo graph of a function entering autocast calls autocast's markers, which torch's check bypasses as
    # unknown functions: their arguments, device and dtype, are graph constants, so the key holds them; so does
    # the channels-last convolution lens puts in training graphs, compiler/graph_passes/conv_layout.py, whose code the
    # compiler key covers)
    cacheable = {**inductor_config.unsafe_marked_cacheable_functions, **_AUTOCAST_MARKERS, **_OUR_FUNCTIONS}
    with functorch_config.patch(enable_autograd_cache=True, bundled_autograd_cache=True), \
            inductor_config.patch(fx_graph_cache=True, unsafe_marked_cacheable_functions=cacheable), \
            torch.compiler.config.patch(cache_key_tag=tag.hexdigest()[:32]):
        _CACHING.append(True)
        try:
            yield
        finally:
            _CACHING.pop()
