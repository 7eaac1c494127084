//! The docs stay true: every example README.md and docs/*.md show with its output is run with
//! the real binary and compared (or listed here as not run, with the reason), no relative
//! link or `#anchor` in them is broken, and every size, budget and limit they state is a row of
//! docs/figures.md, which is checked against its source ([`every_figure_holds_against_its_source`],
//! [`no_page_states_a_size_or_budget_that_is_not_a_figure`]).
//!
//! An example is a fenced block that shows output: its info string is `console`, `json`,
//! `text` or `diff`, or a line of it starts with `$ `. Each one must follow a marker
//! `<!-- example: NAME -->` (GitHub does not render it) naming an entry of [`EXAMPLES`], so a
//! new example cannot go unchecked. A `console` block is a shell transcript: its `$ ` lines run
//! in one bash session, in a fresh folder holding the entry's files, with the binary under test
//! first on `PATH`, and each command's stdout and stderr must be the lines shown under it, but
//! for the values [`MASKS`] names (times, durations and run ids differ on every run). The
//! folder and its subfolders stand for the paths [`FOLDERS`] names (the quick start's folder, a
//! pod's emptyDir and Downward API volume): such a path in a command is the folder, and the
//! folder's path in the output is shown as that path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::util::markdown::anchors;
use crate::util::{hooklog_bin, wait_until};

/// How long one transcript may take: the hook example waits `--announce-timeout`'s default
/// 5 s for a peer that never reports, and the machine is shared.
const TRANSCRIPT_TIMEOUT: Duration = Duration::from_secs(60);

/// The paths the pages' examples use, each with the subfolder of the example's folder that
/// stands for it: the folder itself first, then the subfolders (which the output replaces first).
const FOLDERS: &[(&str, &str)] = &[
    ("/tmp/hooklog-demo", ""),
    ("/hooklog", "hooklog"),
    ("/hooklog-bin", "hooklog-bin"),
    ("/etc/podinfo", "podinfo"),
];

/// `text` with each `from` that is a whole path (not part of a longer name: `/hooklog` is not
/// replaced in `/tmp/hooklog-demo` nor in `DIR/hooklog.sock`) made `to`.
fn replace_path(text: &str, from: &str, to: &str) -> String {
    let part = |c: char| c.is_alphanumeric() || "-_.~".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for (i, _) in text.match_indices(from) {
        let before = text[..i].chars().last();
        let after = text[i + from.len()..].chars().next();
        if i < done || before.is_some_and(|c| part(c) || c == '/') || after.is_some_and(part) {
            continue;
        }
        out.push_str(&text[done..i]);
        out.push_str(to);
        done = i + from.len();
    }
    out.push_str(&text[done..]);
    out
}

/// How a command's shown output is compared with what it printed.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Line by line.
    Exact,
    /// For output that is JSON lines (every line an object): the same lines, in any order but
    /// the last. Records from several inputs at once come in an order that varies from run to
    /// run; the summary is always last. Other output is still compared line by line.
    AnyButLast,
}

/// What the test does with an example.
enum Example {
    /// Run the `console` transcript in a folder holding these files (name in the folder, path in
    /// the repository), and compare.
    Run(&'static [(&'static str, &'static str)], Order),
    /// Checked by another test, named here.
    Elsewhere(&'static str),
    /// Not run, for the reason given.
    NotRun(&'static str),
    /// Run against a real registry holding the test images (Debian's docker-registry, started
    /// and filled as tests/registry.rs does), in a folder holding the page's
    /// `<!-- file: NAME -->` blocks and the `edits` of them, by
    /// [`every_registry_example_is_real`]. A block with `$ ` lines is a transcript (it may be a
    /// `text` block); a block of output only is what `command` prints, the command being stated
    /// here. The registry's address stands for [`SHOWN_REGISTRY`] in the commands and files and
    /// is shown as it in the output, and each digest the page shows beside an image is that
    /// image's digest in this registry ([`registry_digests`]): everything else is compared line
    /// by line.
    Registry {
        edits: &'static [Edit],
        command: Option<&'static str>,
    },
}

/// A file made from one of the page's `<!-- file: NAME -->` blocks by replacing a text it holds
/// once: (name, the block's name, the text, its replacement). The page describes the change in
/// words.
type Edit = (&'static str, &'static str, &'static str, &'static str);

/// The registry the pages' registry examples talk to. The test's registry listens on the port it
/// reports (no other process can take one found free between the finding and the binding), and
/// stands in for this address.
const SHOWN_REGISTRY: &str = "127.0.0.1:5055";

/// The incident manifest the check and inject examples call `checkout.yaml`.
const CHECKOUT: &[(&str, &str)] = &[(
    "checkout.yaml",
    "tests/manifests/incidents/distroless-envoy-sleep.yaml",
)];

/// Every example in README.md and docs/, by its marker's name.
const EXAMPLES: &[(&str, Example)] = &[
    ("hook-and-run", Example::Run(&[], Order::Exact)),
    ("check-distroless", Example::Run(CHECKOUT, Order::Exact)),
    ("inject-checkout", Example::Run(CHECKOUT, Order::Exact)),
    (
        "records-three-writers",
        Example::Run(
            &[("podinfo/labels", "tests/support/podinfo/labels")],
            Order::AnyButLast,
        ),
    ),
    (
        "inject-diff",
        Example::Elsewhere(
            "tests/faithful.rs the_docs_diff_is_what_inject_writes: the diff is cut short, so each \
             of its lines is checked against what inject writes",
        ),
    ),
    (
        "inject-upgrade",
        Example::Elsewhere(
            "tests/reinject.rs an_image_upgrade_is_said_and_the_same_again_is_unchanged: the same \
             two runs on the same Deployment, the report line compared in full",
        ),
    ),
    (
        "iam-policy",
        Example::Elsewhere(
            "tests/k8s.rs: the shown policy must equal k8s/aws/hooklog-iam-policy.json",
        ),
    ),
    ("what-comes-out", Example::Run(&[], Order::AnyButLast)),
    ("cloudwatch-emf", Example::Run(&[], Order::Exact)),
    (
        "image-note",
        Example::Registry {
            edits: &[],
            // The note for envoy: the page's example of an image that cannot be read (plain
            // HTTP without --insecure-registry).
            command: Some("hooklog check checkout.yaml 2>&1 >/dev/null | grep -F /envoy:1"),
        },
    ),
    (
        "image-check-registry",
        Example::Registry {
            edits: &[],
            command: None,
        },
    ),
    (
        "image-entrypoint-registry",
        Example::Registry {
            edits: &[],
            command: None,
        },
    ),
    (
        "image-inject-registry",
        Example::Registry {
            // "the same with envoy's preStop `["sh", "-c", "sleep 15"]`"
            edits: &[(
                "checkout-sh.yaml",
                "checkout.yaml",
                r#"command: ["sleep", "15"]"#,
                r#"command: ["sh", "-c", "sleep 15"]"#,
            )],
            command: None,
        },
    ),
    (
        "image-notes-https",
        Example::Registry {
            edits: &[],
            // "Without `--insecure-registry` ... the notes say why": stderr only.
            command: Some("hooklog check checkout.yaml 2>&1 >/dev/null"),
        },
    ),
    (
        "fargate-summary",
        Example::NotRun(
            "needs an EKS Fargate cluster; tests/kubelet.rs checks the summary a real kubelet's \
             pod writes",
        ),
    ),
    ("where-termination", Example::Run(&[], Order::Exact)),
    (
        "where-events",
        Example::NotRun(
            "needs the API server tier and Debian's kubectl 1.20; tests/events.rs reads the \
             same Event back through the API by the pod's uid (reason, type, reportingComponent, \
             exit status, last output lines)",
        ),
    ),
    (
        "webhook-opt-in",
        Example::NotRun(
            "needs the API server tier and kubectl; tests/apiserver.rs checks a pod stored \
             injected, the dry run and the Deployment warning",
        ),
    ),
    (
        "webhook-missed",
        Example::NotRun(
            "needs the API server tier; tests/apiserver.rs checks that `hooklog check` flags the \
             pod admitted while the webhook was down",
        ),
    ),
    (
        "webhook-auto-tls",
        Example::NotRun(
            "needs the API server tier (scripts/apiserver.sh); tests/apiserver.rs's auto_tls_* \
             tests check the caBundle, the served certificate and its renewal",
        ),
    ),
];

/// Whether a character belongs to a masked value.
type ValueChar = fn(char) -> bool;

/// Values that differ on every run, replaced in both the shown and the actual output:
/// (what comes before the value, what the value may consist of).
const MASKS: &[(&str, ValueChar)] = &[
    // RFC 3339 times: when hooklog read a line (in records, and pretty-printed).
    ("\"time\":\"", |c| c.is_ascii_digit() || "-:.TZ".contains(c)),
    ("\"time\": \"", |c| {
        c.is_ascii_digit() || "-:.TZ".contains(c)
    }),
    // Which run of `hooklog hook` a record is from, and when it started.
    ("\"run_id\":\"", |c| c.is_ascii_hexdigit() || c == '-'),
    ("\"run_id\": \"", |c| c.is_ascii_hexdigit() || c == '-'),
    // A run's seal and key (random on every run).
    ("\"seal\":\"", |c| c.is_ascii_hexdigit()),
    ("\"key\":\"", |c| c.is_ascii_hexdigit()),
    ("\"seal\": \"", |c| c.is_ascii_hexdigit()),
    ("\"key\": \"", |c| c.is_ascii_hexdigit()),
    ("\"started_ms\":", |c| c.is_ascii_digit()),
    ("\"started_ms\": ", |c| c.is_ascii_digit()),
    // EMF's timestamp: when the summary was written.
    ("\"Timestamp\":", |c| c.is_ascii_digit()),
    // How long a hook ran.
    ("\"duration_ms\":", |c| c.is_ascii_digit()),
    ("\"duration_ms\": ", |c| c.is_ascii_digit()),
    (" after ", |c| c.is_ascii_digit()),
];

/// README.md and every page in docs/.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages.insert(0, root.join("README.md"));
    pages
}

/// The name a page is reported by.
fn shown(page: &Path) -> String {
    page.strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(page)
        .display()
        .to_string()
}

/// A fenced block of a page.
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    /// The info string's first word (`console`, `json`, ...), empty for none.
    info: String,
    /// The lines between the fences.
    body: Vec<String>,
    /// The name of the `<!-- example: NAME -->` marker right before it (blank lines between
    /// allowed), if any.
    marker: Option<String>,
    /// The name of the `<!-- file: NAME -->` marker right before it, if any: a file the page's
    /// registry examples run on.
    file: Option<String>,
}

/// The fenced blocks of a markdown text.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(rest) = trimmed.strip_prefix("```") {
            let indent = lines[i].len() - trimmed.len();
            let info = rest.split_whitespace().next().unwrap_or("").to_string();
            let named = |kind: &str| {
                lines[..i]
                    .iter()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .and_then(|l| l.trim().strip_prefix(kind))
                    .and_then(|l| l.strip_suffix("-->"))
                    .map(|n| n.trim().to_string())
            };
            let (marker, file) = (named("<!-- example:"), named("<!-- file:"));
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(
                    lines[i]
                        .get(indent..)
                        .unwrap_or(lines[i].trim_start())
                        .to_string(),
                );
                i += 1;
            }
            out.push(Block {
                line: start + 1,
                info,
                body,
                marker,
                file,
            });
        }
        i += 1;
    }
    out
}

