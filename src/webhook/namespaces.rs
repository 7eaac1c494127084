//! (the control plane) The namespaces' `hooklog.dev/` annotations, for the injected sidecar's settings (pod over
//! namespace over install, as Linkerd's injector reads the namespace object). An AdmissionReview
//! holds the pod, not its namespace, so the webhook lists the namespaces from the API server
//! (RBAC: `list` on `namespaces`, the chart's ClusterRole) before it serves and again every
//! [`REFRESH`]; a review reads the last list and never waits on the API server. Without the
//! permission the webhook serves on with the install's and the pods' settings, and says so.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::apiserver::Client;
use crate::sidecar_settings::PREFIX;

/// How often the list is read again: a namespace annotated now configures the pods created
/// from at most this long after.
pub const REFRESH: Duration = Duration::from_secs(30);
/// Namespaces per page: a namespace object is 1 to 5 KiB with its managedFields, so a page stays
/// well under the client's answer bound (`apiserver::MAX_ANSWER`, 1 MiB).
const PAGE: usize = 100;
/// Longest the first list may hold up the start (a server that does not answer).
const FIRST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most pages read in one refresh (100,000 namespaces): a bound, far above any cluster's.
const MAX_PAGES: usize = 1000;

/// The last list: each namespace's `hooklog.dev/` annotations (only those: memory stays small).
#[derive(Debug, Default)]
pub struct Namespaces {
    by_name: RwLock<HashMap<String, Map<String, Value>>>,
}

impl Namespaces {
    /// The `hooklog.dev/` annotations of namespace `name`, as last listed.
    pub fn annotations(&self, name: &str) -> Option<Map<String, Value>> {
        self.by_name.read().ok()?.get(name).cloned()
    }

    /// Replaces the list (tests set it directly).
    pub fn replace(&self, list: HashMap<String, Map<String, Value>>) {
        if let Ok(mut by_name) = self.by_name.write() {
            *by_name = list;
        }
    }
}

/// One page of `GET /api/v1/namespaces`: the annotated namespaces and the `continue` token.
pub fn page(answer: &Value) -> (HashMap<String, Map<String, Value>>, Option<String>) {
    let mut out = HashMap::new();
    for item in answer["items"].as_array().into_iter().flatten() {
        let Some(name) = item["metadata"]["name"].as_str() else {
            continue;
        };
        let ours: Map<String, Value> = item["metadata"]["annotations"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !ours.is_empty() {
            out.insert(name.to_string(), ours);
        }
    }
    let next = answer["metadata"]["continue"]
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    (out, next)
}

/// Lists every namespace once, page by page, and replaces `into`'s list.
pub async fn refresh(client: &Client, into: &Namespaces) -> Result<usize> {
    let mut all = HashMap::new();
    let mut next: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let path = match &next {
            None => format!("/api/v1/namespaces?limit={PAGE}"),
            Some(token) => format!(
                "/api/v1/namespaces?limit={PAGE}&continue={}",
                percent(token)
            ),
        };
        let answer = client.get_json(&path).await?;
        let (found, token) = page(&answer);
        all.extend(found);
        match token {
            Some(t) => next = Some(t),
            None => {
                let n = all.len();
                into.replace(all);
                return Ok(n);
            }
        }
    }
    anyhow::bail!("more than {MAX_PAGES} pages of {PAGE} namespaces")
}

/// A continue token in a query: it is base64 (`+`, `/`, `=`), escaped as RFC 3986 says.
fn percent(token: &str) -> String {
    token
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Reads the list before the webhook serves; a failure (no RBAC, no API server) is said once and
/// the webhook serves without namespace settings.
pub async fn first(client: &Result<Client>, into: &Namespaces) {
    let result = match client {
        Ok(c) => tokio::time::timeout(FIRST_TIMEOUT, refresh(c, into))
            .await
            .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {FIRST_TIMEOUT:?}"))),
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    match result.context("namespace annotations not read (the webhook needs `list` on namespaces); pods get the install's and their own settings") {
        Ok(n) => tracing::info!(annotated = n, "namespace settings read"),
        Err(e) => tracing::warn!(error = %format!("{e:#}"), "namespace settings"),
    }
}

/// Reads the list again every [`REFRESH`] until `stop`; the last good list stays on failure.
pub async fn keep(client: Client, into: Arc<Namespaces>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(REFRESH) => {}
        }
        if let Err(e) = refresh(&client, &into).await {
            tracing::debug!(error = %format!("{e:#}"), "namespace settings not read again");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_page_keeps_only_hooklogs_annotations_of_annotated_namespaces() {
        let answer = json!({"metadata": {"continue": "eyJ2Ijo+/="}, "items": [
            {"metadata": {"name": "shop", "annotations": {"hooklog.dev/output": "cloudwatch", "other/x": "1"}}},
            {"metadata": {"name": "bare"}},
            {"metadata": {"annotations": {"hooklog.dev/emf": "true"}}},
        ]});
        let (found, next) = page(&answer);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found["shop"],
            *json!({"hooklog.dev/output": "cloudwatch"})
                .as_object()
                .unwrap()
        );
        assert_eq!(next.as_deref(), Some("eyJ2Ijo+/="));
        assert_eq!(percent("eyJ2Ijo+/="), "eyJ2Ijo%2B%2F%3D");
        assert_eq!(page(&json!({"items": []})).1, None);
    }
}
