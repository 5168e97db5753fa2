//! The README and the guide in `docs/` say what the binary does, so that they cannot drift
//! from it: their campaigns validate, their commands run or at least name flags that
//! exist, their links lead somewhere, and the API paths they name are served.
//!
//! What is read: `README.md` and every `docs/*.md`, in that order. In them:
//!
//! * A fenced ```` ```yaml ```` block with a top-level `name:` line is a whole campaign:
//!   `platter validate` must accept it. Any other yaml block is a fragment: it must parse
//!   as YAML, and its top-level keys must be keys a campaign has (as `platter validate`
//!   lists them). A ```` ```toml ```` block must parse as TOML.
//! * A command is a line (with its `\` continuations) of a ```` ```sh ```` block whose
//!   program is `platter`, `platter-agent` (checked as `platter agent`), a built
//!   `target/…/platter`, or `cargo run … --bin platter -- …`; environment assignments and
//!   `sudo` before it, a `$ ` prompt, and a `# comment` after it are allowed. A `$ platter …`
//!   line in any other block, and an inline code span in the text that starts with
//!   `platter `, is a command too.
//! * **The rule for running one.** A command is run, and must exit 0, when its program is
//!   `platter` itself, nothing precedes it (no `sudo`, no environment, no prompt), it is
//!   in a sh block, and either
//!   1. it asks for help (`--help`, `-h`, or `platter help …`), or
//!   2. its command is `validate`, `certs`, `campaigns`, `report` or `history`, or it is
//!      `run examples/quickstart.yaml` (the campaign the README promises needs no root),
//!
//!   and none of its words is a placeholder: an argument in capitals (`FILE`, `CAMPAIGN`,
//!   `A`), anything with `$`, an absolute path (a drive, a system directory) or
//!   `--coordinator`. Every command run shares one fresh working directory, in document
//!   order, in which `examples` is the repository's `examples/` and no coordinator is
//!   named: the README's `platter run examples/quickstart.yaml` stores the run that later
//!   `platter report quickstart` and `platter history quickstart` read. Write a placeholder
//!   for whatever the reader must supply; a file a run command names must exist.
//! * **Every other command is checked**: its command (and subcommand) must exist, and each
//!   `--flag` (or `-x`) it uses must be an option of that command's `--help`, so a renamed
//!   command or flag fails this test even where the command cannot run here.
//! * Every relative link (`[text](path)`, `[text](path#anchor)`) must point at a file or
//!   directory that exists, and an anchor at a heading of the page it names. Every page of
//!   `docs/` must be linked from `docs/README.md`, and that from `README.md`.
//! * Every `/api/v1/…` path they name must be a route the coordinator serves.
//! * The README opens with its two commands, word for word, as `.ci/run` runs them.
//!
//! A block that is meant to be none of this (an invalid campaign shown on purpose, a command
//! that must not run) is marked by the line `<!-- docs.rs: skip -->` right before its
//! opening fence: it is neither validated nor run nor checked.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::platter;

/// The line before a fenced block that makes this test leave the block alone.
const SKIP_MARKER: &str = "<!-- docs.rs: skip -->";

/// The commands that need no root, drive, systemd or coordinator, and so are run when they
/// hold no placeholder (rule 2 above; `run` only with the quickstart).
const RUNNABLE: [&str; 5] = ["validate", "certs", "campaigns", "report", "history"];
const QUICKSTART: &str = "examples/quickstart.yaml";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A Markdown file of the documentation: its path relative to the repository and text.
struct Doc {
    rel: String,
    text: String,
}

