"""protocol.ts is generated from lsp_server/protocol.py, and the server's real answers are what protocol.py
says: a change to one side alone (the TypeScript, the TypedDicts, a handler's keys) fails here. Regenerate with
`python -m lsp_server.protocol_ts --write`."""
from __future__ import annotations

import asyncio
import types
import typing
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pytest
from pygls.workspace import Workspace

from lsp_server import protocol
from lsp_server.features import commands, compiles, linked_lines
from lsp_server.features.lookup import uri_of
from lsp_server.index import Index
from lsp_server.loading.run_loader import load_run
from lsp_server.protocol_ts import COMMANDS, PROTOCOL_GPU_TS, PROTOCOL_TS, declaration, rendered

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "lens_foo1" / "runs"


def test_the_committed_protocol_ts_is_the_generated_text():
    files = rendered()
    assert sorted(files) == sorted([PROTOCOL_TS, PROTOCOL_GPU_TS])
    for path, text in files.items():
        assert path.read_text() == text, f"{path.name}: run `python -m lsp_server.protocol_ts --write`"


class Example(TypedDict):
    """An answer."""

    name: str
    spans: list[protocol.LineRange]
    maybe: typing.Annotated[NotRequired[float | None], "Only sometimes."]
    kind: protocol.KernelKind


def test_the_generator_writes_fields_optional_keys_docs_and_alias_names():
    assert declaration(Example) == "\n".join([
        "/** An answer. */", "export interface Example {", "  name: string;", "  spans: LineRange[];",
        "  /** Only sometimes. */", "  maybe?: number | null;", "  kind: KernelKind;", "}"])
    assert declaration("KernelKind").endswith('"extern" | "unknown" | string;')


