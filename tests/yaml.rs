//! hooklog reads YAML as Kubernetes does (issue 24): generated Kubernetes-shaped documents,
//! written in the shapes real files have, are read by hooklog and by go-yaml v2 (the oracle,
//! tests/util/goyaml.rs) and must read the same: same documents, values and types, or both
//! rejected. Then inject's edits of them are checked against go-yaml's reading of the result.
//!
//! `HOOKLOG_PROPTEST_CASES` sets the number of generated cases (default [`DEFAULT_CASES`]).
//! Every property counts the cases that reached its assertion and fails below a stated share
//! (issue 30), so a generator that drifts into writing what nobody reads fails loudly.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use serde_json::Value;

use crate::util::goyaml::GoYaml;
use crate::util::goyaml::{deliberate_difference, hooklog_reads, non_null};
use crate::util::manifests::run;
use crate::util::text;

/// Cases per property in the default run: enough to meet every shape of issue 24 (each of
/// its bugs failed within the first 100 on main), small enough for seconds of run time.
const DEFAULT_CASES: u32 = 400;
/// Share (percent) of the reading cases go-yaml must accept: the rest are mutated on purpose
/// (a quarter of the cases) to compare rejections.
const MIN_ACCEPTED_SHARE: usize = 55;
/// Share (percent) of the editing cases that must reach the editing assertions (go-yaml reads
/// the input and inject has a pod to edit).
const MIN_EDITED_SHARE: usize = 60;

fn cases() -> u32 {
    std::env::var("HOOKLOG_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

fn runner(name: &str) -> TestRunner {
    TestRunner::new(Config {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(Box::leak(
            format!("proptest-regressions/yaml/{name}.txt").into_boxed_str(),
        )))),
        ..Config::default()
    })
}

// --- the documents ------------------------------------------------------------------------

/// A node before it is written: scalars are the text they hold, written in a style chosen
/// when writing.
#[derive(Clone, Debug, PartialEq)]
enum Y {
    S(String),
    /// A null, spelled as given (`""`: no text at all); only ever a mapping's value.
    Null(&'static str),
    Seq(Vec<Y>),
    Map(Vec<(String, Y)>),
}

fn s(v: &str) -> Y {
    Y::S(v.into())
}

/// Values real manifests hold, YAML 1.1's traps among them.
const POOL: &[&str] = &[
    "yes",
    "no",
    "on",
    "off",
    "y",
    "N",
    "~",
    "null",
    "Null",
    "NULL",
    "a/b",
    "true",
    "False",
    "0755",
    "0644",
    "0x1F",
    "1_000",
    "1e3",
    "-12",
    "+5",
    ".5",
    "1.5",
    "09",
    "12:30",
    "0b101",
    "2024-01-01",
    "10m",
    "64Mi",
    "500m",
    "nginx:1.25",
    "sleep 5",
    "a: b",
    "#hash",
    "- dash",
    "multi word value here",
    "é€ü",
    "line one\nline two",
    "  leading",
    "trailing ",
    "tab\there",
    "it's",
    "say \"hi\"",
    "back\\slash",
    "x, y",
    "[a]",
    "{b}",
    "*star",
    "&amp",
    "!bang",
    "%pct",
    "@at",
    "?q",
    "|pipe",
    ">gt",
    "",
    "http://example.com:8080/path?q=1",
    "--flag=value",
    "/bin/sh",
    "1.2.3",
    "0.0.0.0",
    "100%",
    "a=b",
    "key: value # not a comment",
];

/// Every spelling of null (go-yaml's YAML 1.1): none at all, `~`, and three of `null`.
const NULLS: &[&str] = &["", "~", "null", "Null", "NULL"];

/// A null, spelled one of the ways [`NULLS`] lists.
fn null(r: &mut fastrand::Rng) -> Y {
    Y::Null(NULLS[r.usize(..NULLS.len())])
}

fn pick<'a>(r: &mut fastrand::Rng, from: &[&'a str]) -> &'a str {
    from[r.usize(..from.len())]
}

fn scalar(r: &mut fastrand::Rng) -> Y {
    s(pick(r, POOL))
}

fn labels(r: &mut fastrand::Rng) -> Y {
    let mut out = vec![("app".to_string(), s(pick(r, &["web", "db", "yes", "0755"])))];
    for i in 0..r.usize(0..3) {
        out.push((format!("example.com/l{i}"), scalar(r)));
    }
    Y::Map(out)
}

