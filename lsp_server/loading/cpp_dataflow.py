"""Reads a real Inductor C++ kernel's lines as statements for the data flow (statement_flow): `auto tmpN = ...`
definitions, `tmp_accN` reduction accumulators, stores through the kernel's pointers and the loops around them
(a vectorised loop's tail repeats its statements, so a loop's stores are seen only once it ends)."""
from __future__ import annotations

import re

from lsp_server.loading.cpp_statements import CPP, TAIL
from lsp_server.loading.statement_flow import Statement
from lsp_server.loading.statement_flow import statement_owners as flow_owners
from lsp_server.parsers.output_code import cpp_loops

DEFINITION = re.compile(r"^\s*[A-Za-z_][\w:<>, ]*?\s+(?P<name>tmp(?:_acc)?\d+(?:_vec|_arr)?)\s*=(?!=)"
                        r"|^\s*(?P<update>tmp_acc\d+(?:_vec|_arr)?)\s*=(?!=)")
TMP = re.compile(r"\btmp(?:_acc)?\d+(?:_vec|_arr)?\b")
POINTER = re.compile(r"\b((?:in_out|in|out)_ptr\d+)\b")
STORE = re.compile(r"^\s*(?:(?P<ptr>(?:in_out|out)_ptr\d+)\s*\[.*?\]\s*=\s*(?P<value>.*);"
                   r"|(?P<vec>tmp\w+)\.store\(\s*(?P<vptr>(?:in_out|out)_ptr\d+))")
ALIAS = re.compile(r"^\s*auto\s+(?P<alias>(?:in_out|in|out)_ptr\d+)\s*=\s*(?P<target>(?:in_out|in|out)_ptr\d+)\s*;")
SIGNATURE = re.compile(r"\b(?P<param>(?:in_out|in|out)_ptr\d+|ks\d+)\s*[,)]")
NUMBER = re.compile(r"static_cast<[\w:]+>\((?P<number>-?[\d.]+(?:e[+-]?\d+)?)\)"
                    r"|(?P<inf>-?)std::numeric_limits<\w+>::infinity\(\)")


def kernel_pointers(body: list[str], launch_args: list[str]) -> dict[str, str]:
    """The kernel's pointer parameters (its signature, in order) -> the launch's arguments in that order."""
    signature = " ".join(body[:40]).split("{", 1)[0]
    params = [m["param"] for m in SIGNATURE.finditer(signature)]
    return dict(zip(params, launch_args))


def constants(rhs: str) -> frozenset[str]:
    """Numbers as both sides write them: `static_cast<float>(1.0)` and FX's `1` are "1.0"."""
    found = set()
    for number in NUMBER.finditer(rhs):
        if number["number"]:
            try:
                found.add(str(float(number["number"])).replace("--", ""))
            except ValueError:
                continue
        else:
            found.add(f"{number['inf']}inf")
    return frozenset(found)


def read_statement(index: int, text: str, loop: int | None) -> Statement | None:
    """One C++ line as a statement (None: a line the data flow skips); `loop`: the innermost loop around it."""
    alias = ALIAS.match(text)
    if alias is not None:
        return Statement(index, "alias", target=alias["alias"], source=alias["target"])
    store = STORE.match(text)
    if store is not None:
        value = (store["value"] if store["ptr"] else store["vec"]) or ""
        return Statement(index, "store", operands=tuple(TMP.findall(value)), pointers=tuple(POINTER.findall(value)),
                         constants=constants(value), target=store["ptr"] or store["vptr"], loop=loop)
    found = DEFINITION.match(text)
    if found is None:
        return None
    defined = found["name"] or found["update"]
    rhs = text.split("=", 1)[1]
    operands = tuple(t for t in TMP.findall(rhs) if t != defined)
    reading = {"operands": operands, "pointers": tuple(POINTER.findall(rhs)), "constants": constants(rhs)}
    if defined.startswith("tmp_acc"):
        key = re.sub(r"_vec|_arr", "", defined)
        kind = "declare" if found["name"] else "update"
        return Statement(index, kind, (defined,), key, ops=CPP.ops(rhs), **reading)
    return Statement(index, "define", (defined,), ops=CPP.ops(rhs), **reading)


def cpp_statements(body: list[str]) -> list[Statement]:
    """The body's statements in order, a loop's `end` where its `}` closes it (before that line's statement)."""
    loops = cpp_loops(body, 1, len(body))
    statements = []
    for index, text in enumerate(body):
        statements += [Statement(index, "end", loop=number) for number, loop in enumerate(loops, start=1)
                       if loop.last - 1 == index]
        if TAIL.search(text):
            continue
        around = [(loop.opened, number) for number, loop in enumerate(loops, start=1)
                  if loop.opened - 1 <= index < loop.last - 1]
        statement = read_statement(index, text, max(around)[1] if around else None)
        if statement is not None:
            statements.append(statement)
    return statements


def statement_owners(body: list[str], nodes: list[tuple[str, str, list[str]]], launch_args: list[str],
                     buffers: dict[str, frozenset[str]] | None = None,
                     graph_args: dict[str, list[str]] | None = None) -> dict[int, list[str]]:
    """Index into `body` (a C++ kernel's lines) -> the node it computes; see statement_flow.statement_owners."""
    return flow_owners(cpp_statements(body), CPP, nodes, kernel_pointers(body, launch_args), buffers, graph_args)
