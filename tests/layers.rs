//! The layer map, enforced over the crate's own imports.
//!
//! `src/lib.rs`'s crate doc draws verbena as layers, bottom up, and states
//! the rule: a module may import only from layers below it, and from a
//! module of its own layer only where the map says so. This test reads
//! every `.rs` file under `src/` (comments and the insides of string and
//! char literals blanked), finds every path into the crate — in `use`
//! items, grouped ones included, and inline in code — and checks each
//! against the map in [`LAYERS`], which must be the crate doc's table, row
//! for row. It also builds the graph of imports between the map's modules
//! and reports its cycles.
//!
//! The code follows the map: [`ALLOWED`] (file, imported module) and
//! [`ALLOWED_CYCLES`] are empty. They stay as the place to list a break
//! knowingly taken on, one by one; a break or cycle not listed fails, and
//! so does a listed one that no longer occurs, so the lists only shrink.
//!
//! What is read, and what is not:
//! * a path is mapped by how it is written: `crate::engine::Report`, a
//!   re-export of `engine::report::Report`, counts as an import of
//!   `engine`;
//! * names brought in by a `use` and then used bare (`engine::run` after
//!   `use crate::engine;`) are counted once, at the `use`;
//! * `super::` and `self::` paths, and paths into a child module the file
//!   declares (`coroutine::backoff_ns` after `mod coroutine;`), are
//!   resolved from the file's module and any inline `mod name { … }`
//!   around them; one that leaves its top-level module, or its unit of the
//!   map (`engine::calvin` naming `super::driver`), is checked like a
//!   `crate::` path;
//! * `src/lib.rs` and `src/main.rs` (the crate root and the binary) are
//!   exempt;
//! * code under `#[cfg(test)]` or a feature counts like any other code:
//!   it is compiled into the crate when its configuration is on.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One unit of the map: a top-level module, or a submodule the map places
/// on another layer than its parent (`engine::calvin`); a path belongs to
/// the unit whose name is its longest prefix.
struct Unit {
    name: &'static str,
    layer: u8,
    /// Units of the same layer this one may import.
    may_import: &'static [&'static str],
}

