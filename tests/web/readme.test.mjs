// The README's JavaScript block runs as written (`make test-node`): it is extracted, its
// `./o1sim.js` pointed at web/o1sim.js, and run as a module; the error it catches is the
// typed ConfigError naming its field. (Its shell and Python blocks: tests/test_readme.py.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const readme = readFileSync(`${root}README.md`, "utf8");

test("the README's JavaScript block runs", async () => {
  const blocks = [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  assert.equal(blocks.length, 1);
  const api = pathToFileURL(`${root}web/o1sim.js`).href;
  assert.ok(blocks[0].includes('from "./o1sim.js"'));
  const code = blocks[0]
    .replace('from "./o1sim.js"', `from ${JSON.stringify(api)}`)
    .replace("catch (e) {", "catch (e) { globalThis.readmeError = e;");
  const dir = mkdtempSync(join(tmpdir(), "o1sim-readme-"));
  try {
    const file = join(dir, "readme.mjs");
    writeFileSync(file, code + "\nexport { text, s };\n");
    const mod = await import(pathToFileURL(file).href);
    const result = JSON.parse(mod.text);
    assert.equal(result.summary.num_requests, 2000);
    assert.equal(mod.s.deployment.tp, 4);
    const e = globalThis.readmeError;
    assert.ok(e, "the block's bad scenario did not throw");
    assert.equal(e.name, "ConfigError");
    assert.equal(e.field, "deployment.tp");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
