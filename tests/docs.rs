//! The reference pages say what the code does: `docs/configuration.md` names every config
//! field, every command-line flag and every `ELECTD_*` environment variable of the `electd`
//! binary, and nothing that is gone. The lists are read from the code, not kept by hand:
//! - config fields: the serde fields of `Config` in `src/config/mod.rs`, a field whose type is a
//!   struct of that file expanded into its own fields (`timing.heartbeat_ms`, `tls.ca`,
//!   `peers.addr`; a struct read `try_from` another, as `Timing` from `TimingFile`, by the
//!   fields of the one read);
//! - flags and variables: every `#[arg(...)]` of `src/bin/electd/*.rs` (`long`, its `alias`es
//!   and `env`), and the variables `electd run` sets for its command (`.env("ELECTD_…", …)`).
//!
//! The page's fields are the first cells of its table under "## Config file fields"; its flags
//! every `--flag` it writes; its variables every `ELECTD_NAME` it writes, which must occur in
//! the code (`src/`, `lab/`, `scripts/`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// `text` with `//` comments removed (doc comments included), line by line.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The body of `struct NAME { … }` in `src`, and the attributes just above it.
fn struct_body<'a>(src: &'a str, name: &str) -> Option<(&'a str, &'a str)> {
    let start = src
        .match_indices(&format!("struct {name} {{"))
        .map(|(i, _)| i)
        .find(|&i| i == 0 || !src[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_'))?;
    let open = start + src[start..].find('{')?;
    let mut depth = 0;
    for (i, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    let attrs_start = src[..start]
                        .rfind("\n\n")
                        .map_or(0, |i| i + 2)
                        .max(src[..start].rfind('}').map_or(0, |i| i + 1));
                    return Some((&src[open + 1..open + i], &src[attrs_start..start]));
                }
            }
            _ => {}
        }
    }
    None
}

/// One field of a struct: its name, its type, and the attributes above it.
struct Field {
    name: String,
    ty: String,
    attrs: String,
}

/// The fields of a struct body (depth 1 only), each with the attributes written above it.
fn fields(body: &str) -> Vec<Field> {
    let mut out = Vec::new();
    let mut attrs = String::new();
    let mut depth = 0i32;
    for line in body.lines() {
        let t = line.trim();
        if depth == 0 {
            if t.starts_with("#[") || (!attrs.is_empty() && !attrs_closed(&attrs)) {
                attrs.push_str(t);
                attrs.push('\n');
            } else if let Some((name, ty)) = t
                .strip_prefix("pub ")
                .unwrap_or(t)
                .split_once(':')
                .filter(|(n, _)| {
                    !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                })
            {
                out.push(Field {
                    name: name.to_string(),
                    ty: ty.trim().trim_end_matches(',').trim().to_string(),
                    attrs: std::mem::take(&mut attrs),
                });
            }
        }
        depth += t.matches('{').count() as i32 - t.matches('}').count() as i32;
    }
    out
}

/// Whether the attributes gathered so far end an attribute (their brackets balance).
fn attrs_closed(attrs: &str) -> bool {
    attrs.matches('[').count() == attrs.matches(']').count()
}

/// The value of `key = "…"` in an attribute, if written.
fn attr_value<'a>(attrs: &'a str, key: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = attrs;
    while let Some(i) = rest.find(key) {
        let before_ok = i == 0 || !rest[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        let after = rest[i + key.len()..].trim_start();
        rest = &rest[i + key.len()..];
        if !before_ok {
            continue;
        }
        if let Some(v) = after.strip_prefix('=').map(str::trim_start) {
            if let Some(v) = v.strip_prefix('"') {
                if let Some(end) = v.find('"') {
                    out.push(&v[..end]);
                }
            }
        }
    }
    out
}

/// The config file's fields as `src` (a `config/mod.rs`) declares them, starting at `Config`.
fn config_fields(src: &str) -> BTreeSet<String> {
    let src = without_comments(src);
    let mut out = BTreeSet::new();
    walk_struct(&src, "Config", "", &mut out);
    out
}

