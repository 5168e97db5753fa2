//! The generated protobuf types (`platter_proto::v1`) stay at the edges: only the modules
//! ARCHITECTURE.md names use them, and ARCHITECTURE.md names every module that does.
//!
//! A file uses them when its code (comments left out) names `platter_proto::v1`, or
//! `v1` inside `platter_proto` itself, or `pb::` as a path of its own: `pb` is the one
//! alias the workspace gives `v1` (`use platter_proto::v1 as pb`), and a child module
//! reaches it through its parent's glob (`use super::*`), so the alias alone counts.
//! `tonic_health::pb::…` is another crate's and does not (it follows `::`).
//!
//! A module here is a file's path under `src/` without `.rs` (`mod.rs` is its folder),
//! as ARCHITECTURE.md writes it with `::`; a folder in `ALLOWED` allows every file in it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The modules that may use the generated types, by crate; ARCHITECTURE.md's code map says
/// the same in its paragraph on `platter/v1` ("The generated types are used by …").
const ALLOWED: &[(&str, &[&str])] = &[
    ("proto", &["wire"]),
    ("agent", &["link"]),
    (
        "coordinator",
        &[
            "cli",
            "client",
            "fuzz",
            "service::http::console",
            "service::http::fleet",
            "service::hub",
            "service::rpc",
            "service::server",
            "views",
        ],
    ),
];

/// `text` without `//` comments (doc comments too), so a module that only mentions the
/// generated types in words does not count.
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal ("http://…") is kept: only a comment that
            // starts the line's code, or follows whitespace, is cut.
            Some(i) if l[..i].trim().is_empty() || l[..i].ends_with(' ') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `code` names the generated types, as the file's doc comment says.
fn uses_generated(krate: &str, code: &str) -> bool {
    if code.contains("platter_proto::v1") {
        return true;
    }
    if krate == "proto" && (code.contains("crate::v1") || code.contains("super::v1")) {
        return true;
    }
    code.match_indices("pb::").any(|(i, _)| {
        let before = code[..i].chars().next_back();
        !matches!(before, Some(c) if c == ':' || c == '_' || c.is_alphanumeric())
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `service/http/console.rs` → `service::http::console`; `cli/mod.rs` → `cli`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

fn allowed(list: &[&str], module: &str) -> bool {
    list.iter()
        .any(|a| module == *a || module.starts_with(&format!("{a}::")))
}

/// Every module of `krate` whose code names the generated types (tests left out: the
/// `tests.rs` files and what follows a file's `#[cfg(test)]`).
fn users(workspace: &Path, krate: &str) -> BTreeSet<String> {
    let src = workspace.join(krate).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = BTreeSet::new();
    for file in files {
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
        let module = module_of(&src, &file);
        if module == "v1" || module.is_empty() && krate == "proto" {
            // The generated module itself, and the crate root that declares it.
            continue;
        }
        if uses_generated(krate, &code(before_tests)) {
            found.insert(module);
        }
    }
    found
}

#[test]
fn only_the_modules_named_use_the_generated_types() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut wrong = Vec::new();
    for (krate, list) in ALLOWED {
        let users = users(workspace, krate);
        for module in &users {
            if !allowed(list, module) {
                wrong.push(format!(
                    "{krate}: `{module}` uses platter_proto::v1 but is not among the modules \
                     allowed to (ALLOWED here, and ARCHITECTURE.md's code map): convert at \
                     the edge (`platter_proto::wire`) or add it to both"
                ));
            }
        }
        for a in *list {
            if !users.iter().any(|m| allowed(&[a], m)) {
                wrong.push(format!(
                    "{krate}: `{a}` is allowed to use the generated types but no longer does: \
                     take it out of ALLOWED and ARCHITECTURE.md"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn architecture_md_names_the_same_modules() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let doc = std::fs::read_to_string(workspace.join("ARCHITECTURE.md")).unwrap();
    let start = doc
        .find("The generated types are used by")
        .expect("ARCHITECTURE.md says which modules use the generated types");
    let paragraph = &doc[start..start + doc[start..].find("\n  *").unwrap_or(doc.len() - start)];
    for (krate, list) in ALLOWED {
        for module in *list {
            assert!(
                paragraph.contains(&format!("`{module}`")),
                "ARCHITECTURE.md's sentence on the generated types does not name `{module}` \
                 ({krate}); it reads: {paragraph}"
            );
        }
    }
}

#[test]
fn the_rule_sees_a_use_and_ignores_words_and_other_crates() {
    assert!(uses_generated(
        "coordinator",
        &code("use platter_proto::v1 as pb;")
    ));
    assert!(uses_generated(
        "coordinator",
        &code("let r = pb::ReportRequest {")
    ));
    assert!(uses_generated(
        "proto",
        &code("impl From<crate::v1::Plan> for X {}")
    ));
    assert!(!uses_generated(
        "coordinator",
        &code("// converts to platter_proto::v1 at the edge\nfn f() {}")
    ));
    assert!(!uses_generated(
        "coordinator",
        &code("use tonic_health::pb::health_client::HealthClient;")
    ));
    assert!(!uses_generated("coordinator", &code("let x = grpc_pb::Y;")));
    assert_eq!(
        module_of(Path::new("/s"), Path::new("/s/service/http/console.rs")),
        "service::http::console"
    );
    assert_eq!(
        module_of(Path::new("/s"), Path::new("/s/cli/mod.rs")),
        "cli"
    );
    assert!(allowed(&["service::rpc"], "service::rpc::control"));
    assert!(!allowed(&["service::rpc"], "service::rpcx"));
}
