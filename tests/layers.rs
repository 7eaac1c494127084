//! The source's layers (issue 27): the module graph of `src/` has no circle, every module's
//! first line says which half it belongs to, and nothing of the sidecar names the control plane.
//!
//! The graph is read from the source, as `use crate::...` lines and inline `crate::`/`super::`
//! paths outside comments and `#[cfg(test)] mod` blocks, one node per file (`a/mod.rs` is `a`).
//! What is below both names only what is below both; an item gated to the `control` feature
//! counts as the control plane's wherever it stands (`cli`'s control-plane subcommands).
//! `cargo test --test tests layers::` prints every circle it finds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which half a module is in, as its first line says.
const HALVES: [&str; 3] = [
    "//! (the sidecar) ",
    "//! (the control plane) ",
    "//! (below both) ",
];

/// The control plane's modules: what the sidecar build (`--no-default-features`) leaves out. The
/// CLI's files of the control plane's flags, typed with `kube`'s words, are among them.
const CONTROL: [&str; 10] = [
    "manifest",
    "sidecar_settings",
    "webhook",
    "registry",
    "kube",
    "yaml",
    "cli::check",
    "cli::images",
    "cli::inject",
    "cli::webhook",
];

/// What marks an item the sidecar build leaves out, in a module both builds have.
const CONTROL_GATE: &str = "#[cfg(feature = \"control\")]";

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `src/a/b.rs` is `a::b`, `src/a/mod.rs` is `a`, lib.rs and main.rs are the crate.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).expect("under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts.join("::")
}

/// A file's text up to its `#[cfg(test)] mod` (hooklog's test modules come last in their files).
fn before_tests(text: &str) -> &str {
    for (at, _) in text.match_indices("#[cfg(test)]") {
        if text[at + "#[cfg(test)]".len()..]
            .trim_start()
            .starts_with("mod ")
        {
            return &text[..at];
        }
    }
    text
}

/// The code of a file without its comments, up to its `#[cfg(test)] mod` (tests may import what
/// they like).
fn code(text: &str) -> String {
    before_tests(text)
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `a::b::c` path starting at `s`, and the first-level names of a `::{x, y::z}` group after
/// it.
fn path_at(s: &str) -> (Vec<String>, Vec<String>) {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        let end = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segs.push(rest[..end].to_string());
        rest = &rest[end..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => return (segs, Vec::new()),
        }
    }
    let mut group = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut item = String::new();
        for c in r.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 || (depth == 1 && c == ',') {
                group.push(item.trim().to_string());
                item.clear();
                if depth == 0 {
                    break;
                }
            } else if depth == 1 {
                item.push(c);
            }
        }
    }
    let group = group
        .iter()
        .filter_map(|g| g.split("::").next())
        .filter(|g| !g.is_empty())
        .map(|g| g.trim_matches(|c: char| !ident(c)).to_string())
        .collect();
    (segs, group)
}

/// `text` without the items the sidecar build leaves out: each [`CONTROL_GATE`] and the item it
/// gates. Those items are the control plane's, as the [`CONTROL`] modules are (`cli`'s
/// `Command::Check` and its `mod check;`), so a module of either other half may name the control
/// plane there and nowhere else.
fn without_control(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(CONTROL_GATE) {
        out.push_str(&rest[..at]);
        let item = &rest[at + CONTROL_GATE.len()..];
        rest = &item[item_end(item)..];
    }
    out.push_str(rest);
    out
}

/// Where the item at the start of `item` ends: after its `;`, after its `,` in a list (a
/// variant, a match arm), after the `}` closing its body, or before the bracket closing the list
/// it was the last of. Brackets in strings, characters and `//` comments do not count, nor a
/// comma between `<` and `>` (`Result<(A, B), C>`).
fn item_end(item: &str) -> usize {
    let b = item.as_bytes();
    let (mut depth, mut angle, mut i) = (0i32, 0i32, 0usize);
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += item[i..].find('\n').unwrap_or(item.len() - i);
                continue;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth -= 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b'<' if depth == 0 => angle += 1,
            b'>' if depth == 0 && !matches!(b[i.saturating_sub(1)], b'-' | b'=') => {
                angle = (angle - 1).max(0)
            }
            b';' if depth == 0 => return i + 1,
            b',' if depth == 0 && angle == 0 => return i + 1,
            _ => {}
        }
        if depth < 0 {
            return i;
        }
        i += 1;
    }
    item.len()
}

/// Whether module `m` is one of the [`CONTROL`] modules or inside one.
fn is_control(m: &str) -> bool {
    CONTROL
        .iter()
        .any(|c| m == *c || m.starts_with(&format!("{c}::")))
}