fn walk_struct(src: &str, name: &str, prefix: &str, out: &mut BTreeSet<String>) {
    let (body, attrs) = struct_body(src, name).unwrap_or_else(|| panic!("no struct {name}"));
    // A struct read through another (`#[serde(try_from = "TimingFile")]`): the file's shape is
    // the other's.
    if let Some(from) = attr_value(attrs, "try_from").first() {
        return walk_struct(src, from, prefix, out);
    }
    for f in fields(body) {
        if !f.attrs.is_empty()
            && f.attrs.contains("serde")
            && f.attrs
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| w == "skip" || w == "skip_deserializing")
        {
            continue;
        }
        let name = attr_value(&f.attrs, "rename")
            .first()
            .map_or(f.name.clone(), |r| r.to_string());
        let inner =
            f.ty.trim_start_matches("Option<")
                .trim_start_matches("Vec<")
                .trim_end_matches('>')
                .rsplit("::")
                .next()
                .unwrap_or("")
                .to_string();
        if struct_body(src, &inner).is_some() {
            walk_struct(src, &inner, &format!("{prefix}{name}."), out);
        } else {
            out.insert(format!("{prefix}{name}"));
        }
    }
}

/// Flags (`--name`, aliases included) and `ELECTD_*` variables of one binary source file.
fn flags_and_env(src: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let src = without_comments(src);
    let mut flags = BTreeSet::new();
    let mut env = BTreeSet::new();
    let mut rest = src.as_str();
    while let Some(i) = rest.find("#[arg(") {
        rest = &rest[i + "#[arg(".len()..];
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map(|(i, _)| i)
            .expect("an #[arg(...)] that closes");
        let attr = &rest[..end];
        // The field the attribute is on: the first `name:` line after it.
        let field = rest[end..]
            .lines()
            .skip(1)
            .map(str::trim)
            .find_map(|l| {
                let (name, _) = l.strip_prefix("pub ").unwrap_or(l).split_once(':')?;
                let is_name = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                is_name.then(|| name.to_string())
            })
            .unwrap_or_default();
        let words: Vec<&str> = attr
            .split(',')
            .map(|w| w.split('=').next().unwrap_or("").trim())
            .collect();
        let longs = attr_value(attr, "long");
        if let Some(long) = longs.first() {
            flags.insert(format!("--{long}"));
        } else if words.contains(&"long") {
            flags.insert(format!("--{}", field.replace('_', "-")));
        }
        for alias in attr_value(attr, "alias") {
            flags.insert(format!("--{alias}"));
        }
        for e in attr_value(attr, "env") {
            env.insert(e.to_string());
        }
        rest = &rest[end..];
    }
    // What a command is given in its environment (`electd run`).
    let mut rest = src.as_str();
    while let Some(i) = rest.find(".env(\"ELECTD_") {
        rest = &rest[i + ".env(\"".len()..];
        env.insert(rest[..rest.find('"').unwrap()].to_string());
    }
    (flags, env)
}

/// The `electd` binary's flags and variables.
fn binary_flags_and_env() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut flags = BTreeSet::new();
    let mut env = BTreeSet::new();
    let dir = root().join("src/bin/electd");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    for f in files {
        let (fl, en) = flags_and_env(&std::fs::read_to_string(f).unwrap());
        flags.extend(fl);
        env.extend(en);
    }
    (flags, env)
}

/// The first cells of the table under `## Config file fields`.
fn documented_fields(doc: &str) -> BTreeSet<String> {
    let start = doc
        .find("\n## Config file fields")
        .expect("a '## Config file fields' section");
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// Every `--flag` the page writes.
fn documented_flags(doc: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = doc.as_bytes();
    for (i, _) in doc.match_indices("--") {
        let before_ok = i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'-');
        let name: String = doc[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let name = name.trim_end_matches('-');
        if before_ok && name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// Every `ELECTD_NAME` in `text`.
fn env_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("ELECTD_") {
        let name: String = text[i..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        let name = name.trim_end_matches('_');
        if name.len() > "ELECTD_".len() {
            out.insert(name.to_string());
        }
    }
    out
}

/// The text of every file under `dirs` (build output left out), for names the code uses.
fn code_text(dirs: &[&str]) -> String {
    fn walk(p: &Path, out: &mut String) {
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == "target") {
                return;
            }
            for e in std::fs::read_dir(p).unwrap().flatten() {
                walk(&e.path(), out);
            }
        } else if let Ok(t) = std::fs::read_to_string(p) {
            out.push_str(&t);
            out.push('\n');
        }
    }
    let mut out = String::new();
    for d in dirs {
        walk(&root().join(d), &mut out);
    }
    out
}

fn difference(a: &BTreeSet<String>, b: &BTreeSet<String>) -> Vec<String> {
    a.difference(b).cloned().collect()
}

#[test]
fn the_configuration_page_names_every_config_field_and_no_other() {
    let code = config_fields(&read("src/config/mod.rs"));
    assert!(code.contains("timing.heartbeat_ms") && code.contains("peers.addr"));
    let doc = documented_fields(&read("docs/configuration.md"));
    let missing = difference(&code, &doc);
    let gone = difference(&doc, &code);
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/configuration.md, \"Config file fields\": missing {missing:?}; named but not \
         in src/config/mod.rs {gone:?}"
    );
}

