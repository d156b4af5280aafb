"""The run diff as a pure function over records (lens_format.run_diff): matching by source and target, not by
name; the server, diffing from its index, answers what the files say; saved tensors compared without torch."""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

from lens_format.jsonio import SourceRef
from lens_format.kernel_map import read_kernel_map
from lens_format.profile import read_profile
from lens_format.run_diff import DiffGraph, diff_runs, graph_from_records
from lens_format.tensors import outputs_by_bytes, same_bits
from lsp_server.loading.run_loader import load_run
from lsp_server.reports.run_diff import lens_graphs

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "lens_foo1" / "runs"
FAILED, MISMATCH, PROFILED = sorted(RUNS.iterdir())  # g++ error (op override), accuracy mismatch, profiled


def _src(line: int, code: str) -> SourceRef:
    return SourceRef("/w/prog.py", line, "f", code)


def _graph(path: str, kernels: list[tuple[str, list[str]]], code: dict[str, str] | None = None,
           line_shift: int = 0) -> DiffGraph:
    nodes = [("add", "aten.add.Tensor", _src(3 + line_shift, "y = a + b")),
             ("mul", "aten.mul.Tensor", _src(4 + line_shift, "z = y * 2")),
             ("relu", "aten.relu.default", _src(5 + line_shift, "return z.relu()"))]
    code = code or {}
    lines = [code.get(name, "body") for name, _ in kernels]
    return DiffGraph.build("graph_0", path, nodes, [(name, "pointwise", members, i + 1, i + 1)
                                                    for i, (name, members) in enumerate(kernels)],
                           lines, {name: 0.1 for name, _ in kernels}, 0.5)


def test_a_split_kernel_is_found_by_source_and_target_even_when_lines_and_names_move():
    a = _graph("/a/graph_0", [("cpp_fused_add_mul_relu_0", ["add", "mul", "relu"])])
    b = _graph("/b/graph_0", [("cpp_fused_add_mul_0", ["add", "mul"]), ("cpp_fused_relu_1", ["relu"])],
               line_shift=2)  # an edit above the function moved every line
    doc = diff_runs("/a", [a], "/b", [b])
    (graph,) = doc["graphs"]
    (change,) = graph["kernels"]
    assert (change["change"], change["a"], change["b"]) == \
        ("split", ["cpp_fused_add_mul_relu_0"], ["cpp_fused_add_mul_0", "cpp_fused_relu_1"])
    assert graph["nodes_added"] == graph["nodes_removed"] == [] and doc["changed"] is True
    assert doc["summary"]["fused_differently"] == 1 and change["time_ms"] == {"a": 0.1, "b": 0.2}
    assert graph["outputs"]["status"] == "not_saved"  # no comparison given


def test_same_nodes_with_other_code_is_a_code_change_and_identical_runs_are_the_same():
    a = _graph("/a/graph_0", [("k0", ["add", "mul", "relu"])], {"k0": "auto t = a + b; // k0"})
    b = _graph("/b/graph_0", [("k7", ["add", "mul", "relu"])], {"k7": "auto t = b + a; // k7"})
    (change,) = diff_runs("/a", [a], "/b", [b])["graphs"][0]["kernels"]
    assert change["change"] == "code_changed" and "-auto t = a + b; // KERNEL" in change["code_diff"]
    same = diff_runs("/a", [a], "/a2", [_graph("/a2/graph_0", [("k3", ["add", "mul", "relu"])],
                                                {"k3": "auto t = a + b; // k3"})])
    assert same["changed"] is False and same["summary"]["kernels_same"] == 1


def test_the_server_diffs_from_its_index_what_the_files_say():
    def from_files(run: Path) -> list[DiffGraph]:
        graph = run / "lens" / "graph_0"
        profile = read_profile(graph / "profile.json") if (graph / "profile.json").exists() else None
        return [graph_from_records(str(graph), read_kernel_map(graph / "kernel_map.json"),
                                   (graph / "output_code.py").read_text().splitlines(True), profile)]

    for a, b in ((FAILED, PROFILED), (MISMATCH, PROFILED), (PROFILED, PROFILED)):
        indexed = diff_runs(str(a), lens_graphs(load_run(a)), str(b), lens_graphs(load_run(b)))
        # the index holds absolute, normalised source paths; the files hold what the compiler saw
        assert _file_names(indexed) == _file_names(diff_runs(str(a), from_files(a), str(b), from_files(b)))
    changed = diff_runs(str(FAILED), from_files(FAILED), str(PROFILED), from_files(PROFILED))
    assert changed["changed"] and changed["graphs"][0]["kernels"][0]["change"] == "code_changed"  # the override


def _file_names(doc: object) -> object:
    if isinstance(doc, dict):
        return {k: Path(v).name if k == "file" else _file_names(v) for k, v in doc.items()}
    return [_file_names(v) for v in doc] if isinstance(doc, list) else doc


def _save(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(f"{path.stem}/{name}", data)


def test_saved_outputs_are_same_only_when_their_bytes_say_so(tmp_path: Path):
    a, b = _graph(str(tmp_path / "a"), [("k", ["add"])]), _graph(str(tmp_path / "b"), [("k", ["add"])])
    assert outputs_by_bytes(a, b).status == "not_saved"
    for side, run_id in (("a", b"1"), ("b", b"2")):  # torch.save writes a fresh id into every file
        for name in ("inputs", "outputs"):
            _save(tmp_path / side / "tensors" / f"{name}.pt", {"data.pkl": b"P", "data/0": b"\x00\x01",
                                                               ".data/serialization_id": run_id})
    assert same_bits(tmp_path / "a/tensors/outputs.pt", tmp_path / "b/tensors/outputs.pt") is True
    assert outputs_by_bytes(a, b).to_json() == {"status": "same", "max_abs_error": 0.0, "max_rel_error": 0.0}
    _save(tmp_path / "b/tensors/outputs.pt", {"data.pkl": b"P", "data/0": b"\x00\x02"})
    assert outputs_by_bytes(a, b).status == "not_compared"  # only torch can say how far apart
    shutil.copy(tmp_path / "a/tensors/outputs.pt", tmp_path / "b/tensors/outputs.pt")
    _save(tmp_path / "b/tensors/inputs.pt", {"data.pkl": b"P", "data/0": b"\x09"})
    assert outputs_by_bytes(a, b).status == "not_compared"  # same outputs from other inputs
    (tmp_path / "b/tensors/inputs.pt").write_text("cut short")
    assert same_bits(tmp_path / "a/tensors/inputs.pt", tmp_path / "b/tensors/inputs.pt") is None
