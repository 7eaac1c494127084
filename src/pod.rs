//! (the sidecar) Pod metadata from the Downward API: env vars for names and addresses, a podinfo
//! volume for labels and annotations. No Kubernetes API calls, so no RBAC and no network (only
//! `--events` talks to the API server, `crate::events`).

use std::path::Path;

use anyhow::Context;

/// Annotations no record carries: hooklog's own (`hooklog inject` writes `hooklog.dev/injected`,
/// ~200 B on every pod it touched), and the whole last-applied manifest `kubectl apply` keeps.
const LEFT_OUT_ANNOTATION_PREFIXES: [&str; 1] = ["hooklog.dev/"];
/// See [`LEFT_OUT_ANNOTATION_PREFIXES`]: kubectl's copy of the applied manifest
/// (<https://kubernetes.io/docs/reference/labels-annotations-taints/#kubectl-kubernetes-io-last-applied-configuration>).
const LEFT_OUT_ANNOTATIONS: [&str; 1] = ["kubectl.kubernetes.io/last-applied-configuration"];

/// Bytes of labels and annotations together (as JSON members, `"key":"value",`) one record
/// carries at most. Every record repeats them: 20 KB of Vault templates pushed every line past the
/// default 16 KiB cap (split text, no parsed `hooks.summary`), and 34 KB of labels did the same
/// (issue 25.3). 1 KiB leaves most of even a 2048-byte cap to the line. Labels come first, then
/// annotations, in file order, each that fits; the rest are counted in
/// `kubernetes.labels_omitted` and `kubernetes.annotations_omitted`.
pub const METADATA_MAX_BYTES: usize = 1024;

/// The pod's labels and annotations take at most this share of `--max-line-bytes` (a quarter:
/// 256 bytes at the 1024 minimum), so a lifecycle record or the summary always has room.
const METADATA_SHARE: usize = 4;

/// Longest scalar field (`POD_NAME`, `NODE_NAME`, ...) a record carries: a DNS subdomain, the
/// longest name Kubernetes gives a pod or a node, is at most 253 characters (RFC 1123). A longer
/// value (hand-set) is cut at a character boundary.
pub const SCALAR_MAX_BYTES: usize = 253;

/// The bytes of labels and annotations a record carries at `max_line`.
pub fn metadata_budget(max_line: usize) -> usize {
    METADATA_MAX_BYTES.min(max_line / METADATA_SHARE)
}

/// What hooklog knows of the pod it runs in. Field names follow Fluent Bit's kubernetes filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodMeta {
    /// `POD_NAME`.
    pub pod_name: Option<String>,
    /// `POD_NAMESPACE`.
    pub namespace_name: Option<String>,
    /// `POD_UID`.
    pub pod_id: Option<String>,
    /// `POD_IP`.
    pub pod_ip: Option<String>,
    /// `NODE_NAME`: on Fargate, the per-pod Fargate node.
    pub host: Option<String>,
    /// From `<podinfo>/labels`, in file order.
    pub labels: Vec<(String, String)>,
    /// From `<podinfo>/annotations`, in file order.
    pub annotations: Vec<(String, String)>,
}

impl PodMeta {
    /// Reads the Downward API env vars through `env`, and `labels` and `annotations` from
    /// `podinfo` when given. A missing file in the podinfo folder reads as empty; an unreadable
    /// one is an error naming its path.
    pub fn load(
        env: impl Fn(&str) -> Option<String>,
        podinfo: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let var = |k: &str| env(k).filter(|v| !v.is_empty());
        let mut meta = PodMeta {
            pod_name: var("POD_NAME"),
            namespace_name: var("POD_NAMESPACE"),
            pod_id: var("POD_UID"),
            pod_ip: var("POD_IP"),
            host: var("NODE_NAME"),
            ..PodMeta::default()
        };
        if let Some(dir) = podinfo {
            meta.labels = read_kv_file(&dir.join("labels"))?;
            meta.annotations = read_kv_file(&dir.join("annotations"))?;
        }
        Ok(meta)
    }

    /// Reads from the process environment.
    pub fn from_env(podinfo: Option<&Path>) -> anyhow::Result<Self> {
        Self::load(|k| std::env::var(k).ok(), podinfo)
    }

    /// A field by its Fluent Bit name, for templates such as a log stream name.
    pub fn field(&self, name: &str) -> Option<&str> {
        match name {
            "pod_name" => self.pod_name.as_deref(),
            "namespace_name" => self.namespace_name.as_deref(),
            "pod_id" => self.pod_id.as_deref(),
            "pod_ip" => self.pod_ip.as_deref(),
            "host" => self.host.as_deref(),
            _ => None,
        }
    }

    /// The `kubernetes` object's members as JSON text, split around where `container_name` goes:
    /// the pod's scalar fields, then its labels and annotations. Each part is comma-separated
    /// `"key":value` members without braces, possibly empty. Built once; every record reuses them.
    pub fn kubernetes_members(&self) -> (String, String) {
        self.kubernetes_members_within(METADATA_MAX_BYTES)
    }

