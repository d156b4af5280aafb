"""Statement -> FX node mapping of real Inductor C++ kernels (issue 45): the share of a kernel's statements the
server maps, and the share it maps to the right node, on real `TORCH_COMPILE_DEBUG=1` Inductor runs (CPU).

Ground truth, built by Inductor itself: each program is compiled once as it is, then once per post-grad node with
that node's op swapped for another of the same signature (exp -> expm1, add -> sub, sum -> amax...; Inductor's
`post_grad_custom_post_pass`); the statements of the generated C++ that change are that node's. A statement only
one swap changes is a case; the server (lsp_server's graph builder, on the unswapped run's folder) must map it to
that node. "one of: a, b" answers count as mapped, not as right. Cases are written as JSON (--cases) for the tests.

    python benchmarks/statement_map_bench.py [--out DIR] [--cases FILE] [--only NAME] [--score CASES]

Measured (torch 2.13 CPU Inductor, AMD EPYC Zen 5, issue 45): the six programs below and `--only gpt2` (transformers'
GPT2Model, one layer): 149 statement cases, mapped 100%, right 100%, no misses. The cases were also what the mapping
was developed against (there is no held-out set); swaps that change a kernel's shape (exp -> sin in the softmax
kernels, a boolean mul) give no cases, so those nodes' statements are checked by tests/lsp_server/test_inductor_statements.py.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCH_COMPILE_DEBUG", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

aten = torch.ops.aten
SWAPS = {  # an op -> one of the same signature whose C++ differs
    aten.exp.default: aten.sin.default, aten.expm1.default: aten.sin.default,  # one statement each
    aten.sigmoid.default: aten.tanh.default, aten.tanh.default: aten.sigmoid.default,
    aten.relu.default: aten.abs.default, aten.abs.default: aten.neg.default, aten.neg.default: aten.abs.default,
    aten.rsqrt.default: aten.sqrt.default, aten.sqrt.default: aten.rsqrt.default, aten.sin.default: aten.cos.default,
    aten.cos.default: aten.sin.default, aten.erf.default: aten.tanh.default, aten.log.default: aten.exp.default,
    aten.add.Tensor: aten.sub.Tensor, aten.sub.Tensor: aten.add.Tensor, aten.mul.Tensor: aten.sub.Tensor,
    aten.div.Tensor: aten.mul.Tensor, aten.maximum.default: aten.minimum.default,
    aten.minimum.default: aten.maximum.default, aten.sum.dim_IntList: aten.amax.default,
    aten.amax.default: aten.amin.default, aten.amin.default: aten.amax.default,
    aten.where.self: aten.where.self,  # never swapped (same op): listed so it is not counted as unswappable
}


def mix(x, w, b):
    h = x * 0.5
    a = torch.softmax(h, dim=-1)
    g = torch.sigmoid(x + 1.0)
    y = a * g
    return F.layer_norm(y, (x.shape[-1],), w, b)


def gelu_mlp(x, w1, w2):
    h = F.gelu(x @ w1)
    return torch.tanh(h @ w2) * 2 + x


def rms_norm(x, w):
    v = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(v + 1e-6) * w


def masked_softmax(s, mask):
    m = (1.0 - mask) * -10000.0
    p = torch.softmax(s + m, dim=-1)
    return torch.relu(p - 0.01).sum(dim=-1)


def block(x, w1, w2, g, b):
    h = F.layer_norm(x, (x.shape[-1],), g, b)
    h = F.gelu(h @ w1, approximate="tanh")
    return x + torch.sigmoid(h @ w2) * h.mean(dim=-1, keepdim=True)


def log_softmax_gate(x, y):
    l = torch.log_softmax(x, dim=-1)
    e = torch.exp(y - y.amax(dim=-1, keepdim=True))
    return (l * e).sum(dim=-1) + torch.abs(x).amin(dim=-1)


def gpt2():
    """transformers' GPT2Model of one layer from a small config, random weights (embeddings, attention, MLP)."""
    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=32)
    model = GPT2Model(config).eval()

    def run(ids):
        with torch.no_grad():
            return model(ids).last_hidden_state
    return run


PROGRAMS = {
    "mix": (mix, lambda: (torch.randn(64, 128), torch.randn(128), torch.randn(128))),
    "gelu_mlp": (gelu_mlp, lambda: (torch.randn(16, 64), torch.randn(64, 64), torch.randn(64, 64))),
    "rms_norm": (rms_norm, lambda: (torch.randn(32, 256), torch.randn(256))),
    "masked_softmax": (masked_softmax, lambda: (torch.randn(4, 16, 32), (torch.rand(4, 1, 32) > 0.3).float())),
    "block": (block, lambda: (torch.randn(16, 64), torch.randn(64, 64), torch.randn(64, 64), torch.randn(64),
                              torch.randn(64))),
    "log_softmax_gate": (log_softmax_gate, lambda: (torch.randn(32, 48), torch.randn(32, 48))),
}
OPTIONAL = {"gpt2": (gpt2, lambda: (torch.randint(0, 100, (1, 8)),))}  # --only gpt2 (transformers)


