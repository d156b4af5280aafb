/** Tests of the argument "Show Kernels for Function" accepts from the server's code lenses. */
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { Commands } from "../../common/constants";
import { parseKernelTarget } from "../../common/kernelTarget";

test("a code lens's {uri, line} is the target; a menu's Uri, nothing or a bad line fall back to the cursor", () => {
  assert.deepEqual(parseKernelTarget({ uri: "file:///w/foo1.py", line: 3 }), { uri: "file:///w/foo1.py", line: 3 });
  assert.equal(parseKernelTarget(undefined), undefined);
  assert.equal(parseKernelTarget({ scheme: "file", path: "/w/foo1.py", fsPath: "/w/foo1.py" }), undefined);
  assert.equal(parseKernelTarget({ uri: "file:///w/foo1.py", line: -1 }), undefined);
  assert.equal(parseKernelTarget({ uri: "file:///w/foo1.py", line: 1.5 }), undefined);
  assert.equal(parseKernelTarget({ uri: "", line: 1 }), undefined);
  assert.equal(parseKernelTarget("file:///w/foo1.py"), undefined);
});

test("the server's code lenses name the command the extension registers", () => {
  const codeLens = fs.readFileSync(path.join(__dirname, "../../../../lsp_server/features/code_lens.py"), "utf8");
  const constant = /^SHOW_KERNELS_COMMAND = "([^"]+)"/m.exec(codeLens);
  assert.equal(constant?.[1], Commands.showKernelsForFunction);
});