fn container(r: &mut fastrand::Rng, i: usize) -> Y {
    let mut c = vec![
        ("name".to_string(), s(&format!("c{i}"))),
        (
            "image".to_string(),
            s(pick(
                r,
                &[
                    "nginx:1.25",
                    "busybox",
                    "registry.example.com/app@sha256:0123",
                ],
            )),
        ),
    ];
    if r.bool() {
        c.push((
            "command".into(),
            Y::Seq(vec![
                s("sh"),
                s("-c"),
                s(pick(
                    r,
                    &[
                        "sleep 3600",
                        "exec nginx -g 'daemon off;'",
                        "echo \"hi\"; sleep 1d",
                    ],
                )),
            ]),
        ));
    }
    if r.bool() {
        let env = (0..r.usize(1..4))
            .map(|j| {
                Y::Map(vec![
                    ("name".into(), s(&format!("E{j}"))),
                    ("value".into(), scalar(r)),
                ])
            })
            .collect();
        c.push(("env".into(), Y::Seq(env)));
    }
    if r.bool() {
        c.push((
            "ports".into(),
            Y::Seq(vec![Y::Map(vec![(
                "containerPort".into(),
                s(pick(r, &["80", "8080", "0x1F90"])),
            )])]),
        ));
    }
    if r.u8(..4) > 0 {
        let hook = if r.u8(..4) > 0 {
            Y::Map(vec![(
                "exec".into(),
                Y::Map(vec![(
                    "command".into(),
                    Y::Seq(vec![
                        s("sh"),
                        s("-c"),
                        s(pick(
                            r,
                            &["sleep 5", "nginx -s quit; sleep 2", "echo bye\nsleep 1"],
                        )),
                    ]),
                )]),
            )])
        } else {
            Y::Map(vec![(
                "httpGet".into(),
                Y::Map(vec![
                    ("path".into(), s("/quit")),
                    ("port".into(), s("8080")),
                ]),
            )])
        };
        // A null hook, or a null lifecycle, sometimes: no hook (issue 39).
        let lifecycle = match r.u8(..10) {
            0 => null(r),
            1 => Y::Map(vec![("preStop".into(), null(r))]),
            _ => Y::Map(vec![("preStop".into(), hook)]),
        };
        c.push(("lifecycle".into(), lifecycle));
    }
    if r.u8(..8) == 0 {
        // A null inject fills.
        c.push(("volumeMounts".into(), null(r)));
    }
    if r.bool() {
        c.push((
            "resources".into(),
            Y::Map(vec![(
                "limits".into(),
                Y::Map(vec![
                    ("memory".into(), s("64Mi")),
                    ("cpu".into(), s(pick(r, &["500m", "1", "0.5"]))),
                ]),
            )]),
        ));
    }
    Y::Map(c)
}

fn pod_spec(r: &mut fastrand::Rng, size: usize) -> Y {
    let mut spec = vec![(
        "containers".to_string(),
        Y::Seq(
            (0..1 + r.usize(..size.clamp(1, 3)))
                .map(|i| container(r, i))
                .collect(),
        ),
    )];
    if r.bool() {
        spec.push((
            "terminationGracePeriodSeconds".into(),
            s(pick(r, &["30", "60", "0x3C", "1_0"])),
        ));
    }
    match r.u8(..10) {
        // Not a list where Kubernetes wants one (a partial assert file's): inject refuses it.
        8 => spec.push(("volumes".into(), Y::Map(vec![("name".into(), s("data"))]))),
        // A null inject fills, every spelling (or, quoted, a string it refuses).
        9 => spec.push(("volumes".into(), if r.bool() { s("data") } else { null(r) })),
        0..3 => spec.push(("volumes".into(), Y::Seq(vec![]))),
        3..6 => spec.push((
            "volumes".into(),
            Y::Seq(vec![Y::Map(vec![
                ("name".into(), s("data")),
                ("emptyDir".into(), Y::Map(vec![])),
            ])]),
        )),
        _ => {}
    }
    Y::Map(spec)
}

fn metadata(r: &mut fastrand::Rng, name: &str, lbl: &Y) -> Y {
    let mut m = vec![
        ("name".to_string(), s(name)),
        ("labels".to_string(), lbl.clone()),
    ];
    if r.bool() {
        let mut a = vec![(
            "note".to_string(),
            s("a long annotation value that a real file breaks over lines [with, brackets]"),
        )];
        for i in 0..r.usize(..3) {
            a.push((format!("example.com/a{i}"), scalar(r)));
        }
        m.push(("annotations".into(), Y::Map(a)));
    } else if r.u8(..4) == 0 {
        // A null inject fills (in a template's metadata).
        m.push(("annotations".into(), null(r)));
    }
    Y::Map(m)
}

/// A Kubernetes object: a Pod, Deployment, Job or ConfigMap.
fn object(r: &mut fastrand::Rng, size: usize, n: usize) -> Y {
    let lbl = labels(r);
    let name = format!("obj{n}");
    let kind = pick(r, &["Pod", "Deployment", "Job", "ConfigMap"]);
    let api = match kind {
        "Deployment" => "apps/v1",
        "Job" => "batch/v1",
        _ => "v1",
    };
    let mut o = vec![
        ("apiVersion".to_string(), s(api)),
        ("kind".to_string(), s(kind)),
        ("metadata".to_string(), metadata(r, &name, &lbl)),
    ];
    let template = |r: &mut fastrand::Rng, lbl: &Y| {
        let mut tl = lbl.clone();
        if r.bool()
            && let Y::Map(m) = &mut tl
        {
            m.push(("version".into(), s("v1")));
        }
        Y::Map(vec![
            ("metadata".into(), Y::Map(vec![("labels".into(), tl)])),
            ("spec".into(), pod_spec(r, size)),
        ])
    };
    match kind {
        "Pod" => o.push(("spec".into(), pod_spec(r, size))),
        "Deployment" => o.push((
            "spec".into(),
            Y::Map(vec![
                ("replicas".into(), s(pick(r, &["1", "3", "03", "0x2"]))),
                (
                    "selector".into(),
                    Y::Map(vec![("matchLabels".into(), lbl.clone())]),
                ),
                ("template".into(), template(r, &lbl)),
            ]),
        )),
        "Job" => {
            let mut t = template(r, &lbl);
            if let Y::Map(m) = &mut t
                && let Some((_, Y::Map(spec))) = m.iter_mut().find(|(k, _)| k == "spec")
            {
                spec.push(("restartPolicy".into(), s("Never")));
            }
            o.push(("spec".into(), Y::Map(vec![("template".into(), t)])));
        }
        _ => o.push((
            "data".into(),
            Y::Map(
                (0..r.usize(1..4))
                    .map(|i| (format!("k{i}"), scalar(r)))
                    .collect(),
            ),
        )),
    }
    Y::Map(o)
}

