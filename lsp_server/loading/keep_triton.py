"""Keep a GPU run's Triton cache entries beside its debug dir (`<run>/triton_cache/<hash>/`), so the compiled
chain of its kernels survives the cache being cleared or the run being copied to another machine: every entry
(metadata, TTIR/TTGIR/LLIR/PTX, cubin) whose kernel one of the run's output_code.py files defines, with the
cubin disassembled beside it (`<kernel>.sass`, nvdisasm --print-line-info; `<kernel>.res_usage.txt`,
cuobjdump -res-usage) where those tools are installed. An entry of the same kernel name compiled from another
program's code (a shared cache holds many `triton_poi_fused_add_0`) is left out: its TTIR's location records
name a kernel file none of the run's output_code.py files name (`# kernel path: ...`).

    python -m lsp_server.loading.keep_triton RUN_DIR [--triton-cache DIR]

`kernel-lens compile` calls `keep_after_compile` on each run it wrote (kernel_lens/cli.py hands it to the
compiler's CLI): a run without Triton kernels (a CPU run) is left alone, silently.

Where the cache is: --triton-cache, else $TRITON_CACHE_DIR, else Inductor's default
(`<TORCHINDUCTOR_CACHE_DIR or /tmp/torchinductor_<user>>/triton/<device>`), else ~/.triton/cache."""
from __future__ import annotations

import argparse
import getpass
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TRITON_CACHE_FOLDER = "triton_cache"
# the last two: a folder kept before (re-keeping from it)
KEPT_SUFFIXES = (".json", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".sass", ".res_usage.txt")
KERNEL_DEFINITION = re.compile(r"^(?P<name>triton_\w+) = async_compile\.triton\(", re.M)
KERNEL_PATH = re.compile(r"^# kernel path: (?P<path>\S+)$", re.M)
TOOL_TIMEOUT_S = 30


def cache_candidates() -> list[Path]:
    found = []
    if os.environ.get("TRITON_CACHE_DIR"):
        found.append(Path(os.environ["TRITON_CACHE_DIR"]))
    inductor = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR")
                    or Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}")
    found += sorted((inductor / "triton").glob("*"))
    found.append(Path.home() / ".triton" / "cache")
    return [p for p in found if p.is_dir()]


def run_kernels(run_dir: Path) -> set[str]:
    """The Triton kernels the run's graphs define."""
    names: set[str] = set()
    for code in run_dir.glob("torchinductor/*/output_code.py"):
        names |= {m["name"] for m in KERNEL_DEFINITION.finditer(code.read_text(encoding="utf-8", errors="replace"))}
    return names


def run_kernel_paths(run_dir: Path) -> set[str]:
    """The files Inductor compiled the run's Triton kernels from (output_code.py's `# kernel path:` lines)."""
    paths: set[str] = set()
    for code in run_dir.glob("torchinductor/*/output_code.py"):
        paths |= {m["path"] for m in KERNEL_PATH.finditer(code.read_text(encoding="utf-8", errors="replace"))}
    return paths


def compiled_elsewhere(meta: Path, name: str, paths: set[str]) -> bool:
    """True when the entry's TTIR names none of the run's kernel files (another program's kernel of that name);
    an entry without TTIR, or a run whose output_code.py names no kernel file, cannot tell and is kept."""
    ttir = meta.parent / f"{name}.ttir"
    if not paths or not ttir.is_file():
        return False
    text = ttir.read_text(encoding="utf-8", errors="replace")
    return not any(f'loc("{path}"' in text for path in paths)


def tool(name: str) -> str | None:
    return shutil.which(name) or (str(Path("/usr/local/cuda/bin") / name)
                                  if (Path("/usr/local/cuda/bin") / name).is_file() else None)


def disassemble(cubin: Path) -> None:
    for name, args, suffix in (("nvdisasm", ["--print-line-info", "--print-code"], ".sass"),
                               ("cuobjdump", ["-res-usage"], ".res_usage.txt")):
        path = tool(name)
        if path is None:
            continue
        try:
            done = subprocess.run([path, *args, str(cubin)], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            Path(f"{cubin.with_suffix('')}{suffix}").write_text(done.stdout)


def keep_triton_entries(run_dir: Path, caches: list[Path]) -> int:
    """Copy the entries of the run's kernels into `<run_dir>/triton_cache/`; returns how many were copied."""
    wanted, paths = run_kernels(run_dir), run_kernel_paths(run_dir)
    copied = 0
    for cache in caches:
        for meta in sorted(cache.glob("*/*.json")):
            name = meta.name[: -len(".json")]
            if name not in wanted or compiled_elsewhere(meta, name, paths):
                continue
            dest = run_dir / TRITON_CACHE_FOLDER / meta.parent.name
            if dest.is_dir():
                continue
            dest.mkdir(parents=True)
            for path in meta.parent.glob(f"{name}.*"):
                if path.name.endswith(KEPT_SUFFIXES):
                    shutil.copy2(path, dest / path.name)
            if (dest / f"{name}.cubin").is_file():
                disassemble(dest / f"{name}.cubin")
            copied += 1
    return copied


def keep_after_compile(run_dir: str) -> str | None:
    """`kernel-lens compile`'s step after the script wrote `run_dir`: keep its kernels' entries from the caches
    the script used (the same environment) and say so; None, doing nothing, for a run with no Triton kernel."""
    run = Path(run_dir)
    kernels = run_kernels(run)
    if not kernels:
        return None
    caches = cache_candidates()
    if not caches:
        return f"Triton cache: not found (TRITON_CACHE_DIR, Inductor's or ~/.triton/cache); {len(kernels)} " \
               f"kernels' compiled chain not kept"
    copied = keep_triton_entries(run, caches)
    kept = len({p.name.split(".")[0] for p in (run / TRITON_CACHE_FOLDER).glob("*/*.json")})
    return f"Triton cache entries kept: {run / TRITON_CACHE_FOLDER} ({copied} new; {kept} of {len(kernels)} " \
           f"kernels have theirs)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a debug dir's run folder (torch_compile_debug/run_*)")
    parser.add_argument("--triton-cache", type=Path, action="append", help="Triton cache folder (repeatable)")
    args = parser.parse_args(argv)
    caches = args.triton_cache or cache_candidates()
    copied = keep_triton_entries(args.run_dir, caches)
    print(f"kept {copied} Triton cache entries of {len(run_kernels(args.run_dir))} kernels in "
          f"{args.run_dir / TRITON_CACHE_FOLDER} (from {', '.join(map(str, caches)) or 'no cache found'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