def conforms(value: Any, hint: Any, where: str = "answer") -> list[str]:
    """What in `value` disagrees with the type hint (empty: it is of that type)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Annotated, typing.NotRequired):
        return conforms(value, args[0], where)
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not {hint.__name__}"]
        fields = typing.get_type_hints(hint, include_extras=True)
        optional = {k for k, h in fields.items() if "NotRequired" in str(h)}
        found = [f"{where}.{k}: missing" for k in fields.keys() - optional - value.keys()]
        found += [f"{where}.{k}: not in {hint.__name__}" for k in value.keys() - fields.keys()]
        return found + [p for k in value.keys() & fields.keys() for p in conforms(value[k], fields[k], f"{where}.{k}")]
    if origin in (typing.Union, types.UnionType):
        tries = [conforms(value, arm, where) for arm in args]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} not one of {args}"]
    if origin is list:
        return [f"{where}: not a list"] if not isinstance(value, list) else \
            [p for i, v in enumerate(value) for p in conforms(v, args[0], f"{where}[{i}]")]
    if origin is dict:
        return [f"{where}: not an object"] if not isinstance(value, dict) else \
            [p for k, v in value.items() for p in conforms(v, args[1], f"{where}.{k}")]
    if hint is object:
        return []
    if hint is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    ok = {str: str, bool: bool, int: int, float: (int, float)}[hint]
    return [] if isinstance(value, ok) and (hint is bool or not isinstance(value, bool)) else \
        [f"{where}: {value!r} is not {hint.__name__}"]


def test_the_conformance_check_finds_a_key_one_side_lacks():
    good = {"start": 1, "end": 2}
    assert conforms(good, protocol.LineRange) == [] and conforms(None, protocol.LineRange | None) == []
    assert conforms({"start": 1}, protocol.LineRange) == ["answer.end: missing"]
    assert conforms(good | {"extra": 1}, protocol.LineRange) == ["answer.extra: not in LineRange"]
    assert conforms({"start": "1", "end": 2}, protocol.LineRange) == ["answer.start: '1' is not int"]


class HandlerHost:
    """The server as the feature modules see it when they register: commands by ID, an index, no client."""

    def __init__(self, index: Index):
        self.index = index
        self.handlers: dict[str, Any] = {}
        self.client_capabilities = types.SimpleNamespace(workspace=None, window=None)
        self.workspace = Workspace(None)  # documents read from disk, as for files the client never opened

    def command(self, name: str):
        def add(handler):
            self.handlers[name] = handler
            return handler
        return add

    def feature(self, name: Any, *options: Any):  # LSP features the modules also register: not answers here
        return lambda handler: handler

    def window_log_message(self, params: Any) -> None:  # failsafe's report: a handler raised
        raise AssertionError(params.message)

    def after_index_change(self, changed: Any) -> None:
        pass

    def reindex_all(self) -> int:
        return len(self.index.runs_newest_first())

    def call(self, name: str, *args: Any) -> Any:
        answer = self.handlers[name](*args)
        return asyncio.run(answer) if asyncio.iscoroutine(answer) else answer


@pytest.fixture(scope="module")
def host() -> HandlerHost:
    index = Index()
    for run in sorted(RUNS.iterdir()):
        index.put_run(load_run(run))
    server = HandlerHost(index)
    for feature in (commands, linked_lines, compiles):
        feature.register(server)
    return server


def test_each_handler_answers_what_protocol_py_says(host: HandlerHost):
    runs = [r.id for r in sorted(host.index.runs_newest_first(), key=lambda r: r.path.name)]
    graph = host.index.views[runs[-1]].run.graphs[0]
    source = next(n.source.file for n in graph.nodes.values() if n.source is not None)
    kernel = graph.kernels[0]
    requests = {
        "kernelLens.reindex": [()], "kernelLens.listRuns": [()], "kernelLens.listCompiles": [({},)],
        "kernelLens.listGraphBreaks": [({},)],
        "kernelLens.getProfile": [({"run_id": runs[-1]},), ({"run_id": runs[0]},)],
        "kernelLens.linkedLines": [({"uri": uri_of(source)},), ({"uri": uri_of(graph.output_code)},)],
        "kernelLens.lineCosts": [({"uri": uri_of(source)},)],
        "kernelLens.kernelsAt": [({"uri": uri_of(graph.output_code), "line": kernel.start_line},)],
        "kernelLens.diffRuns": [({"a": runs[0], "b": runs[-1]},), ({"a": "nope", "b": runs[0]},)],
        "kernelLens.selectRun": [({"run_id": runs[-1]},), ({"run_id": "nope"},)],
        # a CPU run has no Triton kernel: both answer their error shape (the GPU answers: test_server_gpu_train.py)
        "kernelLens.tritonChain": [({"uri": uri_of(graph.output_code), "line": kernel.start_line},)],
        "kernelLens.benchmarkKernel": [({"uri": uri_of(graph.output_code), "line": kernel.start_line},)],
        "kernelLens.tritonKernelsAt": [({"uri": uri_of(graph.output_code), "line": kernel.start_line},),
                                       ({"uri": uri_of(source), "line": 0},)],
    }
    answered = set()
    for name, calls in requests.items():
        for args in calls if name in host.handlers else ():
            answer = host.call(name, *args)
            assert conforms(answer, COMMANDS[name], name) == []
            answered.add(name) if answer not in (None, []) else None
    assert answered >= {"kernelLens.diffRuns", "kernelLens.getProfile", "kernelLens.linkedLines",
                        "kernelLens.lineCosts", "kernelLens.kernelsAt", "kernelLens.listRuns"}
    # every command is described (runJob and profileInductor start processes: not called here)
    assert set(host.handlers) <= set(COMMANDS) and set(requests) | {"kernelLens.runJob",
                                                                             "kernelLens.profileInductor"} >= set(host.handlers)
    # the answers had something in them to check
    diff = host.call("kernelLens.diffRuns", {"a": runs[0], "b": runs[-1]})
    assert diff["graphs"][0]["kernels"][0]["a_locations"] and host.call("kernelLens.getProfile",
                                                                        {"run_id": runs[-1]})["graphs"]
