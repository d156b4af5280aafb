"""A feature's exception never stops the server: every handler the features register is wrapped by `failsafe`,
which logs the error to the client and answers null."""
from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

from lsp_server.features.failsafe import failsafe

FEATURES = Path(__file__).resolve().parents[2] / "lsp_server" / "features"


def registered_handlers() -> dict[str, list[str]]:
    """`module.handler` -> its decorators' names, for each function a feature registers with the server."""
    found = {}
    for path in sorted(FEATURES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
                names = [n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", "") for n in names]
                if {"feature", "command"} & set(names):
                    found[f"{path.stem}.{node.name}"] = names
    return found


def test_every_registered_handler_is_failsafe():
    handlers = registered_handlers()
    assert "hover.hover" in handlers and "commands.list_runs" in handlers  # the walk saw the registrations
    assert [h for h, names in handlers.items() if "failsafe" not in names] == []


class ClientLog:
    """What the client is sent (the LSP connection is the process boundary)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def window_log_message(self, params: Any) -> None:
        self.messages.append(params.message)


def test_a_raising_handler_is_logged_and_answered_with_null():
    client = ClientLog()

    @failsafe(client, "hover")
    def broken(_params: Any) -> str:
        raise KeyError("no such kernel")

    @failsafe(client, "kernelLens.listRuns")
    async def broken_async() -> str:
        raise ValueError("bad run")

    assert broken(None) is None and asyncio.run(broken_async()) is None
    assert len(client.messages) == 2
    assert "hover failed" in client.messages[0] and "no such kernel" in client.messages[0]
    assert "kernelLens.listRuns failed" in client.messages[1] and "bad run" in client.messages[1]
