"""Inference-graph freezing: a Dynamo graph's parameters and buffers treated as constants under no_grad, so that
BatchNorm folds into the convolution before it, subgraphs of parameters alone are computed once, and weights
are kept in the layout their GEMM/convolution reads best; guarded by the parameters' identity and version.

`freeze(gm, inputs)` splits Dynamo's graph in two: a constant graph (every node computed from parameters and
buffers alone, plus the folds this module inserts) run eagerly at compile time, and the main graph, whose inputs
are Dynamo's other inputs, the parameters it still reads directly, and the constant graph's results. The
wrapper (`FrozenGraph.wrap`) calls the compiled main graph with the kept constants, after checking on every call
that each parameter the constants came from is the same tensor object, at the same data pointer, with the same
version counter: an in-place change (`p.mul_(2)` under no_grad, `copy_`, `load_state_dict`, an optimizer step),
`p.data = t`, or another module instance of the same code (Dynamo shares one compiled graph between them)
computes the constants again before the call. Writes through `p.data` (its own version counter) are the one
change no counter shows: `config.freezing = False` (LENS_FREEZING=0) is for code that does that.
"""
from __future__ import annotations

import inspect
import logging
import operator
import weakref
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
import torch.fx

from compiler import config
from compiler.graph_passes import freezing_concat
from compiler.graph_passes.conv_onednn import conv_onednn, conv_onednn_adds
from compiler.graph_passes.linear_onednn import linear_onednn
from compiler.graph_passes.freezing_autocast import autocast_casts
from compiler.graph_passes.fx_calls import (
    CONV,
    LINEAR,
    call_arg,
    changes_in_place,
    changes_only_fresh_tensors,
    mutates,
    set_constant_arg,
)
from compiler.machine import conv_packed, gemm_packed

log = logging.getLogger(__name__)
FROZEN: list["FrozenGraph"] = []  # every graph this process froze, in order (tests and the bench read it)

_RANDOM = ("rand", "dropout", "bernoulli", "normal", "multinomial", "uniform", "exponential", "poisson")
_BATCH_NORM = {torch.nn.functional.batch_norm}


# a graph input that was an attribute of Dynamo's graph: a module's parameter or buffer (frontend/dynamo_backend.py)
MODULE_TENSOR = "lens_module_tensor"


def _is_parameter_or_buffer(node: torch.fx.Node, value) -> bool:
    if isinstance(value, torch.nn.Parameter) or node.meta.get(MODULE_TENSOR):
        return True
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", "")
    name = name() if callable(name) else name  # a method in older torch, a property in newer
    return "_buffers" in name or "_parameters" in name


def _pure(node: torch.fx.Node) -> bool:
    """Whether a call node computes its result from its arguments alone (no randomness, no in-place change)."""
    if node.op not in ("call_function", "call_method"):
        return False
    name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
    if getattr(node.target, "__module__", None) in ("_operator", "operator"):
        name = name.rstrip("_") if name in ("and_", "or_", "not_", "is_") else name  # `&`, `|`: not in place
    if any(r in name for r in _RANDOM) or (name.endswith("_") and not name.startswith("_")):
        return False
    return "out" not in node.kwargs and not node.kwargs.get("inplace", False)


def bn_folded(weight, bias, mean, var, gamma, beta, eps: float):
    """Eval-mode BatchNorm after a convolution as that convolution's weight and bias."""
    scale = torch.rsqrt(var + eps)
    if gamma is not None:
        scale = scale * gamma
    shift = -mean * scale if bias is None else (bias - mean) * scale
    if beta is not None:
        shift = shift + beta
    return weight * scale.reshape(-1, *([1] * (weight.dim() - 1))), shift


def channels_last(weight: torch.Tensor) -> torch.Tensor:
    return weight.contiguous(memory_format=torch.channels_last) if weight.dim() == 4 else weight


def _eval_batch_norm_stats(bn: torch.fx.Node, const: set[torch.fx.Node]) -> list | None:
    """(running mean, running var, weight, bias) of an eval-mode batch_norm call whose statistics are constants."""
    if bn.op != "call_function" or bn.target not in _BATCH_NORM or call_arg(bn, 5, "training", False):
        return None
    stats = [call_arg(bn, i, n) for i, n in ((1, "running_mean"), (2, "running_var"), (3, "weight"), (4, "bias"))]
    if stats[0] is None or stats[1] is None or not all(s is None or s in const for s in stats):
        return None
    return stats


