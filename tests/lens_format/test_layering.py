"""The import graph's arrows (ARCHITECTURE.md): the format package imports nothing of ours, `compiler` and
`lsp_server` import only it from each other (only the `kernel-lens` command, kernel_lens/, imports both), no modules import each other in a circle; inside `compiler/` the
pipeline imports no tool, the machine side neither the frontend nor the tools, and no stage of the pipeline a later
one; the server's features import no parser."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("compiler", "kernel_lens", "lens_format", "lsp_server")


def imported_packages(package: str) -> dict[str, set[str]]:
    """Each module file of `package` -> the top-level packages it imports (at any depth in the file)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


def test_the_format_package_imports_nothing_of_ours_nor_torch():
    offending = {f: sorted(n & {"compiler", "lsp_server", "torch"}) for f, n in imported_packages("lens_format").items()
                 if n & {"compiler", "lsp_server", "torch"}}
    assert offending == {}


def test_compiler_and_server_share_only_the_format_package():
    compiler_to_server = {f for f, n in imported_packages("compiler").items() if "lsp_server" in n}
    server_to_compiler = {f for f, n in imported_packages("lsp_server").items() if "compiler" in n}
    assert compiler_to_server == set() and server_to_compiler == set()
    # and both do read and write through it (the check above would hold for two packages sharing nothing)
    assert any("lens_format" in n for n in imported_packages("compiler").values())
    assert any("lens_format" in n for n in imported_packages("lsp_server").values())


def test_only_the_command_line_puts_the_two_together():
    """kernel_lens/ (the `kernel-lens` command) imports the compiler and the server; nothing imports it."""
    assert {"compiler", "lsp_server"} <= set().union(*imported_packages("kernel_lens").values())
    assert {f for package in ("compiler", "lens_format", "lsp_server")
            for f, n in imported_packages(package).items() if "kernel_lens" in n} == set()


def _module_imports() -> dict[str, set[str]]:
    """Each module of ours (dotted name) -> the modules of ours it imports, at any depth, TYPE_CHECKING included."""
    files = {}
    for package in OURS:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            files[name.removesuffix(".__init__")] = path
    edges: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            edges[name].update(t for t in targets if t in files and t != name)
    return edges


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _private_imports() -> dict[str, list[str]]:
    """file -> the private names (`_x`, not dunders) it imports from another module of ours."""
    found: dict[str, list[str]] = {}
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in OURS):
                    bad = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                    if bad:
                        found.setdefault(str(path.relative_to(ROOT)), []).extend(bad)
    return found


def test_no_module_imports_another_modules_private_names():
    """A name another module needs is public where it is defined (shared FX helpers live in graph_passes/fx_calls.py,
    not behind an underscore in the module that happened to need them first)."""
    assert _private_imports() == {}


def test_no_import_circles_anywhere():
    edges = _module_imports()
    assert len(edges) > 100 and edges["compiler.pipeline"]  # the walk saw the packages and their imports
    assert _circles(edges) == []
    # the check finds a circle where there is one
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# compiler/'s roles: the entry points may import anything; the rest of compiler/ is the pipeline
ENTRY_POINTS = {"compiler.cli", "compiler.__main__", "compiler.backend"}
# the only modules on compiler/'s and lsp_server/'s top level (ARCHITECTURE.md names them): entry points, the pipeline
# and its one-file stage, and the leaves the folders share; every other module sits in a folder named for its stage/role
TOP_LEVEL = {
    "compiler": {"__init__", "__main__", "backend", "cli",  # entry points
                 "pipeline", "scheduler",  # the stage list and its loop, the one stage that is one file
                 "config", "decisions", "hooks", "dynamo_skip", "compiled_graph"},  # shared leaves
    "lsp_server": {"__init__", "__main__", "server",  # entry points
                   "index", "model", "settings", "protocol", "protocol_gpu", "protocol_ts", "jobs", "json_answer"},  # shared
}
# what the machine side may import outside compiler/machine/: settings, Dynamo's skip list, and the C++ text
# (prelude, vector math and the erf it links, size variants' markers) it precompiles, builds and links, never the
# frontend, the stages' IR or the tools
MACHINE_MAY_IMPORT = {"compiler", "compiler.config", "compiler.dynamo_skip"}


def _machine_may_import(module: str) -> bool:
    """Outside compiler/machine/: settings, Dynamo's skip list and the C++ text folder (cpp_text/), nothing else."""
    return module in MACHINE_MAY_IMPORT or module == "compiler.cpp_text" or module.startswith("compiler.cpp_text.")


