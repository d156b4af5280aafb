"""`kernelLens.listCompiles`: every Dynamo compile the structured traces saw — frame, compile id, the call site
that triggered it, ops, guards, time, why it recompiled (in plain words) — for the extension's compiles picker."""
from __future__ import annotations

from typing import Any

from ..index import Index
from ..model import CompileFact
from .commands import first_argument
from .failsafe import failsafe
from .lookup import path_of, uri_of

LIST_COMPILES_COMMAND = "kernelLens.listCompiles"


def compile_json(c: CompileFact) -> dict[str, Any]:
    call = {"uri": uri_of(c.call_file), "line": c.call_line - 1} if c.call_file and c.call_line else None
    return {"function": c.function, "compile_id": c.compile_id, "rank": c.rank, "uri": uri_of(c.file),
            "def_line": c.def_line - 1, "call_site": call, "ops": c.ops, "guards": c.guards,
            "compile_time_s": c.compile_time_s, "status": c.status, "graph_breaks": c.graph_breaks,
            "recompile_reasons": list(c.recompile_reasons)}


def list_compiles(index: Index, uri: str | None) -> list[dict[str, Any]]:
    """The compiles of `uri`'s file (all files without one), in file, function and compile-id order."""
    wanted = path_of(uri) if uri else None
    found = [c for c in index.trace.compiles if wanted is None or c.file == wanted]
    found.sort(key=lambda c: (c.file, c.def_line, c.rank if c.rank is not None else -1,
                              tuple(int(p) if p.isdigit() else 0 for p in c.compile_id.split("/"))))
    return [compile_json(c) for c in found]


def register(server: Any) -> None:
    @server.command(LIST_COMPILES_COMMAND)
    @failsafe(server, LIST_COMPILES_COMMAND)
    def list_compiles_command(*args: Any) -> list[dict[str, Any]]:
        uri = first_argument(args).get("uri")
        return list_compiles(server.index, uri if isinstance(uri, str) else None)
