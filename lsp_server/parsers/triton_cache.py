"""Reads Triton cache entries (`<hash>/<kernel>.{json,ttir,ttgir,llir,ptx,sass}` and `<kernel>.res_usage.txt`,
as tests/fixtures/inductor_gpu_train/regenerate.py keeps them beside a debug dir): the metadata, the resource
usage cuobjdump printed, and for each IR stage which line of the Triton source (the kernel's own `.py` file)
each of its lines came from, through the stage's location records:
  .ttir/.ttgir  `loc(#locN)` / `#locN = loc("file":line:col)` (names and call sites resolved to a file line)
  .llir         `!dbg !N` -> `!N = !DILocation(line: L, ..., inlinedAt: !M)` (the outermost call site)
  .ptx          `.file N "path"` and `.loc N L C`, in force until the next `.loc`
  .sass         `//## File "path", line L` (nvdisasm --print-line-info), in force until the next one
Pure text -> dataclasses; nothing here raises on content."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")
RES_USAGE_SUFFIX = ".res_usage.txt"
RES_FUNCTION = re.compile(r"^\s*Function (?P<name>\S+?):?\s*$")
RES_FIELD = re.compile(r"(?P<key>[A-Z_]+(?:\[\d+\])?):(?P<value>\d+)")
MLIR_LOC_DEF = re.compile(r"^#(?P<id>loc\d*) = loc\((?P<body>.*)\)\s*$")
MLIR_USE = re.compile(r"loc\((?P<body>#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*(?:\{.*)?$")
MLIR_FILE_LINE = re.compile(r"\"(?P<file>[^\"]+\.py)\":(?P<line>\d+):\d+")
MLIR_REF = re.compile(r"#(loc\d*)\b")
LL_DBG = re.compile(r"!dbg !(?P<id>\d+)")
LL_LOCATION = re.compile(r"^!(?P<id>\d+) = !DILocation\((?P<body>.*)\)\s*$")
LL_FIELD = re.compile(r"(?P<key>line|inlinedAt): (?:!)?(?P<value>\d+)")
PTX_FILE = re.compile(r"^\s*\.file\s+(?P<id>\d+)\s+\"(?P<path>[^\"]+)\"")
PTX_LOC = re.compile(r"^\s*\.loc\s+(?P<id>\d+)\s+(?P<line>\d+)\s+\d+")
PTX_CALL_SITE = re.compile(r"([\w.-]+\.py):(\d+):\d+")
SASS_FILE = re.compile(r"^\s*//## File \"(?P<path>[^\"]+)\", line (?P<line>\d+)")
SASS_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/")


@dataclass(frozen=True)
class ResourceUsage:
    registers: int | None
    stack: int | None  # bytes of stack frame per thread: spills land here
    shared: int | None
    local: int | None


@dataclass(frozen=True)
class StageLine:
    """A line of a stage file (1-based) and the Triton source line (1-based) it came from."""
    line: int
    source_line: int
    source_file: str | None


@dataclass
class TritonEntry:
    """One compiled variant of a kernel: a Triton cache folder."""
    key: str  # the folder's name (Triton's cache hash)
    name: str
    folder: Path
    metadata: dict = field(default_factory=dict)
    usage: ResourceUsage | None = None

    def stage_path(self, stage: str) -> Path | None:
        path = self.folder / f"{self.name}.{stage}"
        return path if path.is_file() else None

    @property
    def stages(self) -> list[str]:
        return [s for s in STAGES if self.stage_path(s) is not None]

    @property
    def num_warps(self) -> int | None:
        return self.metadata.get("num_warps")

    @property
    def num_stages(self) -> int | None:
        return self.metadata.get("num_stages")

    @property
    def shared(self) -> int | None:
        return self.metadata.get("shared")


def parse_res_usage(text: str, name: str) -> ResourceUsage | None:
    """cuobjdump -res-usage: the `REG:.. STACK:.. SHARED:.. LOCAL:..` line under `Function <name>:`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = RES_FUNCTION.match(line)
        if match and match["name"] == name and i + 1 < len(lines):
            fields = {m["key"]: int(m["value"]) for m in RES_FIELD.finditer(lines[i + 1])}
            return ResourceUsage(fields.get("REG"), fields.get("STACK"), fields.get("SHARED"), fields.get("LOCAL"))
    return None


