/** Tests of the palette's "Profile Inductor Run": its contribution, what it asks the server, how answers read. */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { Commands, ServerCommands } from "../../common/constants";
import { profileInductorOutcome, profileInductorRequest } from "../../common/inductorProfile";

interface Contribution {
  command: string;
  title: string;
  category: string;
}

function contributedCommands(): Contribution[] {
  // out/test/unit/ -> the extension's folder
  const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "..", "package.json"), "utf8"));
  return manifest.contributes.commands;
}

test("the palette shows 'Kernel Lens: Profile Inductor Run', an id of its own beside the server's command", () => {
  const found = contributedCommands().find((c) => c.command === Commands.profileInductorRun);
  assert.ok(found, "kernelLens.profileInductorRun is not contributed");
  assert.equal(`${found.category}: ${found.title}`, "Kernel Lens: Profile Inductor Run");
  // the language client registers the server's own id: a palette command of the same id would clash
  assert.notEqual(Commands.profileInductorRun, ServerCommands.profileInductor);
  assert.equal(ServerCommands.profileInductor, "kernelLens.profileInductor");
});

test("every palette command the extension registers is contributed, and only those", () => {
  const contributed = contributedCommands().map((c) => c.command).sort();
  assert.deepEqual(contributed, Object.values(Commands).sort());
});

test("it profiles the active file's run, else the server's current run", () => {
  assert.deepEqual(profileInductorRequest("file:///ws/prog.py"), { uri: "file:///ws/prog.py" });
  assert.deepEqual(profileInductorRequest("untitled:Untitled-1"), {});
  assert.deepEqual(profileInductorRequest(undefined), {});
});

test("a profiled run opens the profile view; a refusal is the server's words; a failure its last line", () => {
  const done = profileInductorOutcome({ exit_code: 0, output_tail: "wrote .../benchmark_output.txt\n" });
  assert.deepEqual(done, {
    level: "info",
    text: "Kernel Lens: Inductor run profiled (its kernels by category are in the profile view).",
    succeeded: true,
  });
  const ours = "run run_2026 is ours: profile it with `kernel-lens profile SCRIPT` (profile.json)";
  assert.deepEqual(profileInductorOutcome({ exit_code: 2, output_tail: ours }), { level: "warning", text: `Kernel Lens: ${ours}`, succeeded: false });
  const failed = profileInductorOutcome({ exit_code: 1, output_tail: "Traceback ...\nRuntimeError: no kernels\n\n" });
  assert.deepEqual(failed, {
    level: "error",
    text: "Kernel Lens: profiling the Inductor run exited with code 1: RuntimeError: no kernels",
    succeeded: false,
  });
  assert.equal(profileInductorOutcome(undefined).succeeded, false);
});