// --- writing them -------------------------------------------------------------------------

/// How a file is written: each a choice real files make.
#[derive(Clone, Debug)]
struct Shape {
    seed: u64,
    size: usize,
    docs: usize,
    json: u8,
    bom: bool,
    crlf: bool,
    no_final_newline: bool,
    directive: bool,
    doc_end: bool,
    mutate: bool,
    /// The objects as the items of one List: 0 `kind` first, 1 `kind` after `items` (as
    /// `kubectl get -o yaml` writes it), 2 a `DeploymentList`, 3 an object with `items` that is
    /// no List; else each object a document.
    list: u8,
}

prop_compose! {
    fn shape()(
        seed in any::<u64>(),
        size in 1usize..4,
        docs in 1usize..4,
        json in 0u8..8,
        bom in prop::bool::weighted(0.15),
        crlf in prop::bool::weighted(0.2),
        no_final_newline in prop::bool::weighted(0.2),
        directive in prop::bool::weighted(0.1),
        doc_end in prop::bool::weighted(0.1),
        mutate in prop::bool::weighted(0.25),
        list in 0u8..10,
    ) -> Shape {
        Shape { seed, size, docs, json, bom, crlf, no_final_newline, directive, doc_end, mutate, list }
    }
}

struct Writer {
    r: fastrand::Rng,
    out: String,
    step: usize,
    /// Lists under a key indented (`key:\n  - a`) or not (`key:\n- a`).
    seq_indent: bool,
    anchors: Vec<(String, Y)>,
    /// Anchored keys (`&k12 name:`), by anchor, for aliases as keys (`*k12 :`).
    key_anchors: Vec<(String, String)>,
    comments: u8,
    flow: u8,
}

/// True when `v` may be written plain and read back as the same text.
fn can_plain(v: &str, flow: bool) -> bool {
    let Some(first) = v.chars().next() else {
        return false;
    };
    let indicator = "-?:,[]{}#&*!|>'\"%@`".contains(first);
    let dash_ok = (first == '-' || first == '?' || first == ':')
        && v.chars().nth(1).is_some_and(|c| !c.is_whitespace());
    (!indicator || dash_ok)
        && !v.contains(['\n', '\t'])
        && !v.contains(": ")
        && !v.contains(" #")
        && !v.ends_with(':')
        && v.trim() == v
        && !(flow && v.contains([',', '[', ']', '{', '}']))
}

impl Writer {
    fn pad(&mut self, n: usize) {
        self.out.extend(std::iter::repeat_n(' ', n));
    }

    fn chance(&mut self, percent: u8) -> bool {
        self.r.u8(..100) < percent
    }

    /// A comment line at some indentation, sometimes.
    fn comment_line(&mut self, indent: usize) {
        if self.chance(self.comments) {
            let at = self.r.usize(..=indent + 2);
            self.pad(at);
            self.out
                .push_str("# a comment: with [punctuation], 'quotes' & more\n");
        }
    }

    fn end_comment(&mut self) {
        if self.chance(self.comments) {
            self.out.push_str(" # trailing");
        }
    }

    /// A scalar after `key: ` or `- ` in block context (`indent` is its parent's column).
    fn block_scalar_value(&mut self, v: &str, indent: usize) {
        let choice = self.r.u8(..10);
        if choice < 2 && !v.is_empty() {
            self.block_scalar(v, indent);
            return;
        }
        if choice < 6 && can_plain(v, false) {
            if v.contains(' ') && self.chance(40) {
                // A plain scalar over lines, continued deeper than its parent.
                let words: Vec<&str> = v.split(' ').collect();
                self.out.push_str(words[0]);
                for w in &words[1..] {
                    self.out.push('\n');
                    let at = indent + 1 + self.r.usize(..4);
                    self.pad(at);
                    self.out.push_str(w);
                }
            } else {
                self.out.push_str(v);
            }
            self.end_comment();
            self.out.push('\n');
            return;
        }
        let multi = v.contains(' ') && self.chance(40);
        if choice < 8 {
            self.single(v, multi, Some(indent));
        } else {
            self.double(v, multi, Some(indent));
        }
        self.end_comment();
        self.out.push('\n');
    }

    /// A line break inside a quoted scalar, the next line at any column (go-yaml takes any;
    /// `---` or `...` at column 0 would end the document).
    fn quoted_break(&mut self, indent: Option<usize>) {
        self.out.push('\n');
        let at = match indent {
            Some(i) => self.r.usize(..=i + 4),
            None => 1 + self.r.usize(..6),
        };
        self.pad(at.max(1));
    }