/// True for a block that shows output, which must therefore be a checked example.
fn shows_output(block: &Block) -> bool {
    ["console", "json", "text", "diff"].contains(&block.info.as_str())
        || block.body.iter().any(|l| l.starts_with("$ "))
}

/// The targets of a markdown text's links outside code: inline `[text](target)` and reference
/// definitions `[name]: target`, with the line each is on.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Inline code holds no links: drop every `...` span.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        if let Some(def) = prose.trim_start().strip_prefix('[')
            && let Some((_, target)) = def.split_once("]: ")
        {
            out.push((n + 1, target.trim().to_string()));
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            out.push((n + 1, after[..end].trim().to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// No relative link in README.md or docs/ leads nowhere: each file or folder exists, and each
/// `#anchor` is a heading of the page it points into. Links to the pages other branches add
/// (routes, image lookup, webhook) are checked like every other: until those are merged, this
/// fails for them, by design.
#[test]
fn no_link_in_the_docs_is_broken() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a page is in a folder").join(path)
            };
            if !file.exists() {
                broken.push(format!("{}:{line}: {target}: no such file", shown(&page)));
                continue;
            }
            if !anchor.is_empty() {
                let target_text = std::fs::read_to_string(&file).unwrap_or_default();
                if !anchors(&target_text).iter().any(|a| a == anchor) {
                    broken.push(format!(
                        "{}:{line}: {target}: no such heading",
                        shown(&page)
                    ));
                }
            }
        }
    }
    assert!(checked > 40, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The README links every page of docs/.
#[test]
fn the_readme_links_every_docs_page() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let linked: BTreeSet<String> = links(&readme)
        .into_iter()
        .map(|(_, t)| t.split('#').next().unwrap_or("").to_string())
        .collect();
    let mut missing: Vec<String> = pages()
        .iter()
        .skip(1)
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .filter(|p| !linked.contains(p))
        .collect();
    // The pages other branches add: required too, so a merge that drops one fails here.
    for page in ["docs/routes.md", "docs/image-lookup.md", "docs/webhook.md"] {
        if !linked.contains(page) {
            missing.push(page.to_string());
        }
    }
    assert!(missing.is_empty(), "README.md does not link {missing:?}");
}

/// Anchors follow GitHub's rules, so the link test judges them as GitHub renders them.
#[test]
fn anchors_are_githubs() {
    let page = "# Flags\n## `hooklog run`\n## `hooklog hook [OPTIONS] -- CMD [ARGS...]`\n\
                ### 1. Build and push the image\n## Bad input: a clear outcome, nothing dropped\n\
                ```sh\n# not a heading\n```\n## Flags\n## Flags\n#not-a-heading\n\
                ## See [Fargate](fargate.md)\n";
    assert_eq!(
        anchors(page),
        [
            "flags",
            "hooklog-run",
            "hooklog-hook-options----cmd-args",
            "1-build-and-push-the-image",
            "bad-input-a-clear-outcome-nothing-dropped",
            "flags-1",
            "flags-2",
            "see-fargate",
        ]
    );
}