/// The module graph: each module and the modules its code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(false)
}

/// The module graph as the halves are checked: each module and what its code names outside the
/// items gated to the control plane ([`without_control`]), which count as the control plane's.
fn halves_graph() -> BTreeMap<String, BTreeSet<String>> {
    graph_of(true)
}

/// The module graph, with the gated items of the modules outside [`CONTROL`] left out when
/// `gated_out`.
fn graph_of(gated_out: bool) -> BTreeMap<String, BTreeSet<String>> {
    let files = files(&src());
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let resolve = |segs: &[String]| -> Option<String> {
        (1..=segs.len())
            .rev()
            .map(|i| segs[..i].join("::"))
            .find(|m| modules.contains(m))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let m = module_of(f);
        if m == "testkit" || m.ends_with("tests") {
            continue;
        }
        let mut text = std::fs::read_to_string(f).expect("read");
        if gated_out && !is_control(&m) {
            text = without_control(&text);
        }
        let text = code(&text);
        let parent: Vec<String> = m.split("::").map(String::from).collect();
        let parent = &parent[..parent.len().saturating_sub(1)];
        let mut targets = BTreeSet::new();
        for (word, base) in [("crate::", &[][..]), ("super::", parent)] {
            for (at, _) in text.match_indices(word) {
                if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let (segs, group) = path_at(&text[at + word.len()..]);
                let full: Vec<String> = base.iter().cloned().chain(segs).collect();
                targets.extend(resolve(&full));
                for g in group {
                    let mut with = full.clone();
                    with.push(g);
                    targets.extend(resolve(&with));
                }
            }
        }
        targets.retain(|t| !t.is_empty() && *t != m && !m.starts_with(&format!("{t}::")));
        edges.entry(m).or_default().extend(targets);
    }
    edges
}

/// The graph's circles: its strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w.as_str()) {
                    self.visit(w);
                    let lw = self.low[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w.as_str()) {
                    let iw = self.index[w.as_str()];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(k, vs)| std::iter::once(k.as_str()).chain(vs.iter().map(String::as_str)))
        .collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// Issue 27: `cli` and `manifest::check` imported each other (check parses hooklog's argv with
/// the CLI's types, the CLI took `Severity` and `parse_version` from check), and so did
/// `batch` -> `lifecycle::once` -> `record` -> `batch`.
#[test]
fn the_module_graph_has_no_circle() {
    let edges = graph();
    assert!(
        edges.len() > 40 && edges.values().map(BTreeSet::len).sum::<usize>() > 100,
        "the graph reader found too little: {edges:?}"
    );
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "import circles:\n{}",
        shown(&found, &edges, str::to_string)
    );
}

/// The circles `found` among the nodes `node` makes of the modules of `edges`, a line each with
/// the imports that close it (those between two of its nodes): a failed check's message.
fn shown(
    found: &[Vec<String>],
    edges: &BTreeMap<String, BTreeSet<String>>,
    node: impl Fn(&str) -> String,
) -> String {
    let lines: Vec<String> = found
        .iter()
        .map(|c| {
            let inner: Vec<String> = edges
                .iter()
                .flat_map(|(a, bs)| bs.iter().map(move |b| (a, b)))
                .filter(|(a, b)| node(a) != node(b) && c.contains(&node(a)) && c.contains(&node(b)))
                .map(|(a, b)| format!("{a} -> {b}"))
                .collect();
            format!("{}: {}", c.join(" <-> "), inner.join(", "))
        })
        .collect();
    lines.join("\n")
}

/// Issue 38: imports run one way between the top-level rooms too, not only between files.
/// `batch` took `Checkpoint` and `Position` from `source::checkpoint` while `source` fills
/// batches, and `source::socket_guard` took `bind_socket` from `config`, which builds the
/// sources: no circle of files, but each an arrow back up.
#[test]
fn the_rooms_have_no_circle() {
    let top = |m: &str| m.split("::").next().unwrap_or_default().to_string();
    let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, bs) in graph() {
        for b in bs {
            if top(&a) != top(&b) {
                rooms.entry(top(&a)).or_default().insert(top(&b));
            }
        }
    }
    let found = circles(&rooms);
    assert!(
        found.is_empty(),
        "circles of rooms:\n{}",
        shown(&found, &graph(), top)
    );
}

