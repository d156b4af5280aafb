"""Keep a GPU run's Triton cache entries beside its debug dir (`<run>/triton_cache/<hash>/`), so the compiled
chain of its kernels survives the cache being cleared or the run being copied to another machine: every entry
(metadata, TTIR/TTGIR/LLIR/PTX, cubin) whose kernel one of the run's output_code.py files defines, with the
cubin disassembled beside it (`<kernel>.sass`, nvdisasm --print-line-info; `<kernel>.res_usage.txt`,
cuobjdump -res-usage) where those tools are installed.

    python -m lsp_server.loading.keep_triton RUN_DIR [--triton-cache DIR]

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
    wanted = run_kernels(run_dir)
    copied = 0
    for cache in caches:
        for meta in sorted(cache.glob("*/*.json")):
            name = meta.name[: -len(".json")]
            if name not in wanted:
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
