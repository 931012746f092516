//! Fuzzing the scenario parser and `simulate` with proptest: every field of the goldens and
//! the crash reproducers set to a nasty value, nudged, deleted or nested deep, and scenario
//! text with bytes flipped, inserted, deleted or cut. Each case must end in a result that
//! accounts for every request, or in an error of a user-facing kind: never a panic (an
//! `InternalError`), never a hang (`limits.max_seconds` is forced low), never more memory
//! than the forced `limits.max_memory_gib` (the estimate refuses it first).
//!
//! CI runs 40 cases per property (debug builds simulate slowly); `PROPTEST_CASES=N` runs N (`make fuzz`).

use proptest::prelude::*;
use serde_json::{json, Value};
use sim_core::{simulate, Format, SimError, SimOptions};

const LIMITS: &str = r#"{"max_memory_gib": 0.5, "max_seconds": 3.0}"#;

fn seeds() -> &'static [Value] {
    static SEEDS: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(load_seeds)
}

fn load_seeds() -> Vec<Value> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests");
    let mut out = Vec::new();
    for dir in ["golden", "repro"] {
        let mut files: Vec<_> = std::fs::read_dir(format!("{root}/{dir}")).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for p in files {
            let text = std::fs::read_to_string(&p).unwrap();
            let v = match p.extension().and_then(|e| e.to_str()) {
                Some("toml") => {
                    let t: toml::Value = toml::from_str(&text).unwrap();
                    serde_json::to_value(t).unwrap()
                }
                Some("json") => serde_json::from_str(&text).unwrap(),
                _ => continue,
            };
            // The two reproducers of 280k-330k requests are what make a case slow (a third of
            // a second against about a millisecond for every other seed); tests/repro.rs runs
            // them as they are, and a fuzz case gains nothing from their size.
            if v["workload"]["num_requests"].as_u64().is_some_and(|n| n > 50_000) {
                continue;
            }
            out.push(v);
        }
    }
    out
}

fn nasty() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::sample::select(vec![
            json!(-1), json!(0), json!(1), json!(2), json!(16), json!(4294967297u64), json!(u64::MAX), json!(i64::MIN),
            json!(1e308), json!(-1e308), json!(1e-300), json!(0.5), json!(1e12), json!(""), json!("x"), json!("vllm"),
            json!("disagg"), json!("hgx-h200"), json!([]), json!([1]), json!({}), json!(null), json!(true),
        ]),
        any::<i64>().prop_map(|x| json!(x)),
        any::<f64>().prop_filter("finite", |x| x.is_finite()).prop_map(|x| json!(x)),
        "[a-z_]{0,8}".prop_map(|s| json!(s)),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Nudge(u64),
    Set(Value),
    Delete,
    Unknown(String),
    Deep(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..1 << 20).prop_map(Op::Nudge),
        2 => nasty().prop_map(Op::Set),
        1 => Just(Op::Delete),
        1 => "[a-z_]{1,10}".prop_map(Op::Unknown),
        1 => prop::sample::select(vec![10usize, 70, 130, 600]).prop_map(Op::Deep),
    ]
}

fn paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    if !at.is_empty() {
        out.push(at.clone());
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                at.push(json!(k));
                paths(x, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(3) {
                at.push(json!(i));
                paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn parent_mut<'a>(v: &'a mut Value, path: &[Value]) -> &'a mut Value {
    let mut cur = v;
    for p in path {
        cur = match (cur, p) {
            (Value::Object(m), Value::String(k)) => m.get_mut(k).unwrap(),
            (Value::Array(a), Value::Number(i)) => &mut a[i.as_u64().unwrap() as usize],
            _ => unreachable!(),
        };
    }
    cur
}

fn at<'a>(v: &'a Value, path: &[Value]) -> &'a Value {
    path.iter().fold(v, |cur, p| match (cur, p) {
        (Value::Object(m), Value::String(k)) => &m[k],
        (Value::Array(a), Value::Number(i)) => &a[i.as_u64().unwrap() as usize],
        _ => unreachable!(),
    })
}

