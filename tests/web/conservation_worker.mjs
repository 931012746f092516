// The WASM front end of tests/test_conservation_fronts.py: one Node process for a whole
// pytest run. Reads one scenario (JSON text) a line on stdin, runs it through the module and
// writes one JSON line a scenario on stdout: {"ok": <the result JSON text>} or
// {"error": <Python class name>, "field": ..., "message": ...}. Not a `node --test` file.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import * as o1sim from "../../web/o1sim.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
await o1sim.init(readFileSync(`${root}web/pkg/o1sim.wasm`));
process.stdout.write(JSON.stringify({ ready: true }) + "\n");

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let reply;
  try {
    reply = { ok: o1sim.simulate(line) };
  } catch (e) {
    reply = e instanceof o1sim.SimError
      ? { error: e.name, field: e.field ?? null, message: String(e.message) }
      : { error: `untyped ${e && e.name}`, field: null, message: String(e && e.stack) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
