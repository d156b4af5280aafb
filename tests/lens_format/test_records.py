"""kernel_map.json, profile.json, why.json, symbols.json and notes.txt through the format package: every file of
the committed lens_foo1 fixture reads back into records whose `to_json` is the file, and bad files become
ParseErrors naming the file or are skipped field by field — never another exception."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from lens_format.errors import ParseError, UnsupportedVersionError
from lens_format.jsonio import SourceRef
from lens_format.kernel_map import KernelArg, KernelMap, MappedKernel, MappedLine, MappedNode, read_kernel_map
from lens_format.notes import EagerNote, ExternNote, GraphNotes, read_notes
from lens_format.profile import CategoryTime, EagerOp, GraphProfile, KernelTime, read_profile
from lens_format.symbols import ShapeSymbol, SymbolTable, read_symbols
from lens_format.why import WhyFile, WhyFix, WhyRecord, read_why

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "lens_foo1" / "runs"
READERS = {"kernel_map.json": lambda p: read_kernel_map(p).to_json(), "profile.json": lambda p: read_profile(p).to_json(),
           "why.json": lambda p: read_why(p).to_json(),
           "symbols.json": lambda p: SymbolTable(read_symbols(p)).to_json()}


@pytest.mark.parametrize("name", sorted(READERS))
def test_the_fixture_files_read_back_into_records_that_write_them_again(name: str):
    paths = sorted(RUNS.rglob(name))
    assert paths or name == "symbols.json"  # foo1 has static sizes: no symbols.json
    for path in paths:
        assert READERS[name](path) == json.loads(path.read_text()), path


def _kernel_map() -> KernelMap:
    args = [KernelArg("in_ptr0", "in", "bfloat16", "arg0_1", [8, "s0"], "lens_bf16", "float32"),
            KernelArg("in_out_ptr0", "in_out", "float32", "buf0", [8], "float", output="mul"),
            KernelArg("s0", "size", "int64")]
    return KernelMap("graph_0", "compile_error", "backward",
                     [MappedNode("neg", "aten.neg.default", 4, SourceRef("/w/x.py", 3, "f", "a = -x")),
                      MappedNode("mm", "aten.mm.default", 5, None)],
                     [MappedKernel("cpp_fused_neg_0", "pointwise", 20, 41, ["neg"], [MappedLine(31, ["neg"])],
                                   args=args),
                      MappedKernel("extern_buf1_mm", "extern", 50, 50, ["mm"], target="aten.mm.default"),
                      MappedKernel("cpp_old_1", "reduction", 60, 70, [], args=None)])


def test_a_kernel_map_reads_back_as_written_and_answers_line_questions(tmp_path: Path):
    kmap = _kernel_map()
    path = tmp_path / "kernel_map.json"
    path.write_text(json.dumps(kmap.to_json()))
    read = read_kernel_map(path)
    assert read == kmap and read.path == path
    data = kmap.to_json()
    assert data["kernels"][0]["args"][2] == {"name": "s0", "role": "size", "dtype": "int64"}  # no buffer, no shape
    assert "args" not in data["kernels"][2] and data["kernels"][1]["target"] == "aten.mm.default"
    assert kmap.kernel_at(30).name == "cpp_fused_neg_0" and kmap.nodes_at(35) == ["neg"]
    assert kmap.nodes_at(25) == ["neg"] and kmap.kernel_at(45) is None and kmap.nodes_at(45) == []
    assert kmap.node("mm").source is None and kmap.kernel_of("mm").kind == "extern"


def test_a_malformed_kernel_map_keeps_what_it_can(tmp_path: Path):
    path = tmp_path / "kernel_map.json"
    path.write_text(json.dumps({"version": 1, "graph_id": 3, "nodes": [{"target": "x"}, "junk", {"name": "a"}],
                                "kernels": [{"name": "k", "output_code_lines": [1], "lines": [{"nodes": ["a"]}],
                                             "args": [{"role": "in"}, {"name": "x", "shape": [True, 2]}]}]}))
    read = read_kernel_map(path)
    assert (read.graph_id, read.status, [n.name for n in read.nodes]) == ("", "ok", ["a"])
    (k,) = read.kernels
    assert (k.kind, k.start_line, k.lines, [a.name for a in k.args], k.args[0].shape) == \
        ("pointwise", None, [], ["x"], [2])
    path.write_text('{"version": 1, "kernels": [')  # cut short while written
    with pytest.raises(ParseError, match="kernel_map.json:1: invalid JSON"):
        read_kernel_map(path)
    path.write_text(json.dumps({"version": "2.0"}))
    with pytest.raises(UnsupportedVersionError, match="unsupported version"):
        read_kernel_map(path)


def test_a_profile_reads_back_as_written_with_its_speedup(tmp_path: Path):
    profile = GraphProfile("graph_0", 1.2, 0.4, None, 50, 0.45,
                           [KernelTime("cpp_fused_neg_0", "pointwise", 1, 0.35, 87.5, 0.3)],
                           [CategoryTime("pointwise", 0.35, 87.5)], [EagerOp("aten::neg", 1, 0.2, 0.2)])
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile.to_json()))
    read = read_profile(path)
    assert read.speedup == pytest.approx(3.0) and read.kernels == profile.kernels and read.eager_ops == profile.eager_ops
    assert "device" not in profile.to_json()  # only real Inductor's profiles, made by the server, have one
    path.write_text(json.dumps({"version": 1, "graph_id": "g", "kernels": [{"name": "k", "calls": "3"}, {"kind": "x"}],
                                "compiled_ms": "fast"}))
    read = read_profile(path)
    assert (read.compiled_ms, read.kernels) == (None, [KernelTime("k", "", 0, 0.0, 0.0)])


def test_why_records_keep_unknown_kinds_and_drop_unusable_ones(tmp_path: Path):
    fix = WhyFix("Set compiler.config.max_fusion_size = 4", "max_fusion_size", 4)
    why = WhyFile("graph_0", [WhyRecord("not_fused", ("amax", "add"), "max_fusion_size", "did not join", "k1", fix,
                                        ("neg",)),
                              WhyRecord("from_the_future", (), "", "something new")])
    path = tmp_path / "why.json"
    path.write_text(json.dumps(why.to_json()))
    assert read_why(path) == why
    assert "related" not in why.records[1].to_json() and why.records[1].to_json()["fix"] is None
    path.write_text(json.dumps({"version": 1, "records": [{"kind": "aten_call"}, 7, {"kind": "aten_call",
                                "message": "m", "fix": {"setting": "x", "value": [1]}, "kernel": 3}]}))
    (only,) = read_why(path).records
    assert (only.fix, only.kernel, only.origin) == (None, None, "why.json")


def test_symbols_are_written_sorted_and_read_with_open_ranges(tmp_path: Path):
    table = SymbolTable([ShapeSymbol("u0", "", 0, None, None), ShapeSymbol("s77", "L['x'].size()[0]", 2, None, 8,
                                                                            ("Eq(Mod(s77, 4), 0)",))])
    data = table.to_json()
    assert [s["name"] for s in data["symbols"]] == ["s77", "u0"] and data["symbols"][1]["source"] is None
    path = tmp_path / "symbols.json"
    path.write_text(json.dumps(data))
    s77, u0 = read_symbols(path)
    assert s77 == table.symbols[1] and u0 == table.symbols[0]
    assert (s77.range_text, s77.described, u0.described) == ("[2, ∞)", "batch dimension of `x`", "`u0`")
    path.write_text(json.dumps({"version": 1, "symbols": [{"name": ""}, {"name": "s1", "range": "wide"}]}))
    assert read_symbols(path) == [ShapeSymbol("s1", "", None, None, None)]


def test_notes_write_the_lines_readers_parse(tmp_path: Path):
    notes = GraphNotes([ExternNote("mm", "aten.mm.default", "no lowering for aten.mm.default"),
                        ExternNote("tanh", "aten.tanh.default", "lowering failed: (a) (b)")],
                       EagerNote("graph_1", "node ge: SymBool Eq(Mod(s0, 3), 0) is not a size"), ["for people"])
    path = tmp_path / "notes.txt"
    path.write_text(notes.to_text())
    read = read_notes(path)
    assert [(n.node, n.target, n.reason, n.line) for n in read.externs] == \
        [("mm", "aten.mm.default", "no lowering for aten.mm.default", 1),
         ("tanh", "aten.tanh.default", "lowering failed: (a) (b)", 2)]
    assert (read.eager.graph_id, read.eager.reason, read.other) == ("graph_1", notes.eager.reason, ["for people"])
    assert GraphNotes().to_text() == ""
    with pytest.raises(ParseError, match="cannot read"):
        read_notes(tmp_path / "missing" / "notes.txt")


def test_a_tensors_manifest_reads_back_and_skips_nameless_entries(tmp_path: Path):
    from lens_format.tensors import SavedFile, SkippedFile, TensorManifest, read_manifest
    manifest = TensorManifest("graph_0", 1 << 28, files=[SavedFile("tensors/inputs.pt", "graph inputs", 512)],
                              skipped=[SkippedFile("tensors/kernels/k.pt", "kernel k", 1 << 29, "over the cap")])
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest.to_json()))
    assert read_manifest(path) == manifest
    path.write_text(json.dumps({"version": 1, "graph_id": "g", "max_bytes": "lots", "files": [{"what": "x"}]}))
    assert read_manifest(path) == TensorManifest("g", 0, "", [], [])
