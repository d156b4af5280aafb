"""The compile progress watcher: a graph still compiling after a while is named, each graph is reported once
when its files land, and run folders that existed before are not reported. (A real run: test_cli.py.)"""
import io
import json

from compiler.tools.compile_progress import SLOW_AFTER_S, CompileProgress


def test_slow_graph_is_named_and_each_graph_reported_once(tmp_path):
    old = tmp_path / "run_old" / "lens" / "graph_0"
    old.mkdir(parents=True)
    (old / "kernel_map.json").write_text(json.dumps({"graph_kind": "inference"}))
    now = [0.0]
    out = io.StringIO()
    progress = CompileProgress(str(tmp_path), {str(tmp_path / "run_old")}, out=out, clock=lambda: now[0])
    graph = tmp_path / "run_new" / "lens" / "graph_1"
    graph.mkdir(parents=True)
    progress.poll()
    now[0] = SLOW_AFTER_S + 1
    progress.poll()
    progress.poll()  # named once per interval, not once per poll
    (graph / "kernel_map.json").write_text(json.dumps({"graph_kind": "backward"}))
    eager = tmp_path / "run_new" / "lens" / "graph_2"
    eager.mkdir()
    (eager / "notes.txt").write_text("graph_2 runs eagerly (no generated code): why\n")
    progress.poll()
    progress.poll()
    assert out.getvalue().splitlines() == [
        f"kernel-lens: compiling graph_1... ({SLOW_AFTER_S + 1:.0f} s so far; 0 graph(s) done)",
        "kernel-lens: compiled graph_1 (backward); 1 graph(s) so far",
        "kernel-lens: graph_2 runs eagerly (no generated code); 2 graph(s) so far",
    ]
