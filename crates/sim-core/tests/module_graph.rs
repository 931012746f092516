//! The core's module graph, read from the sources: no import circle anywhere, and no import
//! running back up the layers.
//!
//! Every file of `src/` is a node (test-only files and `#[cfg(test)]` items are left out: a
//! test may reach anywhere). An edge is every path a file names through `crate::`, `super::`,
//! `self::` or one of its own child modules, in `use` items, in code and in macro bodies
//! (`json!(…)`, `format!(…)`): a lazy `crate::perf::round_u64(…)` deep in a function is a
//! dependency like any `use`. A path is resolved to the file that defines the item, following
//! re-exports (`pub use step::StepCostModel;` in `perf/mod.rs` makes `crate::perf::StepCostModel`
//! an edge to `perf/step.rs`); a re-export itself is not an edge of the re-exporting file (a
//! folder's `mod.rs` is its façade, not a user of its children).
//!
//! On top of that, [`LAYERS`] orders the top-level modules, lowest first; a module may import
//! its own layer or a lower one. A new top-level module must be given a layer here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use syn::visit::Visit;

/// The top-level modules of `src/`, lowest layer first.
const LAYERS: &[&[&str]] = &[
    // the ground floor: errors, numbers, randomness, requests and time, the result writer
    &["error", "num", "rng", "request", "json", "metric_info"],
    // names a scenario may use, and its resource limits
    &["policy", "limits"],
    // the hardware and model catalog, calibration, the serving front end's delays
    &["frontend", "calib", "catalog", "memory", "topo"],
    // the execution-time model, workloads, the fabric, KV managers
    &["perf", "workload", "fabric", "kv"],
    // the scenario, scheduling, the autoscaler's policy, metrics
    &["config", "sched", "scaling", "metrics"],
    // the event loop and every `impl Engine`
    &["engine"],
    // the façade, the model checker, search over scenarios, the registry
    &["api", "check", "search", "registry"],
    // the crate root (re-exports only)
    &["lib"],
];

/// One parsed source file.
struct Source {
    /// The module path of the file (`["perf", "step"]`; `[]` for `lib.rs`).
    module: Vec<String>,
    /// Top-level item names the file defines (fn, struct, const, …, and inline modules).
    items: BTreeSet<String>,
    /// Re-exports: name → the path it stands for (absolute, `crate`-less).
    reexports: BTreeMap<String, Vec<String>>,
    /// `pub use path::*` targets (absolute).
    globs: Vec<Vec<String>>,
    /// Every path the file names, absolute, `crate`-less (before resolution).
    paths: Vec<Vec<String>>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let text = a.meta.require_list().map(|l| l.tokens.to_string()).unwrap_or_default();
            text.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == "test")
        }
    })
}

/// Collects the paths of a file and its top-level facts.
struct Reader<'a> {
    module: &'a [String],
    children: BTreeSet<String>,
    paths: Vec<Vec<String>>,
    /// The first segment of every path in code (`Thing` in `Thing::new()` or `x: Thing`):
    /// a name the file re-exports and also uses is a dependency on its definition.
    heads: BTreeSet<String>,
}

