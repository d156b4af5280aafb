"""Statement -> FX node mapping of real Inductor kernels (issue 45), C++ on CPU and Triton on GPU: the share of a
kernel's statements the server maps, and the share it maps to the right node, on real `TORCH_COMPILE_DEBUG=1` runs.

Ground truth, built by Inductor itself: each program is compiled once as it is, then once per post-grad node with
that node's op swapped for another of the same signature (exp -> expm1, add -> sub, sum -> amax...; Inductor's
`post_grad_custom_post_pass`); the statements of the generated kernels that change are that node's. A statement only
one swap changes is a case; the server (lsp_server's graph builder, on the unswapped run's folder) must map it to
that node. "one of: a, b" answers count as mapped, not as right. Cases are written as JSON (--cases) for the tests.

    python benchmarks/statement_map_bench.py [--out DIR] [--cases FILE] [--only NAME] [--score CASES]
    python benchmarks/statement_map_bench.py --device cuda --jobs 15 --truth-only --cases FILE   # on a GPU machine
    python benchmarks/statement_map_bench.py --score tests/fixtures/inductor_statements_triton  # its committed runs

(--truth-only needs only torch and triton; tests/fixtures/inductor_statements/regenerate.py --device cuda writes the
committed fixture from it, and tests/lsp_server/test_statement_cases.py scores it.)

Measured, CPU C++ (torch 2.13 CPU Inductor, AMD EPYC Zen 5): the six CPU programs below and `--only gpt2`
(transformers' GPT2Model, one layer): 149 statement cases, mapped 100%, right 100%, no misses.

Measured, GPU Triton (torch 2.11 + triton 3.6 on one NVIDIA H100, tests/fixtures/inductor_statements_triton): the
same seven, `attention` and four `_wide` programs (rows of 4096-8192: looped reductions, Welford): 183 statement
cases, mapped 100% (183), right 100% (183), no misses. (Until an extern call's buffer held the nodes its own
provenance entry names, one was missed: gpt2 line 640 `tmp3 = tmp1 + tmp2`, the bias add after the MLP's mm, read
an `extern_kernels.mm` whose nodes came from a source-node comment, and `add_11` tied with `add_tensor`.)

The cases were also what the mapping was developed against (there is no held-out set); swaps that change a kernel's
shape (exp -> sin in the softmax kernels, a boolean mul, relu on GPU) give no cases, so those nodes' statements are
checked by tests/lsp_server/test_inductor_statements.py.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCH_COMPILE_DEBUG", "1")

import torch
import torch.nn.functional as F

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


def attention(x, wq, wk, wv, mask):
    q, k, v = x @ wq, x @ wk, x @ wv
    s = (q @ k.transpose(-1, -2)) / 8.0 + (1.0 - mask) * -10000.0
    return torch.softmax(s, dim=-1) @ v + x


def gpt2(device: str = "cpu"):
    """transformers' GPT2Model of one layer from a small config, random weights (embeddings, attention, MLP)."""
    from transformers import GPT2Config, GPT2Model
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=100, n_positions=32)
    model = GPT2Model(config).eval().to(device)

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
    "attention": (attention, lambda: (torch.randn(2, 16, 64), torch.randn(64, 64), torch.randn(64, 64),
                                      torch.randn(64, 64), (torch.rand(2, 1, 16) > 0.2).float())),
}
OPTIONAL = {"gpt2": (gpt2, lambda: (torch.randint(0, 100, (1, 8)),))}  # --only gpt2 (transformers)
# Rows too long for one block: on GPU, Triton's looped reductions (`_tmp2` accumulators, Welford's) and split ones.
PROGRAMS |= {
    "mix_wide": (mix, lambda: (torch.randn(64, 8192), torch.randn(8192), torch.randn(8192))),
    "rms_norm_wide": (rms_norm, lambda: (torch.randn(64, 8192), torch.randn(8192))),
    "log_softmax_gate_wide": (log_softmax_gate, lambda: (torch.randn(64, 8192), torch.randn(64, 8192))),
    "block_wide": (block, lambda: (torch.randn(64, 4096), torch.randn(4096, 64), torch.randn(64, 4096),
                                   torch.randn(4096), torch.randn(4096))),
}


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