def _role(module: str) -> str:
    if module in ENTRY_POINTS:
        return "entry point"
    for role in ("machine", "tools"):
        if module == f"compiler.{role}" or module.startswith(f"compiler.{role}."):
            return role
    return "pipeline"


def _layer_violations(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """module -> the modules it imports against compiler/'s arrows."""
    found: dict[str, list[str]] = {}
    for module, targets in edges.items():
        if not (module == "compiler" or module.startswith("compiler.")):
            continue
        role = _role(module)
        if role == "pipeline":
            bad = {t for t in targets if _role(t) in ("tools", "entry point")}
        elif role == "machine":
            bad = {t for t in targets if t.startswith("compiler") and _role(t) != "machine" and not _machine_may_import(t)}
        elif role == "tools":
            bad = {t for t in targets if _role(t) == "entry point"}
        else:  # the entry points wire everything together
            bad = set()
        if bad:
            found[module] = sorted(bad)
    return found


def test_the_top_levels_hold_only_entry_points_the_pipeline_and_shared_leaves():
    for package, allowed in TOP_LEVEL.items():
        assert {p.stem for p in (ROOT / package).glob("*.py")} == allowed


def test_the_stage_order_comes_from_the_pipeline():
    from compiler import pipeline
    assert [s.name for s in pipeline.STAGES] == ["lower", "schedule", "generate", "map", "build"]
    assert list(STAGES) == ["compiler.decompositions", "compiler.lowering", "compiler.scheduler", "compiler.codegen",
                            "compiler.codegen.wrapper", "compiler.debug.kernel_map"]
    # and each stage's debug files are files of the format (docs/debug-directory.md names them all)
    documented = (ROOT / "docs" / "debug-directory.md").read_text()
    assert all(f"`{name}`" in documented for s in pipeline.STAGES for name in s.files)


def test_the_pipeline_imports_no_tool_and_the_machine_neither_the_frontend_nor_the_tools():
    edges = _module_imports()
    # the walk saw each role and the arrows that are allowed: pipeline -> machine, tools -> pipeline and machine
    assert "compiler.machine.runtime" in edges["compiler.pipeline"] and "compiler.hooks" in edges["compiler.pipeline"]
    assert "compiler.pipeline" in edges["compiler.tools.accuracy_mode"]
    assert "compiler.machine.gemm" in edges["compiler.tools.profiling"]
    assert "compiler.tools.accuracy_mode" in edges["compiler.backend"]
    assert _layer_violations(edges) == {}


def test_the_layer_check_finds_an_import_against_the_arrows():
    edges = {"compiler.scheduler": {"compiler.tools.accuracy"},  # pipeline -> a tool
             "compiler.codegen.wrapper": {"compiler.backend", "compiler.machine.memory"},  # pipeline -> entry point
             "compiler.machine.runtime": {"compiler.frontend.dynamo_backend", "compiler.config"},  # machine -> frontend
             "compiler.machine.build": {"compiler.tools.profiling"},  # machine -> a tool
             "compiler.tools.minifier": {"compiler.frontend.dynamo_backend", "compiler.cli"},  # a tool -> entry point
             "compiler.tools.run_diff": {"compiler.tools.accuracy", "compiler.machine.runtime"}}  # allowed
    assert _layer_violations(edges) == {
        "compiler.scheduler": ["compiler.tools.accuracy"], "compiler.codegen.wrapper": ["compiler.backend"],
        "compiler.machine.runtime": ["compiler.frontend.dynamo_backend"], "compiler.machine.build": ["compiler.tools.profiling"],
        "compiler.tools.minifier": ["compiler.cli"]}


def _stage_order() -> dict[str, int]:
    """The pipeline's stages in the order data moves through them, read from compiler/pipeline.py (TRACE_TO_ATEN, then
    each stage's modules); the machine (build, load, run, what the CPU has) is the build stage's code but no stage of
    the data's order: any stage may call it, and its own arrows are checked above."""
    from compiler import pipeline
    modules = [pipeline.TRACE_TO_ATEN] + [m for stage in pipeline.STAGES for m in stage.modules]
    return {m: i for i, m in enumerate(m for m in modules if _role(m) == "pipeline")}


STAGES = _stage_order()


def _stage(module: str) -> int | None:
    """A module's stage: that of its longest dotted prefix in STAGES (codegen's wrapper comes after the rest)."""
    parts = module.split(".")
    return next((STAGES[p] for p in (".".join(parts[:n]) for n in range(len(parts), 0, -1)) if p in STAGES), None)


def _stage_violations(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """module -> the stages' modules it imports against the data's direction: a stage's module importing a later
    stage, or a module the stages share (ir, symbols, why, config…) importing any stage (an arrow through it)."""
    def is_shared(t: str) -> bool:
        return t.startswith("compiler") and _stage(t) is None and _role(t) == "pipeline"

    shared = {t for m, ts in edges.items() if _stage(m) is not None for t in ts if is_shared(t)}
    reached = list(shared)
    while reached:  # and what those import, in turn
        for t in edges.get(reached.pop(), ()):
            if is_shared(t) and t not in shared:
                shared.add(t)
                reached.append(t)
    found: dict[str, list[str]] = {}
    for module, targets in edges.items():
        own = _stage(module)
        if own is not None:
            bad = {t for t in targets if (s := _stage(t)) is not None and s > own}
        elif module in shared:
            bad = {t for t in targets if _stage(t) is not None}
        else:
            continue
        if bad:
            found[module] = sorted(bad)
    return found


def test_no_stage_of_the_pipeline_imports_a_later_one():
    edges = _module_imports()
    # the walk saw arrows back to earlier stages and into the shared modules, which are allowed
    assert "compiler.scheduler" in edges["compiler.codegen.plan"] and "compiler.ir.nodes" in edges["compiler.lowering.graph"]
    assert "compiler.codegen.cpp" in edges["compiler.codegen.wrapper"]
    assert _stage_violations(edges) == {}
    assert _stage_violations({"compiler.lowering.pointwise": {"compiler.codegen.cpp_ops", "compiler.ir.nodes"},
                              "compiler.ir.nodes": {"compiler.ir.size_symbols"}, "compiler.ir.size_symbols": {"compiler.scheduler"},
                              "compiler.codegen.cpp": {"compiler.codegen.wrapper", "compiler.scheduler"},
                              "compiler.codegen.wrapper": {"compiler.codegen.cpp", "compiler.machine.memory"},
                              "compiler.decompositions.table": {"compiler.machine.gemm_half"}}) == {
        "compiler.lowering.pointwise": ["compiler.codegen.cpp_ops"], "compiler.ir.size_symbols": ["compiler.scheduler"],
        "compiler.codegen.cpp": ["compiler.codegen.wrapper"]}

# lsp_server: features answer from the index; the modules that know a file format, and those that build the index
# from the files, are below it
FORMAT_MODULES = ("lsp_server.parsers", "lens_format", "lsp_server.loading")


def _feature_violations(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    """feature module -> the format modules it imports (the records it shows come re-exported by `model`)."""
    found: dict[str, list[str]] = {}
    for module, targets in edges.items():
        if module.startswith("lsp_server.features."):
            bad = sorted(t for t in targets if any(t == p or t.startswith(f"{p}.") for p in FORMAT_MODULES))
            if bad:
                found[module] = bad
    return found


def test_features_import_no_parser_and_no_format_module():
    edges = _module_imports()
    # the walk saw the features and what they do import: the index and its model
    assert {"lsp_server.index", "lsp_server.model"} <= edges["lsp_server.features.describe"]
    assert _feature_violations(edges) == {}
    assert _feature_violations({"lsp_server.features.hover": {"lsp_server.index", "lsp_server.parsers.output_code"},
                                "lsp_server.features.compiles": {"lens_format.why", "lsp_server.model"},
                                "lsp_server.loading.graph_builder": {"lsp_server.parsers.output_code"}}) == {
        "lsp_server.features.hover": ["lsp_server.parsers.output_code"],
        "lsp_server.features.compiles": ["lens_format.why"]}


def _executing_calls(package: str) -> dict[str, list[str]]:
    """file -> the ways it could run code it reads: exec/eval/compile/__import__, runpy, importlib."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("exec", "eval", "compile", "__import__"):
                bad.append(node.func.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                bad += [n for n in names if n.split(".")[0] in ("runpy", "importlib")]
        if bad:
            found[str(path.relative_to(ROOT))] = bad
    return found


def test_the_server_never_imports_or_executes_what_it_reads():
    # the one import by name: server.py registers its own feature modules (`features.<name>`)
    assert _executing_calls("lsp_server") == {"lsp_server/server.py": ["importlib"]}
    assert "features.{name}" in (ROOT / "lsp_server" / "server.py").read_text()
    parsers_talking_lsp = {f: sorted(n & {"lsprotocol", "pygls"}) for f, n in imported_packages("lsp_server").items()
                     if "parsers" in f and n & {"lsprotocol", "pygls"}}
    assert parsers_talking_lsp == {}  # and the parsers never talk LSP
    assert any("pygls" in n for n in imported_packages("lsp_server").values())
