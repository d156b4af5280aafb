"""ARCHITECTURE.md against the code: its bird's-eye view lists compiler/pipeline.py's FX passes and stages in their
order, each with its modules and debug files; every package folder of compiler/ and lsp_server/ has a section of its
own; the top-level modules it names are test_layering.py's TOP_LEVEL; every test it names exists, and every
Architecture Invariant names the test that enforces it."""
from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from compiler import pipeline

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "ARCHITECTURE.md").read_text()
PACKAGES = ("compiler", "lsp_server")


def _birds_eye_block(doc: str) -> str:
    """The fenced block of the `## Bird's-eye view` section."""
    section = doc.split("## Bird's-eye view", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def _module_path(module: str) -> str:
    """`compiler.codegen` -> `codegen/`, `compiler.codegen.wrapper` -> `codegen/wrapper.py` (as the block writes them)."""
    relative = module.removeprefix("compiler.").replace(".", "/")
    return f"{relative}/" if (ROOT / "compiler" / relative).is_dir() else f"{relative}.py"


def _words(line: str) -> set[str]:
    return set(re.split(r"[\s,()]+", line))


def birds_eye_problems(block: str, stages, passes) -> list[str]:
    """What the block says against the pipeline's lists: `fx pass "NAME"  MODULE` lines in FX_PASSES' order, then
    `stage NAME  MODULES…  FILES…` lines in STAGES' order."""
    problems = []
    fx_lines = re.findall(r'^\s*fx pass "([^"]+)"\s+(.*)$', block, re.M)
    if [name for name, _ in fx_lines] != [p.name for p in passes]:
        problems.append(f"FX passes {[n for n, _ in fx_lines]} != {[p.name for p in passes]}")
    for (name, rest), graph_pass in zip(fx_lines, passes):
        if _module_path(graph_pass.module) not in _words(rest):
            problems.append(f"FX pass {name!r} does not name {_module_path(graph_pass.module)}")
    stage_lines = re.findall(r"^\s*stage (\w+)\s+(.*)$", block, re.M)
    if [name for name, _ in stage_lines] != [s.name for s in stages]:
        problems.append(f"stages {[n for n, _ in stage_lines]} != {[s.name for s in stages]}")
    for (name, rest), stage in zip(stage_lines, stages):
        missing = [_module_path(m) for m in stage.modules if _module_path(m) not in _words(rest)]
        missing += [f for f in stage.files if f not in _words(rest)]
        if missing:
            problems.append(f"stage {name!r} does not name {missing}")
    return problems


def test_the_birds_eye_view_lists_the_pipelines_fx_passes_and_stages_in_order():
    assert len(pipeline.STAGES) >= 5 and len(pipeline.FX_PASSES) >= 2  # the lists the pipeline runs
    assert birds_eye_problems(_birds_eye_block(DOC), pipeline.STAGES, pipeline.FX_PASSES) == []


@dataclass(frozen=True)
class _Stage:
    name: str
    modules: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


def test_the_birds_eye_check_finds_a_stage_or_pass_the_view_lacks_or_misplaces():
    block = ('  fx pass "inline"  graph_passes/transformer_fast_path.py\n'
             "  stage lower  lowering/  ir_pre_fusion.txt\n  stage build  machine/  vectorization.txt\n")
    passes = [pipeline.GraphPass("inline", "compiler.graph_passes.transformer_fast_path", None)]
    lower = _Stage("lower", ("compiler.lowering",), ("ir_pre_fusion.txt",))
    build = _Stage("build", ("compiler.machine",), ("vectorization.txt",))
    assert birds_eye_problems(block, [lower, build], passes) == []
    assert birds_eye_problems(block, [lower, _Stage("schedule"), build], passes)  # a stage added to the pipeline
    assert birds_eye_problems(block, [build, lower], passes)  # the order changed
    assert birds_eye_problems(block, [lower, build], passes * 2)  # an FX pass added
    assert birds_eye_problems(block, [lower, _Stage("build", ("compiler.machine",), ("build.log",))], passes)
    assert birds_eye_problems(block, [_Stage("lower", ("compiler.scheduler",)), build], passes)


def _package_folders() -> list[str]:
    """Every folder of compiler/ and lsp_server/ that is a package (holds an __init__.py), the two included."""
    return sorted(str(init.parent.relative_to(ROOT)) for package in PACKAGES
                  for init in (ROOT / package).rglob("__init__.py"))


def _headings(doc: str) -> list[str]:
    return re.findall(r"^#{2,4} `([^`]+)`\s*$", doc, re.M)


def test_every_package_folder_has_its_own_section_and_every_section_names_a_real_path():
    folders = _package_folders()
    assert {"compiler", "compiler/codegen/strategies", "lsp_server/parsers/torch_trace"} <= set(folders)
    headings = _headings(DOC)
    assert [f for f in folders if f"{f}/" not in headings] == []
    assert [h for h in headings if h.split("/")[0] in PACKAGES and not (ROOT / h).exists()] == []


def _section(doc: str, heading: str) -> str:
    return doc.split(f"\n### `{heading}`\n", 1)[1].split("\n### ", 1)[0]


def _top_level() -> dict[str, set[str]]:
    """tests/lens_format/test_layering.py's TOP_LEVEL: the modules allowed on each package's top level."""
    path = ROOT / "tests" / "lens_format" / "test_layering.py"
    spec = importlib.util.spec_from_file_location("_layering_for_architecture", path)
    layering = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layering)
    return layering.TOP_LEVEL


