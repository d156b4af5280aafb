"""Builds C++ source into a shared library with g++, cached on disk by source + flags + compiler version.

Safe for several processes at once: each build happens in a private temp dir, then is renamed into place.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from compiler import config
from compiler.machine import build_parts, pch, prebuilt

log = logging.getLogger(__name__)


@dataclass
class CppDiagnostic:
    file: str
    line: int
    column: int
    severity: str  # error | warning | note
    message: str


class CppCompileError(Exception):
    """g++ rejected the generated source; `diagnostics` holds its parsed messages."""

    def __init__(self, command: list[str], stderr: str, source_path: str, diagnostics: list[CppDiagnostic]):
        self.command, self.stderr, self.source_path, self.diagnostics = command, stderr, source_path, diagnostics
        first = next((d for d in diagnostics if d.severity == "error"), None)
        where = f"{first.file}:{first.line}:{first.column}: {first.message}" if first else stderr.strip()[:500]
        super().__init__(f"C++ compile error: {where}")


class CompilerNotFoundError(Exception):
    """No usable C++ compiler (g++) on this machine."""


_DIAG = re.compile(r"^(?P<file>[^:\n]+\.(?:cpp|cc|h|hpp)):(?P<line>\d+):(?P<col>\d+): "
                   r"(?P<sev>error|warning|note|fatal error): (?P<msg>.*)$")


def parse_diagnostics(stderr: str) -> list[CppDiagnostic]:
    """g++'s `file:line:col: severity: message` lines."""
    out = []
    for line in stderr.splitlines():
        m = _DIAG.match(line.strip())
        if m:
            sev = "error" if m["sev"] == "fatal error" else m["sev"]
            out.append(CppDiagnostic(m["file"], int(m["line"]), int(m["col"]), sev, m["msg"]))
    return out


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    if shutil.which(cxx) is None:
        raise CompilerNotFoundError(f"C++ compiler {cxx!r} not found on PATH: install g++ (apt-get install g++) "
                                    f"or set CXX to a working compiler")
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        raise CompilerNotFoundError(f"C++ compiler {cxx!r} does not run: {e}") from e