/// Every example shown with its output is in [`EXAMPLES`], every entry is shown somewhere, and
/// the README's own examples are all really run.
#[test]
fn every_example_is_known() {
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let readme = page.ends_with("README.md");
        for block in blocks(&text) {
            let at = format!("{}:{}", shown(&page), block.line);
            let Some(name) = &block.marker else {
                if shows_output(&block) {
                    problems.push(format!(
                        "{at}: a `{}` block without <!-- example: NAME -->",
                        block.info
                    ));
                }
                continue;
            };
            used.insert(name.clone());
            match EXAMPLES.iter().find(|(n, _)| n == name) {
                None => problems.push(format!("{at}: example {name:?} is not in EXAMPLES")),
                Some((_, Example::Run(..))) if block.info != "console" => problems.push(format!(
                    "{at}: {name} is run, so it must be a console block"
                )),
                Some((
                    _,
                    Example::Elsewhere(_) | Example::NotRun(_) | Example::Registry { .. },
                )) if readme => problems.push(format!(
                    "{at}: {name}: every README example must be run here, without a tier"
                )),
                Some((_, Example::Registry { command, .. })) => {
                    let commands = block.body.iter().any(|l| l.starts_with("$ "));
                    if commands == command.is_some() {
                        problems.push(format!(
                            "{at}: {name}: a registry example either shows its `$ ` commands \
                             or names in EXAMPLES the one command whose output it is"
                        ));
                    }
                }
                Some(_) => {}
            }
        }
    }
    for (name, example) in EXAMPLES {
        if !used.contains(*name) {
            problems.push(format!("EXAMPLES has {name:?}, which no page shows"));
        }
        // Said in the test's output, so a run shows what it did not check itself.
        match example {
            Example::Run(..) => {}
            Example::Registry { .. } => {
                println!("{name}: run against the registry tier by every_registry_example_is_real")
            }
            Example::Elsewhere(test) => println!("{name}: checked by {test}"),
            Example::NotRun(why) => println!("{name}: not run: {why}"),
        }
        if let Example::Elsewhere(why) | Example::NotRun(why) = example
            && why.len() < 20
        {
            problems.push(format!("{name}: say why, in more than {why:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Runs every `console` example and compares what each command printed with what the page
/// shows under it.
#[test]
fn every_shown_output_is_real() {
    let mut examples = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text) {
            let Some(name) = &block.marker else { continue };
            let Some((_, Example::Run(files, order))) = EXAMPLES.iter().find(|(n, _)| n == name)
            else {
                continue;
            };
            let at = format!("{}:{} ({name})", shown(&page), block.line);
            let steps = transcript(&block.body);
            assert!(!steps.is_empty(), "{at}: no `$ ` command");
            examples.push((at, *files, *order, steps));
        }
    }
    assert!(
        examples.len() >= 6,
        "only {} examples to run",
        examples.len()
    );
    // At once: three of them wait out `--announce-timeout` for a peer that never reports.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = examples
            .iter()
            .map(|(at, files, order, steps)| {
                scope.spawn(move || {
                    let outputs = run_transcript(at, files, steps, &Setup::default());
                    let mut failures = Vec::new();
                    for ((command, want), got) in steps.iter().zip(&outputs) {
                        let (want, got) = (mask(want), mask(got));
                        if !same(&want, &got, *order) {
                            failures.push(format!(
                                "{at}: `$ {command}` printed\n{got}\n--- but the page shows\n{want}"
                            ));
                        }
                    }
                    failures
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|run| run.join().expect("an example's thread ends"))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs every registry example ([`Example::Registry`]) against a real registry: Debian's
/// docker-registry over plain HTTP on a port it reports, holding tests/support/oci-push.py's
/// images, each example in a folder holding its page's `<!-- file: NAME -->` blocks. Each
/// command's output must be the lines the page shows, but for the registry's port and the
/// images' digests, which are this run's (the busybox-based images' digests differ with the
/// machine's busybox) and must each be the digest of the image named beside it. Skips without the
/// tier's tools outside CI.
#[test]
fn every_registry_example_is_real() {
    if !crate::util::registry::tools_present() {
        return;
    }
    let registry = crate::util::registry::Registry::start(false, crate::util::registry::Auth::None);
    let digests = registry.push();
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut shown_digests = BTreeSet::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let blocks = blocks(&text);
        let page_files: Vec<(String, String)> = blocks
            .iter()
            .filter_map(|b| {
                let body = b.body.iter().map(|l| format!("{l}\n")).collect();
                Some((b.file.clone()?, body))
            })
            .collect();
        for block in &blocks {
            let Some(name) = &block.marker else { continue };
            let Some((_, Example::Registry { edits, command })) =
                EXAMPLES.iter().find(|(n, _)| n == name)
            else {
                continue;
            };
            let at = format!("{}:{} ({name})", shown(&page), block.line);
            let mut written = page_files.clone();
            for (file, base, from, to) in *edits {
                let (_, text) = page_files
                    .iter()
                    .find(|(n, _)| n == base)
                    .unwrap_or_else(|| panic!("{at}: no <!-- file: {base} --> on the page"));
                assert_eq!(
                    text.matches(from).count(),
                    1,
                    "{at}: {base} holds {from:?} once"
                );
                written.push((file.to_string(), text.replace(from, to)));
            }
            let shown_steps = match command {
                Some(c) => vec![(c.to_string(), block.body.join("\n"))],
                None => transcript(&block.body),
            };
            assert!(!shown_steps.is_empty(), "{at}: no `$ ` command");
            let setup = Setup {
                written,
                stand_ins: vec![(SHOWN_REGISTRY.to_string(), registry.addr.clone())],
                own_cache: true,
            };
            let outputs = run_transcript(&at, &[], &shown_steps, &setup);
            ran += 1;
            for ((command, want), got) in shown_steps.iter().zip(&outputs) {
                let want = match registry_digests(want, &digests, &mut shown_digests) {
                    Ok(w) => mask(&w),
                    Err(e) => {
                        failures.push(format!("{at}: {e}"));
                        continue;
                    }
                };
                let got = mask(got);
                if want != got {
                    failures.push(format!(
                        "{at}: `$ {command}` printed\n{got}\n--- but the page shows (with this \
                         registry's digests)\n{want}"
                    ));
                }
            }
        }
    }
    let registry_examples = EXAMPLES
        .iter()
        .filter(|(_, e)| matches!(e, Example::Registry { .. }))
        .count();
    assert_eq!(
        ran, registry_examples,
        "every registry example is on a page"
    );
    // The shown digests are replaced, so at least they agree: one per image, none for two.
    let images: BTreeSet<&String> = shown_digests.iter().map(|(i, _)| i).collect();
    let hexes: BTreeSet<&String> = shown_digests.iter().map(|(_, h)| h).collect();
    if images.len() != shown_digests.len() || hexes.len() != shown_digests.len() {
        failures.push(format!(
            "the pages show one image with two digests, or two images with one: {shown_digests:?}"
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `want` with each digest it shows beside an image of [`SHOWN_REGISTRY`]
/// (`127.0.0.1:5055/NAME:TAG (PLATFORM sha256:HEX)`) replaced by the manifest digest of
/// `NAME:TAG` in `digests` (what oci-push.py printed); each `(image, shown digest)` is added to
/// `shown`. An error names a digest shown beside an image the registry does not hold.
fn registry_digests(
    want: &str,
    digests: &serde_json::Value,
    shown: &mut BTreeSet<(String, String)>,
) -> Result<String, String> {
    /// A sha256 digest's hex length.
    const HEX: usize = 64;
    let prefix = format!("{SHOWN_REGISTRY}/");
    let mut out = String::new();
    let mut rest = want;
    while let Some(at) = rest.find(&prefix) {
        let start = at + prefix.len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let image = &rest[..rest.find(' ').unwrap_or(rest.len())];
        // `(linux/amd64 sha256:HEX)` right after the image names its digest.
        let Some(paren) = rest[image.len()..].strip_prefix(" (") else {
            continue;
        };
        let inside = &paren[..paren.find(')').unwrap_or(0)];
        let Some(hex_at) = inside.find("sha256:").map(|i| i + "sha256:".len()) else {
            continue;
        };
        let hex = inside.get(hex_at..hex_at + HEX).unwrap_or_default();
        if hex.len() != HEX || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("{image}: not a sha256 digest in ({inside})"));
        }
        shown.insert((image.to_string(), hex.to_string()));
        let real = digests[image].as_str().ok_or_else(|| {
            format!("the page shows a digest for {image}, which the test registry does not hold")
        })?;
        let head = image.len() + " (".len() + hex_at;
        out.push_str(&rest[..head]);
        out.push_str(real.strip_prefix("sha256:").unwrap_or(real));
        rest = &rest[head + HEX..];
    }
    out.push_str(rest);
    Ok(out)
}

#[test]
fn registry_digests_are_the_named_images() {
    let digests = serde_json::json!({"envoy:1": format!("sha256:{}", "a".repeat(64)),
                                     "app:1": format!("sha256:{}", "b".repeat(64))});
    let old = "0".repeat(64);
    let shown = format!(
        "127.0.0.1:5055/envoy:1 (linux/amd64 sha256:{old}): x, 127.0.0.1:5055/app:1 \
         (linux/amd64 sha256:{old}) and https://127.0.0.1:5055/v2/envoy/manifests/1): y, \
         127.0.0.1:5055/envoy:1 (linux/amd64): z"
    );
    assert_eq!(
        registry_digests(&shown, &digests, &mut BTreeSet::new()).unwrap(),
        format!(
            "127.0.0.1:5055/envoy:1 (linux/amd64 sha256:{}): x, 127.0.0.1:5055/app:1 \
             (linux/amd64 sha256:{}) and https://127.0.0.1:5055/v2/envoy/manifests/1): y, \
             127.0.0.1:5055/envoy:1 (linux/amd64): z",
            "a".repeat(64),
            "b".repeat(64)
        )
    );
    let err = registry_digests(
        &format!("127.0.0.1:5055/bare:1 (linux/amd64 sha256:{old})"),
        &digests,
        &mut BTreeSet::new(),
    );
    assert!(err.unwrap_err().contains("bare:1"));
    let err = registry_digests(
        "127.0.0.1:5055/envoy:1 (linux/amd64 sha256:abc)",
        &digests,
        &mut BTreeSet::new(),
    );
    assert!(err.unwrap_err().contains("not a sha256 digest"));
}

/// A transcript's commands, each with the output shown under it (lines joined by `\n`).
fn transcript(body: &[String]) -> Vec<(String, String)> {
    let mut steps: Vec<(String, Vec<&str>)> = Vec::new();
    for line in body {
        if let Some(command) = line.strip_prefix("$ ") {
            steps.push((command.to_string(), Vec::new()));
        } else if let Some((_, output)) = steps.last_mut() {
            output.push(line);
        }
    }
    steps.into_iter().map(|(c, o)| (c, o.join("\n"))).collect()
}

/// What a transcript's folder and session hold beyond the repository's files.
#[derive(Default)]
struct Setup {
    /// Files written into the folder: (name, contents).
    written: Vec<(String, String)>,
    /// Texts replaced in the commands and the written files, and shown again in the output:
    /// (as the page shows it, as it really is).
    stand_ins: Vec<(String, String)>,
    /// A cache folder of its own, in the example's folder (`HOOKLOG_CACHE_DIR`, `HOME`), and no
    /// registry credentials of the machine: the registry examples read images.
    own_cache: bool,
}

/// Runs a transcript's commands in one bash session in a fresh folder holding `files` and what
/// `setup` writes, and returns what each printed (stdout and stderr, in order), trailing newline
/// dropped.
fn run_transcript(
    at: &str,
    files: &[(&str, &str)],
    steps: &[(String, String)],
    setup: &Setup,
) -> Vec<String> {
    /// Printed after each command; no command prints it.
    const SEP: &str = "--8<-- hooklog docs test --8<--";
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (_, sub) in FOLDERS {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    for (name, source) in files {
        std::fs::copy(root.join(source), dir.path().join(name))
            .unwrap_or_else(|e| panic!("{at}: copy {source}: {e}"));
    }
    let stand_in = |text: &str| {
        setup
            .stand_ins
            .iter()
            .fold(text.to_string(), |t, (shown, real)| t.replace(shown, real))
    };
    for (name, contents) in &setup.written {
        std::fs::write(dir.path().join(name), stand_in(contents))
            .unwrap_or_else(|e| panic!("{at}: write {name}: {e}"));
    }
    let folder = dir.path().canonicalize().unwrap().display().to_string();
    let real = |sub: &str| {
        if sub.is_empty() {
            folder.clone()
        } else {
            format!("{folder}/{sub}")
        }
    };
    let mut script = String::from("exec 2>&1\n");
    for (command, _) in steps {
        let command = FOLDERS.iter().fold(stand_in(command), |c, (shown, sub)| {
            replace_path(&c, shown, &real(sub))
        });
        script.push_str(&format!(
            "{command}\n__status=$?; printf '%s\\n' '{SEP}'; (exit $__status)\n"
        ));
    }
    let bin_dir = hooklog_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out_path = dir.path().join(".transcript-output");
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(Stdio::inherit());
    // The binary under test sees no pod and no hooklog settings of the machine running it.
    for (k, _) in std::env::vars() {
        if k.starts_with("HOOKLOG_") || k.starts_with("POD_") || k == "NODE_NAME" {
            cmd.env_remove(k);
        }
    }
    if setup.own_cache {
        let cache = dir.path().join(".cache");
        std::fs::create_dir(&cache).unwrap();
        cmd.env("HOOKLOG_CACHE_DIR", &cache)
            .env("HOME", &cache)
            .env_remove("DOCKER_CONFIG")
            .env_remove("REGISTRY_AUTH_FILE");
    }
    let mut child = cmd.spawn().expect("bash runs");
    let done = wait_until(TRANSCRIPT_TIMEOUT, || child.try_wait().unwrap().is_some());
    if !done {
        child.kill().ok();
        child.wait().ok();
    }
    let output = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        done,
        "{at}: not done after {TRANSCRIPT_TIMEOUT:?}:\n{output}"
    );
    let mut outputs: Vec<String> = output
        .split(&format!("{SEP}\n"))
        .map(|o| {
            let o = o.strip_suffix('\n').unwrap_or(o).to_string();
            let o = setup
                .stand_ins
                .iter()
                .fold(o, |o, (shown, real)| o.replace(real, shown));
            // Subfolders first: each is under the folder.
            FOLDERS
                .iter()
                .rev()
                .fold(o, |o, (shown, sub)| replace_path(&o, &real(sub), shown))
        })
        .collect();
    assert_eq!(
        outputs.pop().as_deref(),
        Some(""),
        "{at}: output after the last command:\n{output}"
    );
    assert_eq!(outputs.len(), steps.len(), "{at}: {output}");
    outputs
}

/// True when `got` is the output `want` shows, in the order `order` asks for.
fn same(want: &str, got: &str, order: Order) -> bool {
    let json_lines = want.lines().all(|l| l.starts_with('{') && l.ends_with('}'));
    if order == Order::Exact || !json_lines {
        return want == got;
    }
    let (mut want, mut got): (Vec<&str>, Vec<&str>) =
        (want.lines().collect(), got.lines().collect());
    if want.pop() != got.pop() {
        return false;
    }
    want.sort_unstable();
    got.sort_unstable();
    want == got
}

/// `text` with every value [`MASKS`] names replaced by `…`.
fn mask(text: &str) -> String {
    let mut text = text.to_string();
    for (before, value) in MASKS {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(before) {
            let start = at + before.len();
            out.push_str(&rest[..start]);
            let after = &rest[start..];
            let end = after.find(|c: char| !value(c)).unwrap_or(after.len());
            if end > 0 {
                out.push('…');
            }
            rest = &after[end..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

#[test]
fn a_folder_stands_for_whole_paths_only() {
    for (text, want) in [
        ("/hooklog/bin/hooklog x", "D/bin/hooklog x"),
        ("/hooklog-bin/hooklog x", "/hooklog-bin/hooklog x"),
        ("--socket=/hooklog/hooklog.sock", "--socket=D/hooklog.sock"),
        ("cd /tmp/hooklog-demo", "cd /tmp/hooklog-demo"),
        (
            "/tmp/x/hooklog.sock /etc/hooklog-podinfo",
            "/tmp/x/hooklog.sock /etc/hooklog-podinfo",
        ),
        ("\"file:/hooklog\"", "\"file:D\""),
    ] {
        assert_eq!(replace_path(text, "/hooklog", "D"), want, "{text}");
    }
}

#[test]
fn masks_hide_times_and_durations_only() {
    assert_eq!(
        mask(
            r#"{"time":"2026-11-30T01:27:09.104Z","run_id":"1a230a3342e-69de","started_ms":1796112331822,"duration_ms":12,"message":"failed after 2 ms","exit_code":127}"#
        ),
        r#"{"time":"…","run_id":"…","started_ms":…,"duration_ms":…,"message":"failed after … ms","exit_code":127}"#
    );
    assert_eq!(
        mask("\"time\": \"2026-11-30T01:28:09.000Z\",\n\"duration_ms\": 1003,\n\"exit_code\": 1"),
        "\"time\": \"…\",\n\"duration_ms\": …,\n\"exit_code\": 1"
    );
    assert_eq!(
        mask(r#""_aws":{"Timestamp":1796113498005,"CloudWatchMetrics":[]}"#),
        r#""_aws":{"Timestamp":…,"CloudWatchMetrics":[]}"#
    );
    assert_eq!(mask("after all"), "after all");
}

// --- Figures: docs/figures.md is the one home of every size, budget and limit the docs state ---

/// How far a binary may drift from its row in docs/figures.md is the row's own `±N %`; this is
/// the most a row may allow, so a tolerance cannot be widened until any size passes.
const MAX_TOLERANCE_PERCENT: f64 = 5.0;

/// What a quantity counts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Dimension {
    Bytes,
    Seconds,
}

/// A number with its unit as a page states it: its value in bytes or seconds, and half the step
/// of its last digit shown (`6.1 MB` is 6,050,000 to 6,150,000 bytes).
#[derive(Clone, Copy, Debug)]
struct Quantity {
    value: f64,
    half_step: f64,
    dimension: Dimension,
}

impl Quantity {
    /// Whether `exact` rounds to this quantity as shown.
    fn shows(&self, exact: f64, dimension: Dimension) -> bool {
        self.dimension == dimension && (exact - self.value).abs() <= self.half_step * 1.000_001
    }
}

/// The factor of each unit the docs use, in bytes or seconds. `kB` is 1024 bytes: the pages
/// quote `/proc`'s kB, which are KiB.
fn unit_factor(unit: &str) -> Option<(f64, Dimension)> {
    Some(match unit {
        "bytes" | "byte" | "B" => (1.0, Dimension::Bytes),
        "KB" | "kB" | "KiB" => (1024.0, Dimension::Bytes),
        "MB" => (1e6, Dimension::Bytes),
        "MiB" => (1024.0 * 1024.0, Dimension::Bytes),
        "GB" => (1e9, Dimension::Bytes),
        "GiB" => (1024.0 * 1024.0 * 1024.0, Dimension::Bytes),
        "ms" => (1e-3, Dimension::Seconds),
        "s" => (1.0, Dimension::Seconds),
        "min" => (60.0, Dimension::Seconds),
        "h" => (3600.0, Dimension::Seconds),
        _ => return None,
    })
}

/// Every number with a size unit in `text` (`6,147,968 bytes`, `6.1 MB`, `4,672 kB`, `24h`
/// when `durations`), with where it starts.
fn quantities(text: &str, durations: bool) -> Vec<(usize, Quantity)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len()
            && (bytes[i].is_ascii_digit()
                || ((bytes[i] == b',' || bytes[i] == b'.')
                    && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        let number = &text[start..i];
        let mut j = i;
        if bytes.get(j) == Some(&b' ') {
            j += 1;
        }
        let unit_end = text[j..]
            .find(|c: char| !c.is_ascii_alphabetic())
            .map_or(text.len(), |k| j + k);
        let Some((factor, dimension)) = unit_factor(&text[j..unit_end]) else {
            continue;
        };
        if dimension == Dimension::Seconds && !durations {
            continue;
        }
        let digits: String = number.chars().filter(|c| *c != ',').collect();
        let Ok(value) = digits.parse::<f64>() else {
            continue;
        };
        let decimals = digits.split_once('.').map_or(0, |(_, d)| d.len());
        let half_step = 0.5 * 10f64.powi(-(decimals as i32)) * factor;
        // An exact count of bytes is exact.
        let half_step = if factor == 1.0 && decimals == 0 {
            0.0
        } else {
            half_step
        };
        found.push((
            start,
            Quantity {
                value: value * factor,
                half_step,
                dimension,
            },
        ));
        i = unit_end;
    }
    found
}

/// A row of docs/figures.md.
#[derive(Debug)]
struct Figure {
    name: String,
    value: f64,
    dimension: Dimension,
    /// The source column, `;`-separated: `binary VAR ±N %`, `const FILE NAME`, `refused WHAT`.
    sources: Vec<String>,
}

/// The rows of docs/figures.md's table.
fn figures() -> Vec<Figure> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("docs/figures.md")).expect("docs/figures.md");
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 4, "docs/figures.md: a row has 4 cells: {line}");
        let q = quantities(cells[1], true);
        assert_eq!(q.len(), 1, "docs/figures.md: one value per row: {line}");
        assert!(
            cells[1].starts_with(char::is_numeric),
            "docs/figures.md: the value column is the value alone: {line}"
        );
        rows.push(Figure {
            name: cells[0].trim_matches('`').to_string(),
            value: q[0].1.value,
            dimension: q[0].1.dimension,
            sources: cells[2].split("; ").map(str::to_string).collect(),
        });
    }
    rows
}

/// The path and size of the binary `$var` names, for figure `name`; `None` (said) outside CI
/// when scripts/test.sh did not set it.
fn built_size(var: &str, name: &str) -> Option<(String, f64)> {
    let Ok(path) = std::env::var(var) else {
        assert!(
            !crate::util::in_ci(),
            "{var} is not set: scripts/test.sh sets it"
        );
        eprintln!("skipped {name}: {var} is not set (scripts/test.sh sets it)");
        return None;
    };
    let size = std::fs::metadata(&path)
        .unwrap_or_else(|e| panic!("{var}={path}: {e}"))
        .len() as f64;
    Some((path, size))
}

/// Evaluates a constant's initializer as the code writes them: integer literals, `+`, `-`, `*`,
/// `<<`, other constants of the same file (`src`), and `Duration::from_secs(..)` /
/// `from_millis(..)` (in seconds).
fn eval_const(src: &str, expr: &str) -> Option<f64> {
    let expr = expr.trim();
    for (call, scale) in [
        ("Duration::from_secs(", 1.0),
        ("Duration::from_millis(", 1e-3),
    ] {
        if let Some(inner) = expr.strip_prefix(call).and_then(|e| e.strip_suffix(')')) {
            return eval_const(src, inner).map(|v| v * scale);
        }
    }
    // Sums of products, left to right (`16 * 1024 - 1`).
    let mut total = 0.0;
    let mut sign = 1.0;
    let mut term = String::new();
    for c in expr.chars().chain(std::iter::once('+')) {
        if c == '+' || c == '-' {
            let product: Option<f64> = term.split('*').map(|f| factor(src, f)).product();
            total += sign * product?;
            sign = if c == '-' { -1.0 } else { 1.0 };
            term.clear();
        } else {
            term.push(c);
        }
    }
    Some(total)
}

/// One factor of a constant's initializer: a literal, `A << B`, or a constant of `src`.
fn factor(src: &str, f: &str) -> Option<f64> {
    let f = f.trim().trim_end_matches(',').trim();
    // A `Duration` constant's seconds.
    let f = f.strip_suffix(".as_secs()").unwrap_or(f);
    if let Some((a, b)) = f.split_once("<<") {
        return Some(factor(src, a)? * 2f64.powf(factor(src, b)?));
    }
    let literal = f.replace('_', "");
    let literal = literal.trim_end_matches("usize").trim_end_matches("u64");
    if let Ok(v) = literal.parse::<f64>() {
        return Some(v);
    }
    if !f
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let init = initializer(src, f)?;
    eval_const(src, init)
}

/// The initializer of `const NAME` in `src`.
fn initializer<'a>(src: &'a str, name: &str) -> Option<&'a str> {
    let rest = &src[src.find(&format!("const {name}:"))?..];
    Some(&rest[rest.find('=')? + 1..rest.find(';')?])
}

/// The value of `const NAME` in `file` (relative to the repository), in bytes or seconds: a
/// name ending in `_KB` (or `_KIB`) counts KiB, as `/proc` does.
fn const_value(file: &str, name: &str) -> f64 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let init = initializer(&src, name).unwrap_or_else(|| panic!("{file} has no `const {name}`"));
    let value =
        eval_const(&src, init).unwrap_or_else(|| panic!("{file} {name}: cannot read {init:?}"));
    if name.ends_with("_KB") || name.ends_with("_KIB") {
        value * 1024.0
    } else {
        value
    }
}

/// The `resources.limits.memory` of the one container of `file` (a manifest in the repository),
/// in bytes (`64Mi`).
fn memory_limit(file: &str) -> f64 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let limits = text
        .find("limits:")
        .unwrap_or_else(|| panic!("{file}: no limits"));
    let value = text[limits..]
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory:"))
        .unwrap_or_else(|| panic!("{file}: no memory limit"))
        .trim();
    let number = |s: &str| {
        s.parse::<f64>()
            .unwrap_or_else(|_| panic!("{file}: {value}"))
    };
    match value.strip_suffix("Mi") {
        Some(mi) => number(mi) * 1024.0 * 1024.0,
        None => number(value),
    }
}

/// `value` seconds as a duration flag takes it.
fn flag_duration(seconds: f64) -> String {
    format!("{}ms", (seconds * 1000.0).round() as u64)
}

/// The binary's own behaviour at a limit: `WHAT` of a `refused WHAT` source.
fn probe(figure: &Figure, what: &str) {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match what {
        // One step past the cap is a usage error naming the flag; the cap itself is taken (the
        // error is then the next flag's, one step past it too).
        "`run --grace`" => {
            let over = flag_duration(figure.value + 1e-3);
            let out = crate::util::hooklog()
                .args(["run", "--grace", &over])
                .output()
                .expect("run hooklog");
            assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
            assert!(
                text(&out.stderr).contains("--grace"),
                "{}",
                text(&out.stderr)
            );
            let at = flag_duration(figure.value);
            let out = crate::util::hooklog()
                .args(["run", "--grace", &at, "--linger", &over])
                .output()
                .expect("run hooklog");
            assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
            let err = text(&out.stderr);
            assert!(
                err.contains("--linger") && !err.contains("--grace"),
                "{err}"
            );
        }
        // A sparse file one byte past the limit is refused before it is parsed.
        "`check`" => {
            let dir = tempfile::tempdir().expect("temp dir");
            let big = dir.path().join("big.yaml");
            let f = std::fs::File::create(&big).expect("create");
            f.set_len(figure.value as u64 + 1).expect("sparse file");
            let out = crate::util::hooklog()
                .arg("check")
                .arg(&big)
                .output()
                .expect("run hooklog");
            assert_eq!(out.status.code(), Some(64), "{}", text(&out.stderr));
            let err = text(&out.stderr);
            assert!(
                err.contains(&format!("larger than {} bytes", figure.value as u64)),
                "{err}"
            );
        }
        other => panic!("{}: no probe for `refused {other}`", figure.name),
    }
}

#[test]
fn every_figure_holds_against_its_source() {
    let figures = figures();
    assert!(figures.len() >= 10, "docs/figures.md lost its rows");
    for f in &figures {
        assert!(!f.sources.is_empty(), "{}: no source", f.name);
        for source in &f.sources {
            let words: Vec<&str> = source.split_whitespace().collect();
            match words.as_slice() {
                ["binary", var, tolerance, "%"] => {
                    let tolerance: f64 = tolerance
                        .trim_start_matches('±')
                        .parse()
                        .unwrap_or_else(|_| panic!("{}: tolerance {tolerance:?}", f.name));
                    assert!(
                        tolerance <= MAX_TOLERANCE_PERCENT,
                        "{}: ±{tolerance} %",
                        f.name
                    );
                    let Some((path, size)) = built_size(var, &f.name) else {
                        continue;
                    };
                    let drift = 100.0 * (size - f.value).abs() / f.value;
                    eprintln!(
                        "{}: {size} bytes, row {} ({drift:.2} % off)",
                        f.name, f.value
                    );
                    assert!(
                        drift <= tolerance,
                        "{}: {path} is {size} bytes, {drift:.2} % off docs/figures.md's {} \
                         (±{tolerance} %): update the row and the pages that quote it",
                        f.name,
                        f.value
                    );
                }
                ["const", file, name] => {
                    let v = const_value(file, name);
                    assert!(
                        (v - f.value).abs() < 1e-9,
                        "{}: {file} {name} is {v}, docs/figures.md says {}",
                        f.name,
                        f.value
                    );
                }
                ["refused", ..] => probe(f, source.trim_start_matches("refused ")),
                ["max", var] => {
                    let Some((path, size)) = built_size(var, &f.name) else {
                        continue;
                    };
                    assert!(
                        size <= f.value,
                        "{}: {path} is {size} bytes, over {}",
                        f.name,
                        f.value
                    );
                }
                ["limit", file, "memory"] => {
                    let v = memory_limit(file);
                    assert_eq!(v, f.value, "{}: {file}'s memory limit is {v} bytes", f.name);
                }
                _ => panic!("{}: unknown source {source:?}", f.name),
            }
        }
    }
}

/// The words that make a quantity a claim about hooklog's size or a budget when they come
/// shortly before it in its clause ([`CLAIM_WINDOW`]), or anywhere in its table row.
const CLAIM_WORDS: &[&str] = &[
    "binary",
    "binaries",
    "budget",
    "image",
    "sidecar is",
    "full cli is",
];

/// Words right after a quantity that make it a claim about a binary (`3.8 MB for the sidecar`:
/// the README stated 6.15 MB so, unchecked, for months after it was 3.8, issue 41).
const CLAIM_WORDS_AFTER: &[&str] = &["for the sidecar", "for the full cli"];

/// How far before a quantity, in bytes of its clause (cut at `; `, `, `, `(`, `)` and `: `), a
/// claim word makes it a claim.
const CLAIM_WINDOW: usize = 60;

/// Words in the window that make the quantity a measurement of a running process's memory,
/// which is a bench result, not a size (unless a budget word is right before it).
const MEMORY_WORDS: &[&str] = &["rss", "peak", "idle", "vmhwm", "heap"];

/// Words right before a quantity that make it a budget or limit even in a measured region.
const BUDGET_WORDS: &[&str] = &[
    "budget",
    "budget of",
    "target",
    "limit",
    "at most",
    "bounded at",
];

/// The claims of a page: each table row, and each sentence of the prose (code blocks left out,
/// they are examples), with its line and whether it is inside a `<!-- measured: DATE -->` region.
fn claims(text: &str) -> Vec<(usize, String, bool)> {
    let mut out = Vec::new();
    let mut measured = false;
    let mut fenced = false;
    let mut paragraph: Vec<(usize, &str)> = Vec::new();
    let flush = |paragraph: &mut Vec<(usize, &str)>, measured: bool, out: &mut Vec<_>| {
        if paragraph.is_empty() {
            return;
        }
        let first = paragraph[0].0;
        let joined: String = paragraph
            .iter()
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join(" ");
        for sentence in joined.split(". ") {
            out.push((first, sentence.to_string(), measured));
        }
        paragraph.clear();
    };
    for (n, line) in text.lines().enumerate() {
        let n = n + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            flush(&mut paragraph, measured, &mut out);
            continue;
        }
        if fenced {
            continue;
        }
        if line.contains("<!-- measured:") {
            flush(&mut paragraph, measured, &mut out);
            measured = true;
            continue;
        }
        if line.contains("<!-- /measured -->") {
            flush(&mut paragraph, measured, &mut out);
            measured = false;
            continue;
        }
        if line.starts_with('|') {
            flush(&mut paragraph, measured, &mut out);
            out.push((n, line.to_string(), measured));
        } else if line.trim().is_empty() || line.starts_with('#') || line.starts_with("- ") {
            flush(&mut paragraph, measured, &mut out);
            if !line.trim().is_empty() && !line.starts_with('#') {
                paragraph.push((n, line));
            }
        } else {
            paragraph.push((n, line));
        }
    }
    flush(&mut paragraph, measured, &mut out);
    out
}

/// Every stated size of hooklog's binaries or images and every budget in the pages that is not a
/// figure of docs/figures.md: (page:line, the quantity as written, the sentence).
fn stray_figures(page: &str, text: &str, figures: &[Figure]) -> Vec<String> {
    let mut stray = Vec::new();
    for (line, claim, measured) in claims(text) {
        let lower = claim.to_lowercase();
        let row = claim.starts_with('|');
        for (at, q) in quantities(&claim, false) {
            let before = lower[..at].trim_end();
            let budget = BUDGET_WORDS.iter().any(|w| before.ends_with(w));
            let clause_start = ["; ", ", ", "(", ")", ": "]
                .iter()
                .filter_map(|sep| before.rfind(sep).map(|k| k + sep.len()))
                .max()
                .unwrap_or(0)
                .max(before.len().saturating_sub(CLAIM_WINDOW));
            // In a table row, the quantity's cell and the row's first cell.
            let window = if row {
                let cell = before.rfind('|').map_or(before, |k| &before[k..]);
                let first = lower.split('|').nth(1).unwrap_or_default();
                format!("{first} {cell}")
            } else {
                // The window's start on a character boundary (MSRV 1.85: no
                // `floor_char_boundary`).
                let start = (0..=clause_start)
                    .rev()
                    .find(|&k| before.is_char_boundary(k))
                    .unwrap_or(0);
                before[start..].to_string()
            };
            let memory = MEMORY_WORDS.iter().any(|w| window.contains(w));
            let after = lower[at..]
                .split([';', '(', ')'])
                .next()
                .unwrap_or_default();
            let after = after.get(..after.len().min(40)).unwrap_or(after);
            let claimed = (CLAIM_WORDS.iter().any(|w| window.contains(w)) && (budget || !memory))
                || CLAIM_WORDS_AFTER.iter().any(|w| after.contains(w));
            // A measured region's numbers are results, its budgets still figures.
            let checked = if measured { budget } else { budget || claimed };
            if !checked {
                continue;
            }
            if !figures.iter().any(|f| q.shows(f.value, f.dimension)) {
                let end = claim[at..]
                    .find(|c: char| c.is_ascii_alphabetic())
                    .map(|k| {
                        at + k
                            + claim[at + k..]
                                .find(|c: char| !c.is_ascii_alphabetic())
                                .unwrap_or(claim.len() - at - k)
                    })
                    .unwrap_or(claim.len());
                stray.push(format!("{page}:{line}: {:?} in: {claim}", &claim[at..end]));
            }
        }
    }
    stray
}

#[test]
fn no_page_states_a_size_or_budget_that_is_not_a_figure() {
    let figures = figures();
    let mut stray = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        stray.extend(stray_figures(&shown(&page), &text, &figures));
    }
    assert!(
        stray.is_empty(),
        "sizes and budgets not in docs/figures.md (quote a figure, or put a past measurement \
         between <!-- measured: DATE --> and <!-- /measured --> with its command):\n{}",
        stray.join("\n")
    );
}

#[test]
fn the_figure_scanner_finds_what_it_must() {
    let figures = vec![Figure {
        name: "x".into(),
        value: 6_147_968.0,
        dimension: Dimension::Bytes,
        sources: vec![],
    }];
    let cases: &[(&str, usize)] = &[
        ("The binary is 6,147,968 bytes.", 0),
        ("The binary is 6.1 MB.", 0),
        ("The binary is 6.15 MB.", 0),
        ("The binary is 6.2 MB.", 1),
        ("The binary is 9,269,800 bytes.", 1),
        ("the sidecar's binary is 5.9 MiB and its budget 7 MB.", 1),
        ("A record of 7 MB is split.", 0),
        ("| image, gzipped | 3,843,554 (3.8 MB) |", 1),
        (
            "<!-- measured: 2026-12-01 -->\nThe binary was 9.65 MB, at most 9 MB.\n<!-- /measured -->",
            1,
        ),
        (
            "<!-- measured: 2026-12-01 -->\nThe binary was 9.65 MB.\n<!-- /measured -->",
            0,
        ),
        ("```\nthe binary is 9 MB\n```", 0),
        // Issue 41's stale figures: a plural, a claim after the number, a memory figure.
        ("The static binaries are 8.78 MB for the full CLI.", 1),
        ("The CLI (all of it) and 5.15 MB for the sidecar.", 1),
        ("The CLI (all of it) and 6.1 MB for the sidecar.", 0),
    ];
    for (text, want) in cases {
        let got = stray_figures("t.md", text, &figures);
        assert_eq!(got.len(), *want, "{text}: {got:?}");
    }
    // Every unit at its extremes reads as its value.
    for (text, value) in [
        ("1 byte", 1.0),
        ("0 bytes", 0.0),
        ("18,446,744,073,709,551,615 bytes", 1.8446744073709552e19),
        ("4,672 kB", 4_672.0 * 1024.0),
        ("256 MiB", 268_435_456.0),
        ("24h", 86_400.0),
        ("250 ms", 0.25),
    ] {
        let q = quantities(text, true);
        assert_eq!(q.len(), 1, "{text}");
        assert!(
            (q[0].1.value - value).abs() <= value * 1e-12,
            "{text}: {:?}",
            q[0].1
        );
    }
    assert!(quantities("v1.31 x86_64 sha256:12ab 3a", true).is_empty());
}

// --- The install path: every build command builds the image its name says ---

/// The Dockerfile's stages in order (`FROM … AS NAME`); the last is what a build without
/// `--target` makes.
fn dockerfile_stages(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("FROM "))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.iter().position(|w| w.eq_ignore_ascii_case("AS"))?;
            words.get(at + 1).map(|w| w.to_string())
        })
        .collect()
}

