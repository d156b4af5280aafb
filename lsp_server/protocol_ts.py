"""Renders `lsp_server/protocol.py` and `protocol_gpu.py` (the executeCommand result types) as the extension's
`vscode-extension/src/common/protocol.ts` and `protocolGpu.ts` (one TypeScript file per module; the GPU one imports
the types it shares). `python -m lsp_server.protocol_ts` prints them, `--write` rewrites the files;
tests/lsp_server/test_protocol_ts.py checks that the committed files are this text. `COMMANDS` here is every
command's answer type, both modules'."""
from __future__ import annotations

import re
import sys
import types
import typing
from pathlib import Path

from lsp_server import protocol, protocol_gpu

PROTOCOL_TS = Path(__file__).resolve().parents[1] / "vscode-extension" / "src" / "common" / "protocol.ts"
PROTOCOL_GPU_TS = PROTOCOL_TS.with_name("protocolGpu.ts")
HEADER = ("/** Types of the results the language server's executeCommand handlers return (0-based lines, file URIs){}.\n"
          " * Generated from lsp_server/{} by `python -m lsp_server.protocol_ts --write`: edit that file. */")
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


def _name(item: object) -> str:
    return item if isinstance(item, str) else item.__name__


def _render(declarations: list, header: str, shared: list) -> str:
    """One file: its header, an import of the names of `shared` (another file's declarations) it uses, its own."""
    body = [declaration(item) for item in declarations]
    used = set(re.findall(r"\b[A-Z]\w*\b", "\n".join(body)))
    imported = [n for n in map(_name, shared) if n in used]
    imports = [f'import type {{ {", ".join(imported)} }} from "./protocol";'] if imported else []
    return "\n\n".join([header, *imports, *body]) + "\n"


def rendered() -> dict[Path, str]:
    """Each generated file's path and text."""
    return {PROTOCOL_TS: _render(protocol.DECLARATIONS, HEADER.format("", "protocol.py"), []),
            PROTOCOL_GPU_TS: _render(protocol_gpu.DECLARATIONS, HEADER.format(", GPU runs", "protocol_gpu.py"),
                                     protocol.DECLARATIONS)}


def main(argv: list[str]) -> int:
    files = rendered()
    if argv[1:] == ["--write"]:
        for path, text in files.items():
            path.write_text(text)
            print(f"wrote {path}")
    elif argv[1:]:
        print("usage: python -m lsp_server.protocol_ts [--write]", file=sys.stderr)
        return 2
    else:
        sys.stdout.write("\n".join(files.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