@functools.lru_cache(maxsize=None)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of this machine (from /proc/cpuinfo; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def isa_flags() -> list[str]:
    """With -march=native g++ still vectorizes with 256-bit registers on many AVX-512 Intel parts; 512-bit
    measured 1.4x faster on our softmax kernel there (AMD Zen 4 already picks 512)."""
    native = any(f.startswith("-march=native") for f in config.cpp.flags)
    return ["-mprefer-vector-width=512"] if native and "avx512f" in cpu_flags() else []


def build_flags() -> list[str]:
    return [*config.cpp.flags, *isa_flags()]


def compile_flags() -> list[str]:
    """build_flags() for a compile without a link."""
    return [f for f in build_flags() if f != "-shared"]


def vectorization_report(source: str, report: str, line_offset: int = 0) -> list[str]:
    """g++'s `-fopt-info-vec-missed` lines for kernel code, as `kernel:line: reason` (prelude lines dropped;
    line = C++ line + line_offset), like Inductor's `TORCH_LOGS=+schedule` explains why a loop stayed
    scalar."""
    lines = source.splitlines()
    owner: dict[int, str] = {}
    current = None
    for i, text in enumerate(lines, 1):
        m = re.match(r'extern "C" void (\w+)\(', text)
        if m:
            current = m.group(1)
        owner[i] = current or ""
    out, seen = [], set()
    for d in parse_opt_info(report):
        kernel = owner.get(d[0], "")
        if kernel and (d[0], d[1]) not in seen:
            seen.add((d[0], d[1]))
            out.append(f"{kernel}:{d[0] + line_offset}: {d[1]}  | {lines[d[0] - 1].strip()}")
    return out


def parse_opt_info(report: str, file_name: str = "kernels.cpp") -> list[tuple[int, str]]:
    """(line, reason) of the `missed:` lines about `file_name` (not the prelude's header)."""
    out = []
    for line in report.splitlines():
        m = re.match(r"^([^:]+):(\d+):\d+: missed: (.*)$", line)
        if m and os.path.basename(m.group(1)) == file_name:
            out.append((int(m.group(2)), m.group(3)))
    return out


def link_flags() -> list[str]:
    """Libraries, after the source on the command line (--as-needed drops those before it)."""
    from compiler.cpp_text.vector_math import link_flags as vector_math_link_flags
    return vector_math_link_flags()


def cache_key(source: str) -> str:
    cxx = config.cpp.cxx
    h = hashlib.sha256()
    for part in (source, cxx, " ".join(build_flags() + link_flags()), compiler_version(cxx)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


@functools.lru_cache(maxsize=None)
def c_driver(cxx: str) -> str | None:
    """The C driver beside `cxx` (g++ -> gcc, clang++ -> clang, c++ -> cc). It compiles a .cpp file as C++
    all the same but links without libstdc++ (and libm, which builds then name), which kernels do not use:
    g++ spent ~15 ms of each build reading libstdc++.so at link time."""
    folder, base = os.path.split(cxx)
    for cpp, c in (("clang++", "clang"), ("g++", "gcc"), ("c++", "cc")):
        if cpp in base:
            return shutil.which(os.path.join(folder, base.replace(cpp, c)))
    return None


def build_shared_library(source: str, name: str = "kernels") -> str:
    """The path of a .so built from `source` (from the cache when it was built before). The cached files
    are named after the key, not `name`, so the same source compiled under another graph id hits."""
    cached = cached_library(source)
    if cached is not None:
        return cached
    folder = cache_folder(source)
    so_path = os.path.join(folder, "kernels.so")
    os.makedirs(folder, exist_ok=True)
    src_path = os.path.join(folder, "kernels.cpp")
    _write_atomic(src_path, source)
    cxx = config.cpp.cxx
    driver = c_driver(cxx)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        tmp_so = os.path.join(tmp, "kernels.so")
        report_path = os.path.join(tmp, "vectorization.txt")
        # in debug mode only: g++ spent 4-11% longer on row kernels writing it (opt_info_report makes it later)
        opt_info = [f"-fopt-info-vec-missed={report_path}"] if config.debug else []
        jobs = build_parts.jobs()
        text, objects, builds = prebuilt.split(source, cxx, compile_flags(), compiler_version(cxx), here=jobs > 1)
        parts = _part_sources(text, src_path, tmp, jobs)
        try:
            if parts or builds:  # kernels (and support objects not built yet) compiled side by side, then linked
                parts = parts or [_sources(text, source, src_path, tmp)]
                inputs = _compile_parts(driver or cxx, parts, tmp, report_path, src_path, builds)
            else:
                inputs = [*opt_info, *_sources(text, source, src_path, tmp)]
        except _SupportObjectFailed:  # (its log and `failed` marker are in its folder): the definitions inline
            inputs, objects = [*opt_info, *_sources(source, source, src_path, tmp)], []
        proc = _link(driver, cxx, [*build_flags(), "-o", tmp_so, *inputs, *objects, *link_flags()])
        if proc.returncode != 0:
            raise CppCompileError(proc.args, proc.stderr, src_path, parse_diagnostics(proc.stderr))
        _warn_if_prelude_unused(proc.stderr)
        if os.path.exists(report_path):
            if config.debug:
                with open(report_path, errors="replace") as f:
                    for line in vectorization_report(source, f.read()):
                        log.debug("kernel-lens vectorization missed: %s", line)
            os.replace(report_path, os.path.join(folder, OPT_INFO))
        os.replace(tmp_so, so_path)
    _start_prelude_build(text)
    return so_path


def _link(driver: str | None, cxx: str, cmd: list[str]) -> subprocess.CompletedProcess:
    """g++'s `cmd` (sources or objects in, the shared library out) run by the C driver when there is one,
    else by `cxx`; kernels that turn out to need the C++ runtime are linked again by `cxx`."""
    proc = _run([driver, "-Wl,--no-undefined", *cmd, "-lm"] if driver else [cxx, *cmd])
    if proc.returncode != 0 and driver and "undefined reference" in proc.stderr:
        log.debug("kernel-lens: the kernels need the C++ runtime; linking them with %s: %s", cxx,
                  proc.stderr.strip()[:300])
        proc = _run([cxx, *cmd])
    return proc


def _part_sources(text: str, src_path: str, tmp: str, jobs: int) -> list[list[str]] | None:
    """g++'s inputs for each part of `text` that compiler/machine/build_parts.py cuts it into (against the precompiled
    prelude when it is ready, else with the prelude's text in front); None when one g++ builds it as fast."""
    split = pch.split(text)
    if split is None or jobs < 2:
        return None
    prelude, rest, first_line = split
    bodies = build_parts.parts(rest, first_line, src_path, jobs)
    if bodies is None:
        return None
    header = _ready_header(prelude)
    return [_compiled_file(os.path.join(tmp, f"kernels_part{i}.cpp"),
                           body if header else f'#line 1 "{src_path}"\n{prelude}{body}', header)
            for i, body in enumerate(bodies)]


class _SupportObjectFailed(Exception):
    """A support object compiled beside the kernels failed (compiler/machine/prebuilt.py); they compiled fine."""


def _compile_parts(compiler: str, parts: list[list[str]], tmp: str, report_path: str, src_path: str,
                   builds: list[prebuilt.ObjectBuild]) -> list[str]:
    """Compile every part to an object at once, beside the support objects in `builds`; the parts' objects,
    or a CppCompileError naming every part's diagnostics. In debug mode the parts' vectorization reports are
    joined into `report_path`."""
    jobs = []
    for i, inputs in enumerate(parts):
        obj = os.path.join(tmp, f"kernels_part{i}.o")
        report = [f"-fopt-info-vec-missed={report_path}.{i}"] if config.debug else []
        jobs.append((obj, _start([compiler, *compile_flags(), *report, "-c", *inputs, "-o", obj])))
    support = []
    for b in builds:
        try:
            support.append((b, _start(b.command)))
        except CompilerNotFoundError as e:  # the kernels' g++ started: compile the definitions inline instead
            b.finish(False, str(e))
            support.append((b, None))
    failed, stderr = [], []
    for _, proc in jobs:
        err = proc.communicate()[1]
        stderr.append(err)
        if proc.returncode != 0:
            failed.append(proc.args)
        _warn_if_prelude_unused(err)
    support_ok = True
    for build, proc in support:
        if proc is None:
            support_ok = False
            continue
        err = proc.communicate()[1]
        build.finish(proc.returncode == 0, err)
        support_ok = support_ok and proc.returncode == 0
    if failed:
        text = "".join(stderr)
        raise CppCompileError(failed[0], text, src_path, parse_diagnostics(text))
    if not support_ok:
        raise _SupportObjectFailed()
    if config.debug:
        with open(report_path, "w") as out:
            for i in range(len(parts)):
                if os.path.exists(f"{report_path}.{i}"):
                    with open(f"{report_path}.{i}", errors="replace") as f:
                        out.write(f.read())
    return [obj for obj, _ in jobs]


def _warn_if_prelude_unused(stderr: str) -> None:
    if "invalid-pch" in stderr or ".gch" in stderr:
        log.warning("kernel-lens: the precompiled prelude was not used: %s", stderr.strip()[:300])


def _start(cmd: list[str]) -> subprocess.Popen:
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise CompilerNotFoundError(f"could not run {cmd[0]!r}: {e}") from e


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CompilerNotFoundError(f"could not run {cmd[0]!r}: {e}") from e


def _sources(text: str, source: str, src_path: str, tmp: str) -> list[str]:
    """What g++ compiles for `text` (the cached `source` at `src_path`, or a copy with lines blanked): its
    kernels against the precompiled prelude when that is ready, else the whole text. A `#line` keeps
    diagnostics and the vectorization report on the full source's lines."""
    parts = pch.split(text)
    header = parts and _ready_header(parts[0])
    if header:
        return _compiled_file(os.path.join(tmp, "kernels_body.cpp"), f'#line {parts[2]} "{src_path}"\n{parts[1]}',
                              header)
    if text == source:
        return [src_path]
    return _compiled_file(os.path.join(tmp, "kernels_split.cpp"), f'#line 1 "{src_path}"\n{text}', None)


def _ready_header(prelude: str, start: bool = False) -> str | None:
    """The precompiled prelude to `-include`, when it is on and built; with `start`, its build is started when
    it is not (after a build of kernels, not before: on 2 cores the niced prelude build beside the kernels'
    g++ made a transformer layer's cold build 135 -> 170 ms)."""
    if not pch.enabled():
        return None
    return pch.ready_header(prelude, config.cpp.cxx, build_flags(), compiler_version(config.cpp.cxx), start)


def _start_prelude_build(text: str) -> None:
    split = pch.split(text)
    if split is not None:
        _ready_header(split[0], start=True)


def _compiled_file(path: str, text: str, header: str | None) -> list[str]:
    """g++'s inputs for `text` written to `path`, after the precompiled prelude `header` when there is one."""
    with open(path, "w") as f:
        f.write(text)
    return ["-Winvalid-pch", "-include", header, path] if header else [path]


OPT_INFO = "opt-info-vec-missed.txt"  # g++'s raw report, beside the cached .so


def cache_folder(source: str) -> str:
    """Where the build of `source` lives in the cache (the .so, its source, g++'s report)."""
    key = cache_key(source)
    return os.path.join(config.cache_dir(), key[:2], key)


def cached_library(source: str) -> str | None:
    """The path of the .so built from `source` when the cache has it, else None."""
    path = os.path.join(cache_folder(source), "kernels.so")
    return path if os.path.exists(path) else None


def opt_info_report(source: str) -> str | None:
    """g++'s `-fopt-info-vec-missed` report from building `source`. A library built outside debug mode has
    none: g++ then compiles the cached source once more for the report alone (None if that fails)."""
    folder = cache_folder(source)
    path = os.path.join(folder, OPT_INFO)
    if not os.path.exists(path) and os.path.exists(os.path.join(folder, "kernels.cpp")):
        tmp = f"{path}.{os.getpid()}.tmp"
        try:  # compiled to assembly only: no link, so `cxx` itself
            proc = _run([config.cpp.cxx, *compile_flags(), f"-fopt-info-vec-missed={tmp}", "-S", "-o",
                         os.devnull, os.path.join(folder, "kernels.cpp")])
        except CompilerNotFoundError:
            return None
        if proc.returncode == 0 and os.path.exists(tmp):
            os.replace(tmp, path)
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _write_atomic(path: str, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
