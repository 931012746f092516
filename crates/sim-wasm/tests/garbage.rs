//! Garbage in, error envelope out: no input may make the core panic (on wasm a panic in a
//! build without exception handling would trap the module). Every call here must return
//! either a result or an envelope of a *user* error kind, never `InternalError`.

use serde_json::Value;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden");

fn assert_clean(what: &str, out: &sim_wasm::Outcome) {
    let text = match out {
        Ok(t) => t,
        Err(t) => t,
    };
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: output is not JSON ({e}): {text}"));
    if out.is_err() {
        let name = v["error"]["name"].as_str().unwrap_or_default();
        assert!(
            ["ConfigError", "InfeasibleError", "StallError", "ResourceError"].contains(&name),
            "{what}: unexpected error kind {name}: {text}"
        );
        assert!(v["error"]["message"].is_string(), "{what}: {text}");
    }
}

/// A small deterministic PRNG (xorshift) for mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn small_scenario() -> String {
    std::fs::read_to_string(format!("{GOLDEN}/vllm_hand.toml")).unwrap()
}

#[test]
fn random_bytes_and_broken_documents_give_config_errors() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let inputs: Vec<Vec<u8>> = vec![
        vec![],
        b"\xff\xfe\x00garbage".to_vec(),
        b"{".to_vec(),
        b"[]".to_vec(),
        b"null".to_vec(),
        b"42".to_vec(),
        b"{\"model\": {\"preset\": 3}}".to_vec(),
        (0..4096).map(|_| rng.next() as u8).collect(),
    ];
    for (i, input) in inputs.iter().enumerate() {
        for format in [0, 1, 7] {
            assert_clean(&format!("input {i} fmt {format} simulate"), &sim_wasm::simulate(input, format));
            assert_clean(&format!("input {i} fmt {format} validate"), &sim_wasm::validate(input, format));
            assert_clean(&format!("input {i} fmt {format} check"), &sim_wasm::check(input, format, b"{}"));
        }
    }
}

#[test]
fn byte_mutations_of_a_scenario_never_panic() {
    let base = small_scenario().into_bytes();
    let mut rng = Rng(12345);
    for i in 0..400 {
        let mut m = base.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(m.len());
            match rng.below(4) {
                0 => {
                    m.remove(at);
                }
                1 => m[at] = b"0123456789-.e\"[]{}=,x "[rng.below(22)],
                2 => m.insert(at, rng.next() as u8),
                _ => m.truncate(at),
            }
        }
        assert_clean(&format!("mutant {i}: {}", String::from_utf8_lossy(&m)), &sim_wasm::validate(&m, 1));
    }
}

/// Every leaf of every golden scenario replaced by each nasty value, as JSON.
#[test]
fn every_field_set_to_every_nasty_value_gives_an_error_or_a_result() {
    let nasty: Vec<Value> = serde_json::from_str(
        r#"[-1, 0, 1e308, -1e308, 1e-300, 18446744073709551615, -9223372036854775808, 4294967297,
            2.5, "", "x", "NaN", "inf", [], [1], {}, null, true]"#,
    )
    .unwrap();
    let (mut tried, mut simulated) = (0, 0);
    for path in std::fs::read_dir(GOLDEN).unwrap() {
        let path = path.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: Value = serde_json::to_value(toml_to_json(&text)).unwrap();
        let mut leaves = Vec::new();
        collect_leaves(&doc, &mut Vec::new(), &mut leaves);
        for leaf in &leaves {
            for bad in &nasty {
                let mut d = doc.clone();
                *pointer_mut(&mut d, leaf) = bad.clone();
                let input = d.to_string();
                let what = format!("{} {:?} = {bad}", path.display(), leaf);
                let v = sim_wasm::validate(input.as_bytes(), 0);
                assert_clean(&what, &v);
                tried += 1;
                // Simulate only what validates and stays small (a nasty value may legally
                // ask for billions of requests). Absurd rates and costs (1e308, 1e-300) are
                // simulated: the core stops them at its 10^9 s time horizon with an error.
                let huge = ["18446744073709551615", "4294967297"];
                if v.is_ok() && !huge.iter().any(|h| input.contains(h)) {
                    assert_clean(&what, &sim_wasm::simulate(input.as_bytes(), 0));
                    simulated += 1;
                }
            }
        }
    }
    assert!(tried > 2000 && simulated > 100, "{tried} tried, {simulated} simulated");
}

