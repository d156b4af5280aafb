"""The first call of a compiled Dynamo graph checked against eager, as a training step uses it: its outputs, the
inputs it changes in place (an optimizer step's parameters), and its gradients (eager's and the compiled
backward's, for the same forward inputs and the same output gradients). Both sides run on copies of the inputs,
from the same random state; the program's own call comes after, from that state too."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.fx

from compiler.tools.accuracy import Difference, compare

TANGENT_SEED = 0  # the output gradients both backward passes get (random: ones hide sign and scale bugs alike)


@dataclass
class FirstCallCheck:
    """What the first call compared; each difference is None when that part matched (or was not compared)."""

    outputs: Difference | None = None
    mutated_inputs: Difference | None = None  # inputs the graph writes in place, compared after the call
    gradients: Difference | None = None  # d(outputs)/d(inputs), for the inputs requiring grad
    gradients_compared: bool = False  # grad mode on and some output requires grad
    input_names: Sequence[str] = ()

    @property
    def forward(self) -> Difference | None:
        """The forward's difference: an output, else an input it changed in place."""
        return self.outputs or self.mutated_inputs

    def first(self) -> tuple[str, Difference] | None:
        """(what, difference) of the first part that differs, in the order the program computes them."""
        for what, d in (("outputs", self.outputs), ("inputs changed in place", self.mutated_inputs),
                        ("gradients", self.gradients)):
            if d is not None:
                return what, d
        return None

    def describe(self, what: str, d: Difference) -> str:
        """A difference with its output named for a person: the gradient of which input."""
        text = d.describe()
        if what != "outputs" and d.output is not None and d.output < len(self.input_names):
            noun = "gradient of input" if what == "gradients" else "input"
            text = text.replace(f"output {d.output}: ", f"{noun} {self.input_names[d.output]}: ", 1)
        return text


def input_copies(args: Sequence) -> list:
    """Inputs of the same values, layouts and requires_grad. A leaf stays a leaf (the gradient's place); an input
    that is no leaf (an activation) is a copy of a fresh leaf, so the graph may still write into it in place."""
    out = []
    for a in args:
        if not isinstance(a, torch.Tensor):
            out.append(a)
            continue
        leaf = a.detach().clone()
        if a.requires_grad:
            leaf.requires_grad_(True)
            out.append(leaf if a.is_leaf else leaf.clone())
        else:
            out.append(leaf)
    return out


def _leaves(copies: list) -> list[torch.Tensor | None]:
    """The leaf each copy's gradient lands in (None for inputs that need none)."""
    found = []
    for c in copies:
        if isinstance(c, torch.Tensor) and c.requires_grad:
            found.append(c if c.is_leaf else c.grad_fn.next_functions[0][0].variable)
        else:
            found.append(None)
    return found


def _tensors(x) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tensors(item)]
    return []


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else x


def _differentiable(t) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex)


