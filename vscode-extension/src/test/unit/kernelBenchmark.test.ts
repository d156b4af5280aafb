/** "Benchmark Triton Kernel at Cursor" reads the server's answer: the H100's recorded timings of the training
 * fixture's gelu kernel (tests/fixtures/inductor_gpu_train, kernel_benchmarks.json, written by regenerate.py
 * --bench-only) side by side, the no-GPU refusal in the server's words, and the palette entry. */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { Commands } from "../../common/constants";
import { benchmarkOutcome, variantText } from "../../common/kernelBenchmark";
import { BenchmarkVariant } from "../../common/protocolGpu";

const ROOT = path.join(__dirname, "..", "..", "..", "..");
const RUN = path.join(ROOT, "tests", "fixtures", "inductor_gpu_train", "transformer_train", "torch_compile_debug");

function recorded(): { device: string; variants: BenchmarkVariant[] } {
  const [run] = fs.readdirSync(RUN).filter((name) => name.startsWith("run_"));
  const file = path.join(RUN, run, "torchinductor", "model__0_forward_1.0", "kernel_benchmarks.json");
  return JSON.parse(fs.readFileSync(file, "utf8")).kernels.triton_poi_fused_gelu_view_7;
}

test("a GPU answer shows the kernel as compiled and as max-autotune compiles it, side by side", () => {
  const { device, variants } = recorded();
  const [asCompiled, maxAutotune] = ["default", "max_autotune"].map((name) => variants.find((v) => v.variant === name)!);
  const outcome = benchmarkOutcome({ kernel: "triton_poi_fused_gelu_view_7", ms: asCompiled.ms!, gb_per_s: asCompiled.gb_per_s!,
    device, variants: [asCompiled, maxAutotune], recorded: false });
  assert.equal(outcome.level, "info");
  assert.equal(outcome.text, `Kernel Lens: \`triton_poi_fused_gelu_view_7\` on ${device}: `
    + `as compiled ${asCompiled.ms!.toFixed(3)} ms · ${asCompiled.gb_per_s!.toFixed(2)} GB/s (${asCompiled.configs_tried} configs) | `
    + `max-autotune ${maxAutotune.ms!.toFixed(3)} ms · ${maxAutotune.gb_per_s!.toFixed(2)} GB/s (${maxAutotune.configs_tried} configs)`);
  assert.ok(maxAutotune.configs_tried! > asCompiled.configs_tried!, "max-autotune benchmarked more configs");
});

test("a variant that failed says why; no GPU or no answer is the server's refusal or an error", () => {
  assert.equal(variantText({ variant: "max_autotune", ms: null, gb: null, gb_per_s: null, configs_tried: null, best_config: null,
    error: "exit 1: no CUDA GPU" }), "max-autotune: failed (exit 1: no CUDA GPU)");
  const refused = benchmarkOutcome({ kernel: "k", error: "Benchmarking a kernel needs a CUDA GPU on this machine (...)" });
  assert.deepEqual(refused, { level: "warning", text: "Kernel Lens: Benchmarking a kernel needs a CUDA GPU on this machine (...)",
    succeeded: false });
  assert.equal(benchmarkOutcome(undefined).level, "error");
});

test("the palette offers the command on Python files", () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, "vscode-extension", "package.json"), "utf8"));
  assert.ok(manifest.contributes.commands.some((c: { command: string }) => c.command === Commands.benchmarkTritonKernel));
  assert.ok(manifest.contributes.menus.commandPalette.some((m: { command: string; when: string }) =>
    m.command === Commands.benchmarkTritonKernel && m.when === "editorLangId == python"));
});
