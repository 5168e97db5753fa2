//! No import circles between modules (issue 28), in any crate of the workspace.
//!
//! A module is a file (`store/mod.rs` is the `store` module, `store/db/pg.rs` is
//! `store::db::pg`); an inline `mod x { … }` belongs to its file. The check is made at
//! every folder of the module tree, the crate root included, as a picture of that folder
//! would show it: the modules beneath it, a child folder counted as one module with
//! everything in it. So a circle between two files of one folder fails, and so does one
//! between two folders (`report` → `store` → `report`) whose files never import each
//! other back directly. A folder's own file (`lib.rs`, `mod.rs`, or `x.rs` beside `x/`)
//! is its face, not one of its modules: the folder's children may use what it holds
//! (`super::X`) while it calls them, as Rust's module tree means; seen from outside, the
//! face and the folder are one module.
//!
//! An import is any path that names a module of the crate: a `use`, or a path in the code
//! (`crate::a::b::f()`, `super::X`, `child::f()`, a name brought in by a glob, paths in
//! macro calls too), followed through re-exports (`pub use x::Y`) to the module that
//! defines the item. A private glob (`use super::*`) imports only the names used through
//! it; a `pub use x::*` re-exports, so it is an import of `x`. `mod x;` is no import, nor
//! is `pub(in path)`.
//!
//! Test code may import anything: items under `#[cfg(test)]`, and so the `tests.rs` files
//! that only `#[cfg(test)] mod tests;` declares, are left out.
//!
//! The sources are read with `syn`, already in the tree through the proc macros: a Rust
//! lexer of our own would have to get raw strings, lifetimes, nested comments and the
//! extent of a `#[cfg(test)]` item right before it could read a single path.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::Visit;

#[test]
fn no_module_of_the_workspace_imports_itself_through_others() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let manifest: toml::Table = std::fs::read_to_string(workspace.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let members = manifest["workspace"]["members"].as_array().unwrap();
    let mut found = Vec::new();
    for member in members {
        let src = workspace.join(member.as_str().unwrap()).join("src");
        let roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
            .iter()
            .map(|root| src.join(root))
            .filter(|root| root.exists())
            .collect();
        assert!(
            !roots.is_empty(),
            "no lib.rs or main.rs in {}",
            src.display()
        );
        for root in roots {
            found.extend(circles(&Crate::read(&root), workspace));
        }
    }
    assert!(
        found.is_empty(),
        "import circles between modules:\n{}",
        found.join("\n")
    );
}

/// The cycle finder fails on a graph with circles and names each of them.
#[test]
fn the_cycle_finder_names_each_circle() {
    // 0 → 1 → 2 → 0 and 3 ⇄ 4 ⇄ 5, joined by 2 → 3; 6 is on no circle.
    let edges = [
        (0, 1),
        (1, 2),
        (2, 0),
        (2, 3),
        (3, 4),
        (4, 3),
        (4, 5),
        (5, 4),
        (5, 6),
    ];
    let graph = edges.iter().map(|&e| (e, ())).collect();
    assert_eq!(
        cycles(7, &graph),
        vec![vec![0, 1, 2, 0], vec![3, 4, 3], vec![5, 4, 5]]
    );
    let acyclic = [(0, 1), (1, 2), (0, 2)].iter().map(|&e| (e, ())).collect();
    assert_eq!(cycles(3, &acyclic), Vec::<Vec<usize>>::new());
}

/// The whole check on a hand-made crate: a circle between two folders, one inside a
/// folder through `super::*`, and imports it must not count, which would make more.
#[test]
fn a_hand_made_crate_with_circles_fails_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::A;\n"),
        // a's face and its children use each other: no circle.
        ("a.rs", "mod x;\nmod y;\npub struct A;\nfn f() { x::g(); crate::c::k() }\n"),
        // x ⇄ y, x reaching y through a glob of its face.
        ("a/x.rs", "use super::*;\npub fn g() { y::h() }\n"),
        ("a/y.rs", "use crate::b::B;\npub fn h() {}\nfn i() { super::x::g() }\n"),
        // a → b through y, b → a through a re-export in the crate root.
        ("b/mod.rs", "pub struct B;\nfn h() -> crate::A { crate::A }\n"),
        // Not imports: a visibility (c → crate → a → c) and test code (c → a → c).
        (
            "c.rs",
            "pub(super) fn k() {}\n#[cfg(test)]\nmod tests;\n#[cfg(all(test, unix))]\nfn t() { crate::a::A; }\n",
        ),
        ("c/tests.rs", "use crate::a::A;\n"),
    ];
    for (path, text) in files {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let found = circles(&Crate::read(&src.join("lib.rs")), dir.path());
    assert_eq!(found.len(), 2, "{found:#?}");
    let between_folders = found.iter().find(|c| c.contains(": a → b → a\n"));
    assert!(
        between_folders.is_some_and(|c| c.contains("src/a/y.rs:1") && c.contains("src/b/mod.rs:2")),
        "{found:#?}"
    );
    let in_a_folder = found.iter().find(|c| c.contains(": a::x → a::y → a::x\n"));
    assert!(
        in_a_folder.is_some_and(|c| c.contains("src/a/x.rs:2") && c.contains("src/a/y.rs:3")),
        "{found:#?}"
    );
}

