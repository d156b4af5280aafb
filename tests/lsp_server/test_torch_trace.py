"""TraceReader on real TORCH_TRACE logs: records, interning, incremental reads, truncation, restarts, garbage."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_server.parsers.torch_trace.logs_dir import TraceDirectory
from lsp_server.parsers.torch_trace.payloads import parse_graph_break, parse_recompile_reasons
from lsp_server.parsers.torch_trace.reader import TraceReader, decode_payload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "torch_trace"
SINGLE = FIXTURES / "breaks_recompile_failure" / "dedicated_log_torch_trace_single.log"
INDUCTOR = FIXTURES / "inductor_small" / "dedicated_log_torch_trace_single.log"
RANK1 = FIXTURES / "two_ranks" / "dedicated_log_torch_trace_rank_1.log"


def _header_count(data: bytes) -> int:
    """Records in a log by its framing: every line not starting with a tab opens one."""
    return sum(1 for ln in data.split(b"\n") if ln and not ln.startswith(b"\t"))


def _read_all(path: Path) -> tuple[list, TraceReader]:
    reader = TraceReader(path)
    records = reader.read_new()
    records += reader.finish()
    return records, reader


def _fingerprint(records) -> list[tuple]:
    return [(r.offset, r.kind, r.compile_key, r.payload_text,
             r.payload.length if r.payload else None) for r in records]


def test_reads_every_record_of_a_real_log():
    data = SINGLE.read_bytes()
    records, reader = _read_all(SINGLE)
    interned = data.count(b'{"str": [')
    assert len(records) == _header_count(data) - interned  # `str` records only feed the file table
    assert reader.skipped_count == 0
    assert reader.offset == len(data)
    kinds = {r.kind for r in records}
    assert {"dynamo_start", "compilation_metrics", "dynamo_graph_break_reason", "recompile_reasons",
            "dynamo_output_graph", "chromium_event"} <= kinds


def test_interned_filenames_resolve_in_stacks():
    records, _ = _read_all(SINGLE)
    starts = [r for r in records if r.kind == "dynamo_start"]
    assert starts and all(r.stack for r in starts)
    assert all(fr.file.endswith("breaks_recompile_failure.py") for r in starts for fr in r.stack)
    assert starts[0].stack[-1].name == "branchy"


def test_payload_refs_read_back_the_logged_text():
    records, _ = _read_all(INDUCTOR)
    code = next(r for r in records if r.kind == "inductor_output_code")
    text = code.payload_str()
    assert text.startswith("# AOT ID:") and "cpp_fused" in text
    assert "\n\t" not in text
    import hashlib
    assert hashlib.md5(text.encode()).hexdigest() == code.payload.md5  # same bytes torch hashed


def test_rank_comes_from_the_envelope():
    records, _ = _read_all(RANK1)
    assert {r.rank for r in records} == {1}


@pytest.mark.parametrize("step", [1, 7, 4096, 100_000])
def test_incremental_reads_equal_one_read(tmp_path, step):
    data = SINGLE.read_bytes()
    live = tmp_path / "live.log"
    live.write_bytes(b"")
    reader = TraceReader(live)
    got = []
    with live.open("ab") as f:
        for i in range(0, len(data), step if step > 1 else 997):
            f.write(data[i:i + (step if step > 1 else 997)])
            f.flush()
            got += reader.read_new()
    whole, _ = _read_all(SINGLE)
    assert _fingerprint(got) == _fingerprint(whole)
    assert reader.skipped_count == 0


def test_incomplete_last_record_waits_for_more_bytes(tmp_path):
    data = SINGLE.read_bytes()
    gb_at = data.index(b'"dynamo_graph_break_reason"')
    cut = data.index(b"\n\t", gb_at) + 40  # inside the graph-break payload
    live = tmp_path / "live.log"
    live.write_bytes(data[:cut])
    reader = TraceReader(live)
    first = reader.read_new()
    assert all(r.kind != "dynamo_graph_break_reason" for r in first)
    assert reader.offset < cut  # the partial record is pending, not consumed
    with live.open("ab") as f:
        f.write(data[cut:])
    rest = reader.read_new()
    gb = next(r for r in rest if r.kind == "dynamo_graph_break_reason")
    assert parse_graph_break(gb.payload_text).reason == "Data-dependent branching"
    assert reader.skipped_count == 0


def test_payload_cut_on_a_line_boundary_is_held_by_its_md5(tmp_path):
    data = SINGLE.read_bytes()
    out_graph = data.index(b'"dynamo_output_graph"')
    cut = data.index(b"\n\t", data.index(b"\n\t", out_graph) + 1) + 1  # after two payload lines
    live = tmp_path / "live.log"
    live.write_bytes(data[:cut])
    reader = TraceReader(live)
    assert all(r.kind != "dynamo_output_graph" for r in reader.read_new())
    live.write_bytes(data)
    assert any(r.kind == "dynamo_output_graph" for r in reader.read_new())


def test_truncated_record_at_finish_is_counted_not_lost_silently(tmp_path):
    data = SINGLE.read_bytes()
    cut = data.index(b"\n\t", data.index(b'"dynamo_output_graph"')) + 30
    log = tmp_path / "cut.log"
    log.write_bytes(data[:cut])
    reader = TraceReader(log)
    reader.read_new()
    assert reader.finish() == []
    assert reader.skipped_count == 1
    assert reader.skipped[0].reason == "truncated record at end of log"


def test_truncated_file_restarts_the_reader(tmp_path):
    log = tmp_path / "t.log"
    shutil.copy(SINGLE, log)
    reader = TraceReader(log)
    first = reader.read_new()
    log.write_bytes(RANK1.read_bytes()[:20_000])
    again = reader.read_new()
    assert reader.generation == 1
    assert again and {r.rank for r in again} == {1} and len(again) < len(first)


def test_replaced_file_of_larger_size_restarts(tmp_path):
    log = tmp_path / "t.log"
    shutil.copy(RANK1, log)
    reader = TraceReader(log)
    reader.read_new()
    replacement = tmp_path / "new.log"
    shutil.copy(SINGLE, replacement)
    replacement.replace(log)
    records = reader.read_new()
    assert reader.generation == 1
    assert {r.rank for r in records} == {None}


def test_directory_drops_a_restarted_log(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    shutil.copy(SINGLE, log)
    directory = TraceDirectory([tmp_path])
    directory.refresh()
    assert len(directory.summary.compiles()) == 6
    log.write_bytes(RANK1.read_bytes())
    directory.refresh()
    assert {fc.rank for fc in directory.summary.compiles()} == {1}


def test_garbage_lines_are_counted_and_neighbours_survive(tmp_path):
    data = SINGLE.read_bytes()
    lines = data.split(b"\n")
    lines.insert(10, b"this is not a record")
    lines.insert(20, b'V1122 18:39:30.666000 1 x.py:1] {"broken json')
    lines.insert(30, b"\x00\xff\xfe binary \x89PNG")
    log = tmp_path / "g.log"
    log.write_bytes(b"\n".join(lines))
    records, reader = _read_all(log)
    clean, _ = _read_all(SINGLE)
    assert reader.skipped_count == 3
    assert len(records) == len(clean)
    assert {s.reason for s in reader.skipped} == {"line is not a glog-prefixed record",
                                                  "envelope is not valid JSON"}
    assert [s.line for s in reader.skipped] == [11, 21, 31]


def test_unknown_tags_are_records_not_errors(tmp_path):
    log = tmp_path / "u.log"
    log.write_bytes(b'V1122 18:39:30.666000 1 x.py:1] {"some_future_tag": {"a": 1}, "frame_id": 0, '
                    b'"frame_compile_id": 0, "attempt": 0}\n')
    records, reader = _read_all(log)
    assert [r.kind for r in records] == ["some_future_tag"] and reader.skipped_count == 0


def test_old_format_graph_break_and_recompile_reasons():
    old = ("Graph break in user code at /tmp/m.py:9\nReason: Unsupported: generic_jump TensorVariable()\n"
           "User code traceback:\n  File \"/tmp/m.py\", line 9, in f\n    if x.sum() > 0:\n")
    gb = parse_graph_break(old)
    assert (gb.file, gb.line, gb.reason) == ("/tmp/m.py", 9, "Unsupported: generic_jump TensorVariable()")
    assert gb.user_stack[-1].code == "if x.sum() > 0:"
    assert [g.reason for g in parse_recompile_reasons('[\n"size mismatch at index 0",\n"other"\n]')] == [
        "size mismatch at index 0", "other"]
    assert parse_recompile_reasons("0/0: tensor 'a' size mismatch")[0].cache_entry == "0/0"


def test_decode_payload_strips_the_tab_framing():
    assert decode_payload(b"\tline one\n\t\n\t  indented") == "line one\n\n  indented"


REAL = SINGLE.read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(REAL)), junk=st.binary(max_size=300), where=st.integers(0, len(REAL)))
def test_fuzz_garbled_logs_never_crash(tmp_path, cut, junk, where):
    data = REAL[:where] + junk + REAL[where:cut] if where < cut else REAL[:cut] + junk
    log = tmp_path / "fuzz.log"
    log.write_bytes(data)
    directory = TraceDirectory([log])
    directory.refresh()
    directory.finish()
    summary = directory.summary
    summary.functions()
    # the summary reports every stretch the reader skipped, and each skip is a piece of the file's framing
    records, reader = _read_all(log)
    assert summary.skipped_records == reader.skipped_count
    assert len(records) + reader.skipped_count <= max(1, _header_count(data) + 1)
    assert sum(lg.record_count for lg in summary.logs.values()) <= _header_count(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=4000))
def test_fuzz_binary_files_never_crash(tmp_path, blob):
    log = tmp_path / "bin.log"
    log.write_bytes(blob)
    records, reader = _read_all(log)
    assert len(records) + reader.skipped_count <= max(1, _header_count(blob) + 1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(0, len(REAL)), min_size=1, max_size=12))
def test_fuzz_appends_at_any_split_points_equal_one_read(tmp_path, cuts):
    live = tmp_path / "split.log"
    live.write_bytes(b"")
    reader = TraceReader(live)
    got, done = [], 0
    for cut in sorted(set(cuts)) + [len(REAL)]:
        with live.open("ab") as f:
            f.write(REAL[done:cut])
        done = max(done, cut)
        got += reader.read_new()
    whole, _ = _read_all(SINGLE)
    assert _fingerprint(got) == _fingerprint(whole) and reader.skipped_count == 0
