//! (the sidecar) The record: turns one framed line into one or more enriched JSON lines.
//!
//! A plain line becomes `{"time","message","hooklog","kubernetes"}`; a JSON object keeps its
//! fields. The keys `time`, `kubernetes` and `hooklog` belong to hooklog: a line cannot spoof
//! them, its own values move to `hooklog.shadowed`. A line that uses hooklog's own event names
//! without being hooklog's is marked `hooklog.forged`. A key given twice is read once, the last
//! value winning (as jq reads it). A record that would be longer than the output cap is split
//! into parts that carry `hooklog.split = {id, index, last}`.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::batch::Batch;
use crate::batch::CopyKey;
use crate::framing::{Frame, FrameEnd};
use crate::pod::{PodMeta, json_str};
use crate::protocol::{self, Event, field};
use crate::timefmt::RFC3339_MS_LEN;

mod append;
use append::append;

/// Smallest output cap accepted: room for the envelope and some message.
pub const MIN_MAX_LINE_BYTES: usize = 1024;

/// Longest member value (its JSON text) a lifecycle record keeps when it is over the cap even
/// without the pod's metadata: run ids, seals (64 hex digits), outcomes and exit codes fit, a
/// long `message` or `command` does not.
pub const SHORT_MEMBER_BYTES: usize = 128;

/// The start of the `kubernetes` member.
const KUBE_OPEN: &str = "\"kubernetes\":{";

/// Keys of a JSON line that hooklog owns.
const RESERVED: [&str; 3] = ["time", "kubernetes", "hooklog"];

/// What hooklog had to do to a line, reported in `hooklog.flags`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags(u16);

impl Flags {
    /// Bytes that were not UTF-8 were replaced by U+FFFD.
    pub const INVALID_UTF8: Flags = Flags(1);
    /// The line holds control characters (NUL included); JSON escapes them.
    pub const CONTROL_CHARS: Flags = Flags(2);
    /// The line looked like a JSON object but did not parse (bad quoting, too deep, trailing
    /// text): it is kept as text.
    pub const INVALID_JSON: Flags = Flags(4);
    /// The stream ended before the line's newline (writer gone mid-line, file rotated away).
    pub const NO_NEWLINE: Flags = Flags(8);
    /// The line used a key hooklog owns; its value is in `hooklog.shadowed`.
    pub const SHADOWED: Flags = Flags(16);
    /// A JSON object too large for one record: kept as text and split.
    pub const JSON_TOO_LARGE: Flags = Flags(32);
    /// The line uses one of hooklog's own event names without being hooklog's (see
    /// [`imitates_hooklog`]): written as `hooklog.forged = true`, not in `hooklog.flags`.
    pub const FORGED: Flags = Flags(64);
    /// A JSON object over the cap with the pod's labels and annotations: written without them
    /// (`kubernetes` keeps the pod's names), rather than split.
    pub const METADATA_OMITTED: Flags = Flags(128);
    /// A lifecycle record over the cap even without the pod's labels and annotations: written
    /// with only its members of at most [`SHORT_MEMBER_BYTES`] (the wrapper's run, outcome and
    /// exit), rather than split, so its event is still read whole.
    pub const MEMBERS_OMITTED: Flags = Flags(256);

