/** Tests of how job exit codes read to the user. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { JOB_SPECS, jobOutcome } from "../../common/jobs";

test("exit 0 succeeds; only profiling opens the profile view", () => {
  assert.deepEqual(jobOutcome("profile", "foo1.py", 0), { level: "info", text: "Kernel Lens: foo1.py profiled.", succeeded: true });
  assert.equal(JOB_SPECS.profile.opensProfile, true);
  assert.equal(JOB_SPECS.compile.opensProfile, false);
});

test("exit 1 of an accuracy check reports a mismatch", () => {
  const outcome = jobOutcome("check-accuracy", "foo1.py", 1);
  assert.equal(outcome.level, "error");
  assert.equal(outcome.succeeded, false);
  assert.match(outcome.text, /differs from eager/);
});

test("usage errors, unknown codes and cancellations are told apart", () => {
  assert.match(jobOutcome("compile", "a.py", 2).text, /usage error/);
  assert.match(jobOutcome("compile", "a.py", 139).text, /exited with code 139/);
  assert.deepEqual(jobOutcome("compile", "a.py", undefined), { level: "warning", text: "Kernel Lens: compiling a.py was cancelled.", succeeded: false });
});
