//! (the sidecar) The record writer as it was before issue 42, kept as the oracle of the
//! differential property in `tests.rs`: every piece its own `extend_from_slice`, member by member,
//! the `kubernetes` member built as it goes. The encoder now joins constant fragments once, copies
//! runs of members from the line and appends without `memcpy`; its bytes must be these.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::super::{Flags, Key, is_kept, json_string};
use crate::pod::{PodMeta, json_str};

/// What the old writer read from the `Enrichment` and the `Encoder`.
pub(super) struct Reference {
    pod_members: String,
    map_members: String,
    input: String,
}

impl Reference {
    pub(super) fn new(pod: &PodMeta, max_line: usize, input: &str) -> Self {
        let max_line = max_line.max(super::super::MIN_MAX_LINE_BYTES);
        let (pod_members, map_members) =
            pod.kubernetes_members_within(crate::pod::metadata_budget(max_line));
        Reference {
            pod_members,
            map_members,
            input: json_str(input),
        }
    }

    /// The old `write_object` up to its `write_record` call: the container and the shadowed
    /// keys from the members; `forged` is the flag the encoder would set.
    pub(super) fn write_object(
        &self,
        out: &mut Vec<u8>,
        fields: &[(Key<'_>, &RawValue)],
        mut flags: Flags,
        forged: bool,
        time: &[u8],
    ) {
        let mut container: Option<Cow<'_, str>> = None;
        let mut shadowed: Vec<(Key<'_>, &RawValue)> = Vec::new();
        for (k, v) in fields {
            if k.0 == "container_name" {
                match json_string(v) {
                    Some(c) => container = Some(c),
                    None => shadowed.push((k.clone(), v)),
                }
            } else if super::super::RESERVED.contains(&k.0.as_ref()) {
                shadowed.push((k.clone(), v));
            }
        }
        if !shadowed.is_empty() {
            flags.set(Flags::SHADOWED);
        }
        if forged {
            flags.set(Flags::FORGED);
        }
        self.write_record(
            out,
            time,
            container.as_deref(),
            Err(fields),
            flags,
            None,
            &shadowed,
        );
    }

    /// The old `write_record`; `body` is the message (`Ok`) or the members (`Err`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn write_record(
        &self,
        out: &mut Vec<u8>,
        time: &[u8],
        container: Option<&str>,
        body: Result<&str, &[(Key<'_>, &RawValue)]>,
        flags: Flags,
        split: Option<(&str, u32, bool)>,
        shadowed: &[(Key<'_>, &RawValue)],
    ) {
        out.extend_from_slice(b"{\"time\":\"");
        out.extend_from_slice(time);
        out.push(b'"');
        if let Some(c) = container {
            out.extend_from_slice(b",\"container_name\":");
            write_str(out, c);
        }
        match body {
            Ok(t) => {
                out.extend_from_slice(b",\"message\":");
                write_str(out, t);
            }
            Err(fields) => {
                for (k, v) in fields.iter().filter(|(k, _)| is_kept(k)) {
                    out.push(b',');
                    write_key(out, k);
                    out.push(b':');
                    out.extend_from_slice(v.get().as_bytes());
                }
            }
        }
        out.extend_from_slice(b",\"hooklog\":{\"input\":");
        out.extend_from_slice(self.input.as_bytes());
        if flags.has(Flags::FORGED) {
            out.extend_from_slice(b",\"forged\":true");
        }
        if flags.without(Flags::FORGED) != Flags::default() {
            out.extend_from_slice(b",\"flags\":[");
            let mut first = true;
            for (f, name) in Flags::NAMES {
                if flags.has(f) {
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    out.push(b'"');
                    out.extend_from_slice(name.as_bytes());
                    out.push(b'"');
                }
            }
            out.push(b']');
        }
        if let Some((id, index, last)) = split {
            out.extend_from_slice(b",\"split\":{\"id\":");
            write_str(out, id);
            out.extend_from_slice(format!(",\"index\":{index},\"last\":{last}}}").as_bytes());
        }
        if !shadowed.is_empty() {
            out.extend_from_slice(b",\"shadowed\":{");
            for (i, (k, v)) in shadowed.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_key(out, k);
                out.push(b':');
                out.extend_from_slice(v.get().as_bytes());
            }
            out.push(b'}');
        }
        out.extend_from_slice(b"},");
        self.write_kubernetes(out, container, flags.has(Flags::METADATA_OMITTED));
        out.extend_from_slice(b"}\n");
    }

    fn write_kubernetes(&self, out: &mut Vec<u8>, container: Option<&str>, lean: bool) {
        out.extend_from_slice(b"\"kubernetes\":{");
        let mut empty = true;
        let mut member = |out: &mut Vec<u8>| {
            if !empty {
                out.push(b',');
            }
            empty = false;
        };
        if !self.pod_members.is_empty() {
            member(out);
            out.extend_from_slice(self.pod_members.as_bytes());
        }
        if let Some(c) = container {
            member(out);
            out.extend_from_slice(b"\"container_name\":");
            write_str(out, c);
        }
        if !lean && !self.map_members.is_empty() {
            member(out);
            out.extend_from_slice(self.map_members.as_bytes());
        }
        out.push(b'}');
    }
}

/// A JSON string literal as serde_json writes it (what `write_str` is documented to write).
fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(
        serde_json::to_string(s)
            .expect("a str serialises")
            .as_bytes(),
    );
}

/// The old `Key::write`: a borrowed key copied between quotes, an owned one escaped.
fn write_key(out: &mut Vec<u8>, k: &Key<'_>) {
    match &k.0 {
        Cow::Borrowed(k) => {
            out.push(b'"');
            out.extend_from_slice(k.as_bytes());
            out.push(b'"');
        }
        Cow::Owned(k) => write_str(out, k),
    }
}
