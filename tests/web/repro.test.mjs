// The crash reproducers found through WASM (tests/repro/wasm_*, copies of ../shared/repro/)
// under the module's own limits (no limits.max_memory_gib forced): each gives a typed error
// other than InternalError, or a run that accounts for every request. (A prefix-caching
// pool's free queue used to double past 2 GiB on its first freed block: a "capacity
// overflow" InternalError at 460 M blocks.) A reproducer that sets limits.max_memory_gib
// must also grow the module by less than it: the fuzzer's 1,286,137 short requests under
// 0.5 GiB grew it by 724 MiB (the result's JSON text and its columns doubled as they grew);
// scaled down, 330,000 of them under 0.125 GiB grew it by 190 MiB, and 280,000 are about
// the most the estimate now admits there (108 MiB).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import * as o1sim from "../../web/o1sim.js";

const ROOT = new URL("../../", import.meta.url);
const ALLOWED = new Set(["ConfigError", "InfeasibleError", "StallError", "ResourceError"]);

await o1sim.init(readFileSync(new URL("web/pkg/o1sim.wasm", ROOT)));

const names = readdirSync(new URL("tests/repro", ROOT)).filter((f) => f.startsWith("wasm_") && f.endsWith(".json")).sort();

test("the WASM reproducers are committed", () => {
  assert.ok(names.includes("wasm_internalerror_hbm_gib_1e6_sessions.case.json"), names.join(", "));
  assert.ok(names.includes("wasm_memory_over_limit_330000_requests.json"), names.join(", "));
});

for (const name of names) {
  test(`${name}: a typed error or a correct run`, () => {
    let scenario = JSON.parse(readFileSync(new URL(`tests/repro/${name}`, ROOT), "utf8"));
    if (name.endsWith(".case.json")) {
      // A fuzzer's case: the scenario is its payload, given as a table (mode "dict").
      assert.equal(scenario.mode, "dict");
      scenario = scenario.payload;
    }
    o1sim.reset();
    const before = o1sim.memoryBytes();
    const limit = scenario.limits?.max_memory_gib;
    try {
      const r = JSON.parse(o1sim.simulate(scenario));
      const s = r.summary;
      assert.equal(s.finished + s.rejected, s.num_requests, name);
      assert.equal(r.requests.request_id.length, s.num_requests, name);
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      assert.ok(e instanceof o1sim.SimError && ALLOWED.has(e.name), `${name}: ${e?.name}: ${e?.message}`);
    } finally {
      const grown = o1sim.memoryBytes() - before;
      if (limit) assert.ok(grown < limit * 2 ** 30, `${name}: the module grew by ${grown} bytes, over its limit`);
      o1sim.reset();
    }
  });
}
