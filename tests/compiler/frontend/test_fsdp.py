"""FSDP2 (`fully_shard`) training steps compiled by lens on gloo, 2 processes (issue 49): eager FSDP2 runs on CPU with
gloo in torch 2.13, and the patterns users write — `torch.compile(model)` of the sharded model, and each block compiled
(`block.compile()`, before or after `fully_shard`) — give eager FSDP2's parameters after several steps.

What lens needs: nothing beyond `backend="lens"`, and no torch setting. torch 2.13 wraps every FSDP2 hook (all-gather
before a module's forward and backward, reshard and reduce-scatter after) in `torch._dynamo.disable` unconditionally
(pytorch#174863 removed traceable FSDP2 and `skip_fsdp_hooks`), so Dynamo breaks the graph at each sharded module's
hooks and lens compiles the compute between them: the unsharded parameters reach each graph as plain tensors (no
DTensor, no FSDP op, no compiled autograd needed). A sharded module whose `forward` is torch's own (an `nn.Linear` given
its own `fully_shard`) runs outside any graph, with any backend: Dynamo skips torch's frames (pytorch#167009)."""
import json
import os
import queue
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.compiler.frontend.gloo_jobs import free_port

STEPS = 3
WORLD = 2


class Block(torch.nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.lin = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.lin(x))


class MLP(torch.nn.Module):
    """Two blocks sharded on their own; the head's parameters belong to the root's `fully_shard`. (No loop over the
    blocks: Dynamo skips a frame whose graph breaks inside a loop, so the root's own compute would run outside lens.)"""

    def __init__(self):
        super().__init__()
        self.block0, self.block1 = Block(32, 64), Block(64, 64)
        self.head = torch.nn.Linear(64, 10)

    @property
    def blocks(self) -> tuple[Block, Block]:
        return self.block0, self.block1

    def forward(self, x):
        return torch.log_softmax(self.head(self.block1(self.block0(x))), dim=1)


def _compile_blocks(model: MLP) -> None:
    for block in model.blocks:
        block.compile(backend="lens")


# pattern -> (what is done before fully_shard, what after; it returns the module to call), graphs lens compiles:
# the whole model: the FSDP hooks break the graph into each block's compute and the root's own (head, log_softmax),
# a forward and a backward each; blocks: each block's forward and backward
PATTERNS = {
    "compile(fully_shard(model))": ((lambda m: None, lambda m: torch.compile(m, backend="lens")), 6),
    "block.compile() then fully_shard": ((_compile_blocks, lambda m: m), 4),
    "fully_shard then block.compile()": ((lambda m: None, lambda m: _compile_blocks(m) or m), 4),
}


def _train(before, after) -> tuple[list[torch.Tensor], list]:
    """Full parameters after STEPS SGD steps of the FSDP2 model on this rank's batches, and the graphs lens compiled."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from compiler import pipeline
    mesh = init_device_mesh("cpu", (WORLD,))
    torch.manual_seed(0)
    model = MLP()
    first = len(pipeline.COMPILED)
    before(model)
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    step_model = after(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(STEPS):
        x, y = torch.randn(16, 32, generator=data), torch.randint(0, 10, (16,), generator=data)
        torch.nn.functional.nll_loss(step_model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return [p.full_tensor() for p in model.parameters()], pipeline.COMPILED[first:]


def _rank(rank: int, port: int, results, debug_root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        from compiler import config, pipeline
        config.debug, config.debug_dir_root = True, debug_root  # (every graph compiled: no cache serves one)
        eager, _ = _train(lambda m: None, lambda m: m)
        report = {}
        for name, ((before, after), _) in PATTERNS.items():
            torch._dynamo.reset()
            eager_before = len(pipeline.EAGER)
            params, compiled = _train(before, after)
            addmms = sum(1 for c in compiled for n in c.gm.graph.nodes if n.target is torch.ops.aten.addmm.default)
            report[name] = (max((p - e).abs().max().item() for p, e in zip(params, eager)), len(compiled), addmms,
                            pipeline.EAGER[eager_before:])
        results.put((rank, report))
    except Exception:  # noqa: BLE001 (the parent reports it)
        results.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


def _fsdp2_available() -> bool:
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch built without gloo")
@pytest.mark.skipif(not _fsdp2_available(), reason="this torch has no torch.distributed.fsdp.fully_shard (FSDP2)")
def test_fsdp2_training_steps_compiled_by_lens_match_eager_fsdp2(tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, results, str(tmp_path))) for r in range(WORLD)]
    for p in procs:
        p.start()
    try:
        reports = dict(results.get(timeout=600) for _ in procs)
    except queue.Empty:
        pytest.fail("a rank gave no result in 600 s (one died, or both wait in a collective)")
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    for rank, report in reports.items():
        assert isinstance(report, dict), f"rank {rank} failed:\n{report}"
        for name, (diff, compiled, addmms, eager_graphs) in report.items():
            assert diff <= 1e-5, f"rank {rank}, {name}: parameters differ from eager FSDP2's by {diff}"
            assert eager_graphs == [], f"rank {rank}, {name}: graphs ran eagerly: {eager_graphs}"
            assert compiled == PATTERNS[name][1], f"rank {rank}, {name}: lens compiled {compiled} graphs"
        # the head's Linear is in a compiled graph only when the root's forward is compiled
        assert {name: r[2] for name, r in report.items()} == dict(zip(PATTERNS, (3, 2, 2))), report

    # one run folder per rank, each saying which rank wrote it, with all that rank's graphs
    runs = sorted(tmp_path.glob("run_*"))
    records = [json.loads((run / "lens" / "run.json").read_text()) for run in runs]
    assert sorted((r["rank"], r["world_size"], r["backend"]) for r in records) == [(0, 2, "gloo"), (1, 2, "gloo")]
    graphs = sum(n for _, n in PATTERNS.values())
    assert [len([g for g in (run / "lens").iterdir() if g.is_dir()]) for run in runs] == [graphs, graphs]