    /// The words of a quoted scalar's value `v`: between two a space or, in a multi-line
    /// scalar half the time, a line break `line_break` writes; each word as `word` writes it.
    fn words(
        &mut self,
        v: &str,
        multi: bool,
        mut line_break: impl FnMut(&mut Self),
        mut word: impl FnMut(&mut Self, &str),
    ) {
        let mut first = true;
        for w in v.split(' ') {
            if !first {
                if multi && !w.is_empty() && self.chance(50) {
                    line_break(self);
                } else {
                    self.out.push(' ');
                }
            }
            first = false;
            word(self, w);
        }
    }

    fn single(&mut self, v: &str, multi: bool, indent: Option<usize>) {
        self.out.push('\'');
        self.words(
            v,
            multi,
            |w| w.quoted_break(indent),
            // A line break in the value is an empty line in the text.
            |w, word| {
                w.out
                    .push_str(&word.replace('\'', "''").replace('\n', "\n\n "))
            },
        );
        self.out.push('\'');
    }

    fn double(&mut self, v: &str, multi: bool, indent: Option<usize>) {
        self.out.push('"');
        self.words(
            v,
            multi,
            |w| {
                if w.chance(30) {
                    // An escaped line break: the space is kept, the break is not.
                    w.out.push_str(" \\");
                }
                w.quoted_break(indent);
            },
            Self::double_word,
        );
        self.out.push('"');
    }

    /// One word of a double-quoted scalar, its characters escaped or not at random.
    fn double_word(&mut self, word: &str) {
        for c in word.chars() {
            match c {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\t' => self.out.push_str(if self.r.bool() { "\\t" } else { "\t" }),
                'é' if self.r.bool() => self.out.push_str("\\u00e9"),
                // Every escape go-yaml knows for a printable character, and `\/`, which
                // it refuses (YAML 1.2's): both readers must agree on each (issue 39).
                '\'' if self.chance(30) => self.out.push_str("\\'"),
                '/' if self.chance(10) => self.out.push_str("\\/"),
                ' ' if self.chance(5) => self.out.push_str("\\ "),
                c if self.chance(5) => {
                    let n = u32::from(c);
                    let escape = match self.r.u8(..3) {
                        0 if n < 0x100 => format!("\\x{n:02x}"),
                        1 if n < 0x10000 => format!("\\u{n:04X}"),
                        _ => format!("\\U{n:08x}"),
                    };
                    self.out.push_str(&escape);
                }
                c => self.out.push(c),
            }
        }
    }

    /// `|` or `>` with a chomping and sometimes an indentation indicator.
    fn block_scalar(&mut self, v: &str, indent: usize) {
        let literal = self.r.bool();
        let chomp = pick(&mut self.r, &["", "-", "+"]);
        let lines: Vec<&str> = v.split('\n').collect();
        let needs_indicator = lines[0].starts_with(' ');
        let explicit = needs_indicator || self.chance(20);
        let content = indent + self.step;
        self.out.push(if literal { '|' } else { '>' });
        if explicit {
            // Relative to the parent's indentation.
            self.out.push_str(&self.step.to_string());
        }
        self.out.push_str(chomp);
        self.end_comment();
        self.out.push('\n');
        for line in &lines {
            if !line.is_empty() {
                self.pad(content);
            }
            self.out.push_str(line);
            if self.chance(10) {
                self.out.push_str("\twith a tab");
            }
            self.out.push('\n');
        }
        if chomp == "+" && self.chance(50) {
            self.out.push('\n');
        }
    }

    /// An alias to an anchored node equal to `y`, or a new anchor for it, sometimes.
    fn anchor_or_alias(&mut self, y: &Y) -> Option<String> {
        if !matches!(y, Y::Map(m) if !m.is_empty()) && !matches!(y, Y::Seq(l) if !l.is_empty()) {
            return None;
        }
        if let Some((name, _)) = self.anchors.iter().find(|(_, a)| a == y) {
            return Some(format!("*{name}"));
        }
        if self.chance(25) {
            let name = format!("a{}", self.anchors.len());
            self.anchors.push((name.clone(), y.clone()));
            return Some(format!("&{name}"));
        }
        None
    }

    /// A merge key for `m` if an anchored mapping holds some of its entries.
    fn merge_for(&self, m: &[(String, Y)]) -> Option<(String, Vec<(String, Y)>)> {
        for (name, a) in &self.anchors {
            if let Y::Map(base) = a
                && base.len() < m.len()
                && base.iter().all(|e| m.contains(e))
            {
                let rest = m.iter().filter(|e| !base.contains(e)).cloned().collect();
                return Some((name.clone(), rest));
            }
        }
        None
    }