impl Reader<'_> {
    /// A path as written → absolute (`crate`-less), or `None` when it names nothing of ours.
    fn absolute(&self, segs: &[String]) -> Option<Vec<String>> {
        let first = segs.first()?;
        let mut out: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.to_vec(),
            "super" => self.module.to_vec(),
            c if self.children.contains(c) => self.module.to_vec(),
            _ => return None,
        };
        let mut rest = segs;
        if first == "crate" || first == "self" {
            rest = &segs[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            out.pop()?;
            rest = &rest[1..];
        }
        out.extend(rest.iter().cloned());
        Some(out)
    }

    fn note(&mut self, segs: Vec<String>) {
        if let Some(abs) = self.absolute(&segs) {
            self.paths.push(abs);
        }
    }

    /// Paths inside a macro's tokens: `crate :: a :: b` (and `super ::`, `self ::`).
    fn scan_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let tts: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                proc_macro2::TokenTree::Group(g) => self.scan_tokens(g.stream()),
                proc_macro2::TokenTree::Ident(id) => {
                    // a path: ident (:: ident)*
                    let mut segs = vec![id.to_string()];
                    let mut j = i + 1;
                    while j + 2 < tts.len() + 1 {
                        let colons = matches!((&tts.get(j), &tts.get(j + 1)),
                            (Some(proc_macro2::TokenTree::Punct(a)), Some(proc_macro2::TokenTree::Punct(b)))
                                if a.as_char() == ':' && b.as_char() == ':');
                        match (colons, tts.get(j + 2)) {
                            (true, Some(proc_macro2::TokenTree::Ident(next))) => {
                                segs.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    self.heads.insert(segs[0].clone());
                    if segs.len() > 1 {
                        self.note(segs);
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = match i {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(x) => &x.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => return syn::visit::visit_item(self, i),
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&i.attrs) {
            syn::visit::visit_impl_item_fn(self, i);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // Private uses are edges; re-exports are collected by `read` instead.
        if matches!(u.vis, syn::Visibility::Inherited) {
            for p in flatten(&u.tree) {
                self.note(p.0);
            }
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(head) = segs.first() {
            self.heads.insert(head.clone());
        }
        if segs.len() > 1 {
            self.note(segs);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan_tokens(m.tokens.clone());
    }
}

/// A use tree as `(path, name it is known by here)` pairs; a glob gives `(prefix, "*")`.
fn flatten(tree: &syn::UseTree) -> Vec<(Vec<String>, String)> {
    fn walk(t: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        match t {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if name == "self" {
                    out.push((prefix.clone(), prefix.last().cloned().unwrap_or_default()));
                } else {
                    let mut p = prefix.clone();
                    p.push(name.clone());
                    out.push((p, name));
                }
            }
            syn::UseTree::Rename(r) => {
                let mut p = prefix.clone();
                p.push(r.ident.to_string());
                out.push((p, r.rename.to_string()));
            }
            syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into())),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// The module path of a file under `src/`.
fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn read(rel: &str, text: &str) -> (Source, Vec<Vec<String>>) {
    let file = syn::parse_file(text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let module = module_of(rel);
    let mut children = BTreeSet::new();
    let mut test_children = Vec::new();
    let mut items = BTreeSet::new();
    let mut reexports = BTreeMap::new();
    let mut globs = Vec::new();
    for item in &file.items {
        let name = match item {
            syn::Item::Mod(m) => {
                if is_cfg_test(&m.attrs) {
                    let mut child = module.clone();
                    child.push(m.ident.to_string());
                    test_children.push(child);
                    continue;
                }
                children.insert(m.ident.to_string());
                Some(&m.ident)
            }
            syn::Item::Fn(f) => Some(&f.sig.ident),
            syn::Item::Const(c) => Some(&c.ident),
            syn::Item::Static(s) => Some(&s.ident),
            syn::Item::Struct(s) => Some(&s.ident),
            syn::Item::Enum(e) => Some(&e.ident),
            syn::Item::Trait(t) => Some(&t.ident),
            syn::Item::Type(t) => Some(&t.ident),
            syn::Item::Macro(m) => m.ident.as_ref(),
            _ => None,
        };
        if let Some(n) = name {
            items.insert(n.to_string());
        }
    }
    let mut reader = Reader { module: &module, children, paths: Vec::new(), heads: BTreeSet::new() };
    for item in &file.items {
        if let syn::Item::Use(u) = item {
            if !matches!(u.vis, syn::Visibility::Inherited) && !is_cfg_test(&u.attrs) {
                for (path, name) in flatten(&u.tree) {
                    let Some(abs) = reader.absolute(&path) else { continue };
                    if name == "*" {
                        globs.push(abs);
                    } else {
                        reexports.insert(name, abs);
                    }
                }
            }
        }
    }
    reader.visit_file(&file);
    let mut paths = reader.paths;
    // A re-exported name the file uses itself: an edge to where it is defined.
    for (name, target) in &reexports {
        if reader.heads.contains(name) {
            paths.push(target.clone());
        }
    }
    (Source { module, items, reexports, globs, paths }, test_children)
}

/// The file graph: `{file: files it imports}` over `sources` (`{path under src/: text}`).
fn graph(sources: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut parsed = BTreeMap::new();
    let mut test_only = BTreeSet::new();
    for (rel, text) in sources {
        let (src, tests) = read(rel, text);
        test_only.extend(tests);
        parsed.insert(rel.clone(), src);
    }
    parsed.retain(|_, s| !test_only.iter().any(|t| s.module.starts_with(t)));
    let by_module: BTreeMap<Vec<String>, String> = parsed.iter().map(|(rel, s)| (s.module.clone(), rel.clone())).collect();
    // The file defining `path` (following re-exports), or None when it is not ours.
    fn resolve(
        path: &[String],
        parsed: &BTreeMap<String, Source>,
        by_module: &BTreeMap<Vec<String>, String>,
        depth: usize,
    ) -> Option<String> {
        let mut n = path.len();
        while !by_module.contains_key(&path[..n]) {
            n -= 1;
        }
        let file = by_module.get(&path[..n])?;
        let Some(item) = path.get(n) else { return Some(file.clone()) };
        let src = &parsed[file];
        if depth < 16 && !src.items.contains(item) {
            if let Some(target) = src.reexports.get(item) {
                let mut t = target.clone();
                t.extend(path[n + 1..].iter().cloned());
                return resolve(&t, parsed, by_module, depth + 1).or(Some(file.clone()));
            }
            for g in &src.globs {
                let mut t = g.clone();
                t.extend(path[n..].iter().cloned());
                let found = resolve(&t, parsed, by_module, depth + 1);
                if found.as_ref().is_some_and(|f| f != by_module.get(&g[..]).unwrap_or(f) || parsed[f].items.contains(item)) {
                    return found;
                }
            }
        }
        Some(file.clone())
    }
    let mut out = BTreeMap::new();
    for (rel, src) in &parsed {
        let mut edges = BTreeSet::new();
        for p in &src.paths {
            if let Some(f) = resolve(p, &parsed, &by_module, 0) {
                if &f != rel {
                    edges.insert(f);
                }
            }
        }
        out.insert(rel.clone(), edges);
    }
    out
}

/// Every circle of the graph: each strongly connected part of more than one file, sorted.
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut dg = DiGraph::<&str, ()>::new();
    let idx: BTreeMap<&str, _> = g.keys().map(|k| (k.as_str(), dg.add_node(k.as_str()))).collect();
    for (a, bs) in g {
        for b in bs {
            dg.add_edge(idx[a.as_str()], idx[b.as_str()], ());
        }
    }
    let mut out: Vec<Vec<String>> = tarjan_scc(&dg)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let mut v: Vec<String> = c.iter().map(|&n| dg[n].to_string()).collect();
            v.sort();
            v
        })
        .collect();
    out.sort();
    out
}

fn top(rel: &str) -> &str {
    let first = rel.split('/').next().unwrap_or(rel);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// Imports from a file to a higher layer's module, as `"a (layer i) -> b (layer j)"`;
/// a top-level module missing from [`LAYERS`] is reported too.
fn upward(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let layer: BTreeMap<&str, usize> =
        LAYERS.iter().enumerate().flat_map(|(i, group)| group.iter().map(move |m| (*m, i))).collect();
    let mut out = Vec::new();
    for (a, bs) in g {
        let Some(&la) = layer.get(top(a)) else {
            out.push(format!("{a}: the top-level module `{}` has no layer in LAYERS", top(a)));
            continue;
        };
        for b in bs {
            if let Some(&lb) = layer.get(top(b)) {
                if lb > la {
                    out.push(format!("{a} (layer {la}) -> {b} (layer {lb})"));
                }
            }
        }
    }
    out
}

fn sources() -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeMap::new();
    walk(&root, &root, &mut out);
    out
}

#[test]
fn the_core_has_no_import_circle() {
    let g = graph(&sources());
    // The reader sees lazy paths in code and in macro bodies, and follows re-exports.
    assert!(g["api/mod.rs"].contains("engine/mod.rs"), "{:?}", g["api/mod.rs"]);
    assert!(g.keys().all(|f| !f.ends_with("tests.rs")), "test-only files are not nodes");
    assert_eq!(circles(&g), Vec::<Vec<String>>::new());
}

#[test]
fn no_import_reaches_up_a_layer() {
    assert_eq!(upward(&graph(&sources())), Vec::<String>::new());
}

#[test]
fn every_top_level_module_has_one_layer() {
    let named: Vec<&str> = LAYERS.iter().flat_map(|g| g.iter().copied()).collect();
    let unique: BTreeSet<&str> = named.iter().copied().collect();
    assert_eq!(named.len(), unique.len(), "a module is in two layers");
    let found: BTreeSet<String> = sources().keys().map(|f| top(f).to_string()).collect();
    let named: BTreeSet<String> = unique.iter().map(|s| s.to_string()).collect();
    assert_eq!(found, named, "LAYERS must name exactly the top-level modules of src/");
}

/// The checks fail on a back-edge added anywhere: a lazy path in a function, a `use`, a
/// path in a macro body, a path through a re-export, a `super::` path inside a folder.
#[test]
fn a_deliberate_back_edge_fails_both_checks() {
    let real = sources();
    for (file, line) in [
        ("rng.rs", "fn back() -> u64 { crate::engine::MAX_TIME_NS_X }"),
        ("error.rs", "use crate::api::Simulation;"),
        ("num.rs", "fn back() -> String { format!(\"{}\", crate::perf::round_u64(1.0)) }"),
        ("request.rs", "fn back(_: &crate::Simulation) {}"),
    ] {
        let mut s = real.clone();
        s.get_mut(file).unwrap().push_str(&format!("\n{line}\n"));
        let g = graph(&s);
        assert!(!circles(&g).is_empty(), "{file}: {line} closes no circle");
        assert!(!upward(&g).is_empty(), "{file}: {line} is not an upward import");
    }
    // Inside one folder: a child naming its parent's item while the parent uses the child.
    let mut s = real.clone();
    s.get_mut("engine/mod.rs").unwrap().push_str("\nfn back() { let _ = client::Anything; }\n");
    s.get_mut("engine/client.rs").unwrap().push_str("\nfn forth() { let _ = super::Engine::new; }\n");
    assert!(circles(&graph(&s)).iter().any(|c| c.contains(&"engine/client.rs".to_string())));
}

#[test]
fn the_reader_resolves_paths_as_rust_does() {
    let s: BTreeMap<String, String> = [
        ("lib.rs", "pub mod a; pub mod b; mod c; pub mod d; pub use c::*;"),
        ("a/mod.rs", "mod inner; pub use inner::Thing; pub fn f() {}"),
        ("d/mod.rs", "mod spec; pub use spec::Spec; pub fn parse() -> Spec { Spec }"),
        ("d/spec.rs", "pub struct Spec;"),
        ("a/inner.rs", "pub struct Thing; fn g() { super::f() }"),
        ("b.rs", "use crate::a::Thing; fn h() { let _ = crate::Top; }\n#[cfg(test)]\nmod tests { use crate::c::Top; }"),
        ("c.rs", "pub struct Top; fn k() { let _ = serde_json::json!({\"x\": crate::a::f()}); }"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let g = graph(&s);
    // through the re-export to the defining file; the façade's re-export is not an edge
    assert_eq!(g["b.rs"], ["a/inner.rs", "c.rs"].map(String::from).into());
    assert_eq!(g["a/inner.rs"], ["a/mod.rs"].map(String::from).into());
    assert!(g["a/mod.rs"].is_empty());
    // a re-export the façade also uses itself is an edge
    assert_eq!(g["d/mod.rs"], ["d/spec.rs"].map(String::from).into());
    // a path in a macro body
    assert_eq!(g["c.rs"], ["a/mod.rs"].map(String::from).into());
    assert!(circles(&g).is_empty());
}

/// `policy.rs` is read by the parser, the engine and the registry alike, so it may name
/// nothing of the crate but the errors.
#[test]
fn the_policy_registry_imports_only_the_errors() {
    let g = graph(&sources());
    assert!(g["policy.rs"].iter().all(|f| f == "error.rs"), "{:?}", g["policy.rs"]);
}
