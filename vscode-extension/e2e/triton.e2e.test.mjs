// End-to-end test of issue 47's kernel view on a real GPU run in a real VS Code (code-server + Chromium): the
// committed H100 training step (tests/fixtures/inductor_gpu_train/transformer_train) copied into the workspace,
// the kernel view opened on a Triton kernel's line of output_code.py shows the kernel's PTX beside it; the PTX
// lines of that Triton line are labelled with it, and a PTX line leads back to its Triton line (the one its
// `.loc` directive names), with the user's line and the kernel's time. Saves triton_chain.png. The chain also opens
// from a line of the user's program (the kernel picked among those computing it) and from the kernel's own file;
// the kernel's @triton_heuristics line shows its launched config and the configs autotuning tried.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { EditorSession, PYTHON, REPO, until } from "./session.mjs";
import { editorLine, openFile, quickInput, runCommand } from "./workbench.mjs";

const PROGRAM = "transformer_train";
const KERNEL = "triton_poi_fused_gelu_view_7";
let session;

/** The fixture copied to `<workspace>/transformer_train`, its absolute paths pointing there (as the LSP tests do). */
function addGpuRun(workspace) {
  const code = [
    "import sys",
    "from pathlib import Path",
    "sys.path[:0] = ['tests/lsp_server', 'tests']",
    "from lsp_workspaces import FIXTURES, gpu_workspace",
    `gpu_workspace(Path(sys.argv[1]), '${PROGRAM}', FIXTURES / 'inductor_gpu_train')`,
  ].join("\n");
  execFileSync(PYTHON, ["-c", code, path.join(workspace, PROGRAM)], { cwd: REPO, stdio: "inherit" });
}

function only(pattern, root) {
  const found = fs.readdirSync(root, { recursive: true }).filter((f) => pattern.test(f));
  assert.equal(found.length, 1, `${pattern}: ${found.join(", ")}`);
  return path.join(root, found[0]);
}

/** Text of a rendered editor region with what decorations inject (`::after` labels) in place. */
function renderedText(locator) {
  return locator.evaluate((root) => {
    const parts = [];
    for (const el of root.querySelectorAll(".view-line")) {
      let text = el.textContent ?? "";
      for (const span of el.querySelectorAll("span")) {
        const content = getComputedStyle(span, "::after").content;
        if (content && content !== "none" && content !== "normal") {
          text += ` ${content.replace(/^"|"$/g, "")}`;
        }
      }
      parts.push(text.replace(/\u00a0/g, " ")); // the editor renders spaces as no-break spaces
    }
    return parts.join("\n");
  });
}

function groupShowing(page, title) {
  return page.locator(".editor-group-container", { has: page.locator(".tab.active .label-name", { hasText: title }) }).first();
}

async function goToLine(page, line1) {
  const input = await quickInput(page, ":", String(line1));
  await input.press("Enter");
}

before(async () => {
  // VS Code's own inlay hint length (43 characters): the hint's cost comes first, so the cut hides kernel names only
  session = await EditorSession.open({ trusted: true, openScript: false, prepare: addGpuRun });
});

after(async () => {
  await session?.close();
});

