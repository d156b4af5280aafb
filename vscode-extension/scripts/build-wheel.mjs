// Builds the kernel-lens wheel the .vsix carries (wheels/kernel_lens-<version>-py3-none-any.whl), offered by the
// extension for an interpreter without kernel-lens. Built from a copy of the packages, so the repository's ignored
// build/ folder (other layouts' stale modules) never ends up in it. Python: $KERNEL_LENS_PYTHON, else the
// repository's .venv, else python3 (it needs setuptools: the build is not isolated, so it runs offline).
// Usage: node scripts/build-wheel.mjs [OUT_DIR]   (default: wheels/; prints the wheel's path)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const EXTENSION_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const REPO = path.resolve(EXTENSION_DIR, "..");
const SOURCES = ["pyproject.toml", "README.md", "compiler", "lsp_server", "lens_format", "kernel_lens"];

function python() {
  const venv = path.join(REPO, ".venv", "bin", "python");
  return process.env.KERNEL_LENS_PYTHON ?? (fs.existsSync(venv) ? venv : "python3");
}

export function buildWheel(outDir = path.join(EXTENSION_DIR, "wheels")) {
  const staging = fs.mkdtempSync(path.join(os.tmpdir(), "kernel-lens-wheel-"));
  try {
    for (const name of SOURCES) {
      fs.cpSync(path.join(REPO, name), path.join(staging, name), {
        recursive: true,
        filter: (source) => !/(__pycache__|\.pyc$|\.egg-info)/.test(source),
      });
    }
    fs.mkdirSync(outDir, { recursive: true });
    for (const old of fs.readdirSync(outDir).filter((name) => name.endsWith(".whl"))) {
      fs.rmSync(path.join(outDir, old));
    }
    execFileSync(python(), ["-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
      "--disable-pip-version-check", "-w", outDir, staging], { stdio: ["ignore", "ignore", "inherit"] });
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
  const [wheel] = fs.readdirSync(outDir).filter((name) => /^kernel_lens-.*\.whl$/.test(name));
  if (!wheel) {
    throw new Error(`pip wrote no kernel_lens wheel into ${outDir}`);
  }
  return path.join(outDir, wheel);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  console.log(buildWheel(process.argv[2] ? path.resolve(process.argv[2]) : undefined));
}