/// The reader finds a circle when there is one: the two of issue 27, as main had them.
#[test]
fn the_circle_finder_finds_a_circle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [
        ("batch", "lifecycle::once"),
        ("lifecycle::once", "record"),
        ("record", "batch"),
        ("record", "pod"),
        ("cli", "manifest::check"),
        ("manifest::check", "cli"),
    ] {
        edges.entry(a.into()).or_default().insert(b.into());
    }
    assert_eq!(
        circles(&edges),
        [
            vec!["batch", "lifecycle::once", "record"],
            vec!["cli", "manifest::check"]
        ]
    );
    let (segs, group) = path_at("a::b::{c::D, e, f::{g, h}}");
    assert_eq!(
        (segs, group),
        (
            vec!["a".into(), "b".into()],
            vec!["c".into(), "e".into(), "f".into()]
        )
    );
}

/// Every module's first line names its half, the control plane's modules are the ones the
/// sidecar build leaves out, and no module of the sidecar names one of them.
#[test]
fn every_module_says_its_half_and_the_sidecar_names_no_control_plane() {
    let edges = halves_graph();
    let mut wrong = Vec::new();
    for f in files(&src()) {
        let m = module_of(&f);
        let text = std::fs::read_to_string(&f).expect("read");
        let first = text.lines().next().unwrap_or_default();
        let Some(half) = HALVES.iter().find(|h| first.starts_with(*h)) else {
            wrong.push(format!(
                "{}: first line names no half: {first:?}",
                f.display()
            ));
            continue;
        };
        let control = is_control(&m);
        if control != half.contains("control plane") {
            wrong.push(format!(
                "{}: says {half:?}, control plane: {control}",
                f.display()
            ));
        }
        if half.contains("sidecar") {
            for t in edges.get(&m).into_iter().flatten() {
                if is_control(t) {
                    wrong.push(format!("{m} (the sidecar) imports {t} (the control plane)"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for c in CONTROL {
        let (parent, leaf) = match c.rsplit_once("::") {
            Some((p, leaf)) => (src().join(p.replace("::", "/")).join("mod.rs"), leaf),
            None => (src().join("lib.rs"), c),
        };
        let text = std::fs::read_to_string(&parent).expect("parent module");
        assert!(
            [format!("pub mod {leaf};"), format!("mod {leaf};")]
                .iter()
                .any(|decl| text.contains(&format!("{CONTROL_GATE}\n{decl}"))),
            "{} builds {c} only with the control feature",
            parent.display()
        );
    }
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    assert!(
        lib.contains("the sidecar") && lib.contains("the control plane"),
        "lib.rs's tour names the two halves"
    );
}

/// What is below both names nothing of either half: only other modules below both.
#[test]
fn below_both_names_neither_half() {
    let edges = halves_graph();
    let mut below = BTreeSet::new();
    for f in files(&src()) {
        let text = std::fs::read_to_string(&f).expect("read");
        if text.starts_with(HALVES[2]) {
            below.insert(module_of(&f));
        }
    }
    assert!(
        below.contains("protocol") && below.contains("cli"),
        "the reader found the modules below both: {below:?}"
    );
    let mut wrong = Vec::new();
    for m in &below {
        for t in edges.get(m).into_iter().flatten() {
            if !below.contains(t) {
                wrong.push(format!("{m} (below both) imports {t}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The gated items are read as a whole, whatever their shape, and nothing after them is lost:
/// a module declaration, a `use` group, an enum variant with a string holding brackets, match
/// arms, and a function whose signature has a comma outside brackets.
#[test]
fn a_gated_item_is_left_out_to_its_end() {
    let text = format!(
        "mod a;\n{g}\nmod b;\n{g}\npub use b::{{X, Y}};\nenum C {{\n    Run(R),\n    {g}\n    \
         /// doc (\n    #[command(after_help = \"x ( {{ [\")]\n    Check(crate::kube::K),\n    \
         Last(L),\n}}\nfn f(c: C) -> u8 {{\n    match c {{\n        {g}\n        \
         C::Check(k) => k.run(),\n        _ => 0,\n    }}\n}}\n{g}\nfn g() -> Result<(A, B), \
         String> {{ crate::kube::x() }}\nfn h() {{}}\n",
        g = CONTROL_GATE
    );
    let kept = without_control(&text);
    for gone in ["mod b", "X, Y", "Check", "kube", "k.run", "fn g"] {
        assert!(!kept.contains(gone), "{gone} kept:\n{kept}");
    }
    for stays in [
        "mod a;",
        "Run(R)",
        "Last(L)",
        "_ => 0",
        "fn h()",
        "fn f(c: C)",
    ] {
        assert!(kept.contains(stays), "{stays} lost:\n{kept}");
    }
}

/// The longest a product function may be, in lines from `fn` to its closing brace: longer ones
/// read as lists of named steps instead (issue 38), as `daemon::run` does.
const MAX_FN_LINES: usize = 80;

/// The functions still longer than [`MAX_FN_LINES`], by file and name, each with why it stays for
/// now. One that is split, or shrinks below the limit, must leave the list (the test says so):
/// the list only shrinks.
const LONG_FN_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// A file's text with each comment, string and character literal blanked (its newlines kept),
/// so that braces and `fn` are only code's.
fn blanked(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |c: u8| if c == b'\n' { b'\n' } else { b' ' };
    while i < b.len() {
        let end = match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => text[i..].find('\n').map_or(b.len(), |n| i + n),
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                (j + 1).min(b.len())
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i + 3,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                text[i + 2..].find('\'').map_or(b.len(), |n| i + 3 + n)
            }
            c => {
                out.push(c);
                i += 1;
                continue;
            }
        };
        out.extend(b[i..end].iter().map(|c| blank(*c)));
        i = end;
    }
    String::from_utf8(out).expect("ASCII blanks in UTF-8 text")
}

/// Each function with a body in `text` (blanked, up to its tests): its name, first line and
/// length in lines.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let b = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    for (at, _) in text.match_indices("fn ") {
        if at > 0 && ident(b[at - 1]) {
            continue;
        }
        let name: String = text[at + 3..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body's `{`: the first outside parentheses and brackets, unless a `;` ends a
        // declaration first.
        let (mut depth, mut open) = (0i32, None);
        for (k, c) in text[at..].bytes().enumerate() {
            match c {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => {
                    open = Some(at + k);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut braces = 0i32;
        let Some(close) = text[open..].bytes().position(|c| {
            braces += match c {
                b'{' => 1,
                b'}' => -1,
                _ => 0,
            };
            braces == 0
        }) else {
            continue;
        };
        let first = text[..at].matches('\n').count() + 1;
        let last = text[..open + close].matches('\n').count() + 1;
        out.push((name, first, last - first + 1));
    }
    out
}

/// Every product function, the tests' and testkit's aside, as (file, name, line, length).
fn product_functions() -> Vec<(String, String, usize, usize)> {
    let mut out = Vec::new();
    for f in files(&src()) {
        let m = module_of(&f);
        if m == "testkit" || m.ends_with("tests") {
            continue;
        }
        let text = std::fs::read_to_string(&f).expect("read");
        let rel = f
            .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")))
            .expect("under the crate")
            .display()
            .to_string();
        for (name, line, len) in functions(&blanked(before_tests(&text))) {
            out.push((rel.clone(), name, line, len));
        }
    }
    out
}

/// No product function is over [`MAX_FN_LINES`] but the [`LONG_FN_EXCEPTIONS`], and each of
/// those still is.
#[test]
fn no_function_is_longer_than_its_limit() {
    let all = product_functions();
    assert!(
        all.len() > 500
            && all
                .iter()
                .any(|(f, n, ..)| f == "src/daemon.rs" && n == "run"),
        "the reader found too few functions: {}",
        all.len()
    );
    let long: Vec<_> = all.iter().filter(|(.., len)| *len > MAX_FN_LINES).collect();
    let mut wrong: Vec<String> = long
        .iter()
        .filter(|(f, n, ..)| {
            !LONG_FN_EXCEPTIONS
                .iter()
                .any(|(ef, en, _)| ef == f && en == n)
        })
        .map(|(f, n, line, len)| {
            format!(
                "{f}:{line}: fn {n} is {len} lines, over {MAX_FN_LINES}: split it into named steps"
            )
        })
        .collect();
    for (f, n, _) in LONG_FN_EXCEPTIONS {
        if !long.iter().any(|(lf, ln, ..)| lf == f && ln == n) {
            wrong.push(format!(
                "{f}: fn {n} is no longer over {MAX_FN_LINES} lines: take it off LONG_FN_EXCEPTIONS"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The reader measures a function from `fn` to its closing brace, braces in strings, comments
/// and characters aside, and skips declarations without a body.
#[test]
fn the_function_reader_measures_bodies() {
    let text = "trait T {\n    fn declared(&self);\n}\nfn one() {\n    let s = \"}}}\";\n    // }\n    let c = '}';\n    if true {\n        g(|x| { x });\n    }\n}\nfn two(a: [u8; 2]) -> Result<(), ()> { Ok(()) }\n";
    let found = functions(&blanked(text));
    assert_eq!(
        found,
        [("one".to_string(), 4, 8), ("two".to_string(), 12, 1)],
        "{found:?}"
    );
}