/// A command of a shell block or a Dockerfile comment, its `\` continuations joined.
fn shell_commands(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        let line = line.trim_start_matches('#').trim();
        match line.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// One image build a page shows: the stage it builds and the names it tags.
#[derive(Debug)]
struct Build {
    at: String,
    stage: String,
    tags: Vec<String>,
}

/// Every `docker build`, `docker buildx build` and `podman build` in `commands` (a command line
/// may hold several, joined by `&&` or `;`), with the stage each builds.
fn builds(at: &str, commands: &[String], default_stage: &str) -> Vec<Build> {
    let mut out = Vec::new();
    for command in commands {
        for part in command.split("&&").flat_map(|p| p.split(';')) {
            let words: Vec<&str> = part.split_whitespace().collect();
            let builds = words
                .windows(2)
                .any(|w| matches!(w, ["docker" | "podman", "build"] | ["buildx", "build"]));
            if !builds {
                continue;
            }
            let mut stage = default_stage.to_string();
            let mut tags = Vec::new();
            let mut i = 0;
            while i < words.len() {
                match words[i] {
                    "--target" | "-t" | "--tag" => {
                        let value = words.get(i + 1).copied().unwrap_or_default().to_string();
                        if words[i] == "--target" {
                            stage = value;
                        } else {
                            tags.push(value);
                        }
                        i += 1;
                    }
                    w if w.starts_with("--target=") => stage = w["--target=".len()..].to_string(),
                    w if w.starts_with("--tag=") => tags.push(w["--tag=".len()..].to_string()),
                    _ => {}
                }
                i += 1;
            }
            out.push(Build {
                at: at.to_string(),
                stage,
                tags,
            });
        }
    }
    out
}

/// An image reference's name without registry path, tag or digest: `hooklog-sidecar` of
/// `REGISTRY/hooklog-sidecar:0.1.0-$arch`.
fn image_name(reference: &str) -> &str {
    let reference = reference.split('@').next().unwrap_or_default();
    let last = reference.rsplit('/').next().unwrap_or_default();
    last.split(':').next().unwrap_or_default()
}

/// The values of `KEY=VALUE` in `command`: a word, or after `=` or `,` in one
/// (`--set a=1,KEY=VALUE`, `--post-renderer-args=--image=VALUE`); a shell variable is left out.
fn set_values<'a>(command: &'a str, key: &str) -> Vec<&'a str> {
    let pattern = format!("{key}=");
    let mut out = Vec::new();
    for word in command.split_whitespace() {
        for (i, _) in word.match_indices(&pattern) {
            if i == 0 || word[..i].ends_with(['=', ',']) {
                let value = word[i + pattern.len()..]
                    .split(',')
                    .next()
                    .unwrap_or_default();
                if !value.trim_matches('"').starts_with('$') {
                    out.push(value);
                }
            }
        }
    }
    out
}