#[test]
fn the_configuration_page_names_every_flag_and_no_other() {
    let (code, _) = binary_flags_and_env();
    assert!(code.contains("--heartbeat-ms") && code.contains("--node"));
    let doc = documented_flags(&read("docs/configuration.md"));
    let missing = difference(&code, &doc);
    let builtin: BTreeSet<String> = ["--help", "--version"].map(String::from).into();
    let gone: Vec<_> = doc
        .difference(&code)
        .filter(|f| !builtin.contains(*f))
        .cloned()
        .collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/configuration.md: flags missing {missing:?}; named but not flags of \
         src/bin/electd {gone:?}"
    );
}

#[test]
fn the_configuration_page_names_every_environment_variable_and_no_other() {
    let (_, code) = binary_flags_and_env();
    assert!(code.contains("ELECTD_HEARTBEAT_MS") && code.contains("ELECTD_TERM"));
    let page = read("docs/configuration.md");
    let doc = env_names(&page);
    let missing = difference(&code, &doc);
    let used = env_names(&code_text(&["src", "lab", "scripts"]));
    let gone = difference(&doc, &used);
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/configuration.md: variables missing {missing:?}; named but used nowhere in \
         src/, lab/ or scripts/ {gone:?}"
    );
}

/// The readers themselves: a field, a flag and a variable each found, a renamed, skipped or
/// commented one not, and a page that lacks one or names a gone one fails.
#[test]
fn the_readers_find_what_the_code_declares() {
    let config = r#"
        /// `struct Config {` in a comment changes nothing.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Config {
            /// The id.
            pub id: u64,
            #[serde(default, skip_serializing)]
            pub secret: Option<Secret>,
            #[serde(skip)]
            pub cache: u64,
            #[serde(rename = "where")]
            pub place: String,
            #[serde(default)]
            pub timing: Timing,
            pub peers: Vec<Peer>,
        }
        #[derive(Deserialize)]
        #[serde(try_from = "TimingFile")]
        pub struct Timing {
            pub beat: u64,
        }
        struct TimingFile {
            beat: Option<u64>,
            old_beat: Option<u64>,
        }
        pub struct Peer {
            pub id: u64,
            pub addr: String,
        }
    "#;
    let names: Vec<String> = config_fields(config).into_iter().collect();
    assert_eq!(
        names,
        [
            "id",
            "peers.addr",
            "peers.id",
            "secret",
            "timing.beat",
            "timing.old_beat",
            "where"
        ]
    );

    let flags = r#"
        pub struct Fields {
            /// Old: `#[arg(long = "gone")]`.
            #[arg(long, env = "ELECTD_DATA_DIR")]
            data_dir: Option<PathBuf>,
            #[arg(
                long = "peer",
                value_parser = parse_peer,
                env = "ELECTD_PEERS", value_delimiter = ','
            )]
            #[serde(skip_serializing_if = "Vec::is_empty")]
            peers: Vec<Peer>,
            #[arg(long, alias = "old-name", hide = true)]
            new_name: Option<u64>,
            #[arg(last = true, required = true, value_name = "CMD")]
            pub cmd: Vec<String>,
        }
        fn spawn() { Command::new(x).env("ELECTD_TERM", t.to_string()); }
    "#;
    let (f, e) = flags_and_env(flags);
    assert_eq!(
        f.into_iter().collect::<Vec<_>>(),
        ["--data-dir", "--new-name", "--old-name", "--peer"]
    );
    assert_eq!(
        e.into_iter().collect::<Vec<_>>(),
        ["ELECTD_DATA_DIR", "ELECTD_PEERS", "ELECTD_TERM"]
    );

    let page =
        "# C\n\n## Config file fields\n\n| field | default |\n|---|---|\n| `id` | required |\n\
                | `timing.beat` | 30 |\n\n## Flags\n\n`--data-dir`, `--peer ID=ADDR`, \
                `electd run -- CMD`, ELECTD_<FIELD>, `ELECTD_PEERS=1=a,2=b`.\n";
    assert_eq!(
        documented_fields(page).into_iter().collect::<Vec<_>>(),
        ["id", "timing.beat"]
    );
    assert_eq!(
        documented_flags(page).into_iter().collect::<Vec<_>>(),
        ["--data-dir", "--peer"]
    );
    assert_eq!(
        env_names(page).into_iter().collect::<Vec<_>>(),
        ["ELECTD_PEERS"]
    );
    let missing = difference(&config_fields(config), &documented_fields(page));
    assert!(missing.contains(&"peers.addr".to_string()), "{missing:?}");
}

