//! Golden scenarios: every `tests/golden/*.toml` must produce exactly the bytes of its
//! `.json` neighbour. The Python suite runs the same files through the wheel (and the WASM
//! runner will too), so all front ends agree byte for byte.
//! Regenerate after an intended change with `UPDATE_GOLDEN=1 cargo test --test golden`
//! (or `make golden`) and review the diff.

use std::path::PathBuf;

use sim_core::{simulate, Format, SimOptions};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

#[test]
fn golden_scenarios_match_byte_for_byte() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut names: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("tests/golden exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "expected at least 4 golden scenarios, found {}", names.len());
    let mut failures = Vec::new();
    for path in names {
        let text = std::fs::read_to_string(&path).unwrap();
        let got = simulate(&text, Format::Toml, SimOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .to_json();
        let expected_path = path.with_extension("json");
        if update {
            std::fs::write(&expected_path, &got).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|_| panic!("{} missing: run `make golden`", expected_path.display()));
        if got != expected {
            failures.push(path.file_name().unwrap().to_string_lossy().to_string());
        }
    }
    assert!(failures.is_empty(), "golden mismatch: {failures:?}");
}