def output_gradients(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Seeded random gradients for `outputs` (the same for eager and compiled)."""
    g = torch.Generator().manual_seed(TANGENT_SEED)
    return [torch.randn(o.shape, generator=g, dtype=torch.float64).to(o.dtype) for o in outputs]


@dataclass
class BackwardPass:
    """The inputs of one side's backward: which outputs, their gradients, which leaves."""

    outputs: list[torch.Tensor]
    tangents: list[torch.Tensor]
    leaves: list[torch.Tensor]
    positions: list[int]  # the input position of each leaf

    def run(self, retain: bool = False) -> list:
        return list(torch.autograd.grad(self.outputs, self.leaves, self.tangents, retain_graph=retain,
                                        allow_unused=True))


def backward_passes(out_e, out_c, copies_e: list, copies_c: list) -> tuple[BackwardPass, BackwardPass] | None:
    """Eager's and the compiled graph's backward over the outputs both sides differentiate, with the same output
    gradients; None when nothing is differentiated (grad mode off, no output requiring grad)."""
    if not torch.is_grad_enabled():
        return None
    pairs = [(e, c) for e, c in zip(_tensors(out_e), _tensors(out_c)) if _differentiable(e) and _differentiable(c)]
    leaves_e, leaves_c = _leaves(copies_e), _leaves(copies_c)
    positions = [i for i, (le, lc) in enumerate(zip(leaves_e, leaves_c)) if le is not None and lc is not None]
    if not pairs or not positions:
        return None
    tangents = output_gradients([c for _, c in pairs])
    return (BackwardPass([e for e, _ in pairs], tangents, [leaves_e[i] for i in positions], positions),
            BackwardPass([c for _, c in pairs], tangents, [leaves_c[i] for i in positions], positions))


def _gradient_difference(eager: BackwardPass, compiled: BackwardPass, tol: float) -> Difference | None:
    grads_e, grads_c = eager.run(), compiled.run()
    zero = [torch.zeros_like(leaf) for leaf in eager.leaves]  # an input the graph does not use gets no gradient
    grads_e = [z if g is None else g for g, z in zip(grads_e, zero)]
    grads_c = [z if g is None else g for g, z in zip(grads_c, zero)]
    d = compare(grads_e, grads_c, tol)
    if d is not None and d.output is not None:
        d.output = eager.positions[d.output]  # the input whose gradient differs
    return d


def graph_attributes(eager: Callable) -> list[tuple[str, torch.Tensor]]:
    """The tensors a Dynamo graph reads as attributes, not inputs (an optimizer's parameters and state: static
    addresses), when `eager` is its forward."""
    gm = getattr(eager, "__self__", None)
    if not isinstance(gm, torch.fx.GraphModule):
        return []
    found = []
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = gm
            for part in str(node.target).split("."):
                value = getattr(value, part, None)
            if isinstance(value, torch.Tensor):
                found.append((str(node.target), value))
    return found


class AttributeSnapshot:
    """A graph's attribute tensors, put back after each side's run: the check leaves them as it found them (the
    program's own call changes them once)."""

    def __init__(self, attrs: list[tuple[str, torch.Tensor]]):
        self.attrs = attrs
        self.before = [t.detach().clone() for _, t in attrs]

    def after_run(self) -> list[torch.Tensor]:
        """Their values now, and each put back as before."""
        now = [t.detach().clone() for _, t in self.attrs]
        with torch.no_grad():
            for (_, t), old in zip(self.attrs, self.before):
                t.copy_(old)
        return now


def check_first_call(eager: Callable, compiled: Callable, args: Sequence, tol: float,
                     input_names: Sequence[str] = ()) -> FirstCallCheck:
    """Run `eager` and `compiled` on copies of `args` from the same random state and compare outputs, the
    inputs and attribute tensors changed in place, and (grad mode on) the gradients. The random state and the
    attributes are left as they were."""
    state = torch.random.get_rng_state()
    attrs = AttributeSnapshot(graph_attributes(eager))
    copies_e, copies_c = input_copies(args), input_copies(args)
    names = list(input_names) + [name for name, _ in attrs.attrs]
    try:
        out_e = eager(*copies_e)
        attrs_e = attrs.after_run()
        torch.random.set_rng_state(state)
        out_c = compiled(*copies_c)
        attrs_c = attrs.after_run()
        check = FirstCallCheck(input_names=names)
        check.outputs = compare(_as_list(out_e), _as_list(out_c), tol)
        changed = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        d = compare([copies_e[i] for i in changed] + attrs_e, [copies_c[i] for i in changed] + attrs_c, tol)
        if d is not None and d.output is not None:
            d.output = changed[d.output] if d.output < len(changed) else len(args) + d.output - len(changed)
        check.mutated_inputs = d
        passes = backward_passes(out_e, out_c, copies_e, copies_c)
        if passes is not None:
            check.gradients_compared = True
            check.gradients = _gradient_difference(*passes, tol)
    finally:
        torch.random.set_rng_state(state)
    return check


def checking_first_call(eager: Callable, compiled: Callable, tol: float,
                        on_result: Callable[[FirstCallCheck], None], input_names: Sequence[str] = ()) -> Callable:
    """Wrap a compiled Dynamo graph: its first call is checked (check_first_call) and the result handed to
    `on_result`, then the program's call runs; later calls run the compiled graph alone."""
    done = False

    def run(*args):
        nonlocal done
        if not done:
            done = True
            on_result(check_first_call(eager, compiled, args, tol, input_names))
        return compiled(*args)

    return run


def placeholder_names(eager: Callable) -> list[str]:
    """The Dynamo graph's input names (`l_x_`, `l_self_modules_fc_parameters_weight_`) when `eager` is its forward."""
    gm = getattr(eager, "__self__", None)
    graph = getattr(gm, "graph", None)
    return [n.name for n in graph.nodes if n.op == "placeholder"] if graph is not None else []