    /// A value after `key:` (the colon written) in block context.
    fn value(&mut self, y: &Y, indent: usize) {
        if let Some(a) = self.anchor_or_alias(y) {
            self.out.push(' ');
            self.out.push_str(&a);
            if a.starts_with('*') {
                self.out.push('\n');
                return;
            }
        }
        match y {
            Y::S(v) => {
                self.out.push(' ');
                self.block_scalar_value(v, indent);
            }
            Y::Null(token) => self.null_value(token, indent),
            Y::Seq(l) if l.is_empty() => self.out.push_str(" []\n"),
            Y::Map(m) if m.is_empty() => self.out.push_str(" {}\n"),
            _ if self.chance(self.flow) => {
                self.out.push(' ');
                self.flow(y, indent);
                self.end_comment();
                self.out.push('\n');
            }
            Y::Map(m) => {
                self.end_comment();
                self.out.push('\n');
                self.entries(m, indent + self.step, false);
            }
            Y::Seq(l) => {
                self.end_comment();
                self.out.push('\n');
                let at = if self.seq_indent {
                    indent + self.step
                } else {
                    indent
                };
                self.items(l, at);
            }
        }
    }

    /// An alias to an anchored key equal to `k`, sometimes (`*k12 :`, and `*k12:`, which
    /// go-yaml reads as the alias `k12` and its `:`), or a new anchor on it (`&k12 key`),
    /// rarely: go-yaml reads both as the key itself (issue 39). True when an alias was written,
    /// with its `:`.
    fn key_anchor_or_alias(&mut self, k: &str) -> bool {
        let anchored = self
            .key_anchors
            .iter()
            .find(|(_, a)| a == k)
            .map(|(name, _)| name.clone());
        if let Some(name) = anchored
            && self.chance(50)
        {
            let colon = pick(&mut self.r, &[" :", " :", ":"]);
            self.out.push_str(&format!("*{name}{colon}"));
            return true;
        }
        if self.chance(3) {
            let name = format!("k{}", self.out.len());
            self.out.push_str(&format!("&{name} "));
            self.key_anchors.push((name, k.to_string()));
        }
        false
    }

    /// A null after `key:`: its token after a blank or on the next line, a comment after it
    /// sometimes.
    fn null_value(&mut self, token: &str, indent: usize) {
        if !token.is_empty() {
            if self.chance(25) {
                self.end_comment();
                self.out.push('\n');
                let at = indent + 1 + self.r.usize(..4);
                self.pad(at);
            } else {
                self.out.push(' ');
            }
            self.out.push_str(token);
        }
        self.end_comment();
        self.out.push('\n');
    }

    fn key(&mut self, k: &str) {
        if self.key_anchor_or_alias(k) {
            return;
        }
        if can_plain(k, false) && !self.chance(5) {
            self.out.push_str(k);
        } else {
            self.out.push('"');
            self.out.push_str(k);
            self.out.push('"');
        }
        self.out.push(':');
    }

    /// A block mapping's entries at column `indent`; the first one right here when `inline`
    /// (after `- `).
    fn entries(&mut self, m: &[(String, Y)], indent: usize, inline: bool) {
        let (merge, rest) = match self.merge_for(m) {
            Some((name, rest)) if self.chance(50) => (Some(name), rest),
            _ => (None, m.to_vec()),
        };
        let mut first = inline;
        if let Some(name) = merge {
            if !first {
                self.pad(indent);
            }
            first = false;
            self.out.push_str(&format!("<<: *{name}\n"));
        }
        for (k, v) in &rest {
            if !first {
                self.comment_line(indent);
                self.pad(indent);
            }
            first = false;
            self.key(k);
            self.value(v, indent);
        }
    }

    fn items(&mut self, l: &[Y], indent: usize) {
        for y in l {
            self.comment_line(indent);
            self.pad(indent);
            self.out.push('-');
            match y {
                Y::Map(m) if !m.is_empty() && !self.chance(self.flow) => {
                    self.out.push(' ');
                    self.entries(m, indent + 2, true);
                }
                Y::S(v) => {
                    self.out.push(' ');
                    self.block_scalar_value(v, indent);
                }
                _ => {
                    self.out.push(' ');
                    self.flow(y, indent);
                    self.out.push('\n');
                }
            }
        }
    }

    /// A node in flow style, over lines sometimes, with trailing commas sometimes.
    fn flow(&mut self, y: &Y, indent: usize) {
        let multi = self.chance(30);
        let (open, close, len) = match y {
            Y::Null(token) => {
                // A mapping's value, after `key: `: on the next line sometimes.
                if !token.is_empty() && self.chance(20) {
                    self.out.push('\n');
                    let at = indent + 1 + self.r.usize(..4);
                    self.pad(at);
                }
                self.out.push_str(token);
                return;
            }
            Y::S(v) => {
                if self.chance(5) {
                    // A tag in a flow collection, the `,` after it part of it in go-yaml
                    // (`[!!str, a]` is `["a"]`, issue 39), or a blank after it.
                    self.out
                        .push_str(pick(&mut self.r, &["!!str ", "!!str, ", "!local ", "!e, "]));
                }
                if can_plain(v, true) && self.chance(70) {
                    self.out.push_str(v);
                } else {
                    let multi = self.chance(20);
                    if self.r.bool() {
                        self.single(v, multi, None);
                    } else {
                        self.double(v, multi, None);
                    }
                }
                return;
            }
            Y::Seq(l) => ('[', ']', l.len()),
            Y::Map(m) => ('{', '}', m.len()),
        };
        self.out.push(open);
        for i in 0..len {
            if multi {
                self.out.push('\n');
                let at = indent + 1 + self.r.usize(..4);
                self.pad(at);
            } else if i > 0 {
                self.out.push(' ');
            }
            match y {
                Y::Seq(l) => self.flow(&l[i], indent + 2),
                Y::Map(m) => {
                    let (k, v) = &m[i];
                    if !self.key_anchor_or_alias(k) {
                        self.out.push_str(k);
                        self.out.push(':');
                    }
                    self.out.push(' ');
                    self.flow(v, indent + 2);
                }
                Y::S(_) | Y::Null(_) => unreachable!(),
            }
            if i + 1 < len || self.chance(30) {
                self.out.push(',');
            }
        }
        if multi {
            self.out.push('\n');
            self.pad(indent);
        }
        self.out.push(close);
    }
}