/// `README.md`, then every `docs/*.md` by name.
fn docs() -> Vec<Doc> {
    let mut paths = vec![PathBuf::from("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| Path::new("docs").join(p.file_name().unwrap()))
        .collect();
    pages.sort();
    paths.extend(pages);
    paths
        .into_iter()
        .map(|rel| Doc {
            text: std::fs::read_to_string(repo().join(&rel)).unwrap(),
            rel: rel.to_string_lossy().into_owned(),
        })
        .collect()
}

/// A fenced code block: where it starts (`README.md:12`), its language and its lines, with
/// the fence's indentation removed.
struct Block {
    at: String,
    lang: String,
    lines: Vec<(usize, String)>,
    skip: bool,
}

/// A document's fenced blocks, and its lines outside them (1-based line numbers).
fn split(doc: &Doc) -> (Vec<Block>, Vec<(usize, String)>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    // The open block: the fence's indentation and length, and the block so far.
    let mut open: Option<(usize, usize, Block)> = None;
    let mut previous = "";
    for (i, line) in doc.text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match open.take() {
            Some((fence_indent, fence, block)) => {
                if ticks >= fence && trimmed.trim_end().chars().all(|c| c == '`') {
                    blocks.push(block);
                } else {
                    let mut block = block;
                    let cut = line
                        .char_indices()
                        .find(|&(j, c)| j >= fence_indent || c != ' ')
                        .map_or(line.len(), |(j, _)| j);
                    block.lines.push((n, line[cut..].to_string()));
                    open = Some((fence_indent, fence, block));
                }
            }
            None if ticks >= 3 => {
                let lang = trimmed[ticks..]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let block = Block {
                    at: format!("{}:{n}", doc.rel),
                    lang,
                    lines: Vec::new(),
                    skip: previous.trim() == SKIP_MARKER,
                };
                open = Some((indent, ticks, block));
            }
            None => prose.push((n, line.to_string())),
        }
        if !line.trim().is_empty() {
            previous = line;
        }
    }
    assert!(open.is_none(), "{}: a code block is never closed", doc.rel);
    (blocks, prose)
}

/// The text of a line outside its inline code spans, and the spans.
fn code_spans(line: &str) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        text.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[start + ticks..];
        match after.find(&fence) {
            Some(end) => {
                spans.push(after[..end].trim().to_string());
                rest = &after[end + ticks..];
            }
            None => {
                // An unclosed backtick is text (or a span closed on a later line).
                text.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    text.push_str(rest);
    (text, spans)
}

// ---------------------------------------------------------------------------------------
// Campaigns

/// The keys a campaign may have at the top, as `platter validate` lists them when given
/// one it does not know.
fn campaign_keys(dir: &Path) -> Vec<String> {
    let file = common::write(
        dir,
        "unknown-key.yaml",
        "name: probe\nnot_a_key: 1\nworkload: { command: { run: \"true\" } }\n",
    );
    let out = platter().arg("validate").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let hint = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("hint: allowed keys here: "))
        .unwrap_or_else(|| panic!("no list of allowed keys in: {stderr}"));
    let keys: Vec<String> = hint
        .split(", ")
        .map(|k| k.trim().trim_matches('`').to_string())
        .collect();
    assert!(keys.iter().any(|k| k == "workload"), "{keys:?}");
    keys
}

#[test]
fn every_campaign_in_the_docs_validates() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = campaign_keys(tmp.path());
    let (mut campaigns, mut fragments, mut tomls) = (0, 0, 0);
    let mut failures = Vec::new();
    for doc in docs() {
        for (k, block) in split(&doc).0.into_iter().enumerate() {
            if block.skip {
                continue;
            }
            let text: String = block.lines.iter().map(|(_, l)| format!("{l}\n")).collect();
            match block.lang.as_str() {
                "yaml" | "yml" => {}
                "toml" => {
                    tomls += 1;
                    if let Err(e) = text.parse::<toml::Table>() {
                        failures.push(format!("{}: not TOML: {e}", block.at));
                    }
                    continue;
                }
                _ => continue,
            }
            let parsed = match yaml_rust2::YamlLoader::load_from_str(&text) {
                Ok(docs) => docs,
                Err(e) => {
                    failures.push(format!("{}: not YAML: {e}", block.at));
                    continue;
                }
            };
            if block.lines.iter().any(|(_, l)| l.starts_with("name:")) {
                campaigns += 1;
                let name = format!("{}-{k}.yaml", doc.rel.replace(['/', '.'], "-"));
                let file = common::write(tmp.path(), &name, &text);
                let out = platter()
                    .current_dir(tmp.path())
                    .args(["validate", "--local-host", "docs-host"])
                    .arg(&file)
                    .output()
                    .unwrap();
                if !out.status.success() {
                    failures.push(format!(
                        "{}: `platter validate` refuses this campaign ({}):\n{}",
                        block.at,
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                continue;
            }
            fragments += 1;
            for top in parsed.iter().filter_map(|d| d.as_hash()) {
                for key in top.keys().filter_map(|k| k.as_str()) {
                    if !keys.iter().any(|k| k == key) {
                        failures.push(format!(
                            "{}: `{key}:` is not a campaign key (they are {})",
                            block.at,
                            keys.join(", ")
                        ));
                    }
                }
            }
        }
    }
    eprintln!(
        "docs: {campaigns} campaign(s) validated, {fragments} YAML fragment(s) and {tomls} TOML block(s) parsed"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The README's tour and the campaign reference hold whole campaigns.
    assert!(campaigns >= 3, "only {campaigns} campaigns found");
}

// ---------------------------------------------------------------------------------------
// Commands

/// A `platter` command found in the documentation.
struct Cmd {
    at: String,
    /// Its arguments after the program (`platter-agent`'s after an implied `agent`).
    args: Vec<String>,
    /// Whether it may be run (rule above), before looking at its arguments.
    plain: bool,
}

/// Shell words of `line` up to a comment or the end of its first command (`|`, `;`, `&`,
/// `>`, `<`), quotes removed.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '#' if !in_word => break,
            '|' | ';' | '&' | '>' | '<' => break,
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The `platter` command in `line`, if it holds one.
fn command(at: String, line: &str, in_sh: bool) -> Option<Cmd> {
    let mut plain = in_sh;
    let mut line = line.trim();
    if let Some(rest) = line.strip_prefix("$ ") {
        line = rest;
        plain = false;
    }
    let mut w = words(line);
    while w.first().is_some_and(|first| {
        let assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        });
        assignment || first == "sudo"
    }) {
        w.remove(0);
        plain = false;
    }
    let program = w.first()?.clone();
    let args: Vec<String> = match program.as_str() {
        "platter" => w[1..].to_vec(),
        "platter-agent" => {
            plain = false;
            std::iter::once("agent".to_string())
                .chain(w[1..].iter().cloned())
                .collect()
        }
        p if p.ends_with("/platter") && p.starts_with("target/") => {
            plain = false;
            w[1..].to_vec()
        }
        "cargo" if w.windows(2).any(|p| p[0] == "--bin" && p[1] == "platter") => {
            plain = false;
            let dashes = w.iter().position(|x| x == "--")?;
            w[dashes + 1..].to_vec()
        }
        _ => return None,
    };
    Some(Cmd { at, args, plain })
}

/// Every command of every document, in document order.
fn commands() -> Vec<Cmd> {
    let mut out = Vec::new();
    for doc in docs() {
        let (blocks, prose) = split(&doc);
        // Blocks and text by line, so that commands keep the document's order.
        let mut found: Vec<(usize, Cmd)> = Vec::new();
        for block in blocks.iter().filter(|b| !b.skip) {
            let sh = matches!(block.lang.as_str(), "sh" | "bash" | "shell");
            let mut joined: Vec<(usize, String)> = Vec::new();
            let mut continued = false;
            for (n, line) in &block.lines {
                let (text, more) = match line.trim_end().strip_suffix('\\') {
                    Some(t) => (t.to_string(), true),
                    None => (line.clone(), false),
                };
                match joined.last_mut() {
                    Some((_, last)) if continued => {
                        last.push(' ');
                        last.push_str(&text);
                    }
                    _ => joined.push((*n, text)),
                }
                continued = more;
            }
            for (n, line) in joined {
                if !sh && !line.trim_start().starts_with("$ platter") {
                    continue;
                }
                if let Some(c) = command(format!("{}:{n}", doc.rel), &line, sh) {
                    found.push((n, c));
                }
            }
        }
        for (n, line) in &prose {
            for span in code_spans(line).1 {
                let is_command = span == "platter"
                    || span.starts_with("platter ")
                    || span == "platter-agent"
                    || span.starts_with("platter-agent ");
                if is_command {
                    if let Some(c) = command(format!("{}:{n}", doc.rel), &span, false) {
                        found.push((*n, c));
                    }
                }
            }
        }
        found.sort_by_key(|(n, _)| *n);
        out.extend(found.into_iter().map(|(_, c)| c));
    }
    out
}

/// `platter <path> --help`, asked once per path.
struct Helps(HashMap<Vec<String>, String>);

impl Helps {
    fn of(&mut self, path: &[String]) -> &str {
        self.0.entry(path.to_vec()).or_insert_with(|| {
            let out = common::run_ok(platter().args(path).arg("--help"));
            String::from_utf8(out.stdout).unwrap()
        })
    }
}

/// The commands a help lists under `Commands:`, with their aliases.
fn subcommands(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut listing = false;
    for line in help.lines() {
        if line.starts_with("Commands:") {
            listing = true;
            continue;
        }
        if listing && !line.starts_with(' ') {
            break;
        }
        if !listing {
            continue;
        }
        // `  NAME  Description … [alias: OTHER]` or `[aliases: A, B]`.
        if let Some(name) = line.split_whitespace().next() {
            out.push(name.to_string());
        }
        for marker in ["[alias: ", "[aliases: "] {
            if let Some(i) = line.find(marker) {
                let rest = &line[i + marker.len()..];
                let list = &rest[..rest.find(']').unwrap_or(rest.len())];
                out.extend(list.split(',').map(|a| a.trim().to_string()));
            }
        }
    }
    out
}

/// The options a help defines: the `-x` and `--name` at the start of its option lines.
fn options(help: &str) -> Vec<String> {
    let mut out = vec!["--help".to_string(), "-h".to_string()];
    for line in help.lines() {
        let line = line.trim_start();
        if !line.starts_with('-') {
            continue;
        }
        for token in line.split([',', ' ', '=', '<', '[']) {
            let flag = token.trim();
            let long = flag.len() > 2
                && flag.starts_with("--")
                && flag[2..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-');
            let short = flag.len() == 2
                && flag.starts_with('-')
                && flag.as_bytes()[1].is_ascii_alphanumeric();
            if long || short {
                out.push(flag.to_string());
            } else if !flag.is_empty() {
                break;
            }
        }
    }
    out
}

fn is_flag(word: &str) -> bool {
    let name = word.split('=').next().unwrap_or(word);
    let long = name.len() > 2
        && name.starts_with("--")
        && name[2..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    let short =
        name.len() == 2 && name.starts_with('-') && name.as_bytes()[1].is_ascii_alphabetic();
    long || short
}

/// Whether `word` stands for something the reader supplies: an argument in capitals
/// (`FILE`, `A`, `KEY=VALUE`, `pki/agent-HOST` included), or a shell expansion.
fn placeholder(word: &str) -> bool {
    if word.contains('$') || word.contains('`') {
        return true;
    }
    word.split(['=', '@', '/', ',', ':']).any(|part| {
        part.starts_with(|c: char| c.is_ascii_uppercase())
            && !part.chars().any(|c| c.is_ascii_lowercase())
    })
}

/// Where `args` name their command: the command path (`["certs", "issue"]`) and the rest,
/// or what is wrong.
fn resolve(helps: &mut Helps, args: &[String]) -> Result<(Vec<String>, Vec<String>), String> {
    let mut path: Vec<String> = Vec::new();
    let mut rest = args.to_vec();
    if rest.first().is_some_and(|a| a == "help") {
        rest.remove(0);
    }
    loop {
        let commands = subcommands(helps.of(&path));
        if commands.is_empty() {
            return Ok((path, rest));
        }
        let Some(next) = rest.first() else {
            return Ok((path, rest));
        };
        if next.starts_with('-') || next == "…" || next == "..." {
            return Ok((path, rest));
        }
        if !commands.contains(next) || next == "help" {
            let under = if path.is_empty() {
                "platter".to_string()
            } else {
                format!("platter {}", path.join(" "))
            };
            return Err(format!(
                "`{under}` has no command `{next}` (it has {})",
                commands.join(", ")
            ));
        }
        path.push(rest.remove(0));
    }
}

#[test]
fn every_command_in_the_docs_runs_or_has_its_flags() {
    let work = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("examples"), work.path().join("examples")).unwrap();
    let config = work.path().join("no-client-config");
    std::fs::create_dir(&config).unwrap();
    let mut helps = Helps(HashMap::new());
    let (mut ran, mut checked) = (0, 0);
    let mut failures = Vec::new();
    for cmd in commands() {
        let (path, rest) = match resolve(&mut helps, &cmd.args) {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("{}: {e}", cmd.at));
                continue;
            }
        };
        let known = options(helps.of(&path));
        let mut flags_ok = true;
        for word in rest
            .iter()
            .take_while(|w| *w != "--")
            .filter(|w| is_flag(w))
        {
            let name = word.split('=').next().unwrap_or(word);
            if !known.iter().any(|k| k == name) {
                flags_ok = false;
                failures.push(format!(
                    "{}: `platter {} --help` has no option `{name}`",
                    cmd.at,
                    path.join(" ")
                ));
            }
        }
        checked += 1;
        let asks_help = cmd.args.first().is_some_and(|a| a == "help")
            || cmd.args.iter().any(|a| a == "--help" || a == "-h");
        let first = path.first().map(String::as_str).unwrap_or("");
        let runnable_command = RUNNABLE.contains(&first)
            || (first == "run"
                && rest
                    .iter()
                    .find(|a| !a.starts_with('-'))
                    .is_some_and(|f| f == QUICKSTART));
        let self_contained = !cmd.args.iter().any(|a| {
            placeholder(a) || a.starts_with('/') || a.contains("=/") || a == "--coordinator"
        });
        if !(cmd.plain && flags_ok && (asks_help || (runnable_command && self_contained))) {
            continue;
        }
        let out = common::run_within(
            platter()
                .args(&cmd.args)
                .current_dir(work.path())
                .env("XDG_CONFIG_HOME", &config)
                .env_remove("PLATTER_COORDINATOR")
                .env_remove("PLATTER_TLS_DIR")
                .env_remove("PLATTER_CONFIG")
                .env_remove("PLATTER_DB")
                .env_remove("PLATTER_RETRY_FOR"),
            Duration::from_secs(300),
        );
        ran += 1;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
            failures.push(format!(
                "{}: `platter {}` exited with {} (run in {}):\n{}",
                cmd.at,
                cmd.args.join(" "),
                out.status,
                work.path().display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ));
        }
    }
    eprintln!("docs: {checked} command(s) checked against --help, {ran} of them run");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(ran >= 10 && checked >= 50, "ran {ran}, checked {checked}");
}