/// Every key of every sample Hugging Face config.json set to each nasty value, simulated
/// (a config is the one model input the core parses key by key).
#[test]
fn every_config_json_key_set_to_every_nasty_value_gives_an_error_or_a_result() {
    let nasty: Vec<Value> = serde_json::from_str(
        r#"[-1, 0, 1, 3, 7, 1e308, 2.5, 65537, 4294967295, 18446744073709551615, "", "x", [], [1, 0], [0, 99], {}, null, true]"#,
    )
    .unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/hf_configs");
    let (mut tried, mut ran) = (0, 0);
    for path in std::fs::read_dir(dir).unwrap() {
        let path = path.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let text_keys: Vec<(Option<&str>, String)> = match config.get("text_config").and_then(Value::as_object) {
            Some(t) => t.keys().map(|k| (Some("text_config"), k.clone())).collect(),
            None => config.as_object().unwrap().keys().map(|k| (None, k.clone())).collect(),
        };
        for (outer, key) in &text_keys {
            for bad in &nasty {
                let mut c = config.clone();
                let node = match outer {
                    Some(o) => &mut c[*o],
                    None => &mut c,
                };
                node[key.as_str()] = bad.clone();
                let scenario = serde_json::json!({
                    "seed": 1, "gpu": "h200", "deployment": {"tp": 8}, "model": {"hf_config": c},
                    "workload": {"num_requests": 3, "arrival": {"kind": "poisson", "rate": 5.0},
                                 "prompt": {"kind": "fixed", "value": 50}, "output": {"kind": "fixed", "value": 3}},
                });
                let what = format!("{} {key} = {bad}", path.display());
                let out = sim_wasm::simulate(scenario.to_string().as_bytes(), 0);
                assert_clean(&what, &out);
                tried += 1;
                ran += usize::from(out.is_ok());
            }
        }
    }
    assert!(tried > 2000 && ran > 500, "{tried} tried, {ran} ran");
}

#[test]
fn a_panic_becomes_an_internal_error_envelope() {
    let code = sim_wasm::o1_test_panic();
    assert_eq!(code, 1);
    let out = unsafe { std::slice::from_raw_parts(sim_wasm::o1_out_ptr(), sim_wasm::o1_out_len()) };
    let v: Value = serde_json::from_slice(out).unwrap();
    assert_eq!(v["error"]["name"], "InternalError");
    assert!(v["error"]["message"].as_str().unwrap().contains("o1_test_panic"));
}

#[test]
fn config_errors_name_the_field() {
    let text = small_scenario().replace("block_size = 4", "block_size = 0");
    let err = sim_wasm::validate(text.as_bytes(), 1).unwrap_err();
    let v: Value = serde_json::from_str(&err).unwrap();
    assert_eq!(v["error"]["name"], "ConfigError");
    assert_eq!(v["error"]["field"], "scheduler.block_size", "{err}");
    assert!(v["error"]["message"].as_str().unwrap().starts_with("scheduler.block_size: "));
}

fn toml_to_json(text: &str) -> Value {
    // The core's validate echoes the resolved scenario (presets expanded): a valid JSON
    // scenario with every field spelled out, so every field gets its nasty values.
    let out = sim_wasm::validate(text.as_bytes(), 1).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    v["scenario"].clone()
}

fn collect_leaves(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(k.clone());
                collect_leaves(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(3) {
                at.push(i.to_string());
                collect_leaves(x, at, out);
                at.pop();
            }
        }
        _ => out.push(at.clone()),
    }
}

fn pointer_mut<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    let mut cur = v;
    for p in path {
        cur = match cur {
            Value::Object(m) => m.get_mut(p).unwrap(),
            Value::Array(a) => &mut a[p.parse::<usize>().unwrap()],
            _ => unreachable!(),
        };
    }
    cur
}