class Swap:
    """Inductor's post-grad pass: node `name`'s op replaced by its SWAPS entry (None: nothing changes)."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.swapped: str | None = None

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in graph.nodes:
            if node.name == self.name and node.op == "call_function" and node.target in SWAPS:
                node.target = SWAPS[node.target]
                self.swapped = str(node.target)

    def uuid(self) -> str:
        return f"swap-{self.name}"


def compile_once(fn, args, swap: Swap, debug_root: Path) -> Path | None:
    """Compile `fn` with `swap` in a fresh Dynamo state; the graph folder Inductor wrote (one graph)."""
    import torch._inductor.config as inductor_config
    torch._dynamo.reset()
    before = set(debug_root.glob("run_*/torchinductor/*/output_code.py"))
    with inductor_config.patch(post_grad_custom_post_pass=swap):
        try:
            torch.compile(fn)(*args)
        except Exception:  # noqa: BLE001 - a swap Inductor cannot compile (a bool mul to sub) has no case
            return None
    written = sorted(set(debug_root.glob("run_*/torchinductor/*/output_code.py")) - before)
    return written[-1].parent if len(written) == 1 else None


def post_grad_nodes(folder: Path) -> list[str]:
    """The nodes of the kernels, as Inductor's provenance lists them."""
    data = json.loads((folder / "inductor_provenance_tracking_node_mappings.json").read_text())
    return sorted({n for nodes in data.get("cppCodeToPost", {}).values() for n in nodes})


KERNEL_DEF = re.compile(r"^(cpp_fused_\w+) = async_compile")


def kernel_bodies(text: str) -> list[tuple[int, list[str]]]:
    """Each C++ kernel's (first line, lines) in order (the kernel's name left out: a swap renames it)."""
    lines, found, current = text.splitlines(), [], None
    for number, line in enumerate(lines, start=1):
        if KERNEL_DEF.match(line):
            current = (number, [])
            found.append(current)
        elif current is not None:
            if line.startswith("'''"):
                current = None
            else:
                current[1].append(line)
    return found


def changed_lines(base: str, swapped: str) -> list[int] | None:
    """Lines (1-based, of `base`) of C++ statements that differ; None where the kernels' shape changed."""
    a, b = kernel_bodies(base), kernel_bodies(swapped)
    if len(a) != len(b) or any(len(x[1]) != len(y[1]) for x, y in zip(a, b)):
        return None
    return [start + 1 + i for (start, la), (_, lb) in zip(a, b) for i, (p, q) in enumerate(zip(la, lb)) if p != q]


def truth_of(name: str, debug_root: Path) -> tuple[Path, dict[int, list[str]], list[str]]:
    fn, make = PROGRAMS[name] if name in PROGRAMS else OPTIONAL[name]
    torch.manual_seed(0)
    if name in OPTIONAL:
        fn = fn()
    args = make()
    base = compile_once(fn, args, Swap(None), debug_root)
    assert base is not None, name
    base_text = (base / "output_code.py").read_text()
    owners: dict[int, list[str]] = {}
    skipped = []
    for node in post_grad_nodes(base):
        swap = Swap(node)
        folder = compile_once(fn, args, swap, debug_root)
        if swap.swapped is None:
            continue  # an op with no swap (a view, var_mean...): its statements are not cases
        changed = changed_lines(base_text, (folder / "output_code.py").read_text()) if folder else None
        if changed is None:
            skipped.append(node)
            continue
        for line in changed:
            owners.setdefault(line, []).append(node)
    return base, owners, skipped


def server_lines(folder: Path) -> dict[int, list[str]]:
    """What the language server maps each generated line to (its index of that graph folder)."""
    from lsp_server.loading.graph_builder import build_graph
    from lsp_server.model import Graph
    graph = Graph(folder.name, folder, "bench")
    build_graph(graph)
    return {kl.line: kl.nodes for k in graph.kernels if k.language == "cpp" for kl in k.lines}


def measure(name: str, debug_root: Path) -> dict:
    base, owners, skipped = truth_of(name, debug_root)
    text = (base / "output_code.py").read_text().splitlines()
    cases = [{"line": line, "text": text[line - 1].strip(), "node": nodes[0]}
             for line, nodes in sorted(owners.items()) if len(nodes) == 1]  # two swaps change it: no single owner
    return score({"program": name, "folder": str(base), "skipped_swaps": skipped, "cases": cases})


def score(result: dict) -> dict:
    """The server's answer for each case (its graph builder on the unswapped run's folder) and the shares."""
    mapped = server_lines(Path(result["folder"]))
    for case in result["cases"]:
        case["answer"] = mapped.get(case["line"], [])
    cases = result["cases"]
    result.update(statements=len(cases), mapped=sum(1 for c in cases if c["answer"]),
                  right=sum(1 for c in cases if c["answer"] == [c["node"]]),
                  misses=[c for c in cases if c["answer"] != [c["node"]]])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where Inductor writes (default: a temp dir)")
    parser.add_argument("--cases", type=Path, default=None, help="write every case (JSON) here")
    parser.add_argument("--only", action="append", default=None)
    parser.add_argument("--score", type=Path, default=None, help="score the cases of an earlier --cases file again")
    options = parser.parse_args()
    if options.score is not None:
        results = [score(r) for r in json.loads(options.score.read_text())]
    else:
        out = options.out or Path(tempfile.mkdtemp(prefix="statement_map_"))
        os.chdir(out)
        torch._dynamo.config.debug_dir_root = str(out / "torch_compile_debug")  # not where the script started
        results = [measure(name, out / "torch_compile_debug") for name in options.only or PROGRAMS]
    total = sum(r["statements"] for r in results)
    mapped, right = sum(r["mapped"] for r in results), sum(r["right"] for r in results)
    for r in results:
        print(f"{r['program']}: {r['statements']} statements, mapped {r['mapped']}, right {r['right']}"
              + (f"; swaps that changed the kernels' shape: {', '.join(r['skipped_swaps'])}" if r["skipped_swaps"] else ""))
        for miss in r["misses"]:
            print(f"  miss: line {miss['line']} `{miss['text']}` is {miss['node']}, answered {miss['answer']}")
    print(f"all: {total} statements; mapped {mapped / max(total, 1):.1%}, right {right / max(total, 1):.1%}")
    if options.cases:
        options.cases.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