def _fold_batch_norms(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> int:
    """conv(x, W, b) -> batch_norm(eval, constant stats) becomes conv(x, W', b'); returns how many folded."""
    folded = 0
    for bn in list(graph.nodes):
        stats = _eval_batch_norm_stats(bn, const)
        conv = bn.args[0] if stats is not None else None
        if (not isinstance(conv, torch.fx.Node) or conv.op != "call_function" or conv.target not in CONV
                or len(conv.users) != 1):
            continue
        weight, bias = call_arg(conv, 1, "weight"), call_arg(conv, 2, "bias")
        if weight not in const or not (bias is None or bias in const):
            continue
        with graph.inserting_before(conv):
            pair = graph.call_function(bn_folded, (weight, bias, *stats, float(call_arg(bn, 7, "eps", 1e-5))))
            new_w = graph.call_function(_getitem, (pair, 0))
            new_b = graph.call_function(_getitem, (pair, 1))
        for node, like in ((new_w, weight), (new_b, stats[0])):  # (the folds' layouts: freezing_autocast reads them)
            if isinstance(like.meta.get("example_value"), torch.Tensor):
                node.meta["example_value"] = like.meta["example_value"]
        const.update((pair, new_w, new_b))
        args = list(conv.args) + [None] * max(0, 3 - len(conv.args))
        args[1], args[2] = new_w, new_b
        conv.args = tuple(args)
        conv.kwargs = {k: v for k, v in conv.kwargs.items() if k not in ("weight", "bias")}
        bn.replace_all_uses_with(conv)
        graph.erase_node(bn)
        folded += 1
    return folded


def bn_affine(mean, var, gamma, beta, eps: float, dims: int):
    """Eval-mode BatchNorm's per-channel scale and shift, shaped to broadcast over an input of `dims` dims."""
    one = torch.ones_like(var)
    scale, shift = bn_folded(one, None, mean, var, gamma, beta, eps)
    shape = (-1, *([1] * (dims - 2)))
    return scale.reshape(shape), shift.reshape(shape)


def _affine_batch_norms(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> int:
    """An eval-mode float32 batch_norm with constant statistics that did not fold into a convolution (after a
    concatenation, a residual add, a pooling) as `x * scale + shift`, scale and shift computed once with the other
    constants: the kernel it fuses into then reads two numbers a channel instead of computing a square root and a
    division per element (MixNet's batch norms after concatenated convolutions). Returns how many."""
    changed = 0
    for bn in list(graph.nodes):
        stats = _eval_batch_norm_stats(bn, const)
        x, val = (bn.args[0], bn.meta.get("example_value")) if stats is not None else (None, None)
        if (not isinstance(x, torch.fx.Node) or x in const or not isinstance(val, torch.Tensor)
                or val.dtype != torch.float32 or val.dim() < 2):
            continue
        with graph.inserting_before(bn):
            pair = graph.call_function(bn_affine, (*stats, float(call_arg(bn, 7, "eps", 1e-5)), val.dim()))
            scale = graph.call_function(_getitem, (pair, 0))
            shift = graph.call_function(_getitem, (pair, 1))
            scaled = graph.call_function(operator.mul, (x, scale))
            out = graph.call_function(operator.add, (scaled, shift))
        const.update((pair, scale, shift))
        scaled.meta["example_value"] = out.meta["example_value"] = val
        bn.replace_all_uses_with(out)
        graph.erase_node(bn)
        changed += 1
    return changed


def _getitem(pair, i):
    return pair[i]


def _relayout(graph: torch.fx.Graph, const: set[torch.fx.Node], targets: set, index: int, name: str,
              layout: Callable) -> int:
    """The constant weight argument of each `targets` call read through `layout` (a constant node)."""
    changed = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in targets:
            continue
        weight = call_arg(node, index, name)
        if weight not in const:
            continue
        with graph.inserting_before(node):
            new = graph.call_function(layout, (weight,))
        set_constant_arg(node, index, name, new, const)
        changed += 1
    return changed


def _conv_weights_channels_last(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> int:
    """Constant conv2d weights read channels-last: oneDNN then runs the convolution channels-last (its output too),
    without reordering an NCHW weight on every call, and the activations stay channels-last through the kernels
    between convolutions (lowering keeps eager's channels-last layout). Conv net inference 0.79-0.83 -> 0.72-0.74
    of Inductor's time (in-process A/B). A 4-d output the graph returned contiguous is made contiguous again, so
    callers see eager's layout (a `.view` of it works as in eager); returns how many weights."""
    changed = _relayout(graph, const, CONV, 1, "weight", channels_last)
    if changed:
        out = next(n for n in graph.nodes if n.op == "output")

        def eager_layout(node):
            val = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
            if not isinstance(val, torch.Tensor) or val.dim() != 4 or not val.is_contiguous():
                return node
            with graph.inserting_before(out):
                return graph.call_method("contiguous", (node,))
        out.args = torch.fx.node.map_arg(out.args, eager_layout)
    return changed


def _views_strides(graph: torch.fx.Graph) -> bool:
    """Whether the graph calls an op whose success depends on its input's strides (`view`, `as_strided`): only
    then can channels-last activations fail where contiguous ones trace (checking every graph by a fake run cost
    the conv net's cold compile ~100 ms)."""
    names = {"view", "as_strided"}
    return any((n.op == "call_method" and n.target in names)
               or (n.op == "call_function" and getattr(n.target, "__name__", "") in names) for n in graph.nodes)


def _transposed_storage(weight: torch.Tensor) -> torch.Tensor:
    """A Linear's (N, K) weight stored K-major, so the (K, N) operand its GEMM reads is contiguous."""
    return weight.t().contiguous().t() if weight.dim() == 2 else weight


@dataclass
class FrozenGraph:
    """Dynamo's graph split into the constants computed from parameters and the graph that reads them."""

    gm: torch.fx.GraphModule  # the main graph: kept inputs, then one input per constant
    example_inputs: list
    kept: list[int]  # Dynamo's input positions the main graph still takes, in order
    sources: list[int]  # Dynamo's input positions the constants are computed from
    constants_gm: torch.fx.GraphModule  # sources -> constants
    constants: list[torch.Tensor]
    folds: dict[str, int] = field(default_factory=dict)  # what was folded, how often
    _seen: list[tuple] = field(default_factory=list)  # per source: (weakref, data_ptr, version)
    refolds: int = 0

    def _stamp(self, args: Sequence) -> None:
        self._seen = [(weakref.ref(args[i]), args[i].data_ptr(), args[i]._version) for i in self.sources]

    def _current(self, args: Sequence) -> bool:
        for (ref, ptr, version), i in zip(self._seen, self.sources):
            t = args[i]
            if ref() is not t or t._version != version or t.data_ptr() != ptr:
                return False
        return True

    def _refold(self, args: Sequence) -> bool:
        """Compute the constants again from `args`' parameters; False if their layout changed (then the
        compiled main graph cannot take them)."""
        with torch.no_grad():
            fresh = list(self.constants_gm(*[args[i] for i in self.sources]))
        if any(a.shape != b.shape or a.stride() != b.stride() or a.dtype != b.dtype
               for a, b in zip(fresh, self.constants)):
            return False
        self.constants = fresh
        gemm_packed.register(fresh)
        conv_packed.register(fresh)
        self._stamp(args)
        self.refolds += 1
        return True

    def wrap(self, compiled: Callable, fallback: Callable) -> Callable:
        """Dynamo's calling convention: the original inputs in, the compiled main graph called with constants
        that are current for them (or `fallback`, the unfrozen graph run eagerly, if they no longer fit)."""
        boxed = _boxed(compiled)
        kept = self.kept

        def run(*args):
            if not self._current(args) and not self._refold(args):
                log.warning("kernel-lens: frozen parameters changed layout; this graph now runs eagerly")
                return fallback(*args)
            inputs = [args[i] for i in kept] + self.constants
            return compiled(inputs) if boxed else compiled(*inputs)

        run._lens_frozen = self  # type: ignore[attr-defined]
        return run


def _boxed(call: Callable) -> bool:
    """Whether `call` takes its inputs as one list. Its `_boxed_call` alone does not say: AOTAutograd's forward takes
    them positionally but copies that mark from the boxed graph it wraps (functools.wraps), so a frozen graph whose
    main graph ran eagerly (no direct call) was handed its inputs as one list inside another."""
    if not getattr(call, "_boxed_call", False):
        return False
    try:
        params = list(inspect.signature(call, follow_wrapped=False).parameters.values())
    except (TypeError, ValueError):
        return True
    return not any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def freeze(gm: torch.fx.GraphModule, example_inputs: Sequence, concat: bool = True,
           conv_channels_last: bool = True) -> FrozenGraph | None:
    """The split of an inference graph under no_grad whose parameters/buffers feed a fold, or None (grad mode,
    freezing off, a graph that changes tensors in place, nothing to fold). `concat`: Linear layers sharing an
    input merged into one product (compiler/graph_passes/freezing_concat.py); `conv_channels_last`: convolution weights kept
    channels-last (`_conv_weights_channels_last`)."""
    if not config.freezing or torch.is_grad_enabled() or gm.meta.get("lens_frozen"):
        return None
    from torch._subclasses.fake_tensor import FakeTensor
    if not all(isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor) for t in example_inputs):
        return None  # constants are computed from the real parameters
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    frozen = {n for n, t in zip(placeholders, example_inputs)
              if _is_parameter_or_buffer(n, t) and t.device.type == "cpu" and t.layout == torch.strided
              and type(t) in (torch.Tensor, torch.nn.Parameter)}
    if not frozen:
        return None
    gemm_packed.register(t for n, t in zip(placeholders, example_inputs) if n in frozen)
    conv_packed.register(t for n, t in zip(placeholders, example_inputs) if n in frozen)
    const = set(frozen)
    _propagate(graph, const)
    if mutates(gm) and not changes_only_fresh_tensors(graph, const):
        return None  # (a change of an input, a parameter or a constant would be folded away or applied each call)
    folds = {"batch_norm": _fold_batch_norms(graph, const), "autocast weight casts": autocast_casts(graph, const)}
    if config.freezing_batch_norm_affine:
        folds["batch_norm as a constant scale and shift"] = _affine_batch_norms(graph, const)
    if conv_channels_last and config.freezing_conv_channels_last:
        folds["conv weight channels_last"] = relaid = _conv_weights_channels_last(graph, const)
        if relaid and _views_strides(graph) and not freezing_concat.traces(
                gm, graph, example_inputs, "convolution weights kept as they are"):
            return freeze(gm, example_inputs, concat, conv_channels_last=False)
    if config.freezing_conv_onednn:
        folds["conv as oneDNN over a prepacked weight"] = conv_onednn(graph, const)
        if config.freezing_conv_onednn_add:
            folds["residual add fused into the conv"] = conv_onednn_adds(graph)
    if config.freezing_linear_transposed:
        folds["linear weight K-major"] = _relayout(graph, const, LINEAR, 1, "weight", _transposed_storage)
    if concat and config.freezing_concat_linears:
        folds["linears sharing an input as one product"] = merged = freezing_concat.concat_linears(graph, const)
        if merged and not freezing_concat.traces(gm, graph, example_inputs):
            return freeze(gm, example_inputs, concat=False)
    if config.freezing_linear_onednn:
        folds["bf16 linear as oneDNN with its activation"] = linear_onednn(graph, const)
    # an in-place change whose result nobody reads (`out.mul_(g)`: NFNet's skip-init gain) is no dead code: FX counts
    # a method call pure
    graph.eliminate_dead_code(is_impure_node=lambda n: n.is_impure() or changes_in_place(n))
    return _split(gm, graph, placeholders, example_inputs, const, folds)


def _propagate(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> None:
    for n in graph.nodes:
        if n in const or not _pure(n) or not isinstance(n.meta.get("example_value"), torch.Tensor):
            continue
        inputs = n.all_input_nodes
        if inputs and all(i in const for i in inputs):
            const.add(n)


def _split(gm: torch.fx.GraphModule, graph: torch.fx.Graph, placeholders: list[torch.fx.Node],
           example_inputs: Sequence, const: set[torch.fx.Node], folds: dict[str, int]) -> FrozenGraph | None:
    computed = [n for n in graph.nodes if n in const and n.op != "placeholder"]
    # constants the main graph reads: computed nodes with a user outside the constant graph
    outputs = [n for n in computed if any(u not in const for u in n.users)]
    if not outputs:
        return None
    position = {n: i for i, n in enumerate(placeholders)}
    sources = sorted({position[i] for n in computed for i in n.all_input_nodes if i.op == "placeholder"})
    constants_graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for i in sources:
        env[placeholders[i]] = constants_graph.placeholder(placeholders[i].name)
    for n in computed:
        env[n] = constants_graph.node_copy(n, lambda a: env[a])
    constants_graph.output(tuple(env[n] for n in outputs))
    constants_gm = torch.fx.GraphModule(gm, constants_graph)
    with torch.no_grad():
        constants = list(constants_gm(*[example_inputs[i] for i in sources]))

    main = torch.fx.Graph()
    menv: dict[torch.fx.Node, torch.fx.Node] = {}
    kept = [i for i, n in enumerate(placeholders) if any(u not in const for u in n.users)]
    for i in kept:
        menv[placeholders[i]] = main.node_copy(placeholders[i], lambda a: menv[a])
    for k, n in enumerate(outputs):
        menv[n] = main.placeholder(f"frozen_{k}_{n.name}")
        menv[n].meta["example_value"] = _fake_like(constants[k])
    for n in graph.nodes:
        if n.op != "placeholder" and n not in const:
            menv[n] = main.node_copy(n, lambda a: menv[a])
    main_gm = torch.fx.GraphModule(gm, main)
    main_gm.meta.update(gm.meta)
    main_gm.meta["lens_frozen"] = True
    frozen = FrozenGraph(main_gm, [example_inputs[i] for i in kept] + constants, kept, sources, constants_gm,
                         constants, {k: v for k, v in folds.items() if v})
    frozen.folds["constant subgraphs"] = len(outputs)
    gemm_packed.register(constants)
    conv_packed.register(constants)
    frozen._stamp(example_inputs)
    FROZEN.append(frozen)
    return frozen


def _fake_like(t: torch.Tensor):
    from torch._guards import detect_fake_mode
    mode = detect_fake_mode()
    return mode.from_tensor(t, static_shapes=True) if mode is not None else t