test("the kernel view shows a Triton kernel's PTX beside it, each PTX line linked to its Triton line", { timeout: 6 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    const program = path.join(session.workspace, PROGRAM);
    const codePath = only(/model__0_forward_1\.0\/output_code\.py$/, path.join(program, "torch_compile_debug"));
    const code = fs.readFileSync(codePath, "utf8").split("\n");
    const ptxPath = only(new RegExp(`${KERNEL}\\.ptx$`), path.join(program, "torch_compile_debug"));
    const ptx = fs.readFileSync(ptxPath, "utf8").split("\n");
    const user = fs.readFileSync(path.join(program, "prog.py"), "utf8").split("\n");
    // Ground truth from the files: a PTX instruction's Triton line is the kernel-file line its `.loc` names;
    // kernel-file line L is output_code.py's line (the `async_compile.triton(` line) + L - 1.
    const start = code.findIndex((l) => l.startsWith(`${KERNEL} = async_compile.triton(`)) + 1;
    const erf = code.findIndex((l, i) => i > start && l.includes("libdevice.erf(")) + 1;
    const loc = ptx.findIndex((l) => new RegExp(`^\\s*\\.loc\\s+1 ${erf - start + 1} `).test(l));
    assert.ok(start > 0 && erf > start && loc >= 0, "no erf line or no .loc of it in the fixture");
    const ptxLine = loc + 2; // 1-based: the instruction after the .loc
    const gelu = user.findIndex((l) => l.includes("h = F.gelu(")) + 1;

    await quickInput(page, "", "model__0_forward_1.0/output_code.py");
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "output_code.py" }).first().waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    await editorLine(page, "from ctypes import").waitFor({ timeout: 30_000 });
    await goToLine(page, erf);
    await editorLine(page, "libdevice.erf(").waitFor({ timeout: 30_000 });
    // The server indexes the run after start: ask until the view opens (a refusal says "no generated line").
    const ptxGroup = groupShowing(page, `${KERNEL}.ptx`);
    await until(async () => {
      await runCommand(page, "Kernel Lens: Open Kernel View (linked lines)");
      return ptxGroup.waitFor({ timeout: 5_000 }).then(() => true, () => false);
    }, 120_000, () => "the kernel view never showed the kernel's PTX");
    // From the Triton line: its PTX lines are outlined, the first labelled with the Triton line and the user's.
    await until(async () => (await renderedText(ptxGroup.locator(".view-lines").first())).includes(`◀ output_code.py:${erf} · prog.py:${gelu}`),
      30_000, () => "no ◀ output_code.py label in the PTX");
    // And back: the cursor on the PTX instruction leads to the Triton line its .loc names.
    await ptxGroup.locator(".view-lines").first().click();
    await goToLine(page, ptxLine);
    const codeGroup = groupShowing(page, "output_code.py");
    const back = await until(async () => {
      const text = await renderedText(codeGroup.locator(".view-lines").first());
      return text.split("\n").find((l) => l.includes(`◀ PTX:${ptxLine} · prog.py:${gelu}`));
    }, 30_000, () => `no ◀ PTX:${ptxLine} label in output_code.py`);
    assert.ok(back.includes(code[erf - 1].trim()), `the label is on another line: ${back}`);
    t.diagnostic(`linked back: ${back.trim()}`);
    // The kernel's cost on its def line: its time per graph call from the user's profiler trace.
    await runCommand(page, "View: Focus First Editor Group");
    await goToLine(page, code.findIndex((l) => l.startsWith(`def ${KERNEL}(`)) + 1);
    await until(async () => /⏱ [\d.]+ ms · [\d.]+% of the graph call · PTX beside/.test(await renderedText(codeGroup.locator(".view-lines").first())),
      30_000, () => "no kernel time on the def line");
    await session.screenshot("triton_chain.png");
  }),
);

const SOFTMAX = "triton_per_fused__softmax_div_exp_masked_fill_prepare_softmax_online_sub_view_3";

/** Ground truth from the fixture's files: a forward kernel's lines in output_code.py and its own file. */
function kernelFacts(program, kernel) {
  const codePath = only(/model__0_forward_1\.0\/output_code\.py$/, path.join(program, "torch_compile_debug"));
  const code = fs.readFileSync(codePath, "utf8").split("\n");
  const opening = code.findIndex((l) => l.startsWith(`${kernel} = async_compile.triton(`));
  const end = code.findIndex((l, i) => i > opening && l.startsWith("''', device_str="));
  const kernelFile = [...code.slice(0, opening)].reverse().find((l) => l.startsWith("# kernel path: ")).slice("# kernel path: ".length);
  return { code, opening: opening + 1, end: end + 1, kernelFile };
}

function userLine(program, text) {
  return fs.readFileSync(path.join(program, "prog.py"), "utf8").split("\n").findIndex((l) => l.includes(text)) + 1;
}

/** Runs Show Triton Kernel Chain of This Line until `kernel`'s PTX shows (the server indexes the run after start). */
async function showChain(page, kernel, pick) {
  const ptxGroup = groupShowing(page, `${kernel}.ptx`);
  await until(async () => {
    await runCommand(page, "Kernel Lens: Show Triton Kernel Chain of This Line");
    await pick?.();
    return ptxGroup.waitFor({ timeout: 5_000 }).then(() => true, () => false);
  }, 120_000, () => `the chain never showed ${kernel}'s PTX`);
  return ptxGroup;
}

