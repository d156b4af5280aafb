"""Renders `lsp_server/protocol.py` and `protocol_gpu.py` (the executeCommand result types) as the extension's
`vscode-extension/src/common/protocol.ts`. `python -m lsp_server.protocol_ts` prints it, `--write` rewrites the
file; tests/lsp_server/test_protocol_ts.py checks that the committed file is this text. `COMMANDS` here is every
command's answer type, both modules'."""
from __future__ import annotations

import sys
import types
import typing
from pathlib import Path

from lsp_server import protocol, protocol_gpu

PROTOCOL_TS = Path(__file__).resolve().parents[1] / "vscode-extension" / "src" / "common" / "protocol.ts"
HEADER = ("/** Types of the results the language server's executeCommand handlers return (0-based lines, file URIs).\n"
          " * Generated from lsp_server/protocol.py and protocol_gpu.py by `python -m lsp_server.protocol_ts --write`:\n"
          " * edit those files. */")
ALIASES = {**protocol.ALIASES, **protocol_gpu.ALIASES}
DECLARATIONS = [*protocol.DECLARATIONS, *protocol_gpu.DECLARATIONS]
COMMANDS: dict[str, object] = {**protocol.COMMANDS, **protocol_gpu.COMMANDS}
SCALARS = {str: "string", int: "number", float: "number", bool: "boolean", type(None): "null", object: "unknown"}


def ts_type(hint: object, alias_ok: bool = True) -> str:
    """A Python type hint as TypeScript; a hint equal to a named alias of protocol.py is written as its name."""
    if alias_ok:
        for name, alias in ALIASES.items():
            if hint == alias:
                return name
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in SCALARS:
        return SCALARS[hint]
    if typing.is_typeddict(hint):
        return hint.__name__
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(ts_type(a) for a in args)
    if origin is list:
        inner = ts_type(args[0])
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    if origin is dict:
        return f"Record<{ts_type(args[0])}, {ts_type(args[1])}>"
    raise TypeError(f"lsp_server/protocol.py or protocol_gpu.py: no TypeScript for {hint!r}")


def _field(name: str, hint: object) -> list[str]:
    """`NotRequired[...]` (outside or inside `Annotated`) makes an optional property: read from the hint, since
    TypedDict's own __optional_keys__ misses it in string annotations before Python 3.12."""
    doc, optional = "", False
    for _ in range(2):
        if typing.get_origin(hint) is typing.Annotated:
            hint, doc = typing.get_args(hint)[0], typing.get_args(hint)[1]
        if typing.get_origin(hint) is typing.NotRequired:
            hint, optional = typing.get_args(hint)[0], True
    lines = [f"  /** {doc} */"] if doc else []
    return lines + [f"  {name}{'?' if optional else ''}: {ts_type(hint)};"]


def _doc(text: str | None, indent: str = "") -> list[str]:
    return [f"{indent}/** {' '.join(text.split())} */"] if text else []


def declaration(item: object) -> str:
    if isinstance(item, str):
        return f"export type {item} = {ts_type(ALIASES[item], alias_ok=False)};"
    hints = typing.get_type_hints(item, include_extras=True)
    lines = _doc(item.__doc__ if item.__doc__ != typing.TypedDict.__doc__ else None)
    lines.append(f"export interface {item.__name__} {{")
    for name, hint in hints.items():
        lines += _field(name, hint)
    return "\n".join(lines + ["}"])


def render() -> str:
    return "\n\n".join([HEADER, *(declaration(item) for item in DECLARATIONS)]) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if argv[1:] == ["--write"]:
        PROTOCOL_TS.write_text(text)
        print(f"wrote {PROTOCOL_TS}")
    elif argv[1:]:
        print("usage: python -m lsp_server.protocol_ts [--write]", file=sys.stderr)
        return 2
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