/// A module of a crate: where it is, what it holds, and the paths it names.
#[derive(Default)]
struct Module {
    path: Vec<String>,
    file: PathBuf,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    /// Items defined here (a path ending at one of them ends in this module).
    defined: BTreeSet<String>,
    /// `use` bindings: the name and the path it stands for, as written here.
    uses: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
    /// Every path named here, with its line.
    refs: Vec<(Vec<String>, usize)>,
}

/// One crate's module tree, read from its root file.
struct Crate {
    modules: Vec<Module>,
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut krate = Crate {
            modules: vec![Module {
                file: root.to_path_buf(),
                ..Module::default()
            }],
        };
        krate.read_file(0, root.parent().unwrap());
        krate
    }

    /// Reads the file of module `m`, whose child modules' files are in `dir`.
    fn read_file(&mut self, m: usize, dir: &Path) {
        let file = &self.modules[m].file;
        let text = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let ast =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()));
        self.read_items(m, &ast.items, dir);
    }

    fn read_items(&mut self, m: usize, items: &[syn::Item], dir: &Path) {
        for item in items {
            if is_test(item_attrs(item)) {
                continue;
            }
            if let Some(name) = item_name(item) {
                self.modules[m].defined.insert(name);
            }
            let syn::Item::Mod(module) = item else {
                let mut refs = Refs {
                    krate: self,
                    module: m,
                };
                refs.visit_item(item);
                continue;
            };
            let name = module.ident.to_string();
            let child = self.modules.len();
            let mut path = self.modules[m].path.clone();
            path.push(name.clone());
            self.modules.push(Module {
                path,
                file: self.modules[m].file.clone(),
                parent: Some(m),
                ..Module::default()
            });
            self.modules[m].children.insert(name.clone(), child);
            match &module.content {
                Some((_, items)) => self.read_items(child, items, &dir.join(&name)),
                None => {
                    let file = [
                        dir.join(format!("{name}.rs")),
                        dir.join(&name).join("mod.rs"),
                    ]
                    .into_iter()
                    .find(|f| f.exists())
                    .unwrap_or_else(|| panic!("no file for module {name} in {}", dir.display()));
                    self.modules[child].file = file;
                    self.read_file(child, &dir.join(&name));
                }
            }
        }
    }

    /// The module that `path`, named in module `m`, ends in (`None`: outside the crate, or
    /// a local name).
    fn resolve(&self, m: usize, path: &[String], depth: usize) -> Option<usize> {
        let (first, rest) = path.split_first()?;
        if depth > 32 {
            return None;
        }
        match first.as_str() {
            "crate" => self.walk(0, rest, depth),
            "self" => self.walk(m, rest, depth),
            "super" => self.walk(self.modules[m].parent?, rest, depth),
            _ if self.holds(m, first, depth) => self.walk(m, path, depth),
            _ => None,
        }
    }

    /// Follows `path` down from module `m`.
    fn walk(&self, m: usize, path: &[String], depth: usize) -> Option<usize> {
        let Some((first, rest)) = path.split_first() else {
            return Some(m);
        };
        let module = &self.modules[m];
        if first == "super" {
            return self.walk(module.parent?, rest, depth);
        }
        if let Some(&child) = module.children.get(first) {
            return self.walk(child, rest, depth);
        }
        if module.defined.contains(first) {
            return Some(m);
        }
        if let Some(target) = module.uses.get(first) {
            let mut path = target.clone();
            path.extend_from_slice(rest);
            return self.resolve(m, &path, depth + 1);
        }
        for glob in &module.globs {
            if let Some(g) = self.resolve(m, glob, depth + 1) {
                if g != m && self.holds(g, first, depth + 1) {
                    return self.walk(g, path, depth + 1);
                }
            }
        }
        // Something of `m` this reading does not see (an enum's variant, a macro's item).
        Some(m)
    }

    /// Whether `name` means something in module `m`.
    fn holds(&self, m: usize, name: &str, depth: usize) -> bool {
        let module = &self.modules[m];
        depth <= 32
            && (module.children.contains_key(name)
                || module.defined.contains(name)
                || module.uses.contains_key(name)
                || module.globs.iter().any(|glob| {
                    self.resolve(m, glob, depth + 1)
                        .is_some_and(|g| g != m && self.holds(g, name, depth + 1))
                }))
    }

    /// The imports between files: (from, to) → where, the first seen of each.
    fn imports(&self) -> BTreeMap<(PathBuf, PathBuf), String> {
        let mut imports = BTreeMap::new();
        for (m, module) in self.modules.iter().enumerate() {
            for (path, line) in &module.refs {
                let Some(target) = self.resolve(m, path, 0) else {
                    continue;
                };
                let to = &self.modules[target].file;
                if *to != module.file {
                    imports
                        .entry((module.file.clone(), to.clone()))
                        .or_insert_with(|| format!("{}:{line}", module.file.display()));
                }
            }
        }
        imports
    }
}

