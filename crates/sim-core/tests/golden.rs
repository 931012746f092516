//! Golden scenarios: every `tests/golden/*.toml` must produce exactly the bytes of its
//! `.json` neighbour, re-indented by [`pretty`] so that a diff shows which value moved. The
//! re-indenting is purely textual (number tokens are the writer's, untouched), so the files
//! still pin the result JSON byte for byte. The Python suite, the WASM module under Node and
//! the page in Chromium run the same files through the same re-indenting, so all front
//! ends agree byte for byte.
//! Regenerate after an intended change with `UPDATE_GOLDEN=1 cargo test --test golden`
//! (or `make golden`) and review the diff.

use std::path::PathBuf;

use sim_core::{simulate, Format, SimOptions};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// A golden file's text for a result's compact JSON: a newline and two spaces per level
/// after `{`, `[` and `,` and before `}`, `]`; a space after `:`; `{}` and `[]` stay as they
/// are; whitespace between tokens dropped; the text of strings and numbers copied as it is;
/// a final newline. The same walk is in `tests/goldenkit.py` and `tests/web/parity.test.mjs`.
fn pretty(json: &str) -> String {
    let b = json.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len() * 2);
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.extend(std::iter::repeat_n(b' ', 2 * depth));
    };
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        i += 1;
        if in_string {
            // Bytes of a multi-byte UTF-8 character are never ASCII, so they copy through.
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                out.push(c);
            }
            b'{' | b'[' => {
                let close = if c == b'{' { b'}' } else { b']' };
                let mut j = i;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                out.push(c);
                if j < b.len() && b[j] == close {
                    out.push(close);
                    i = j + 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            b',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => out.push(c),
        }
    }
    out.push(b'\n');
    String::from_utf8(out).expect("only ASCII bytes are added to valid UTF-8")
}

#[test]
fn pretty_reindents_without_touching_strings_or_numbers() {
    let compact = r#"{"a\"{":[],"b":{},"c":[1,{"d":"}],\\","é:[":"x, y"},[ ]],"e":-0.0,"f":1e300,"g":[{}]}"#;
    let expected = r#"{
  "a\"{": [],
  "b": {},
  "c": [
    1,
    {
      "d": "}],\\",
      "é:[": "x, y"
    },
    []
  ],
  "e": -0.0,
  "f": 1e300,
  "g": [
    {}
  ]
}
"#;
    let got = pretty(compact);
    assert_eq!(got, expected);
    let parse = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
    assert_eq!(parse(&got), parse(compact));
    assert_eq!(pretty(&got), got, "re-indenting a golden file gives it back");
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
        let got = pretty(&got);
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