def program(name: str, device: str) -> tuple:
    """The program `name` and its arguments on `device`, the same in every process (seeded)."""
    fn, make = PROGRAMS[name] if name in PROGRAMS else OPTIONAL[name]
    torch.manual_seed(0)
    if name in OPTIONAL:
        fn = fn(device)
    return fn, tuple(a.to(device) for a in make())


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


def start_worker(root: str) -> None:
    """Each worker process writes its Inductor runs under a folder of its own."""
    torch._dynamo.config.debug_dir_root = str(Path(root) / f"worker_{os.getpid()}")


def compile_swapped(name: str, device: str, node: str | None) -> tuple[str | None, str | None]:
    """In a worker: program `name` compiled with `node`'s op swapped (None: as it is) -> (its graph folder, the
    op swapped in; None when the node has no swap)."""
    fn, args = program(name, device)
    swap = Swap(node)
    folder = compile_once(fn, args, swap, Path(torch._dynamo.config.debug_dir_root))
    return (str(folder) if folder else None), swap.swapped


POST_GRAD_NODE = re.compile(r"^\s+(?P<name>\w+)(?::[^=]*)?= torch\.ops\.(?P<target>\w+\.\w+\.\w+)\(", re.MULTILINE)


def post_grad_nodes(folder: Path) -> list[str]:
    """The nodes of the kernels, as Inductor's provenance lists them, less those whose op (in the post-grad graph,
    fx_graph_transformed.py) has no swap: compiling them again would change nothing."""
    data = json.loads((folder / "inductor_provenance_tracking_node_mappings.json").read_text())
    nodes = sorted({n for nodes in data.get("cppCodeToPost", {}).values() for n in nodes})
    transformed = folder / "fx_graph_transformed.py"
    text = transformed.read_text() if transformed.is_file() else ""
    targets = {m["name"]: m["target"] for m in POST_GRAD_NODE.finditer(text)}
    swappable = {str(op) for op, other in SWAPS.items() if other is not op}
    return [n for n in nodes if n not in targets or targets[n] in swappable]


KERNEL_DEF = re.compile(r"^(?P<name>cpp_fused_\w+|triton_\w+) = async_compile")


def kernel_bodies(text: str) -> list[tuple[int, list[str], int]]:
    """Each generated kernel's (first line, lines, index of its first statement) in order; a swap renames the
    kernel, so its name reads `KERNEL`. A Triton kernel's statements follow its `def` (not its decorator)."""
    lines, found, current, name = text.splitlines(), [], None, ""
    for number, line in enumerate(lines, start=1):
        start = KERNEL_DEF.match(line)
        if start:
            current, name = (number, [], 0), start["name"]
            found.append(current)
        elif current is not None:
            if line.startswith("'''"):
                current = None
            else:
                current[1].append(line.replace(name, "KERNEL"))
    return [(first, body, next((i + 1 for i, l in enumerate(body) if l.startswith("def ")), 0))
            for first, body, _ in found]


def changed_lines(base: str, swapped: str) -> list[int] | None:
    """Lines (1-based, of `base`) of statements that differ; None where the kernels' shape changed."""
    a, b = kernel_bodies(base), kernel_bodies(swapped)
    if len(a) != len(b) or any(len(x[1]) != len(y[1]) for x, y in zip(a, b)):
        return None
    return [start + 1 + i for (start, la, first), (_, lb, _) in zip(a, b)
            for i, (p, q) in enumerate(zip(la, lb)) if p != q and i >= first]