/// Issue 41: the README built the sidecar (the Dockerfile's default stage) under the full CLI's
/// name `hooklog`, which the chart runs as the webhook (`unrecognized subcommand 'webhook'`),
/// and named a `hooklog-sidecar` image no step built. Every build command in README.md, docs/
/// and the Dockerfile's own comments builds a stage of the Dockerfile under that stage's name;
/// the README builds both; and every place that names an image for a role (the chart's
/// `image` and `sidecarImage`, `inject --image`, k8s/webhook/, inject's and the webhook's
/// `--help`) names the stage that has that role: the full CLI (`webhook`) for the webhook, the
/// default stage for pods.
#[test]
fn every_install_path_builds_and_names_the_images_the_chart_and_inject_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let stages = dockerfile_stages(&dockerfile);
    let sidecar = stages.last().expect("the Dockerfile has stages").clone();
    // The full CLI: the stage built from `build` (not `build-sidecar`), the one the webhook runs.
    let full = "hooklog";
    assert!(stages.iter().any(|s| s == full), "{stages:?}");
    assert_ne!(sidecar, full, "the default stage is the sidecar");

    let mut all = Vec::new();
    let comments: Vec<String> = dockerfile
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(str::to_string)
        .collect();
    all.extend(builds("Dockerfile", &shell_commands(&comments), &sidecar));
    let mut readme = Vec::new();
    let mut commands_of = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for block in blocks(&text) {
            let at = format!("{}:{}", shown(&page), block.line);
            let commands = shell_commands(&block.body);
            let found = builds(&at, &commands, &sidecar);
            if page.ends_with("README.md") {
                readme.extend(found.iter().map(|b| b.stage.clone()));
            }
            all.extend(found);
            commands_of.extend(commands.into_iter().map(|c| (at.clone(), c)));
        }
    }
    assert!(all.len() >= 4, "too few builds found: {all:?}");
    for b in &all {
        assert!(
            stages.contains(&b.stage),
            "{}: --target {} is not a stage of the Dockerfile ({stages:?})",
            b.at,
            b.stage
        );
        assert!(
            !b.tags.is_empty(),
            "{}: a build without a name: {b:?}",
            b.at
        );
        for tag in &b.tags {
            assert_eq!(
                image_name(tag),
                b.stage,
                "{}: `{tag}` names the image {} but the build makes the stage {}",
                b.at,
                image_name(tag),
                b.stage
            );
        }
    }
    for want in [&sidecar, &full.to_string()] {
        assert!(
            readme.contains(want),
            "README.md builds no `{want}` image (it builds {readme:?})"
        );
    }

    // Every image a command names for a role: the chart's values and inject's --image.
    let mut named = 0;
    for (at, command) in &commands_of {
        // `--image` of hooklog's own commands (inject, webhook, the post-renderer's arguments),
        // not of `kubectl run`.
        let ours = command.contains("hooklog ") || command.contains("--post-renderer");
        for (key, stage) in [
            ("image.repository", full),
            ("sidecarImage.repository", sidecar.as_str()),
            ("--image", sidecar.as_str()),
        ] {
            if key == "--image" && !ours {
                continue;
            }
            for value in set_values(command, key) {
                named += 1;
                assert_eq!(
                    image_name(value),
                    stage,
                    "{at}: {key}={value} in: {command}"
                );
            }
        }
        let words: Vec<&str> = command.split_whitespace().collect();
        for w in words.windows(2) {
            if ours && w[0] == "--image" && !w[1].trim_matches('"').starts_with('$') {
                named += 1;
                assert_eq!(image_name(w[1]), sidecar, "{at}: {command}");
            }
        }
    }
    assert!(named >= 3, "too few images named: {named}");

    // The chart's values say which build makes each image.
    let values = std::fs::read_to_string(root.join("charts/hooklog/values.yaml")).unwrap();
    let comment_before = |key: &str| -> String {
        let lines: Vec<&str> = values.lines().collect();
        let at = lines.iter().position(|l| *l == key).unwrap();
        let start = lines[..at]
            .iter()
            .rposition(|l| !l.starts_with('#'))
            .map_or(0, |k| k + 1);
        lines[start..at]
            .iter()
            .map(|l| l.trim_start_matches('#').trim())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let image = comment_before("image:");
    assert!(
        image.contains(&format!("`--target {full}`")) && image.contains("required"),
        "values.yaml's image: {image}"
    );
    let sidecar_image = comment_before("sidecarImage:");
    assert!(
        sidecar_image.contains(&format!("`{sidecar}`"))
            && sidecar_image.contains("default stage")
            && sidecar_image.contains("required"),
        "values.yaml's sidecarImage: {sidecar_image}"
    );

    // k8s/webhook/: the webhook container runs the full CLI and writes the sidecar into pods.
    let shipped = std::fs::read_to_string(root.join("k8s/webhook/webhook.yaml")).unwrap();
    let lines: Vec<&str> = shipped.lines().map(str::trim).collect();
    let image_line = lines
        .iter()
        .find_map(|l| l.strip_prefix("image: "))
        .unwrap();
    assert_eq!(image_name(image_line), full, "k8s/webhook/webhook.yaml");
    let inject_at = lines
        .iter()
        .position(|l| *l == "- name: HOOKLOG_INJECT_IMAGE")
        .unwrap();
    let inject_image = lines[inject_at + 1].strip_prefix("value: ").unwrap();
    assert_eq!(
        image_name(inject_image),
        sidecar,
        "k8s/webhook/webhook.yaml"
    );

    // inject's and the webhook's --help name the sidecar's image and stage.
    for sub in ["inject", "webhook"] {
        let out = std::process::Command::new(hooklog_bin())
            .args([sub, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout).replace(['\n', ' '], "");
        assert!(
            help.contains(&format!("(`{sidecar}`,theDockerfile'sdefaultstage)")),
            "{sub} --help does not name the default stage `{sidecar}`"
        );
    }
}