    const NAMES: [(Flags, &'static str); 8] = [
        (Flags::INVALID_UTF8, "invalid_utf8"),
        (Flags::CONTROL_CHARS, "control_chars"),
        (Flags::INVALID_JSON, "invalid_json"),
        (Flags::NO_NEWLINE, "no_newline"),
        (Flags::SHADOWED, "shadowed_key"),
        (Flags::JSON_TOO_LARGE, "json_too_large"),
        (Flags::METADATA_OMITTED, "metadata_omitted"),
        (Flags::MEMBERS_OMITTED, "members_omitted"),
    ];

    fn has(self, f: Flags) -> bool {
        self.0 & f.0 != 0
    }

    fn set(&mut self, f: Flags) {
        self.0 |= f.0;
    }

    /// These flags without `f`.
    fn without(self, f: Flags) -> Flags {
        Flags(self.0 & !f.0)
    }
}

/// A lifecycle report found in a line (`event: hook.started` / `hook.finished`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookEvent {
    /// The container whose hook it is.
    pub container: String,
    /// Started or finished, with how.
    pub kind: HookEventKind,
    /// Which run of the wrapper it came from (`run_id`, `started_ms`), when it says.
    pub run: Option<HookRun>,
    /// What pairs a run's finish with its start, which a peer reading the shared file cannot
    /// copy in time: `hook.started`'s `seal` (the SHA-256, hex, of a random key the wrapper
    /// keeps), `hook.finished`'s `key` (that key, written only once the run is over).
    pub proof: Option<String>,
}

impl HookEvent {
    /// What tells copies of this event read from `line` apart from other records, or none for
    /// an event without a run: nothing to tell copies apart by.
    pub fn copy_key(&self, line: &[u8]) -> Option<CopyKey> {
        let run = self.run.as_ref()?;
        let finished = matches!(self.kind, HookEventKind::Finished { .. });
        Some(CopyKey::new(&run.id, finished, line))
    }
}

/// One run of `hooklog hook`, as its records name it: events of one container are ordered by
/// it, whichever input (socket or file) each came through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookRun {
    /// The wrapper's id for this run.
    pub id: String,
    /// When the command was started, ms since the epoch (the wrapper's clock).
    pub started_ms: i64,
}

/// What a hook event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookEventKind {
    /// The hook began.
    Started,
    /// The hook ended.
    Finished {
        /// `ok`, `failed` or `timed_out` as the wrapper judged it.
        outcome: String,
        /// Exit status, none when killed by a signal.
        exit_code: Option<i64>,
        /// How long it ran.
        duration_ms: Option<u64>,
    },
}

/// The parts of every record that depend only on the pod and the settings, built once: the
/// `kubernetes` member as the few fragments a record is written from (issue 42: fewer, larger
/// copies; `container_name` sits between the pod's scalars and its labels, as in Fluent Bit's
/// output, so the member is written around it).
#[derive(Debug)]
pub struct Enrichment {
    /// `"kubernetes":{` and the pod's scalar members: the member's start without a container.
    kube_open: String,
    /// `kube_open`, a comma after any scalars, and `"container_name":`: the start with one.
    kube_container: String,
    /// After `kube_container` and the container's name: a comma and the pod's `labels` and
    /// `annotations` members (when it has any), then the end of `kubernetes` and of the record,
    /// `}}` and the newline.
    close_container: String,
    /// The same after `kube_open` (no comma when the pod has no scalar members).
    close_open: String,
    /// Longest record written, newline included.
    max_line: usize,
    /// Prefix of split ids, unique to this run of hooklog.
    split_prefix: String,
    /// Counter behind split ids.
    split_seq: AtomicU64,
}

impl Enrichment {
    /// Enrichment for `pod`, with records capped at `max_line` bytes.
    pub fn new(pod: &PodMeta, max_line: usize) -> Self {
        let max_line = max_line.max(MIN_MAX_LINE_BYTES);
        let (pod_members, map_members) =
            pod.kubernetes_members_within(crate::pod::metadata_budget(max_line));
        let kube_open = format!("{KUBE_OPEN}{pod_members}");
        let (scalars, maps) = (!pod_members.is_empty(), !map_members.is_empty());
        let comma = |between: bool| if between { "," } else { "" };
        Enrichment {
            kube_container: format!("{kube_open}{}\"container_name\":", comma(scalars)),
            close_container: format!("{}{map_members}}}}}\n", comma(maps)),
            close_open: format!("{}{map_members}}}}}\n", comma(scalars && maps)),
            kube_open,
            max_line,
            split_prefix: format!("{:x}", crate::timefmt::now_ms()),
            split_seq: AtomicU64::new(0),
        }
    }