def test_each_packages_section_names_its_top_level_modules():
    top_level = _top_level()
    assert set(top_level) == set(PACKAGES)
    for package, modules in top_level.items():
        section = _section(DOC, f"{package}/")
        assert [m for m in sorted(modules - {"__init__"}) if f"`{m}.py`" not in section] == [], package


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def missing_tests(doc: str) -> list[str]:
    """Each `path::name` the document names whose path is not a test file of tests/ defining test function `name`."""
    missing = []
    for path, name in re.findall(r"([\w./-]*)::(\w+)", doc):
        file = ROOT / path
        if not (path.startswith("tests/") and path.endswith(".py") and file.is_file() and name.startswith("test_")
                and name in _test_functions(file)):
            missing.append(f"{path}::{name}")
    return missing


def test_every_test_the_document_names_exists():
    assert len(re.findall(r"tests/[\w/]+\.py::test_\w+", DOC)) > 30  # the references the check reads
    assert missing_tests(DOC) == []
    assert missing_tests("`tests/lens_format/test_layering.py::test_no_import_circles_anywhere`") == []
    assert missing_tests("`tests/lens_format/test_layering.py::test_no_such_thing`, `test_layering.py::"
                         "test_no_import_circles_anywhere`, `tests/nowhere.py::test_x`") == [
        "tests/lens_format/test_layering.py::test_no_such_thing", "test_layering.py::test_no_import_circles_anywhere",
        "tests/nowhere.py::test_x"]


def invariants_without_a_test(doc: str) -> list[str]:
    """Each **Architecture Invariant:** paragraph (to the next one, a blank line or a heading) naming no test file."""
    test_file = re.compile(r"tests/[\w/]+\.py|[\w/.-]+\.test\.(?:ts|mjs)")
    found = []
    for chunk in doc.split("**Architecture Invariant:**")[1:]:
        text = re.split(r"\n\s*\n|\n#", chunk, maxsplit=1)[0]
        if not test_file.search(text):
            found.append(" ".join(text.split())[:80])
    return found


def test_every_architecture_invariant_names_its_test():
    assert DOC.count("**Architecture Invariant:**") > 20
    assert invariants_without_a_test(DOC) == []
    assert invariants_without_a_test("**Architecture Invariant:** x holds.\n\n**Architecture Invariant:** y "
                                     "(`tests/a.py::test_y`).") == ["x holds."]