def read_entry(folder: Path) -> TritonEntry | None:
    """The entry in `folder` (its one `<kernel>.json`, not `__grp__*`), or None."""
    metas = [p for p in folder.glob("*.json") if not p.name.startswith("__grp__")]
    if len(metas) != 1:
        return None
    name = metas[0].name[: -len(".json")]
    try:
        metadata = json.loads(metas[0].read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        metadata = {}
    entry = TritonEntry(folder.name, name, folder, metadata if isinstance(metadata, dict) else {})
    usage = folder / f"{name}{RES_USAGE_SUFFIX}"
    if usage.is_file():
        entry.usage = parse_res_usage(usage.read_text(encoding="utf-8", errors="replace"), name)
    return entry


def read_cache(cache: Path) -> dict[str, list[TritonEntry]]:
    """Every entry under a Triton cache folder, by kernel name."""
    entries: dict[str, list[TritonEntry]] = {}
    for folder in sorted(p for p in cache.iterdir() if p.is_dir()) if cache.is_dir() else ():
        entry = read_entry(folder)
        if entry is not None:
            entries.setdefault(entry.name, []).append(entry)
    return entries


def _mlir_lines(text: str) -> list[StageLine]:
    lines = text.splitlines()
    defs = {m["id"]: m["body"] for m in map(MLIR_LOC_DEF.match, lines) if m}
    memo: dict[str, tuple[str, int] | None] = {}

    def resolve(body: str, depth: int = 0) -> tuple[str, int] | None:
        direct = MLIR_FILE_LINE.search(body)
        if direct and not body.startswith("callsite"):
            return direct["file"], int(direct["line"])
        refs = MLIR_REF.findall(body)
        if body.startswith("callsite") and refs:  # callsite(callee at caller): the caller's line is the kernel's
            refs = refs[-1:]
        for ref in refs:
            if depth < 16 and ref in defs:
                if ref not in memo:
                    memo[ref] = None
                    memo[ref] = resolve(defs[ref], depth + 1)
                if memo[ref] is not None:
                    return memo[ref]
        return (direct["file"], int(direct["line"])) if direct else None

    found = []
    for number, line in enumerate(lines, start=1):
        if line.startswith("#loc"):
            continue
        use = MLIR_USE.search(line)
        hit = resolve(use["body"]) if use else None
        if hit is not None and not line.lstrip().startswith(("module", "}")):
            found.append(StageLine(number, hit[1], hit[0]))
    return found


def _llir_lines(text: str) -> list[StageLine]:
    lines = text.splitlines()
    locations: dict[str, dict[str, int]] = {}
    for line in lines:
        match = LL_LOCATION.match(line)
        if match:
            locations[match["id"]] = {m["key"]: int(m["value"]) for m in LL_FIELD.finditer(match["body"])}

    def outermost(ref: str) -> int | None:
        seen = set()
        while ref in locations and ref not in seen:
            seen.add(ref)
            outer = locations[ref].get("inlinedAt")
            if outer is None:
                return locations[ref].get("line")
            ref = str(outer)
        return None

    found = []
    for number, line in enumerate(lines, start=1):
        dbg = LL_DBG.search(line) if not line.startswith("!") else None
        source = outermost(dbg["id"]) if dbg else None
        if source:
            found.append(StageLine(number, source, None))
    return found


def _ptx_lines(text: str) -> list[StageLine]:
    """`.file` directives come last in Triton's PTX: ids are resolved after the pass. An inlined `.loc`
    (Triton's standard library) carries its call sites in the comment (`@[ kernel.py:54:26 ]`): the
    outermost one, the kernel's line, is taken."""
    files: dict[str, str] = {}
    current: tuple[str, int] | tuple[None, int, str] | None = None
    found: list[tuple[int, str | None, int]] = []  # (line, file id or path, source line)
    for number, line in enumerate(text.splitlines(), start=1):
        if (match := PTX_FILE.match(line)) is not None:
            files[match["id"]] = match["path"]
        elif (match := PTX_LOC.match(line)) is not None:
            sites = PTX_CALL_SITE.findall(line.split("//", 1)[1]) if "@[" in line else []
            if sites:
                current = (f"name:{sites[-1][0]}", int(sites[-1][1]))
            else:
                current = (match["id"], int(match["line"])) if int(match["line"]) else None
        elif current and line.strip() and not line.lstrip().startswith(("//", ".", "$", "}", "{")) and ";" in line:
            found.append((number, current[0], current[1]))

    def path_of(ref: str | None) -> str | None:
        if ref and ref.startswith("name:"):
            return next((p for p in files.values() if p.endswith("/" + ref[5:])), ref[5:])
        return files.get(ref or "")

    return [StageLine(number, source, path_of(ref)) for number, ref, source in found]


def _sass_lines(text: str) -> list[StageLine]:
    current: tuple[str, int] | None = None
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if (match := SASS_FILE.match(line)) is not None:
            current = (match["path"], int(match["line"]))
        elif current and SASS_INSTRUCTION.match(line):
            found.append(StageLine(number, current[1], current[0]))
        elif line.startswith(("//----", ".L_x")):
            current = None
    return found


STAGE_READERS = {"ttir": _mlir_lines, "ttgir": _mlir_lines, "llir": _llir_lines, "ptx": _ptx_lines, "sass": _sass_lines}


def stage_lines(text: str, stage: str) -> list[StageLine]:
    """Each located line of a stage file and its Triton source line."""
    reader = STAGE_READERS.get(stage)
    return reader(text) if reader else []