    /// [`Self::kubernetes_members`] with at most `budget` bytes of labels and annotations.
    pub fn kubernetes_members_within(&self, budget: usize) -> (String, String) {
        let mut scalars = Vec::new();
        for (k, v) in [
            ("pod_name", &self.pod_name),
            ("namespace_name", &self.namespace_name),
            ("pod_id", &self.pod_id),
            ("pod_ip", &self.pod_ip),
            ("host", &self.host),
        ] {
            if let Some(v) = v {
                let mut end = v.len().min(SCALAR_MAX_BYTES);
                while !v.is_char_boundary(end) {
                    end -= 1;
                }
                scalars.push(format!("\"{k}\":{}", json_str(&v[..end])));
            }
        }
        let mut maps = Vec::new();
        let mut left = budget;
        let (labels, labels_omitted) = carried(&self.labels, &mut left, |_| true);
        let (annotations, annotations_omitted) = carried(&self.annotations, &mut left, |k| {
            !LEFT_OUT_ANNOTATIONS.contains(&k)
                && !LEFT_OUT_ANNOTATION_PREFIXES
                    .iter()
                    .any(|p| k.starts_with(p))
        });
        for (name, kvs) in [("labels", labels), ("annotations", annotations)] {
            if kvs.is_empty() {
                continue;
            }
            let map: serde_json::Map<String, serde_json::Value> = kvs
                .into_iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            maps.push(format!("\"{name}\":{}", serde_json::Value::Object(map)));
        }
        if labels_omitted > 0 {
            maps.push(format!("\"labels_omitted\":{labels_omitted}"));
        }
        if annotations_omitted > 0 {
            maps.push(format!("\"annotations_omitted\":{annotations_omitted}"));
        }
        (scalars.join(","), maps.join(","))
    }
}

/// The pairs of `kvs` that `keep` keeps and that fit in `left` bytes (in order, each that fits),
/// taken from `left`; with the number left out for the bound.
fn carried<'a>(
    kvs: &'a [(String, String)],
    left: &mut usize,
    keep: impl Fn(&str) -> bool,
) -> (Vec<&'a (String, String)>, usize) {
    /// The `:` and `,` around a member.
    const MEMBER_OVERHEAD: usize = 2;
    let mut out = Vec::new();
    let mut omitted = 0;
    for kv in kvs {
        if !keep(&kv.0) {
            continue;
        }
        // Once at start-up, not per record: the literals' lengths, quotes included.
        let len = json_str(&kv.0).len() + json_str(&kv.1).len() + MEMBER_OVERHEAD;
        if len <= *left {
            *left -= len;
            out.push(kv);
        } else {
            omitted += 1;
        }
    }
    (out, omitted)
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

fn read_kv_file(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(parse_kv(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read podinfo file {}", path.display())),
    }
}

/// Parses the Downward API's `key="value"` lines; values are Go-quoted strings. A line that does
/// not fit the format keeps its raw text as the value rather than being dropped.
pub fn parse_kv(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| match line.split_once('=') {
            Some((k, v)) => (
                k.trim().to_string(),
                go_unquote(v.trim()).unwrap_or_else(|| v.trim().to_string()),
            ),
            None => (line.trim().to_string(), String::new()),
        })
        .collect()
}

/// Undoes Go's `strconv.Quote`, which the kubelet uses for these files.
fn go_unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let hex = |chars: &mut std::str::Chars<'_>, n: usize| -> Option<u32> {
            let digits: String = chars.take(n).collect();
            (digits.len() == n).then_some(())?;
            u32::from_str_radix(&digits, 16).ok()
        };
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            '\'' => out.push('\''),
            'x' => out.push(char::from_u32(hex(&mut chars, 2)?)?),
            'u' => out.push(char::from_u32(hex(&mut chars, 4)?)?),
            'U' => out.push(char::from_u32(hex(&mut chars, 8)?)?),
            d @ '0'..='7' => {
                let rest: String = chars.by_ref().take(2).collect();
                let v = u32::from_str_radix(&format!("{d}{rest}"), 8).ok()?;
                out.push(char::from_u32(v)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_downward_api_files() {
        let kv = parse_kv(
            "app=\"api-server\"\npod-template-hash=\"5d9f\"\n\
             kubernetes.io/config.seen=\"2026-11-30T01:00:00.000Z\"\nnote=\"say \\\"hi\\\"\\n\"\n",
        );
        assert_eq!(
            kv,
            vec![
                ("app".into(), "api-server".into()),
                ("pod-template-hash".into(), "5d9f".into()),
                (
                    "kubernetes.io/config.seen".into(),
                    "2026-11-30T01:00:00.000Z".into()
                ),
                ("note".into(), "say \"hi\"\n".into()),
            ]
        );
    }

    #[test]
    fn malformed_lines_are_kept_not_dropped() {
        assert_eq!(
            parse_kv("odd=unquoted\nalone\n"),
            vec![
                ("odd".into(), "unquoted".into()),
                ("alone".into(), String::new())
            ]
        );
    }

    #[test]
    fn builds_fluent_bit_shaped_kubernetes_object() {
        let env = |k: &str| match k {
            "POD_NAME" => Some("api-7d9".to_string()),
            "POD_NAMESPACE" => Some("shop".to_string()),
            "POD_UID" => Some("0b1c".to_string()),
            "POD_IP" => Some("10.0.0.7".to_string()),
            "NODE_NAME" => Some("fargate-ip-10-0-0-7".to_string()),
            _ => None,
        };
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("labels"), "app=\"api\"\n").unwrap();
        let meta = PodMeta::load(env, Some(dir.path())).unwrap();
        let (scalars, maps) = meta.kubernetes_members();
        let json = format!("{{\"kubernetes\":{{{scalars},\"container_name\":\"envoy\",{maps}}}}}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let k = &v["kubernetes"];
        assert_eq!(k["pod_name"], "api-7d9");
        assert_eq!(k["namespace_name"], "shop");
        assert_eq!(k["pod_id"], "0b1c");
        assert_eq!(k["pod_ip"], "10.0.0.7");
        assert_eq!(k["host"], "fargate-ip-10-0-0-7");
        assert_eq!(k["container_name"], "envoy");
        assert_eq!(k["labels"]["app"], "api");
        assert!(k.get("annotations").is_none());
    }
}