/// Collects the `use`s and paths of one module's items (its own, not its child modules').
struct Refs<'a> {
    krate: &'a mut Crate,
    module: usize,
}

impl Refs<'_> {
    fn record(&mut self, path: Vec<String>, line: usize) {
        self.krate.modules[self.module].refs.push((path, line));
    }

    fn read_use(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>, public: bool) {
        let line = tree.span().start().line;
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.read_use(&p.tree, prefix, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.bind(prefix, n.ident.to_string(), None, line),
            syn::UseTree::Rename(r) => self.bind(
                prefix,
                r.ident.to_string(),
                Some(r.rename.to_string()),
                line,
            ),
            syn::UseTree::Glob(_) => {
                if public {
                    self.record(prefix.clone(), line);
                }
                self.krate.modules[self.module].globs.push(prefix.clone());
            }
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.read_use(tree, prefix, public);
                }
            }
        }
    }

    fn bind(&mut self, prefix: &[String], name: String, rename: Option<String>, line: usize) {
        let mut path = prefix.to_vec();
        // `use a::b::{self}` names `b`.
        let name = if name == "self" {
            prefix.last().cloned().unwrap_or_default()
        } else {
            path.push(name.clone());
            name
        };
        self.record(path.clone(), line);
        let name = rename.unwrap_or(name);
        if name != "_" {
            self.krate.modules[self.module].uses.insert(name, path);
        }
    }

    /// Paths inside a macro call: every `a::b::c` (or lone name) among its tokens.
    fn read_tokens(&mut self, tokens: TokenStream) {
        let mut path: Vec<String> = Vec::new();
        let mut line = 0;
        let mut colons = 0;
        for token in tokens {
            match token {
                TokenTree::Ident(ident) => {
                    if colons != 2 {
                        self.flush(&mut path, line);
                        line = ident.span().start().line;
                    }
                    path.push(ident.to_string());
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !path.is_empty() && colons < 2 => {
                    colons += 1
                }
                other => {
                    self.flush(&mut path, line);
                    colons = 0;
                    if let TokenTree::Group(group) = other {
                        self.read_tokens(group.stream());
                    }
                }
            }
        }
        self.flush(&mut path, line);
    }

    fn flush(&mut self, path: &mut Vec<String>, line: usize) {
        if !path.is_empty() {
            self.record(std::mem::take(path), line);
        }
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => return,
        };
        if !is_test(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        if item.leading_colon.is_none() {
            let public = !matches!(item.vis, syn::Visibility::Inherited);
            self.read_use(&item.tree, &mut Vec::new(), public);
        }
    }

    // A module's own inline modules are read by `read_items`; one inside a function is
    // left out.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    // `pub(in crate::a)` and `pub(super)` say who may look, not what is used.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.record(segments, path.span().start().line);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.read_tokens(mac.tokens.clone());
    }
}

/// `#[cfg(test)]`, or a `cfg` that needs `test` (`all(test, …)`), never `not(test)`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let syn::Meta::List(list) = &attr.meta else {
            return false;
        };
        let words: Vec<String> = list.tokens.clone().into_iter().flat_map(idents).collect();
        list.path.is_ident("cfg")
            && words.iter().any(|w| w == "test")
            && !words.iter().any(|w| w == "not")
    })
}