def truth(names: list[str], device: str, debug_root: Path, jobs: int, save: Path | None = None) -> list[dict]:
    """Each program's unswapped run and its cases: the statements exactly one node's swap changes. The
    compilations run in `jobs` processes (a GPU run's Triton compiles are slow); `save` gets the programs done
    so far after each (a run cut short keeps them)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=start_worker,
                             initargs=(str(debug_root),)) as pool:
        bases = dict(zip(names, pool.map(compile_swapped, names, [device] * len(names), [None] * len(names))))
        tasks = {}
        for name in names:
            assert bases[name][0] is not None, f"{name} did not compile"
            for node in post_grad_nodes(Path(bases[name][0])):
                tasks[name, node] = pool.submit(compile_swapped, name, device, node)
        results = []
        for name in names:
            base = Path(bases[name][0])
            base_text = (base / "output_code.py").read_text()
            owners: dict[int, list[str]] = {}
            skipped = []
            for node in [n for p, n in tasks if p == name]:
                folder, swapped = tasks[name, node].result()
                if swapped is None:
                    continue  # an op with no swap (a view, var_mean...): its statements are not cases
                changed = changed_lines(base_text, Path(folder, "output_code.py").read_text()) if folder else None
                if changed is None:
                    skipped.append(node)
                    continue
                for line in changed:
                    owners.setdefault(line, []).append(node)
            text = base_text.splitlines()
            cases = [{"line": line, "text": text[line - 1].strip(), "node": nodes[0]}
                     for line, nodes in sorted(owners.items()) if len(nodes) == 1]  # two swaps change it: no owner
            results.append({"program": name, "folder": str(base), "skipped_swaps": skipped, "cases": cases})
            print(f"{name}: {len(cases)} cases", flush=True)
            if save is not None:
                save.write_text(json.dumps(results, indent=1) + "\n")
    return results


def server_lines(folder: Path) -> dict[int, list[str]]:
    """What the language server maps each generated line to (its index of that graph folder)."""
    from lsp_server.loading.graph_builder import build_graph
    from lsp_server.model import Graph
    graph = Graph(folder.name, folder, "bench")
    build_graph(graph)
    return {kl.line: kl.nodes for k in graph.kernels if k.language != "python" for kl in k.lines}


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


def report(results: list[dict]) -> None:
    total = sum(r["statements"] for r in results)
    mapped, right = sum(r["mapped"] for r in results), sum(r["right"] for r in results)
    for r in results:
        skipped = f"; swaps that changed the kernels' shape: {', '.join(r['skipped_swaps'])}" * bool(r["skipped_swaps"])
        print(f"{r['program']}: {r['statements']} statements, mapped {r['mapped']}, right {r['right']}{skipped}")
        for miss in r["misses"]:
            print(f"  miss: line {miss['line']} `{miss['text']}` is {miss['node']}, answered {miss['answer']}")
    print(f"all: {total} statements; mapped {mapped / max(total, 1):.1%}, right {right / max(total, 1):.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where Inductor writes (default: a temp dir)")
    parser.add_argument("--cases", type=Path, default=None, help="write every case (JSON) here")
    parser.add_argument("--only", action="append", default=None)
    parser.add_argument("--score", type=Path, default=None,
                        help="score an earlier --cases file, or a fixture folder (its cases.json), again")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="cuda: Triton kernels")
    parser.add_argument("--jobs", type=int, default=1, help="processes compiling at once")
    parser.add_argument("--truth-only", action="store_true", help="write the cases unscored (no lsp_server needed)")
    options = parser.parse_args()
    if options.score is not None and options.score.is_dir():  # a committed fixture: cases.json beside its runs
        skipped = json.loads((options.score / "skipped_swaps.json").read_text()) \
            if (options.score / "skipped_swaps.json").is_file() else {}
        results = [{"program": name, "folder": str(options.score / name), "skipped_swaps": skipped.get(name, []),
                    "cases": cases} for name, cases in json.loads((options.score / "cases.json").read_text()).items()]
    elif options.score is not None:
        results = json.loads(options.score.read_text())
    else:
        out = (options.out or Path(tempfile.mkdtemp(prefix="statement_map_"))).resolve()
        out.mkdir(parents=True, exist_ok=True)
        os.chdir(out)
        if options.jobs > 1:  # each process compiles its Triton/C++ kernels itself, not in a pool of its own
            os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        results = truth(options.only or list(PROGRAMS), options.device, out / "torch_compile_debug", options.jobs,
                        options.cases)
    if not options.truth_only:
        results = [score(r) for r in results]
        report(results)
    if options.cases:
        options.cases.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