/// Issue 52, item 6: the config check the README shows passes on every bundled config, as
/// written (it exited 2 without the secret the bundled configs leave to the environment).
#[test]
fn the_readmes_config_check_passes_on_every_bundled_config() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line =
        "ELECTD_CLUSTER_SECRET=0123456789abcdef electd --config cluster/node1.toml --check-config";
    assert!(readme.contains(line), "README.md shows: {line}");
    for n in 1..=5 {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_electd"))
            .current_dir(root())
            .args([
                "--config",
                &format!("cluster/node{n}.toml"),
                "--check-config",
            ])
            .env_remove("ELECTD_CLUSTER_SECRET")
            .env("ELECTD_CLUSTER_SECRET", "0123456789abcdef")
            .output()
            .unwrap();
        assert_eq!(
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
            (Some(0), "config ok"),
            "cluster/node{n}.toml: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Issue 52, item 6: the package's one-line description (the man page's NAME line and the
/// package summary) names the five modes.
#[test]
fn the_cargo_description_names_the_five_modes() {
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let description = cargo
        .lines()
        .find_map(|l| l.strip_prefix("description = "))
        .expect("a description");
    for mode in ["quorum", "mutex", "bully", "ring", "invitation"] {
        assert!(
            description.contains(mode),
            "{mode} missing from {description}"
        );
    }
}

/// Issue 52, item 6: no text points at a section of the README that is not there, neither as
/// `(README, "Section")` nor as a `README.md#anchor` link (sections moved to docs/ once, and
/// the pointers stayed).
#[test]
fn no_text_points_at_a_missing_readme_section() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let headings: Vec<String> = readme
        .lines()
        .filter_map(|l| {
            l.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| l.starts_with('#'))
        })
        .map(str::to_string)
        .collect();
    let slug = |h: &str| -> String {
        h.to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    };
    let anchors: Vec<String> = headings.iter().map(|h| slug(h)).collect();
    let mut files = Vec::new();
    for dir in ["docs", "src", "lab/src", "client/src", "contrib"] {
        collect(&root().join(dir), &mut files);
    }
    files.push(root().join("README.md"));
    let mut missing = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let text = text.replace("\n", " ").replace("  ", " ");
        for (i, _) in text.match_indices("README, \"") {
            let rest = &text[i + 9..];
            let Some(end) = rest.find('"') else { continue };
            let name = rest[..end].trim_end_matches('\\').replace("  ", " ");
            if !headings.contains(&name) {
                missing.push(format!("{}: (README, \"{name}\")", f.display()));
            }
        }
        for (i, _) in text.match_indices("README.md#") {
            let rest = &text[i + 10..];
            let anchor: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '-')
                .collect();
            if !anchors.contains(&anchor) {
                missing.push(format!("{}: README.md#{anchor}", f.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "pointers to no README section: {missing:#?}"
    );
}

/// Every file under `dir` (recursively) whose text the pointer check reads.
fn collect(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| {
            ["md", "rs", "yaml", "yml", "toml", "service"].contains(&x.to_str().unwrap_or(""))
        }) {
            out.push(p);
        }
    }
}

/// docs/applications.md shows the client libraries' example programs as they are in the repo,
/// whole, so that what a reader copies is what `lab/tests/clients.rs` type-checks and vets.
#[test]
fn the_client_examples_in_the_docs_are_the_files() {
    let doc = read("docs/applications.md");
    for (file, lang) in [
        ("clients/python/example.py", "python"),
        ("clients/go/example/main.go", "go"),
    ] {
        let block = format!("```{lang}\n{}```\n", read(file));
        assert!(
            doc.contains(&block),
            "docs/applications.md does not show {file} as it is"
        );
    }
}