    /// The cap on one record.
    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Ends a record whose `kubernetes` member was begun with `kube_open` (and the container,
    /// when `container`): the labels and annotations (unless `lean`), `}}` and the newline.
    fn write_close(&self, out: &mut Vec<u8>, container: bool, lean: bool) {
        let close = match (lean, container) {
            (true, _) => "}}\n",
            (false, true) => &self.close_container,
            (false, false) => &self.close_open,
        };
        append(out, close.as_bytes());
    }

    fn next_split_id(&self) -> String {
        let n = self.split_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}-{n:x}", self.split_prefix)
    }
}

/// Turns the frames of one input stream into records. One per stream, because it remembers the
/// split state of a line that spans frames.
#[derive(Debug)]
pub struct Encoder {
    /// Shared enrichment.
    enrichment: Arc<Enrichment>,
    /// `,"hooklog":{"input":` and this stream's name as a JSON string literal, e.g.
    /// `"file:/hooklog/prestop.log"`: the start of the `hooklog` member.
    hooklog_open: Vec<u8>,
    /// A plain record's middle (no flags, split or shadowed keys): `hooklog_open`, `},` and
    /// the enrichment's `kube_open`, joined once so a record copies them in one piece.
    plain_open: Vec<u8>,
    /// The same up to `"container_name":` (the enrichment's `kube_container`).
    plain_container: Vec<u8>,
    /// The split line in progress: its id and the next part's index.
    split: Option<(String, u32)>,
    /// The last `time_ms` formatted and its text: a whole read shares one timestamp, so most
    /// lines reuse it instead of formatting it again.
    time_cache: Stamp,
    /// Encodes hooklog's own records (the summary), which use its event names by right: they
    /// are never marked `forged`.
    own: bool,
}

/// The content of a record.
enum Body<'a> {
    /// A `message` string.
    Text(&'a str),
    /// Members of a JSON object line, reserved keys removed.
    Fields(&'a [(Key<'a>, &'a RawValue)], Line<'a>),
}

/// The text of the JSON object line whose members a [`Body::Fields`] borrows: members that
/// stand in it as a record writes them are copied from it as one run (see [`write_members`]).
#[derive(Clone, Copy)]
struct Line<'a>(&'a [u8]);

/// A read's time: milliseconds since the epoch and their RFC 3339 text, formatted once.
#[derive(Debug, Clone, Copy)]
struct Stamp {
    ms: i64,
    text: [u8; RFC3339_MS_LEN],
}

impl Stamp {
    fn at(ms: i64) -> Self {
        Stamp {
            ms,
            text: crate::timefmt::rfc3339_ms(ms),
        }
    }
}

impl Encoder {
    /// An encoder for the stream called `input` (shown in `hooklog.input`).
    pub fn new(enrichment: Arc<Enrichment>, input: &str) -> Self {
        let hooklog_open = format!(",\"hooklog\":{{\"input\":{}", json_str(input)).into_bytes();
        let plain = |kube: &str| [&hooklog_open[..], b"},", kube.as_bytes()].concat();
        Encoder {
            plain_open: plain(&enrichment.kube_open),
            plain_container: plain(&enrichment.kube_container),
            hooklog_open,
            enrichment,
            split: None,
            time_cache: Stamp::at(0),
            own: false,
        }
    }

    /// The encoder of hooklog's own records (`hooklog.input` = `hooklog`).
    pub fn own(enrichment: Arc<Enrichment>) -> Self {
        Encoder {
            own: true,
            ..Encoder::new(enrichment, "hooklog")
        }
    }

