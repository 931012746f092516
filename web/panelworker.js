// What the page's search panels (Capacity & plan, Model check) share: a Worker of a panel's
// own running worker.js (so a long search never delays the experiment's runs, and Stop ends it
// by terminating the Worker), and the small DOM builder they render with.

/** `el("td", {textContent: "x"}, child, …)`: an element with properties and children (null and
 *  undefined children are left out). */
export const el = (tag, props = {}, ...kids) => {
  const e = Object.assign(document.createElement(tag), props);
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
};

/** Requests to a panel's Worker by id. `start()` starts it (once) and resolves when the WASM
 *  module at `wasmUrl` is loaded; `ask(op, args, progress)` resolves with the reply (a worker
 *  error rejects with its name, message and field), `progress` receives its progress messages;
 *  `cancel()` terminates the Worker, rejecting what was in flight with a "Stopped" error. */
export class PanelWorker {
  constructor(wasmUrl) {
    this.wasmUrl = wasmUrl;
    this.worker = null;
    this.ready = null;
    this.nextId = 1;
    this.pending = new Map();
  }

  /** Whether a request is in flight. */
  get busy() {
    return this.worker !== null && this.pending.size > 0;
  }

  start() {
    if (this.worker) return this.ready;
    this.worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
    this.worker.onmessage = (ev) => {
      const p = this.pending.get(ev.data.id);
      if (!p) return;
      if (ev.data.progress !== undefined) { p.progress?.(ev.data.progress); return; }
      this.pending.delete(ev.data.id);
      ev.data.ok ? p.resolve(ev.data) : p.reject(Object.assign(new Error(ev.data.error.message), ev.data.error));
    };
    this.worker.onerror = (ev) => {
      for (const p of this.pending.values()) p.reject(new Error(`worker failed: ${ev.message}`));
      this.pending.clear();
    };
    this.ready = this.ask("init", [this.wasmUrl]);
    return this.ready;
  }

  ask(op, args, progress) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, progress });
      this.worker.postMessage({ id, op, args });
    });
  }

  cancel() {
    if (!this.worker) return;
    this.worker.terminate();
    this.worker = null;
    for (const p of this.pending.values()) p.reject(Object.assign(new Error("stopped"), { name: "Stopped" }));
    this.pending.clear();
  }
}