/// The README's opening is a contract: `.ci/run` runs its two commands, word for word.
#[test]
fn the_readme_opens_with_the_two_commands() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let opening = &readme[..readme.find("\n## ").unwrap_or(readme.len())];
    for command in [
        "cargo run --release --bin platter -- run examples/quickstart.yaml",
        "cargo test --workspace",
    ] {
        assert!(
            opening.contains(&format!("```sh\n{command}\n```")),
            "README.md no longer opens with `{command}` in a block of its own"
        );
    }
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(ci.contains("cargo test --workspace"));
    assert!(
        ci.contains("cargo run --release --locked --bin platter -- run examples/quickstart.yaml")
    );
}

// ---------------------------------------------------------------------------------------
// Links

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation but `-` and `_`
/// dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let doc = Doc {
        rel: file.display().to_string(),
        text,
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (_, line) in split(&doc).1 {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let n = seen.entry(base.clone()).or_insert(0);
        out.push(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of a line's links, `[text](target)`, outside code spans.
fn links(line: &str) -> Vec<String> {
    let text = code_spans(line).0;
    let mut out = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after
            .find(|c: char| c == ')' || c.is_whitespace())
            .unwrap_or(after.len());
        out.push(after[..end].to_string());
        rest = &after[end..];
    }
    out
}

#[test]
fn every_relative_link_points_at_a_file() {
    let mut failures = Vec::new();
    let mut count = 0;
    // Which documents each document links to (repository-relative).
    let mut linked: HashMap<String, Vec<String>> = HashMap::new();
    for doc in docs() {
        let dir = Path::new(&doc.rel).parent().unwrap().to_path_buf();
        for (n, line) in split(&doc).1 {
            for target in links(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                count += 1;
                let (file, anchor) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target.as_str(), None),
                };
                let rel = if file.is_empty() {
                    PathBuf::from(&doc.rel)
                } else {
                    dir.join(file)
                };
                let path = repo().join(&rel);
                if !path.exists() {
                    failures.push(format!("{}:{n}: `{target}`: no such file", doc.rel));
                    continue;
                }
                let normal = normalize(&rel);
                linked.entry(doc.rel.clone()).or_default().push(normal);
                if let Some(anchor) = anchor {
                    let is_md = path.extension().is_some_and(|e| e == "md");
                    if is_md && !anchors(&path).iter().any(|a| a == anchor) {
                        failures.push(format!(
                            "{}:{n}: `{target}`: {} has no heading with the anchor `#{anchor}`",
                            doc.rel,
                            rel.display()
                        ));
                    }
                }
            }
        }
    }
    // Every page can be found from the README.
    let from = |doc: &str, to: &str| linked.get(doc).is_some_and(|l| l.iter().any(|t| t == to));
    if !from("README.md", "docs/README.md") {
        failures.push("README.md does not link docs/README.md, the guide's index".into());
    }
    for doc in docs() {
        if doc.rel.starts_with("docs/")
            && doc.rel != "docs/README.md"
            && !from("docs/README.md", &doc.rel)
        {
            failures.push(format!("docs/README.md does not link {}", doc.rel));
        }
    }
    eprintln!("docs: {count} relative link(s) checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count >= 50, "only {count} links found");
}