test("a line of the user's program opens the chain of the kernel picked among those computing it, with its launched config", { timeout: 6 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    const program = path.join(session.workspace, PROGRAM);
    const facts = kernelFacts(program, SOFTMAX);
    const scores = userLine(program, "scores = (q @ k.transpose(-2, -1))");
    await runCommand(page, "View: Close All Editor Groups");
    await quickInput(page, "", `${PROGRAM}/prog.py`);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "prog.py" }).first().waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    await editorLine(page, "class Block").waitFor({ timeout: 30_000 });
    await goToLine(page, scores);
    await editorLine(page, "scores = (q @ k").waitFor({ timeout: 30_000 });
    let offered = [];
    const ptxGroup = await showChain(page, SOFTMAX, async () => {
      // two kernels with kept stages compute the line (the qkv projection's, the softmax): the softmax is picked
      const rows = page.locator(".quick-input-list .monaco-list-row");
      const softmax = rows.filter({ hasText: SOFTMAX }).first();
      if (!(await softmax.waitFor({ timeout: 5_000 }).then(() => true, () => false))) {
        return; // refused: the run is not indexed yet
      }
      offered = await rows.allTextContents();
      await softmax.click();
    });
    assert.equal(offered.length, 2, `offered: ${offered.join(" | ")}`);
    assert.ok(offered.some((r) => r.includes("triton_poi_fused_addmm_clone_split_transpose_view_1")), offered.join(" | "));
    // the PTX lines of the kernel's first Triton line from the user's line carry that Triton line and the user's
    const label = await until(async () => (await renderedText(ptxGroup.locator(".view-lines").first())).match(/◀ output_code\.py:(\d+) · prog\.py:(\d+)/),
      30_000, () => "no ◀ output_code.py label in the PTX");
    const [, tritonLine, labelled] = label.map(Number);
    assert.equal(labelled, scores);
    assert.ok(facts.opening < tritonLine && tritonLine < facts.end, `Triton line ${tritonLine} outside the kernel ${facts.opening}-${facts.end}`);
    t.diagnostic(`picked among ${offered.length}; PTX labelled ${label[0]} (${facts.code[tritonLine - 1].trim()})`);
    // the launched config and the autotuning on the kernel's @triton_heuristics line (prog_stderr.txt: the log)
    const stderr = fs.readFileSync(path.join(program, "prog_stderr.txt"), "utf8");
    const [, xblock, warps] = stderr.match(new RegExp(`Best config for ${SOFTMAX}: XBLOCK: (\\d+), num_warps: (\\d+),`));
    const tried = stderr.split(`Benchmark all input configs for ${SOFTMAX}, get:`)[1].split("Best config for")[0].match(/nreg \d+/g).length;
    const r0 = facts.code.slice(facts.opening).find((l) => /R0_BLOCK: tl.constexpr = \d+/.test(l)).match(/= (\d+)/)[1];
    const heuristics = facts.code.findIndex((l, i) => i >= facts.opening && l.startsWith("@triton_heuristics.")) + 1;
    const codeGroup = groupShowing(page, "output_code.py");
    await codeGroup.locator(".view-lines").first().click();
    await goToLine(page, heuristics);
    const expected = `⚙ R0_BLOCK=${r0} (kernel source) · XBLOCK=${xblock} · num_warps=${warps} · num_stages=1 · fastest of ${tried} configs tried (`;
    const launchLine = await until(async () => (await renderedText(codeGroup.locator(".view-lines").first())).split("\n").find((l) => l.includes(expected)),
      30_000, () => `no "${expected}" on the @triton_heuristics line`);
    assert.ok(launchLine.includes("@triton_heuristics."), launchLine);
    t.diagnostic(`launch: ${launchLine.trim()}`);
  }),
);

test("a line of the kernel's own file opens its chain at the same line of output_code.py", { timeout: 6 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    const program = path.join(session.workspace, PROGRAM);
    const facts = kernelFacts(program, KERNEL);
    const erf = facts.code.findIndex((l, i) => i > facts.opening && l.includes("libdevice.erf(")) + 1;
    const gelu = userLine(program, "h = F.gelu(");
    await runCommand(page, "View: Close All Editor Groups");
    await openFile(page, path.basename(facts.kernelFile), "import triton");
    await goToLine(page, erf - facts.opening + 1); // kernel-file line L is output_code.py's opening line + L - 1
    await editorLine(page, "libdevice.erf(").waitFor({ timeout: 30_000 });
    const ptxGroup = await showChain(page, KERNEL);
    await until(async () => (await renderedText(ptxGroup.locator(".view-lines").first())).includes(`◀ output_code.py:${erf} · prog.py:${gelu}`),
      30_000, () => `no ◀ output_code.py:${erf} label in the PTX`);
    const codeGroup = groupShowing(page, "output_code.py");
    await codeGroup.locator(".view-line", { hasText: "libdevice.erf(" }).first().waitFor({ timeout: 30_000 });
  }),
);