#[test]
fn predict_step_garbage_gives_config_errors() {
    let ok = r#"{"model": "llama-3-8b", "gpu": "h200", "tp": 1, "batch": [{"new_tokens": 2048, "context_tokens": 0}]}"#;
    assert!(sim_wasm::predict_step(ok.as_bytes()).is_ok());
    let doc: Value = serde_json::from_str(ok).unwrap();
    let nasty: Vec<Value> =
        serde_json::from_str(r#"[-1, 0, 1e308, 18446744073709551615, -9223372036854775808, 2.5, "", "x", [], {}, null, true]"#).unwrap();
    let mut leaves = Vec::new();
    collect_leaves(&doc, &mut Vec::new(), &mut leaves);
    for leaf in &leaves {
        for bad in &nasty {
            let mut d = doc.clone();
            *pointer_mut(&mut d, leaf) = bad.clone();
            assert_clean(&format!("{leaf:?} = {bad}"), &sim_wasm::predict_step(d.to_string().as_bytes()));
        }
    }
    for junk in [&b""[..], b"{", b"[]", b"\xff"] {
        assert_clean("junk", &sim_wasm::predict_step(junk));
    }
}

#[test]
fn routes_and_topology_garbage_give_config_errors_with_paths() {
    let ok = sim_wasm::routes(br#""hgx-h200""#, b"gpu0", b"gpu5", b"").expect("routes on a preset");
    let v: Value = serde_json::from_str(&ok).unwrap();
    assert!(v.as_array().is_some_and(|a| a.iter().any(|c| c["chosen"] == true)), "{ok}");
    let table = sim_wasm::topology(br#""2x-hgx-h200-ib""#).expect("a preset expands");
    let t: Value = serde_json::from_str(&table).unwrap();
    assert!(t["links"].as_array().unwrap().len() > 16 && t["nodes"].as_array().unwrap().len() > 16);
    // A bad link names its item under `topology.`, as inside a scenario.
    let bad = br#"{"preset": "hgx-h200", "links": [{"src": "gpu0", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 0, "latency_us": 1}]}"#;
    let err: Value = serde_json::from_str(&sim_wasm::topology(bad).unwrap_err()).unwrap();
    assert_eq!(err["error"]["name"], "ConfigError");
    assert_eq!(err["error"]["field"], "topology.links[0].bandwidth_gbps", "{err}");
    // An absurd latency is refused up front (routing sums integer picoseconds).
    let huge = br#"{"preset": "hgx-h200", "links": [{"src": "gpu0", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 1, "latency_us": 1e308}]}"#;
    let err: Value = serde_json::from_str(&sim_wasm::topology(huge).unwrap_err()).unwrap();
    assert_eq!(err["error"]["field"], "topology.links[0].latency_us", "{err}");
    let err: Value = serde_json::from_str(&sim_wasm::routes(br#""hgx-h200""#, b"gpu0", b"gpu9", b"[]").unwrap_err()).unwrap();
    assert_eq!(err["error"]["field"], "dst", "{err}");
    for junk in [&b""[..], b"{", b"[]", b"\xff", b"null", b"3", br#""nope""#, br#"{"links": [{}]}"#] {
        assert_clean("topology junk", &sim_wasm::topology(junk));
        assert_clean("routes junk", &sim_wasm::routes(junk, b"gpu0", b"gpu1", b""));
        assert_clean("routes junk ids", &sim_wasm::routes(br#""hgx-h200""#, junk, b"\xff", b""));
    }
    // Links down: a link on the route moves it; a bad list names `down` or its item.
    let two = br#""2x-hgx-h200-ib""#;
    let down = sim_wasm::routes(two, b"n0.gpu3", b"n1.gpu3", br#"[["ib3", "n0.nic3"]]"#).expect("a link down");
    let v: Value = serde_json::from_str(&down).unwrap();
    let chosen = v.as_array().unwrap().iter().find(|c| c["chosen"] == true).expect("still a route");
    assert!(!chosen["path"].as_array().unwrap().iter().any(|n| n == "ib3"), "{down}");
    // gpu0's only link down on one HGX: no route, an empty list.
    assert_eq!(sim_wasm::routes(br#""hgx-h200""#, b"gpu0", b"gpu5", br#"[["nvswitch0", "gpu0"]]"#).as_deref(), Ok("[]"));
    let field = |down: &[u8]| -> Value {
        let err: Value = serde_json::from_str(&sim_wasm::routes(two, b"n0.gpu3", b"n1.gpu3", down).unwrap_err()).unwrap();
        assert_eq!(err["error"]["name"], "ConfigError", "{err}");
        err["error"]["field"].clone()
    };
    assert_eq!(field(br#"[["n0.gpu0", "n0.gpu1"]]"#), "down[0]", "not a link");
    assert_eq!(field(br#"[["n0.gpu0", "n0.nvswitch0"], ["n0.gpu0", "gpu99"]]"#), "down[1]", "unknown id");
    assert_eq!(field(br#"[["n0.gpu0"]]"#), "down[0]");
    assert_eq!(field(br#"["n0.gpu0|n0.nvswitch0"]"#), "down[0]");
    assert_eq!(field(br#"{"a": 1}"#), "down");
    for junk in [&b"{"[..], b"\xff", b"null", b"3", b"[[1, 2]]", b"[[null, \"n0.gpu0\"]]", b"[[[]]]"] {
        assert_clean("routes junk down", &sim_wasm::routes(two, b"n0.gpu3", b"n1.gpu3", junk));
    }
}

#[test]
fn step_anatomy_garbage_gives_config_errors() {
    // A calibrated cost model (the small scenario's is linear: one row).
    let scenario = std::fs::read_to_string(format!("{GOLDEN}/policy_vllm.toml")).unwrap();
    let steps = sim_wasm::simulate_steps(scenario.as_bytes(), 1).expect("steps of the small scenario");
    let steps: Value = serde_json::from_str(&steps).unwrap();
    let step = steps.as_array().unwrap().iter().find(|s| !s["shape"]["prefill"].as_array().unwrap().is_empty()).unwrap().clone();
    let ok = sim_wasm::step_anatomy(scenario.as_bytes(), 1, step.to_string().as_bytes()).expect("an anatomy");
    let a: Value = serde_json::from_str(&ok).unwrap();
    assert!(a["kernels"]["name"].as_array().unwrap().len() > 10, "{ok}");
    let nasty: Vec<Value> =
        serde_json::from_str(r#"[-1, 0, 1e308, 18446744073709551615, -9223372036854775808, 2.5, "", "x", [], {}, null, true]"#).unwrap();
    let mut leaves = Vec::new();
    collect_leaves(&step, &mut Vec::new(), &mut leaves);
    for leaf in leaves.iter().filter(|l| l.first().is_some_and(|k| k == "shape")) {
        for bad in &nasty {
            let mut d = step.clone();
            *pointer_mut(&mut d, leaf) = bad.clone();
            assert_clean(&format!("{leaf:?} = {bad}"), &sim_wasm::step_anatomy(scenario.as_bytes(), 1, d.to_string().as_bytes()));
        }
    }
    // Too many prefill entries for the scenario's max_num_seqs: refused, naming the field.
    let mut d = step.clone();
    d["shape"]["prefill"] = serde_json::json!(vec![[1, 0]; 100_000]);
    let err: Value = serde_json::from_str(&sim_wasm::step_anatomy(scenario.as_bytes(), 1, d.to_string().as_bytes()).unwrap_err()).unwrap();
    assert_eq!(err["error"]["field"], "step.shape.prefill", "{err}");
    for junk in [&b""[..], b"{", b"[]", b"\xff", b"null", b"3"] {
        assert_clean("step junk", &sim_wasm::step_anatomy(scenario.as_bytes(), 1, junk));
        assert_clean("scenario junk", &sim_wasm::step_anatomy(junk, 1, step.to_string().as_bytes()));
    }
}