fn apply(mut sc: Value, ops: &[(usize, Op)]) -> Value {
    for (pick, op) in ops {
        let mut all = Vec::new();
        paths(&sc, &mut Vec::new(), &mut all);
        let numeric: Vec<_> = all.iter().filter(|p| at(&sc, p).is_number()).cloned().collect();
        let pool = if matches!(op, Op::Nudge(_)) && !numeric.is_empty() { &numeric } else { &all };
        if pool.is_empty() {
            break;
        }
        let path = pool[pick % pool.len()].clone();
        let (last, head) = path.split_last().unwrap();
        let parent = parent_mut(&mut sc, head);
        let slot = match (&mut *parent, last) {
            (Value::Object(m), Value::String(k)) => m.get_mut(k),
            (Value::Array(a), Value::Number(i)) => a.get_mut(i.as_u64().unwrap() as usize),
            _ => None,
        };
        let Some(slot) = slot else { continue };
        match op {
            Op::Nudge(r) => {
                *slot = match slot.as_f64() {
                    Some(x) if slot.is_u64() || slot.is_i64() => json!(r % (2 * x.abs() as u64 + 9)),
                    Some(x) => json!((*r as f64 / (1u64 << 20) as f64) * (2.0 * x.abs() + 1.0)),
                    None => slot.clone(),
                }
            }
            Op::Set(v) => *slot = v.clone(),
            Op::Delete => *slot = Value::Null,
            Op::Unknown(k) => {
                if let Value::Object(m) = parent {
                    m.insert(k.clone(), json!(1));
                }
            }
            Op::Deep(n) => {
                let mut x = json!(1);
                for i in 0..*n {
                    x = if i % 2 == 0 { json!([x]) } else { json!({"a": x}) };
                }
                *slot = x;
            }
        }
    }
    if let Value::Object(m) = &mut sc {
        m.insert("limits".into(), serde_json::from_str(LIMITS).unwrap());
    }
    sc
}

/// A result accounting for every request, or a user-facing error.
fn outcome(r: Result<sim_core::SimResult, SimError>, what: &str) -> Result<(), TestCaseError> {
    match r {
        Ok(r) => {
            let s = &r.summary;
            let (n, f, j) = (s["num_requests"].as_u64(), s["finished"].as_u64(), s["rejected"].as_u64());
            prop_assert_eq!(f.zip(j).map(|(a, b)| a + b), n, "{}", what);
            prop_assert_eq!(r.requests.request_id.len() as u64, n.unwrap_or(0));
        }
        Err(e) => prop_assert!(
            ["ConfigError", "InfeasibleError", "StallError", "ResourceError"].contains(&e.kind_name()),
            "{}: {}: {}",
            what,
            e.kind_name(),
            e
        ),
    }
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_scenarios_end_in_a_result_or_a_typed_error(
        seed in any::<prop::sample::Index>(),
        ops in prop::collection::vec((any::<usize>(), op()), 1..4),
    ) {
        let seeds = seeds();
        let sc = apply(seeds[seed.index(seeds.len())].clone(), &ops);
        let text = sc.to_string();
        outcome(simulate(&text, Format::Json, SimOptions::default()), &text)?;
    }

    #[test]
    fn mutated_scenario_text_ends_in_a_result_or_a_typed_error(
        seed in any::<prop::sample::Index>(),
        toml_format in any::<bool>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, any::<u8>()), 1..6),
    ) {
        let seeds = seeds();
        let mut v = seeds[seed.index(seeds.len())].clone();
        v["limits"] = serde_json::from_str(LIMITS).unwrap();
        let text = if toml_format { toml::to_string(&v).unwrap_or_default() } else { v.to_string() };
        let mut b = text.into_bytes();
        for (at, kind, byte) in &edits {
            if b.is_empty() {
                break;
            }
            let i = at.index(b.len());
            match kind {
                0 => { b.remove(i); }
                1 => b[i] = b"0123456789-.e\"[]{}=,x \n#'"[*byte as usize % 25],
                2 => b.insert(i, *byte),
                _ => b.truncate(i),
            }
        }
        let text = String::from_utf8_lossy(&b).into_owned();
        let format = if toml_format { Format::Toml } else { Format::Json };
        outcome(simulate(&text, format, SimOptions::default()), &text)?;
    }
}