/// As JSON: scalars that read as numbers or booleans in JSON are written so.
fn to_json(y: &Y) -> Value {
    match y {
        Y::S(v) => match v.as_str() {
            "true" => Value::Bool(true),
            "null" => Value::Null,
            _ => match v.parse::<i64>() {
                Ok(n) if !v.starts_with(['0', '+']) || v == "0" => Value::from(n),
                _ => Value::String(v.clone()),
            },
        },
        Y::Null(_) => Value::Null,
        Y::Seq(l) => Value::Array(l.iter().map(to_json).collect()),
        Y::Map(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// A file of `shape.docs` generated objects, written as `shape` says.
fn write(shape: &Shape) -> String {
    let mut r = fastrand::Rng::with_seed(shape.seed);
    let mut objects: Vec<Y> = (0..shape.docs)
        .map(|n| object(&mut r, shape.size, n))
        .collect();
    if shape.list < 4 {
        let kind = match shape.list {
            2 => "DeploymentList",
            3 => "ItemHolder",
            _ => "List",
        };
        let items = ("items".to_string(), Y::Seq(std::mem::take(&mut objects)));
        let mut list = vec![
            ("apiVersion".to_string(), s("v1")),
            ("kind".into(), s(kind)),
        ];
        match shape.list {
            1 => list.insert(1, items),
            _ => list.push(items),
        }
        if shape.list == 1 {
            list.push((
                "metadata".into(),
                Y::Map(vec![("resourceVersion".into(), s(""))]),
            ));
        }
        objects.push(Y::Map(list));
    }
    let mut out = match shape.json {
        0 => serde_json::to_string_pretty(&to_json(&objects[0])).unwrap() + "\n",
        1 => serde_json::to_string(&to_json(&objects[0])).unwrap(),
        2 => objects
            .iter()
            .map(|o| serde_json::to_string_pretty(&to_json(o)).unwrap() + "\n")
            .collect(),
        _ => {
            let mut w = Writer {
                step: if r.u8(..4) == 0 { 4 } else { 2 },
                seq_indent: r.bool(),
                anchors: Vec::new(),
                key_anchors: Vec::new(),
                comments: pick(&mut r, &["0", "10", "30"]).parse().unwrap(),
                flow: pick(&mut r, &["0", "0", "10", "30", "100"])
                    .parse()
                    .unwrap(),
                r,
                out: String::new(),
            };
            if w.chance(30) {
                w.out.push_str("# a file's header comment\n");
            }
            if shape.directive {
                // YAML 1.1 is what go-yaml takes; 1.2 it refuses (issue 39); a %TAG with it.
                let directive = pick(
                    &mut w.r,
                    &[
                        "%YAML 1.1\n",
                        "%YAML 1.2\n",
                        "%TAG !e! tag:example.com,2000:\n%YAML 1.1\n",
                    ],
                );
                w.out.push_str(directive);
                w.out.push_str("---\n");
            }
            for (i, o) in objects.iter().enumerate() {
                if i > 0 || (!shape.directive && w.chance(30)) {
                    let sep = if w.chance(20) {
                        "--- # next\n"
                    } else {
                        "---\n"
                    };
                    w.out.push_str(sep);
                }
                w.anchors.clear();
                w.key_anchors.clear();
                if w.flow == 100 && w.chance(50) {
                    // The whole document in flow style, as the Kubernetes website's examples.
                    w.flow(o, 0);
                    w.out.push('\n');
                } else if let Y::Map(m) = o {
                    w.entries(m, 0, false);
                }
                if shape.doc_end {
                    w.out.push_str("...\n");
                }
            }
            if w.chance(20) {
                w.out.push_str("# the end\n");
            }
            w.out
        }
    };
    if shape.mutate {
        mutate(&mut out, shape.seed);
    }
    if shape.no_final_newline {
        while out.ends_with('\n') {
            out.pop();
        }
    }
    if shape.crlf {
        out = out.replace('\n', "\r\n");
    }
    if shape.bom {
        out.insert(0, '\u{feff}');
    }
    out
}

/// A small change that often makes the text invalid, to compare rejections.
fn mutate(text: &mut String, seed: u64) {
    let mut r = fastrand::Rng::with_seed(seed ^ 0x5eed);
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    if boundaries.is_empty() {
        return;
    }
    let at = boundaries[r.usize(..boundaries.len())];
    match r.u8(..6) {
        0 => {
            text.remove(at);
        }
        1 => text.insert(
            at,
            pick(&mut r, &[":", "-", "[", "{", "'", "\"", "#", "&", "*", "|"])
                .chars()
                .next()
                .unwrap(),
        ),
        2 => text.insert(at, '\t'),
        3 => text.insert(at, '\n'),
        4 => text.insert(at, ' '),
        _ => {
            let start = tree_line_start(text, at);
            text.insert_str(start, "  ");
        }
    }
}

fn tree_line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

// --- the properties -----------------------------------------------------------------------

/// The items of a document that is a List of objects, if it is one: `kind` ending in `List`.
fn list_items(doc: &Value) -> Option<&Vec<Value>> {
    let kind = doc["kind"].as_str()?;
    let items = doc["items"].as_array()?;
    (kind.ends_with("List") && items.iter().all(Value::is_object)).then_some(items)
}

#[test]
fn hooklog_reads_what_go_yaml_reads() {
    let Some(oracle) = GoYaml::start() else {
        return;
    };
    let oracle = std::cell::RefCell::new(oracle);
    let total = AtomicUsize::new(0);
    let accepted = AtomicUsize::new(0);
    let rejected = AtomicUsize::new(0);
    // HOOKLOG_YAML_SURVEY=1: count the disagreements instead of stopping at the first (to
    // compare parsers).
    let survey = std::env::var_os("HOOKLOG_YAML_SURVEY").is_some();
    let differ = AtomicUsize::new(0);
    let alias_keys = AtomicUsize::new(0);
    let result = runner("reading").run(&shape(), |shape| {
        let text = write(&shape);
        let go = oracle.borrow_mut().read(&text).map(non_null);
        let ours = hooklog_reads(&text);
        total.fetch_add(1, Ordering::Relaxed);
        match (&go, &ours) {
            (Ok(want), Ok(got)) => {
                accepted.fetch_add(1, Ordering::Relaxed);
                if text.contains("*k") {
                    alias_keys.fetch_add(1, Ordering::Relaxed);
                }
                if survey && got != want {
                    differ.fetch_add(1, Ordering::Relaxed);
                    eprintln!("SURVEY values differ: {}", text.replace('\n', "\\n"));
                } else {
                    prop_assert_eq!(got, want, "{:?}\n{}", shape, text);
                }
            }
            (Err(_), Err(_)) => {
                rejected.fetch_add(1, Ordering::Relaxed);
            }
            (Ok(_), Err(_)) if deliberate_difference(&ours) => {}
            _ if survey => {
                differ.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "SURVEY go={:?} hooklog={:?}",
                    go.as_ref().err(),
                    ours.as_ref().err()
                );
            }
            _ => prop_assert!(
                false,
                "go-yaml: {:?}\nhooklog: {:?}\n{:?}\n{}",
                go,
                ours,
                shape,
                text
            ),
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (total, accepted) = (total.into_inner(), accepted.into_inner());
    eprintln!(
        "{total} cases: {accepted} read by both ({} with an alias as a key), {} rejected by both, {} read differently",
        alias_keys.into_inner(),
        rejected.into_inner(),
        differ.into_inner()
    );
    assert!(
        accepted * 100 >= total * MIN_ACCEPTED_SHARE,
        "only {accepted} of {total} cases were read by both (want {MIN_ACCEPTED_SHARE}%)"
    );
}

const IMAGE: &str = "registry.example.com/hooklog:0.1.0";

/// The binary on `input`: its stdout and stderr, or its stderr when it failed.
fn hooklog_on(args: &[&str], input: &str) -> Result<(String, String), String> {
    let out = run(args, Some(input));
    if out.status.success() {
        Ok((text(&out.stdout), text(&out.stderr)))
    } else {
        Err(text(&out.stderr))
    }
}

/// Lines with their line ends.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The shape's traits a failure is filed under in a survey.
fn traits(shape: &Shape, input: &str) -> String {
    let mut t = Vec::new();
    if shape.json < 3 {
        t.push("json");
    }
    if shape.bom {
        t.push("bom");
    }
    if shape.crlf {
        t.push("crlf");
    }
    if shape.no_final_newline {
        t.push("no-final-newline");
    }
    if shape.directive || shape.doc_end {
        t.push("directive/...");
    }
    if input.contains(" &a") {
        t.push("anchors");
    }
    if input.contains("*k") {
        t.push("alias-keys");
    }
    if input.contains("[]") {
        t.push("empty-flow");
    }
    if shape.list < 4 {
        t.push("list");
    }
    if input.contains(": {\n") || input.contains(": [\n") || input.starts_with('{') {
        t.push("multi-line-flow");
    }
    t.join(",")
}

/// The editing properties (issue 24's point 2): on every file go-yaml reads, inject's output
/// read by go-yaml is what inject makes of the values, edited in place; its lines end as the
/// file's do and the BOM stays; inject twice changes nothing; uninject gives back the bytes.
/// `HOOKLOG_YAML_SURVEY=1` files every failure under its property and the shape's traits
/// instead of stopping at the first.
#[test]
fn inject_edits_every_shape_faithfully() {
    let Some(oracle) = GoYaml::start() else {
        return;
    };
    let oracle = std::cell::RefCell::new(oracle);
    let survey = std::env::var_os("HOOKLOG_YAML_SURVEY").is_some();
    let failures = std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    let total = AtomicUsize::new(0);
    let edited = AtomicUsize::new(0);
    // Edited cases with an alias as a key; with a null that inject filled and kept.
    let alias_keys = AtomicUsize::new(0);
    let nulls_kept = AtomicUsize::new(0);
    let strategy = shape().prop_filter("readable", |s| !s.mutate);
    // Each case runs the binary four times: a quarter of the reading cases.
    let mut r = runner("editing");
    r = TestRunner::new(Config {
        cases: (cases() / 4).max(20),
        ..r.config().clone()
    });
    let result = r.run(&strategy, |shape| {
        let input = write(&shape);
        total.fetch_add(1, Ordering::Relaxed);
        let fail = |property: &str, detail: String| -> Result<(), TestCaseError> {
            if survey {
                // Why inject wrote it anew, without the file's line and column.
                let why = detail
                    .split_once("could not edit in place (")
                    .map(|(_, w)| {
                        w.chars()
                            .filter(|c| !c.is_ascii_digit())
                            .take(70)
                            .collect::<String>()
                    })
                    .unwrap_or_default();
                let key = format!("{property} {why} [{}]", traits(&shape, &input));
                *failures.lock().unwrap().entry(key).or_default() += 1;
                return Err(TestCaseError::reject("surveyed"));
            }
            Err(TestCaseError::fail(format!(
                "{property}: {detail}\n{shape:?}\n--- input\n{input}"
            )))
        };
        let Ok(before) = oracle.borrow_mut().read(&input).map(non_null) else {
            return Ok(());
        };
        let args = ["inject", "--image", IMAGE, "--sidecar", "native", "-"];
        let (once, notes) = match hooklog_on(&args, &input) {
            Ok(o) => o,
            Err(e) if deliberate_difference(&Err(e.clone())) => return Ok(()),
            // A field of the wrong shape (`volumes` a mapping): refused, never replaced.
            Err(e) if e.contains("where Kubernetes wants") => return Ok(()),
            Err(e) => return fail("inject fails", e),
        };
        edited.fetch_add(1, Ordering::Relaxed);
        // What inject makes of the values, as JSON: the reference for the edited text. A
        // List's items each as a document of its own, put back in their List after: inject reads
        // a List's items one at a time, and this reads none.
        let json: String = before
            .iter()
            .flat_map(|d| match list_items(d) {
                Some(items) => items.clone(),
                None => vec![d.clone()],
            })
            .map(|d| d.to_string() + "\n---\n")
            .collect();
        let (want, _) = hooklog_on(&args, &json).map_err(TestCaseError::fail)?;
        let want = oracle.borrow_mut().read(&want).map(non_null).map(|flat| {
            let mut flat = flat.into_iter();
            before
                .iter()
                .map(|d| {
                    let mut d = d.clone();
                    if let Some(n) = list_items(&d).map(Vec::len) {
                        d["items"] = Value::Array(flat.by_ref().take(n).collect());
                    } else if let Some(one) = flat.next() {
                        d = one;
                    }
                    d
                })
                .collect::<Vec<_>>()
        });
        let got = oracle.borrow_mut().read(&once).map(non_null);
        if got != want {
            return fail(
                "go-yaml reads the output otherwise",
                format!("{got:?}\n--- output\n{once}"),
            );
        }
        if notes.contains("could not edit in place") {
            return fail("written anew", notes);
        }
        let crlf = input.contains("\r\n");
        if let Some(line) = lines(&once)
            .into_iter()
            .find(|l| l.ends_with('\n') && l.ends_with("\r\n") != crlf)
        {
            return fail("mixed line ends", format!("{line:?}\n--- output\n{once}"));
        }
        if once.starts_with('\u{feff}') != input.starts_with('\u{feff}') {
            return fail("BOM lost", once);
        }
        let twice = hooklog_on(&args, &once).map_err(TestCaseError::fail)?.0;
        if twice != once {
            return fail(
                "inject twice changes it",
                format!("--- once\n{once}\n--- twice\n{twice}"),
            );
        }
        let back = hooklog_on(&["uninject", "-"], &once)
            .map_err(TestCaseError::fail)?
            .0;
        if back != input {
            return fail(
                "uninject(inject(x)) != x",
                format!("--- output\n{once}\n--- back\n{back:?}"),
            );
        }
        if input.contains("*k") {
            alias_keys.fetch_add(1, Ordering::Relaxed);
        }
        if once.contains("# hooklog: was") {
            nulls_kept.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    let failures = failures.into_inner().unwrap();
    for (class, n) in &failures {
        eprintln!("SURVEY {n:4} {class}");
    }
    if let Err(e) = result
        && !survey
    {
        panic!("{e}");
    }
    let (total, edited) = (total.into_inner(), edited.into_inner());
    eprintln!(
        "{total} cases: {edited} edited ({} with an alias as a key, {} with a null kept)",
        alias_keys.into_inner(),
        nulls_kept.into_inner()
    );
    assert!(
        edited * 100 >= total * MIN_EDITED_SHARE,
        "only {edited} of {total} cases reached the editing assertions (want {MIN_EDITED_SHARE}%)"
    );
}