/// `docs/../README.md` → `README.md`.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::CurDir => {}
            c => parts.push(c.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.join("/")
}

// ---------------------------------------------------------------------------------------
// The API

/// The `/api/v1` routes the console serves, from its router.
fn routes() -> Vec<String> {
    let source =
        std::fs::read_to_string(repo().join("coordinator/src/service/http/mod.rs")).unwrap();
    let routes: Vec<String> = source
        .split("\"/api/v1")
        .skip(1)
        .map(|rest| format!("/api/v1{}", &rest[..rest.find('"').unwrap()]))
        .collect();
    assert!(routes.len() >= 10, "{routes:?}");
    routes
}

#[test]
fn every_api_path_in_the_docs_is_served() {
    let routes = routes();
    let mut failures = Vec::new();
    let mut count = 0;
    for doc in docs() {
        for (i, line) in doc.text.lines().enumerate() {
            for (at, _) in line.match_indices("/api/v1") {
                let path: String = line[at..]
                    .chars()
                    .take_while(|&c| c.is_ascii_alphanumeric() || "_{}.-/".contains(c))
                    .collect();
                let path = path.trim_end_matches(['.', '/']);
                if path == "/api/v1" {
                    continue;
                }
                count += 1;
                let want: Vec<&str> = path.split('/').collect();
                let served = routes.iter().any(|r| {
                    let have: Vec<&str> = r.split('/').collect();
                    have.len() == want.len()
                        && have
                            .iter()
                            .zip(&want)
                            .all(|(h, w)| h == w || (h.starts_with('{') && h.ends_with('}')))
                });
                if !served {
                    failures.push(format!(
                        "{}:{}: `{path}` is not a route the console serves",
                        doc.rel,
                        i + 1
                    ));
                }
            }
        }
    }
    eprintln!("docs: {count} API path(s) checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count >= 5);
}