fn idents(token: TokenTree) -> Vec<String> {
    match token {
        TokenTree::Ident(i) => vec![i.to_string()],
        TokenTree::Group(g) => g.stream().into_iter().flat_map(idents).collect(),
        _ => Vec::new(),
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

/// The circles of one crate, at each of its folders, named as `a → b → a` with where each
/// import is (paths relative to `base`).
fn circles(krate: &Crate, base: &Path) -> Vec<String> {
    let imports = krate.imports();
    // The tree of files: a file's parent is the file of its module's nearest ancestor in
    // another file.
    let mut name_of: BTreeMap<&Path, String> = BTreeMap::new();
    let mut parent_of: BTreeMap<&Path, &Path> = BTreeMap::new();
    for module in &krate.modules {
        let mut up = module.parent;
        while let Some(p) = up {
            if krate.modules[p].file != module.file {
                parent_of.insert(&module.file, &krate.modules[p].file);
                break;
            }
            up = krate.modules[p].parent;
        }
        let name = if module.path.is_empty() {
            "crate".to_string()
        } else {
            module.path.join("::")
        };
        name_of.entry(&module.file).or_insert(name);
    }
    let mut found = Vec::new();
    for (&folder, folder_name) in &name_of {
        let mut placed = BTreeMap::new();
        for ((from, to), at) in &imports {
            let place = |file| place(&parent_of, folder, file);
            if let (Some(a), Some(b)) = (place(from), place(to)) {
                if a != b && a != folder && b != folder {
                    placed.entry((a, b)).or_insert(at);
                }
            }
        }
        // Numbered in path order, so each circle starts at its first module by path.
        let nodes: Vec<&Path> = placed
            .keys()
            .flat_map(|&(a, b)| [a, b])
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let number = |n| nodes.binary_search(&n).unwrap();
        let graph: BTreeMap<(usize, usize), &String> = placed
            .into_iter()
            .map(|((a, b), at)| ((number(a), number(b)), at))
            .collect();
        for cycle in cycles(nodes.len(), &graph) {
            let names: Vec<&str> = cycle.iter().map(|&n| name_of[nodes[n]].as_str()).collect();
            let wheres: Vec<String> = cycle
                .windows(2)
                .map(|e| {
                    let at = graph[&(e[0], e[1])].as_str();
                    let at = at
                        .strip_prefix(&format!("{}/", base.display()))
                        .unwrap_or(at);
                    format!(
                        "  {} → {}: {at}",
                        name_of[nodes[e[0]]], name_of[nodes[e[1]]]
                    )
                })
                .collect();
            found.push(format!(
                "in {folder_name} ({}): {}\n{}",
                folder.strip_prefix(base).unwrap_or(folder).display(),
                names.join(" → "),
                wheres.join("\n")
            ));
        }
    }
    found
}

/// Where `file` stands in the picture of `folder`: the folder's own file (its face), or
/// the child of the folder it is in; None outside the folder.
fn place<'a>(
    parent_of: &BTreeMap<&'a Path, &'a Path>,
    folder: &'a Path,
    mut file: &'a Path,
) -> Option<&'a Path> {
    loop {
        if file == folder {
            return Some(file);
        }
        let parent = *parent_of.get(file)?;
        if parent == folder {
            return Some(file);
        }
        file = parent;
    }
}

/// The circles of each strongly connected component of more than one node: from each of
/// its nodes that no circle named so far goes through, in order, the shortest circle back
/// to it; so every module of a component is named in one.
fn cycles<W>(n: usize, edges: &BTreeMap<(usize, usize), W>) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let next = |a: usize| edges.range((a, 0)..(a + 1, 0)).map(|(&(_, b), _)| b);
    let mut components = components(n, &next);
    components.sort();
    for component in components.into_iter().filter(|c| c.len() > 1) {
        let mut named = BTreeSet::new();
        for &start in &component {
            if named.contains(&start) {
                continue;
            }
            let cycle = shortest_cycle(start, &component, &next);
            named.extend(cycle.iter().copied());
            out.push(cycle);
        }
    }
    out
}

/// Breadth first from `start` within `component`, back to `start`.
fn shortest_cycle<I: Iterator<Item = usize>>(
    start: usize,
    component: &[usize],
    next: &dyn Fn(usize) -> I,
) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(a) = queue.pop_front() {
        for b in next(a).filter(|b| component.contains(b)) {
            if b == start {
                let mut cycle = vec![start, a];
                let mut at = a;
                while at != start {
                    at = came_from[&at];
                    cycle.push(at);
                }
                cycle.reverse();
                return cycle;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(b) {
                e.insert(a);
                queue.push_back(b);
            }
        }
    }
    unreachable!("{start} is in a strongly connected component of more than one node")
}

/// Tarjan's strongly connected components, each sorted.
fn components<I: Iterator<Item = usize>>(n: usize, next: &dyn Fn(usize) -> I) -> Vec<Vec<usize>> {
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        out: Vec<Vec<usize>>,
    }
    fn connect<I: Iterator<Item = usize>>(v: usize, s: &mut State, next: &dyn Fn(usize) -> I) {
        s.index[v] = Some(s.counter);
        s.low[v] = s.counter;
        s.counter += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for w in next(v) {
            match s.index[w] {
                None => {
                    connect(w, s, next);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on_stack[w] => s.low[v] = s.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            s.out.push(component);
        }
    }
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            connect(v, &mut s, next);
        }
    }
    s.out
}
