//! The front ends' policy registry (`python/o1sim/registry.json`: display order, labels,
//! chart colours) names exactly the policies the core accepts, and marks as needing a
//! topology exactly those that are not co-located. A policy added to the core and not to
//! the registry (or the other way round) fails here before any front end shows it.

use sim_core::config::{ALL_POLICIES, POLICIES};

fn registry() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/o1sim/registry.json");
    let text = std::fs::read_to_string(path).expect("python/o1sim/registry.json is readable");
    serde_json::from_str(&text).expect("python/o1sim/registry.json is JSON")
}

#[test]
fn the_registry_names_every_policy_of_the_core_once() {
    let reg = registry();
    let entries = reg["policies"].as_array().expect("policies is a list");
    let mut names: Vec<&str> = entries.iter().map(|p| p["name"].as_str().expect("name is text")).collect();
    let colocated: Vec<&str> = entries
        .iter()
        .filter(|p| p["needs_topology"] == serde_json::Value::Bool(false))
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(colocated, POLICIES, "co-located policies, in the core's order");
    names.sort_unstable();
    let mut all = ALL_POLICIES.to_vec();
    all.sort_unstable();
    assert_eq!(names, all, "every policy of the core, none twice");
    for p in entries {
        let color = p["color"].as_str().expect("color is text");
        assert!(color.len() == 7 && color.starts_with('#') && color[1..].chars().all(|c| c.is_ascii_hexdigit()), "{p}: color #rrggbb");
        assert!(!p["label"].as_str().unwrap_or("").is_empty(), "{p}: label");
    }
}