    /// Encodes one frame read at `time_ms` into `out`, and reports any hook event it carries.
    pub fn encode(&mut self, frame: Frame<'_>, time_ms: i64, out: &mut Batch) -> Option<HookEvent> {
        let stamp = self.stamp(time_ms);
        let mut flags = Flags::default();
        if frame.end == FrameEnd::Eof {
            flags.set(Flags::NO_NEWLINE);
        }
        let is_piece = frame.continued || frame.end == FrameEnd::Cut;
        let text: Cow<'_, str> = match std::str::from_utf8(frame.bytes) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                flags.set(Flags::INVALID_UTF8);
                String::from_utf8_lossy(frame.bytes)
            }
        };
        if !is_piece && !flags.has(Flags::INVALID_UTF8) && looks_like_object(frame.bytes) {
            match serde_json::from_str::<Fields<'_>>(&text) {
                Ok(fields) => {
                    return self.encode_object(&fields.0, &text, flags, frame.end, &stamp, out);
                }
                Err(_) => flags.set(Flags::INVALID_JSON),
            }
        }
        if has_control_chars(&text) {
            flags.set(Flags::CONTROL_CHARS);
        }
        let line_ends_here = frame.end != FrameEnd::Cut;
        let (time, time_ms) = (&stamp.text, stamp.ms);
        self.write_text(
            &text,
            flags,
            None,
            line_ends_here,
            is_piece,
            time,
            time_ms,
            out,
        );
        None
    }

    /// `time_ms` with its RFC 3339 text, formatted once per distinct millisecond: a whole read
    /// shares one timestamp.
    fn stamp(&mut self, time_ms: i64) -> Stamp {
        if self.time_cache.ms != time_ms {
            self.time_cache = Stamp::at(time_ms);
        }
        self.time_cache
    }

    /// Encodes a JSON object line. The record is kept whole when it can be, in these steps:
    /// as it is; without the pod's labels and annotations; (a lifecycle record, which must be
    /// read whole) with only its short members; only then is it split as text.
    fn encode_object(
        &mut self,
        fields: &[(Key<'_>, &RawValue)],
        text: &str,
        mut flags: Flags,
        end: FrameEnd,
        stamp: &Stamp,
        out: &mut Batch,
    ) -> Option<HookEvent> {
        let (time, time_ms) = (&stamp.text, stamp.ms);
        let line = Line(text.as_bytes());
        let start = out.buf.len();
        let event = self.write_object(fields, line, flags, time, &mut out.buf);
        if self.kept(start, time_ms, out) {
            return event;
        }
        let mut lean = flags;
        lean.set(Flags::METADATA_OMITTED);
        self.write_object(fields, line, lean, time, &mut out.buf);
        if self.kept(start, time_ms, out) {
            return event;
        }
        if event.is_some() {
            let short: Vec<(Key<'_>, &RawValue)> = fields
                .iter()
                .filter(|(_, v)| v.get().len() <= SHORT_MEMBER_BYTES)
                .cloned()
                .collect();
            lean.set(Flags::MEMBERS_OMITTED);
            self.write_object(&short, line, lean, time, &mut out.buf);
            if self.kept(start, time_ms, out) {
                return event;
            }
        }
        flags.set(Flags::JSON_TOO_LARGE);
        let line_ends_here = end != FrameEnd::Cut;
        self.write_text(text, flags, None, line_ends_here, true, time, time_ms, out);
        event
    }

    /// Keeps the record written to `out` since `start` when it is within the line cap, and
    /// takes it back otherwise.
    fn kept(&self, start: usize, time_ms: i64, out: &mut Batch) -> bool {
        if out.buf.len() - start <= self.enrichment.max_line {
            out.push_record(time_ms);
            true
        } else {
            out.buf.truncate(start);
            false
        }
    }

    /// Writes a record with a `message`, splitting it into parts when it would not fit.
    #[allow(clippy::too_many_arguments)]
    fn write_text(
        &mut self,
        text: &str,
        flags: Flags,
        container: Option<&[u8]>,
        line_ends_here: bool,
        force_split: bool,
        time: &[u8; RFC3339_MS_LEN],
        time_ms: i64,
        out: &mut Batch,
    ) {
        let max = self.enrichment.max_line;
        if !force_split && self.split.is_none() {
            let start = out.buf.len();
            self.write_record(
                &mut out.buf,
                time,
                container,
                Body::Text(text),
                flags,
                None,
                &[],
            );
            if out.buf.len() - start <= max {
                out.push_record(time_ms);
                return;
            }
            out.buf.truncate(start);
        }
        let (id, mut index) = match self.split.take() {
            Some(s) => s,
            None => (self.enrichment.next_split_id(), 0),
        };
        // The envelope with the widest split member it can have, to size the message budget.
        let mut scratch = Vec::new();
        self.write_record(
            &mut scratch,
            time,
            container,
            Body::Text(""),
            flags,
            Some((&id, u32::MAX, false)),
            &[],
        );
        let budget = max.saturating_sub(scratch.len()).max(64);
        let mut rest = text;
        loop {
            let cut = escaped_prefix(rest, budget);
            let (piece, tail) = rest.split_at(cut);
            let last = tail.is_empty() && line_ends_here;
            self.write_record(
                &mut out.buf,
                time,
                container,
                Body::Text(piece),
                flags,
                Some((&id, index, last)),
                &[],
            );
            out.push_record(time_ms);
            index = index.saturating_add(1);
            rest = tail;
            if rest.is_empty() {
                break;
            }
        }
        if !line_ends_here {
            self.split = Some((id, index));
        }
    }

    /// Writes a JSON object line's record; returns the hook event it carries, if any.
    fn write_object(
        &self,
        fields: &[(Key<'_>, &RawValue)],
        line: Line<'_>,
        mut flags: Flags,
        time: &[u8; RFC3339_MS_LEN],
        out: &mut Vec<u8>,
    ) -> Option<HookEvent> {
        // No per-line copies: `container_name` is borrowed when its literal has no escapes, and
        // the kept members are filtered while writing.
        let mut container: Option<(Cow<'_, str>, &RawValue)> = None;
        let mut shadowed: Vec<(Key<'_>, &RawValue)> = Vec::new();
        for (k, v) in fields {
            if k.0 == "container_name" {
                match json_string(v) {
                    Some(c) => container = Some((c, v)),
                    None => shadowed.push((k.clone(), v)),
                }
            } else if RESERVED.contains(&k.0.as_ref()) {
                shadowed.push((k.clone(), v));
            }
        }
        if !shadowed.is_empty() {
            flags.set(Flags::SHADOWED);
        }
        if !self.own && imitates_hooklog(fields) {
            flags.set(Flags::FORGED);
        }
        // The name as the record writes it: a literal without escapes is that already (it holds
        // no quote, backslash or control character, so `write_str` adds nothing), one with
        // escapes is written anew.
        let literal: Option<Cow<'_, [u8]>> = container.as_ref().map(|(c, v)| match c {
            Cow::Borrowed(_) => Cow::Borrowed(v.get().as_bytes()),
            Cow::Owned(c) => {
                let mut b = Vec::with_capacity(c.len() + 2);
                write_str(&mut b, c);
                Cow::Owned(b)
            }
        });
        self.write_record(
            out,
            time,
            literal.as_deref(),
            Body::Fields(fields, line),
            flags,
            None,
            &shadowed,
        );
        hook_event(fields, container.as_ref().map(|(c, _)| c.as_ref()))
    }

    /// Writes one record and its newline. A plain record (no flags, split or shadowed keys: the
    /// common case) is written in a few pieces, constant fragments joined once beforehand
    /// (`plain_open`, `plain_container`, the enrichment's closes), the others member by member.
    #[allow(clippy::too_many_arguments)]
    fn write_record(
        &self,
        out: &mut Vec<u8>,
        time: &[u8; RFC3339_MS_LEN],
        container: Option<&[u8]>,
        body: Body<'_>,
        flags: Flags,
        split: Option<(&str, u32, bool)>,
        shadowed: &[(Key<'_>, &RawValue)],
    ) {
        // Lengths known at compile time: moved in line.
        out.extend_from_slice(b"{\"time\":\"");
        out.extend_from_slice(time);
        out.push(b'"');
        if let Some(c) = container {
            out.extend_from_slice(b",\"container_name\":");
            append(out, c);
        }
        match body {
            Body::Text(t) => {
                out.extend_from_slice(b",\"message\":");
                write_str(out, t);
            }
            Body::Fields(fields, line) => write_members(out, fields, line),
        }
        let enrichment = &self.enrichment;
        if flags == Flags::default() && split.is_none() && shadowed.is_empty() {
            append(
                out,
                match container {
                    Some(_) => &self.plain_container,
                    None => &self.plain_open,
                },
            );
        } else {
            self.write_hooklog(out, flags, split, shadowed);
            out.extend_from_slice(b"},");
            append(
                out,
                match container {
                    Some(_) => enrichment.kube_container.as_bytes(),
                    None => enrichment.kube_open.as_bytes(),
                },
            );
        }
        if let Some(c) = container {
            append(out, c);
        }
        enrichment.write_close(out, container.is_some(), flags.has(Flags::METADATA_OMITTED));
    }

    /// Writes the `hooklog` member but its closing brace: the input, then what hooklog did to
    /// the line.
    fn write_hooklog(
        &self,
        out: &mut Vec<u8>,
        flags: Flags,
        split: Option<(&str, u32, bool)>,
        shadowed: &[(Key<'_>, &RawValue)],
    ) {
        append(out, &self.hooklog_open);
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
                    append(out, name.as_bytes());
                    out.push(b'"');
                }
            }
            out.push(b']');
        }
        if let Some((id, index, last)) = split {
            out.extend_from_slice(b",\"split\":{\"id\":");
            write_str(out, id);
            append(
                out,
                format!(",\"index\":{index},\"last\":{last}}}").as_bytes(),
            );
        }
        if !shadowed.is_empty() {
            out.extend_from_slice(b",\"shadowed\":{");
            for (i, (k, v)) in shadowed.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                k.write(out);
                out.push(b':');
                append(out, v.get().as_bytes());
            }
            out.push(b'}');
        }
    }
}

/// Writes the kept members of a JSON object line, each after a comma. Members that stand in the
/// line as they are written here (`"key":value`, no space around the colon, one comma between
/// them: a line as most loggers write it) are copied from it as one run, not key by key (issue
/// 42); the others are written piece by piece. The bytes are the same either way.
fn write_members(out: &mut Vec<u8>, fields: &[(Key<'_>, &RawValue)], line: Line<'_>) {
    let mut run: Option<Range<usize>> = None;
    for (k, v) in fields.iter().filter(|(k, _)| is_kept(k)) {
        let member = line.member(k, v);
        if let (Some(r), Some(m)) = (&mut run, &member)
            && r.end + 1 == m.start
            && line.0[r.end] == b','
        {
            r.end = m.end;
            continue;
        }
        if let Some(r) = run.take() {
            out.push(b',');
            append(out, &line.0[r]);
        }
        match member {
            Some(m) => run = Some(m),
            None => {
                out.push(b',');
                k.write(out);
                out.push(b':');
                append(out, v.get().as_bytes());
            }
        }
    }
    if let Some(r) = run {
        out.push(b',');
        append(out, &line.0[r]);
    }
}

impl Line<'_> {
    /// Where `"key":value` stands in the line as a record writes it, when it does: the key
    /// borrowed from the line (one with escapes was decoded into a copy), a quote either side
    /// of it, the colon right after, the value right after the colon. Found from where the key
    /// and the value lie in memory: serde_json borrows both from the line.
    fn member(self, k: &Key<'_>, v: &RawValue) -> Option<Range<usize>> {
        let Cow::Borrowed(key) = &k.0 else {
            return None;
        };
        let key_start = offset_in(self.0, key.as_bytes())?;
        let value_start = offset_in(self.0, v.get().as_bytes())?;
        let key_end = key_start + key.len();
        let start = key_start.checked_sub(1)?;
        (self.0[start] == b'"'
            && self.0.get(key_end) == Some(&b'"')
            && self.0.get(key_end + 1) == Some(&b':')
            && value_start == key_end + 2)
            .then(|| start..value_start + v.get().len())
    }
}

/// Where `part` starts in `whole` when it lies inside it: the same bytes in memory, not equal
/// bytes elsewhere.
fn offset_in(whole: &[u8], part: &[u8]) -> Option<usize> {
    let start = part.as_ptr().addr().checked_sub(whole.as_ptr().addr())?;
    (start + part.len() <= whole.len()).then_some(start)
}

/// True when a JSON line uses one of hooklog's own event names without being hooklog's: any
/// `hooks.*` event (only the daemon writes those, as `hooklog.input` = `hooklog`), or a `hook.*`
/// event without the members the wrapper writes in it (hand-written, or forged).
fn imitates_hooklog(fields: &[(Key<'_>, &RawValue)]) -> bool {
    let Some((_, value)) = fields.iter().find(|(k, _)| k.0 == field::EVENT) else {
        return false;
    };
    let raw = value.get();
    // Most lines stop here; a name spelled with escapes (`"\u0068ook.finished"`) is decoded.
    if !raw.starts_with("\"hook") && !raw.contains('\\') {
        return false;
    }
    let Some(name) = json_string(value) else {
        return false;
    };
    if name.starts_with(protocol::DAEMON_PREFIX) {
        return true;
    }
    if !name.starts_with(protocol::HOOK_PREFIX) {
        return false;
    }
    let has = |member: &str| fields.iter().any(|(k, _)| k.0 == member);
    match Event::parse(&name) {
        Some(event) => !event.members().iter().all(|m| has(m)),
        None => true,
    }
}

/// Finds a hook event among a JSON line's members.
fn hook_event(fields: &[(Key<'_>, &RawValue)], container: Option<&str>) -> Option<HookEvent> {
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k.0 == name)
            .map(|(_, v)| v.get())
    };
    let event: String = serde_json::from_str(get(field::EVENT)?).ok()?;
    // The daemon waits for preStop hooks: a wrapped postStart hook that finished long ago must not
    // count as the container's preStop. Records without `hook` (hand-written) count.
    let hook: Option<String> = get(field::HOOK).and_then(|v| serde_json::from_str(v).ok());
    if hook.is_some_and(|h| !h.eq_ignore_ascii_case("preStop")) {
        return None;
    }
    let kind = match Event::parse(&event) {
        Some(Event::Started) => HookEventKind::Started,
        Some(Event::Finished) => HookEventKind::Finished {
            outcome: get(field::OUTCOME)
                .and_then(|v| serde_json::from_str::<String>(v).ok())
                .unwrap_or_else(|| "failed".to_string()),
            exit_code: get(field::EXIT_CODE).and_then(|v| serde_json::from_str(v).ok()),
            duration_ms: get(field::DURATION_MS).and_then(|v| serde_json::from_str(v).ok()),
        },
        Some(Event::Output) | None => return None,
    };
    let run = match (get(field::RUN_ID), get(field::STARTED_MS)) {
        (Some(id), Some(ms)) => serde_json::from_str::<String>(id)
            .ok()
            .zip(serde_json::from_str::<i64>(ms).ok())
            .map(|(id, started_ms)| HookRun { id, started_ms }),
        _ => None,
    };
    let proof_member = match kind {
        HookEventKind::Started => field::SEAL,
        HookEventKind::Finished { .. } => field::KEY,
    };
    let proof = get(proof_member).and_then(|v| serde_json::from_str::<String>(v).ok());
    Some(HookEvent {
        container: container?.to_string(),
        kind,
        run,
        proof,
    })
}

/// Appends `s` as a JSON string literal, byte for byte as serde_json writes it.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| !needs_escape(b)) {
        // The common case: nothing to escape, one copy.
        out.reserve(s.len() + 2);
        out.push(b'"');
        append(out, s.as_bytes());
        out.push(b'"');
    } else {
        // Writing to a Vec cannot fail, and a &str always serialises.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// True for the bytes serde_json escapes inside a string: `"`, `\` and controls below 0x20.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// A JSON string value's text; borrowed from the line when its literal has no escapes. None
/// when the value is not a string.
fn json_string(v: &RawValue) -> Option<Cow<'_, str>> {
    let raw = v.get();
    if let Some(inner) = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"'))
        && !inner.contains('\\')
    {
        // A valid literal without a backslash holds no quote and no control character.
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}

/// True for a member of a JSON line that stays in the record's body: not `container_name`
/// (moved to the front, or shadowed when not a string) and not a key hooklog owns (shadowed).
fn is_kept(k: &Key<'_>) -> bool {
    k.0 != "container_name" && !RESERVED.contains(&k.0.as_ref())
}

/// Bytes `c` takes inside a JSON string as serde_json writes it.
fn escaped_char_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        '\0'..='\u{1f}' => 6,
        _ => c.len_utf8(),
    }
}

/// Bytes `s` takes inside a JSON string as serde_json writes it.
pub fn escaped_len(s: &str) -> usize {
    s.chars().map(escaped_char_len).sum()
}

/// The longest prefix of `s` (in bytes, on a character boundary, at least one character) whose
/// escaped form fits in `budget` bytes.
pub fn escaped_prefix(s: &str, budget: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += escaped_char_len(c);
        if used > budget {
            return if i == 0 { c.len_utf8() } else { i };
        }
    }
    s.len()
}

fn has_control_chars(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 && b != b'\t')
}

fn looks_like_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// A key of a JSON line, borrowed when it has no escapes.
#[derive(Debug, Clone)]
struct Key<'a>(Cow<'a, str>);

impl Key<'_> {
    /// Appends the key as a JSON string literal. A borrowed key came from a literal without
    /// escapes, so it holds nothing to escape and is copied as it is.
    fn write(&self, out: &mut Vec<u8>) {
        match &self.0 {
            Cow::Borrowed(k) => {
                out.push(b'"');
                append(out, k.as_bytes());
                out.push(b'"');
            }
            Cow::Owned(k) => write_str(out, k),
        }
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// The top-level members of a JSON object, in order, values left as raw JSON text.
struct Fields<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'de> de::Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut v: Vec<(Key<'de>, &'de RawValue)> =
                    Vec::with_capacity(m.size_hint().unwrap_or(8));
                // Past this many members, duplicates are found through an index rather than by
                // comparing with each earlier key: a line of thousands of keys stays linear.
                const LINEAR_SCAN_MEMBERS: usize = 16;
                let mut index: Option<std::collections::HashMap<String, usize>> = None;
                while let Some((key, value)) = m.next_entry::<Key<'de>, &'de RawValue>()? {
                    // A duplicated key: the last value wins, in the first one's place, as jq
                    // reads it (`{"a":1,"b":2,"a":3}` is `{"a":3,"b":2}`); every reader then
                    // agrees with the summary.
                    let earlier = match &mut index {
                        Some(ix) => ix.get(key.0.as_ref()).copied(),
                        None => v.iter().position(|(k, _)| k.0 == key.0),
                    };
                    if let Some(i) = earlier {
                        v[i].1 = value;
                        continue;
                    }
                    if let Some(ix) = &mut index {
                        ix.insert(key.0.to_string(), v.len());
                    }
                    v.push((key, value));
                    if index.is_none() && v.len() >= LINEAR_SCAN_MEMBERS {
                        index = Some(
                            v.iter()
                                .enumerate()
                                .map(|(i, (k, _))| (k.0.to_string(), i))
                                .collect(),
                        );
                    }
                }
                Ok(Fields(v))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests;