const fn unit(name: &'static str, layer: u8, may_import: &'static [&'static str]) -> Unit {
    Unit {
        name,
        layer,
        may_import,
    }
}

/// The layer map of `src/lib.rs`'s crate doc, as data.
const LAYERS: &[Unit] = &[
    unit("base", 0, &[]),
    unit("config", 1, &[]),
    unit("fabric", 2, &[]),
    unit("store", 3, &[]),
    unit("runtime", 4, &[]),
    unit("txn", 5, &[]),
    unit("check", 5, &[]),
    unit("stats", 5, &["txn"]),
    unit("replication", 6, &[]),
    unit("protocols", 7, &[]),
    unit("workloads", 7, &[]),
    unit("recovery", 8, &[]),
    unit(
        "engine::coroutine",
        9,
        &["engine::program", "engine::report"],
    ),
    unit("engine::calvin", 9, &["engine::program", "engine::report"]),
    unit("engine::program", 9, &["engine::report"]),
    unit("engine::report", 9, &[]),
    unit("engine", 10, &[]),
    unit("cluster", 10, &["engine"]),
    unit("experiments", 11, &[]),
    unit("cli", 12, &[]),
];

/// Imports allowed to break the map: (importing file, imported unit).
/// Each entry covers every such path of that file into that unit. Remove
/// an entry once its file no longer makes that import.
const ALLOWED: &[(&str, &str)] = &[];

/// Import cycles allowed between units, each as its units sorted by name.
const ALLOWED_CYCLES: &[&[&str]] = &[];

// ---------------------------------------------------------------------------
// Reading the source: comments and literals out, then tokens.
// ---------------------------------------------------------------------------

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `src` with every comment (line, block, nested block, doc) and the
/// whole of every string, byte-string, raw-string and char literal
/// replaced by spaces. Newlines are kept, so line numbers still hold.
fn blank_comments_and_literals(src: &str) -> String {
    let s: Vec<char> = src.chars().collect();
    let mut out = s.clone();
    let n = s.len();
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(n)] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let mut i = 0;
    while i < n {
        let c = s[i];
        let prev_is_ident = i > 0 && is_ident_char(s[i - 1]);
        if c == '/' && at(i + 1) == '/' {
            let end = (i..n).find(|&j| s[j] == '\n').unwrap_or(n);
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && at(i + 1) == '*' {
            let (mut j, mut depth) = (i + 2, 1);
            while j < n && depth > 0 {
                if s[j] == '/' && at(j + 1) == '*' {
                    depth += 1;
                    j += 2;
                } else if s[j] == '*' && at(j + 1) == '/' {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(end) = raw_string_end(&s, i).filter(|_| !prev_is_ident) {
            blank(&mut out, i, end);
            i = end;
        } else if c == '"' {
            let mut j = i + 1;
            while j < n && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' && at(i + 1) == '\\' {
            // An escaped char literal: '\n', '\'', '\u{1F600}'.
            let mut j = i + 3;
            while j < n && s[j] != '\'' {
                j += 1;
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if c == '\'' && at(i + 2) == '\'' {
            // A one-char literal such as '"'; otherwise a lifetime or label.
            blank(&mut out, i, i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// Where the raw string starting at `i` (`r"…"`, `r#"…"#`, `br"…"`,
/// `cr"…"`) ends, one past its last `#`; `None` when none starts there.
fn raw_string_end(s: &[char], i: usize) -> Option<usize> {
    let r = match s.get(i)? {
        'r' => i,
        'b' | 'c' if s.get(i + 1) == Some(&'r') => i + 1,
        _ => return None,
    };
    let hashes = s[r + 1..].iter().take_while(|&&c| c == '#').count();
    let open = r + 1 + hashes;
    if s.get(open) != Some(&'"') {
        return None;
    }
    let mut j = open + 1;
    while j < s.len() {
        if s[j] == '"'
            && s[j + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(s.len())
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
    /// A number, or anything else that is neither name nor punctuation.
    Other,
}

struct Token {
    tok: Tok,
    line: usize,
}

/// The tokens of comment- and literal-free source, each with its line.
fn tokenize(clean: &str) -> Vec<Token> {
    let s: Vec<char> = clean.chars().collect();
    let mut tokens = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < s.len() {
        let c = s[i];
        let start = i;
        let tok = if c == '\n' {
            line += 1;
            i += 1;
            continue;
        } else if c.is_whitespace() {
            i += 1;
            continue;
        } else if c.is_alphabetic() || c == '_' {
            while i < s.len() && is_ident_char(s[i]) {
                i += 1;
            }
            Tok::Ident(s[start..i].iter().collect())
        } else if c.is_ascii_digit() {
            while i < s.len() && (is_ident_char(s[i]) || s[i] == '.') {
                i += 1;
            }
            Tok::Other
        } else if c == ':' && s.get(i + 1) == Some(&':') {
            i += 2;
            Tok::PathSep
        } else {
            i += 1;
            Tok::Punct(c)
        };
        tokens.push(Token { tok, line });
    }
    tokens
}

// ---------------------------------------------------------------------------
// Finding the paths into the crate.
// ---------------------------------------------------------------------------

/// A path into the crate as written, and where.
#[derive(Clone, Debug)]
struct Written {
    line: usize,
    segments: Vec<String>,
}

/// An in-crate path resolved to absolute module segments (no `crate`),
/// with the module it was written in and how it was written.
#[derive(Clone, Debug)]
struct Import {
    line: usize,
    /// The module the path is written in (file module plus inline `mod`s).
    from: Vec<String>,
    /// The absolute path it names, `crate::` dropped.
    to: Vec<String>,
    written: String,
}

fn ident(tokens: &[Token], i: usize) -> Option<&str> {
    match tokens.get(i).map(|t| &t.tok) {
        Some(Tok::Ident(name)) => Some(name),
        _ => None,
    }
}

fn is(tokens: &[Token], i: usize, tok: &Tok) -> bool {
    tokens.get(i).map(|t| &t.tok) == Some(tok)
}

/// Every import in a file's source, resolved against `module`, the path of
/// the file's module (`["protocols", "occ"]` for `src/protocols/occ.rs`).
fn imports_in(source: &str, module: &[&str]) -> Vec<Import> {
    let tokens = tokenize(&blank_comments_and_literals(source));
    let children = child_modules(&tokens);
    let mut here: Vec<String> = module.iter().map(|m| m.to_string()).collect();
    // Inline modules open around the current token: their brace depth.
    let mut inline_opened_at: Vec<usize> = Vec::new();
    let mut depth = 0;
    let mut imports = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i].tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if inline_opened_at.last() == Some(&depth) {
                    inline_opened_at.pop();
                    here.pop();
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(name), true) =
                    (ident(&tokens, i + 1), is(&tokens, i + 2, &Tok::Punct('{')))
                {
                    here.push(name.to_string());
                    inline_opened_at.push(depth);
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(kw) if kw == "use" && !is(&tokens, i.wrapping_sub(1), &Tok::PathSep) => {
                let mut written = Vec::new();
                let mut j = i + 1;
                use_tree(&tokens, &mut j, &[], &mut written);
                let file_level = here.len() == module.len();
                imports.extend(
                    written
                        .into_iter()
                        .filter_map(|w| resolve(&here, &children, file_level, w)),
                );
                i = j;
                continue;
            }
            Tok::Ident(first) if starts_a_path(&tokens, i, first, &children) => {
                let (written, next) = inline_path(&tokens, i);
                let file_level = here.len() == module.len();
                imports.extend(resolve(&here, &children, file_level, written));
                i = next;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    imports
}

/// The child modules a file declares (`mod name;`), which its paths may
/// name without `self::`.
fn child_modules(tokens: &[Token]) -> BTreeSet<String> {
    (0..tokens.len())
        .filter(|&i| ident(tokens, i) == Some("mod") && is(tokens, i + 2, &Tok::Punct(';')))
        .filter_map(|i| ident(tokens, i + 1).map(str::to_string))
        .collect()
}

/// Whether `tokens[i]`, the name `first`, starts a path that may lead into
/// the crate: `crate::`, `super::`, `self::` or a child module's `name::`
/// followed by a name, and not itself a later segment or a method.
fn starts_a_path(tokens: &[Token], i: usize, first: &str, children: &BTreeSet<String>) -> bool {
    let root = matches!(first, "crate" | "super" | "self") || children.contains(first);
    let before = i.checked_sub(1).map(|b| &tokens[b].tok);
    root && is(tokens, i + 1, &Tok::PathSep)
        && ident(tokens, i + 2).is_some()
        && before != Some(&Tok::PathSep)
        && before != Some(&Tok::Punct('.'))
}

/// The paths of one `use` tree from `tokens[*i]` on, each expanded to a
/// full path (`use a::{b, c::d}` gives `a::b` and `a::c::d`); `*i` ends
/// past the tree. A glob ends its path with `*`.
fn use_tree(tokens: &[Token], i: &mut usize, prefix: &[String], out: &mut Vec<Written>) {
    let mut path = prefix.to_vec();
    loop {
        let line = tokens.get(*i).map_or(0, |t| t.line);
        match tokens.get(*i).map(|t| &t.tok) {
            Some(Tok::Ident(name)) => {
                path.push(name.clone());
                *i += 1;
                if is(tokens, *i, &Tok::PathSep) {
                    *i += 1;
                    continue;
                }
                if ident(tokens, *i) == Some("as") {
                    *i += 2;
                }
                out.push(Written {
                    line,
                    segments: path,
                });
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                path.push("*".to_string());
                out.push(Written {
                    line,
                    segments: path,
                });
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    if is(tokens, *i, &Tok::Punct('}')) {
                        *i += 1;
                        return;
                    }
                    let before = *i;
                    use_tree(tokens, i, &path, out);
                    if is(tokens, *i, &Tok::Punct(',')) {
                        *i += 1;
                    } else if *i == before || *i >= tokens.len() {
                        return;
                    }
                }
            }
            // A leading `::` names an extern crate: nothing of ours.
            Some(Tok::PathSep) if path.is_empty() => {
                *i += 1;
                path.push("::".to_string());
            }
            _ => return,
        }
    }
}

/// The path written inline from `tokens[start]` (`crate` or `super`):
/// names joined by `::`, up to the first thing that is not a name.
fn inline_path(tokens: &[Token], start: usize) -> (Written, usize) {
    let mut segments = Vec::new();
    let mut i = start;
    while let Some(name) = ident(tokens, i) {
        segments.push(name.to_string());
        if is(tokens, i + 1, &Tok::PathSep) && ident(tokens, i + 2).is_some() {
            i += 2;
        } else {
            i += 1;
            break;
        }
    }
    let line = tokens[start].line;
    (Written { line, segments }, i)
}

/// A written path as an import from module `here`, when it is a path into
/// the crate: `crate::…`, `super::…` climbing from `here`, `self::…`, or,
/// at a file's own level (`file_level`), one of its `children`'s names.
/// Extern paths and other names in scope give `None`.
fn resolve(
    here: &[String],
    children: &BTreeSet<String>,
    file_level: bool,
    written: Written,
) -> Option<Import> {
    let segs = &written.segments;
    let first = segs.first()?.as_str();
    let (mut to, mut rest): (Vec<String>, &[String]) = match first {
        "crate" => (Vec::new(), &segs[1..]),
        "super" | "self" => (here.to_vec(), &segs[1..]),
        _ if file_level && children.contains(first) => (here.to_vec(), &segs[..]),
        _ => return None,
    };
    if segs[0] == "super" {
        to.pop();
        while rest.first().map(String::as_str) == Some("super") {
            assert!(
                !to.is_empty(),
                "line {}: `super` climbs above the crate root",
                written.line
            );
            to.pop();
            rest = &rest[1..];
        }
    }
    to.extend(rest.iter().filter(|s| *s != "self" && *s != "*").cloned());
    Some(Import {
        line: written.line,
        from: here.to_vec(),
        to,
        written: segs.join("::"),
    })
}

// ---------------------------------------------------------------------------
// The map.
// ---------------------------------------------------------------------------

/// The unit a module path belongs to: the longest unit name that is a
/// prefix of it. `None` for the crate root itself.
fn unit_of(path: &[String]) -> Option<&'static Unit> {
    let top = path.first()?;
    let found = LAYERS
        .iter()
        .filter(|u| {
            let names: Vec<&str> = u.name.split("::").collect();
            names.len() <= path.len() && names.iter().zip(path).all(|(a, b)| a == b)
        })
        .max_by_key(|u| u.name.split("::").count());
    Some(found.unwrap_or_else(|| panic!("module `{top}` is not on the layer map: add it to LAYERS and to src/lib.rs's crate doc")))
}

/// The rule an import from `from` into `to` breaks, if any.
fn broken_rule(from: &Unit, to: &Unit) -> Option<&'static str> {
    if to.layer > from.layer {
        Some("a module may import only from layers below it")
    } else if to.layer == from.layer && to.name != from.name && !from.may_import.contains(&to.name)
    {
        Some("modules of one layer may not import each other unless the map allows it")
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// The crate's files.
// ---------------------------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file under `src/` defines (`src/protocols/occ.rs` →
/// `protocols::occ`, `src/cli.rs` → `cli`); `None` for the exempt crate
/// root and binary.
fn module_of(relative: &str) -> Option<Vec<String>> {
    let stem = relative.strip_prefix("src/")?.strip_suffix(".rs")?;
    if stem == "lib" || stem == "main" {
        return None;
    }
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    Some(parts)
}

/// Every crate file's imports into another unit: (file, import).
fn cross_unit_imports() -> Vec<(String, Import)> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for path in files {
        let relative = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let Some(module) = module_of(&relative) else {
            continue;
        };
        let source = fs::read_to_string(&path).unwrap();
        let module: Vec<&str> = module.iter().map(String::as_str).collect();
        for import in imports_in(&source, &module) {
            let (Some(from), Some(to)) = (unit_of(&import.from), unit_of(&import.to)) else {
                continue;
            };
            if from.name != to.name {
                found.push((relative.clone(), import));
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------

#[test]
fn imports_follow_the_layer_map() {
    let mut breaks: BTreeMap<(String, &str), Vec<String>> = BTreeMap::new();
    let mut unit_pairs: BTreeSet<(&str, &str)> = BTreeSet::new();
    for (file, import) in cross_unit_imports() {
        let (from, to) = (unit_of(&import.from).unwrap(), unit_of(&import.to).unwrap());
        if let Some(rule) = broken_rule(from, to) {
            let message = format!(
                "{file}:{}: `{}`: {} (layer {}) imports {} (layer {}): {rule}",
                import.line, import.written, from.name, from.layer, to.name, to.layer
            );
            breaks.entry((file, to.name)).or_default().push(message);
            unit_pairs.insert((from.name, to.name));
        }
    }
    let allowed: BTreeSet<(&str, &str)> = ALLOWED.iter().copied().collect();
    assert_eq!(allowed.len(), ALLOWED.len(), "ALLOWED lists an entry twice");
    let mut failures = Vec::new();
    for ((file, to), messages) in &breaks {
        if !allowed.contains(&(file.as_str(), *to)) {
            failures.extend(messages.iter().cloned());
        }
    }
    for (file, to) in &allowed {
        if !breaks.contains_key(&(file.to_string(), *to)) {
            failures.push(format!(
                "({file:?}, {to:?}) is allow-listed but {file} no longer imports {to} against the map: remove it from the allow-list"
            ));
        }
    }
    println!(
        "{} allow-listed imports against the layer map ({} unit pairs)",
        ALLOWED.len(),
        unit_pairs.len()
    );
    assert!(
        failures.is_empty(),
        "imports against the layer map:\n{}",
        failures.join("\n")
    );
}

#[test]
fn no_new_import_cycles() {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, import) in cross_unit_imports() {
        let (from, to) = (unit_of(&import.from).unwrap(), unit_of(&import.to).unwrap());
        edges.entry(from.name).or_default().insert(to.name);
    }
    let cycles: BTreeSet<Vec<&str>> = strongly_connected(&edges)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    let allowed: BTreeSet<Vec<&str>> = ALLOWED_CYCLES.iter().map(|c| c.to_vec()).collect();
    let mut failures = Vec::new();
    for cycle in cycles.difference(&allowed) {
        failures.push(format!(
            "a cycle not on the allow-list: {}",
            cycle.join(" ↔ ")
        ));
    }
    for cycle in allowed.difference(&cycles) {
        failures.push(format!(
            "the allow-listed cycle {} no longer occurs as listed (broken, or split into smaller ones): remove it from the allow-list",
            cycle.join(" ↔ ")
        ));
    }
    println!("{} allow-listed import cycles", ALLOWED_CYCLES.len());
    assert!(
        failures.is_empty(),
        "import cycles between units:\n{}",
        failures.join("\n")
    );
}

/// The strongly connected components of a graph (Tarjan), each sorted.
fn strongly_connected<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'e> {
        edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(w: &mut Walk<'a, '_>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        for &next in w.edges.get(v).into_iter().flatten() {
            if !w.index.contains_key(next) {
                visit(w, next);
                let low = w.low[v].min(w.low[next]);
                w.low.insert(v, low);
            } else if w.stack.contains(&next) {
                let low = w.low[v].min(w.index[next]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let at = w.stack.iter().rposition(|&u| u == v).unwrap();
            let mut component = w.stack.split_off(at);
            component.sort();
            w.components.push(component);
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        components: Vec::new(),
    };
    for &v in edges.keys() {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.components
}

#[test]
fn the_crate_doc_draws_the_same_map() {
    let lib = fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let mut doc_units: BTreeSet<(String, u8)> = BTreeSet::new();
    let mut doc_allowances: BTreeSet<(String, String)> = BTreeSet::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//! |")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(layer) = cells[0].parse::<u8>() else {
            continue;
        };
        for name in backticked(cells[2]) {
            doc_units.insert((name, layer));
        }
        for clause in cells[3].split(';').filter(|c| c.contains("may import")) {
            let names = backticked(clause);
            for allowed in names.iter().skip(1) {
                doc_allowances.insert((names[0].clone(), allowed.clone()));
            }
        }
    }
    let units: BTreeSet<(String, u8)> = LAYERS
        .iter()
        .map(|u| (u.name.to_string(), u.layer))
        .collect();
    assert_eq!(
        doc_units, units,
        "src/lib.rs's layer table and LAYERS differ"
    );
    let allowances: BTreeSet<(String, String)> = LAYERS
        .iter()
        .flat_map(|u| {
            u.may_import
                .iter()
                .map(|m| (u.name.to_string(), m.to_string()))
        })
        .collect();
    assert_eq!(
        doc_allowances, allowances,
        "src/lib.rs's same-layer allowances and LAYERS differ"
    );
    for u in LAYERS {
        let path = root().join("src").join(u.name.replace("::", "/"));
        let exists = path.with_extension("rs").is_file() || path.join("mod.rs").is_file();
        assert!(
            exists,
            "`{}` is on the layer map but no module of that name is under src/",
            u.name
        );
    }
    for line in lib.lines() {
        if let Some(name) = line
            .strip_prefix("pub mod ")
            .and_then(|l| l.strip_suffix(';'))
        {
            assert!(
                LAYERS.iter().any(|u| u.name == name),
                "`{name}` is not on the layer map"
            );
        }
    }
}

/// The `names` between backticks in a table cell.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_import_reader_reads_what_rust_reads() {
    let source = r##"
use crate::{fabric::NodeId,
    store::{Tuple, index::Index as Idx},
    config};
// use crate::cli::InAComment;
/* crate::experiments::InABlock /* nested */ crate::cli::StillInIt */
/// See [`crate::cli::InADoc`].
fn f<'a>(x: &'a str) -> crate::txn::Txn {
    let url = "https://example.org/crate::cli::InAString";
    let quote = '"';
    let raw = r#"crate::cli::InARawString "quoted" // not a comment"#;
    super::sibling::g(crate::fabric::sim::Sim::new())
}
mod child;
pub use child::{Thing, deeper::*};
fn h() { x.child::<u8>(); child::make(); other::child::Nope; self::f(); }
mod tests {
    use super::*;
    use ::std::fmt;
    use self::inner::X;
    use child::NotOursHere;
}
"##;
    let found: Vec<(usize, String)> = imports_in(source, &["protocols", "occ"])
        .into_iter()
        .map(|i| (i.line, i.to.join("::")))
        .collect();
    let expected = [
        (2, "fabric::NodeId"),
        (3, "store::Tuple"),
        (3, "store::index::Index"),
        (4, "config"),
        (8, "txn::Txn"),
        (12, "protocols::sibling::g"),
        (12, "fabric::sim::Sim::new"),
        (15, "protocols::occ::child::Thing"),
        (15, "protocols::occ::child::deeper"),
        (16, "protocols::occ::child::make"),
        (16, "protocols::occ::f"),
        (18, "protocols::occ"),
        (20, "protocols::occ::tests::inner::X"),
    ];
    let expected: Vec<(usize, String)> =
        expected.iter().map(|(l, p)| (*l, p.to_string())).collect();
    assert_eq!(found, expected);

    // A top-level file's `super` is the crate root: `super::config` from
    // `src/cli.rs` is `crate::config`.
    let found = imports_in("use super::config::Config;", &["cli"]);
    assert_eq!(found[0].to, ["config", "Config"]);
    assert_eq!(module_of("src/protocols/mod.rs").unwrap(), ["protocols"]);
    assert_eq!(module_of("src/lib.rs"), None);
}
