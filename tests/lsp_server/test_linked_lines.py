"""Linked highlighting and per-line cost through the real server on the lens_foo1 fixture: the source lines and
the generated lines they became (kernelLens.linkedLines), the prelude as a folding range, each line's share
and ms with how it was split (kernelLens.lineCosts), and the profile's lines sorted by cost."""
from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from lens_foo1_fixture import KERNEL, KERNEL_CAT_LINE, KERNEL_MAX_LINE, KERNEL_NEG_LINE, KERNEL_START, KERNEL_TIMED
from test_server_lens import CAT_LINE, MAX_LINE, NEG_LINE, doc, graph_dir


async def command(client: LanguageClient, name: str, argument: dict):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(name, [argument]))


async def test_linked_lines_both_ways_with_one_band_per_source_line(lens_client: LanguageClient, lens_workspace: Path):
    source, generated = lens_workspace / "foo1.py", graph_dir(lens_workspace) / "output_code.py"
    linked = await command(lens_client, "kernelLens.linkedLines", {"uri": source.as_uri()})
    assert linked["source_uri"] == source.as_uri() and linked["generated_uri"] == generated.as_uri()
    by_line = {link["source_line"]: link for link in linked["links"]}
    assert sorted(by_line) == [NEG_LINE, MAX_LINE, CAT_LINE]
    assert KERNEL_NEG_LINE in by_line[NEG_LINE]["generated_lines"]
    assert KERNEL_MAX_LINE in by_line[MAX_LINE]["generated_lines"]
    assert KERNEL_CAT_LINE in by_line[CAT_LINE]["generated_lines"]
    assert [by_line[n]["band"] for n in (NEG_LINE, MAX_LINE, CAT_LINE)] == [0, 1, 2]
    assert linked["prelude"] == {"start": 0, "end": KERNEL_START - 1}
    from_kernel = await command(lens_client, "kernelLens.linkedLines", {"uri": generated.as_uri()})
    assert from_kernel["links"] == linked["links"] and from_kernel["source_uri"] == source.as_uri()


async def test_the_prelude_is_a_folding_range_of_output_code(lens_client: LanguageClient, lens_workspace: Path):
    ranges = await lens_client.text_document_folding_range_async(types.FoldingRangeParams(
        doc(graph_dir(lens_workspace) / "output_code.py")))
    assert (ranges[0].start_line, ranges[0].end_line) == (0, KERNEL_START - 1)
    assert any(r.start_line == KERNEL_START for r in ranges[1:])
    assert await lens_client.text_document_folding_range_async(types.FoldingRangeParams(
        doc(lens_workspace / "foo1.py"))) is None  # the editor's own folding for user files


async def test_line_costs_say_how_a_kernel_time_was_split(lens_client: LanguageClient, lens_workspace: Path):
    costs = await command(lens_client, "kernelLens.lineCosts", {"uri": (lens_workspace / "foo1.py").as_uri()})
    assert {entry["line"] for entry in costs["lines"]} == {NEG_LINE, MAX_LINE, CAT_LINE}
    entry = costs["lines"][0]
    (kernel,) = entry["kernels"]
    assert kernel["name"] == KERNEL and kernel["lines_sharing"] == 3
    assert abs(entry["ms"] - KERNEL_TIMED["total_ms"] / 3) < 1e-12
    assert abs(entry["percent"] - KERNEL_TIMED["percent"] / 3) < 1e-9
    assert "split evenly" in costs["measures"]
    profile = await command(lens_client, "kernelLens.getProfile", {})
    lines = profile["lines"]
    assert [line["line"] for line in lines] and {line["line"] for line in lines} == {NEG_LINE, MAX_LINE, CAT_LINE}
    assert lines[0]["file"] == "foo1.py" and lines[0]["kernels"] == [KERNEL] and lines[0]["code"]
    assert [line["percent"] for line in lines] == sorted((line["percent"] for line in lines), reverse=True)