/** The server's line costs of the program's prog.py, asked in process (the answer the extension draws). */
function lineCostsOf(program) {
  const code = [
    "import json, sys",
    "from pathlib import Path",
    "from lsp_server.features.linked_lines import line_costs_json",
    "from lsp_server.features.lookup import uri_of",
    "from lsp_server.index import Index",
    "from lsp_server.loading.run_loader import find_run_dirs, load_run",
    "program = Path(sys.argv[1])",
    "index = Index()",
    "for run in find_run_dirs(program / 'torch_compile_debug'):",
    "    index.put_run(load_run(run))",
    "print(json.dumps(line_costs_json(index, uri_of(str(program / 'prog.py')))))",
  ].join("\n");
  return JSON.parse(execFileSync(PYTHON, ["-c", code, program], { cwd: REPO, env: { ...process.env, OMP_NUM_THREADS: "1" } }).toString());
}

/** Inlay hints' `format_ms`: µs below 0.01 ms. */
function formatLineMs(ms) {
  return ms < 0.01 ? `${(ms * 1000).toFixed(2)} µs` : `${ms.toFixed(3)} ms`;
}

/** The inlay hint of a lineCosts entry as the server labels it (cost first, then the first two kernel names, "…"
 * for more) and as VS Code renders it: cut at `editor.inlayHints.maximumLength`'s default 43 characters. */
function renderedHint(entry) {
  const names = [...new Set(entry.kernels.map((k) => k.name))];
  const label = `${entry.percent.toFixed(1)}% · ${formatLineMs(entry.ms)} → ${names.slice(0, 2).join(", ")}${names.length > 2 ? " …" : ""}`;
  return label.length > 43 ? `${label.slice(0, 43)}…` : label;
}

/** 1-based line numbers the editor group renders, and those whose row has a heat mark (the glyph margin draws
 * its marks apart from the line numbers: matched by their vertical position). */
function renderedGutter(group) {
  return group.locator("div.margin[role='presentation']").first().evaluate((margin) => {
    const top = (el) => Math.round(el.getBoundingClientRect().top);
    const rows = new Map([...margin.querySelectorAll(".line-numbers")].map((el) => [top(el), Number(el.textContent)]));
    const marks = [...margin.querySelectorAll("div")].filter((el) => getComputedStyle(el).backgroundImage.includes("data:image/svg"));
    return { numbers: [...rows.values()], marked: [...new Set(marks.map((el) => rows.get(top(el))))] };
  });
}

test("the GPU run's cost per line: ms in the inlay hints and the heat gutter of the user's program", { timeout: 6 * 60_000 }, (t) =>
  session.reporting(t, async () => {
    const page = session.page;
    const program = path.join(session.workspace, PROGRAM);
    const costs = lineCostsOf(program);
    const softmax = userLine(program, "attn = scores.masked_fill(mask");
    const entry = costs.lines.find((e) => e.line === softmax - 1);
    assert.ok(entry && entry.ms > 0 && entry.kernels.some((k) => k.name.startsWith("triton_")), JSON.stringify(entry));
    await runCommand(page, "View: Close All Editor Groups");
    await quickInput(page, "", `${PROGRAM}/prog.py`);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: "prog.py" }).first().waitFor({ timeout: 30_000 });
    await page.keyboard.press("Enter");
    await editorLine(page, "class Block").waitFor({ timeout: 30_000 });
    await goToLine(page, softmax);
    const source = groupShowing(page, "prog.py");
    // The inlay hint on the softmax line: its share of the profiled step and its ms per step, from the trace, then
    // its kernels (cut by VS Code's length limit: the cost stays visible).
    const hint = renderedHint(entry);
    const shown = await until(async () => (await renderedText(source.locator(".view-lines").first())).split("\n").find((l) => l.includes(hint)),
      90_000, () => `no inlay hint "${hint}"`);
    assert.ok(shown.includes("attn = scores.masked_fill") && hint.startsWith(`${entry.percent.toFixed(1)}% · `), shown);
    // The heat gutter: a mark on each rendered line that has a profiled share, and on no other.
    const costed = new Set(costs.lines.filter((e) => e.percent > 0).map((e) => e.line + 1));
    let last;
    const gutter = await until(async () => {
      const seen = (last = await renderedGutter(source));
      const expected = seen.numbers.filter((n) => costed.has(n));
      return expected.length > 0 && JSON.stringify(seen.marked.sort((a, b) => a - b)) === JSON.stringify(expected.sort((a, b) => a - b)) ? seen : undefined;
    }, 60_000, () => `the gutter's marks are not the costed lines: ${JSON.stringify(last)} vs ${[...costed].sort((a, b) => a - b)}`);
    t.diagnostic(`inlay: ${shown.trim()}; ${gutter.marked.length} marked of ${gutter.numbers.length} rendered lines`);
  }),
);
