"""DistributedDataParallel training steps compiled by lens on gloo, 2 processes: both patterns users write,
`DDP(torch.compile(model))` and `torch.compile(DDP(model))` (in both, torch's DDP optimizer splits the graph at bucket
boundaries and lens compiles each piece), give eager DDP's parameters after several steps (issue 49)."""
import json
import os
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.compiler.frontend.gloo_jobs import free_port

STEPS = 3


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # 512x512 weights (1 MiB each) against 1 MiB buckets: the DDP optimizer splits the graph in two pieces
        self.a, self.c, self.b = torch.nn.Linear(32, 512), torch.nn.Linear(512, 512), torch.nn.Linear(512, 10)

    def forward(self, x):
        return torch.log_softmax(self.b(torch.relu(self.c(torch.relu(self.a(x))))), dim=1)


def _train(wrap) -> tuple[list[torch.Tensor], int]:
    """Parameters after STEPS SGD steps of `wrap(model)` on this rank's batches, and how many graphs lens compiled."""
    from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: F401 (wrap's)
    from compiler import pipeline
    torch.manual_seed(0)
    model = MLP()
    before = len(pipeline.COMPILED)
    step_model = wrap(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(dist.get_rank())
    for _ in range(STEPS):
        x, y = torch.randn(16, 32, generator=data), torch.randint(0, 10, (16,), generator=data)
        torch.nn.functional.nll_loss(step_model(x), y).backward()
        opt.step()
        opt.zero_grad()
    return [p.detach().clone() for p in model.parameters()], len(pipeline.COMPILED) - before


def _rank(rank: int, port: int, results, debug_root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
        from compiler import config, pipeline
        config.debug, config.debug_dir_root = True, debug_root  # (a debug folder per rank)
        eager, _ = _train(lambda m: DDP(m))
        report = {}
        patterns = {
            "DDP(compile)": lambda m: DDP(torch.compile(m, backend="lens")),
            "compile(DDP)": lambda m: torch.compile(DDP(m, bucket_cap_mb=1), backend="lens"),
        }
        for name, wrap in patterns.items():
            torch._dynamo.reset()
            eager_before = len(pipeline.EAGER)
            params, compiled = _train(wrap)
            report[name] = (max((p - e).abs().max().item() for p, e in zip(params, eager)), compiled,
                            pipeline.EAGER[eager_before:])
        results.put((rank, report))
    except Exception:  # noqa: BLE001 (the parent reports it)
        results.put((rank, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(), reason="torch built without gloo")
def test_ddp_training_steps_compiled_by_lens_match_eager_ddp(tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, results, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    reports = dict(results.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    for rank, report in reports.items():
        assert isinstance(report, dict), f"rank {rank} failed:\n{report}"
        for pattern, (diff, compiled, eager_graphs) in report.items():
            assert diff <= 1e-5, f"rank {rank}, {pattern}: parameters differ from eager DDP's by {diff}"
            assert eager_graphs == [], f"rank {rank}, {pattern}: graphs ran eagerly: {eager_graphs}"
        # the DDP optimizer splits the graph in both patterns (a compile inside DDP's forward finds it active): a
        # forward and a backward graph per piece, each compiled by lens
        assert report["DDP(compile)"][1] == 4 and report["compile(DDP)"][1] == 4, report

    # one run folder per rank, each saying which rank wrote it, with that rank's 8 graphs
    runs = sorted(tmp_path.glob("run_*"))
    records = [json.loads((run / "lens" / "run.json").read_text()) for run in runs]
    assert sorted((r["rank"], r["world_size"], r["backend"]) for r in records) == [(0, 2, "gloo"), (1, 2, "gloo")]
    assert [len([g for g in (run / "lens").iterdir() if g.is_dir()]) for run in runs] == [8, 8]
    assert sorted(r["pid"] for r in records) == sorted(p.pid for p in procs)
