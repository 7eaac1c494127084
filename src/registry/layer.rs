//! (the control plane) A layer's tar, streamed: each entry becomes a [`Change`] (a file, a folder, a link or a
//! whiteout) without keeping file data; [`apply`] lays the layers' changes over each other as
//! overlayfs does (the OCI image spec's "Applying changesets").

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

use super::Entry;

/// Entries one image may hold (every layer together) before its listing is refused: a bound on
/// memory for a hostile or absurd image. The largest public images (CUDA, TeX Live) hold a few
/// hundred thousand.
pub const MAX_ENTRIES: usize = 2_000_000;

/// Whiteout prefix and opaque marker (OCI image spec, layer.md "Whiteouts").
const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// One entry of a layer, as far as command lookup cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Change {
    Put(String, Entry),
    /// A hard link to an earlier path (of this or a lower layer).
    Link(String, String),
    /// `.wh.NAME`: NAME and all below it are gone.
    Whiteout(String),
    /// `.wh..wh..opq` in DIR: what lower layers had in DIR is gone.
    Opaque(String),
}

/// The compression of a layer, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    /// OCI image spec media types (`application/vnd.oci.image.layer.v1.tar`, `+gzip`, `+zstd`,
    /// the non-distributable variants) and Docker's (`...rootfs.diff.tar.gzip`).
    pub fn from_media_type(m: &str) -> Option<Compression> {
        match m {
            "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar"
            | "application/vnd.docker.image.rootfs.diff.tar" => Some(Compression::None),
            "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip"
            | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => {
                Some(Compression::Gzip)
            }
            "application/vnd.oci.image.layer.v1.tar+zstd"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd" => {
                Some(Compression::Zstd)
            }
            _ => None,
        }
    }
}

/// `/a/b` for any spelling of a path in a tar (`./a/b`, `a//b/`).
pub fn normalise(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    format!("/{}", parts.join("/"))
}

/// Reads a layer's (decompressed) tar from `r` to its end, keeping only the entries.
pub fn list(r: impl Read, compression: Compression) -> std::io::Result<Vec<Change>> {
    match compression {
        Compression::None => list_tar(r),
        Compression::Gzip => list_tar(flate2::read::MultiGzDecoder::new(r)),
        Compression::Zstd => list_tar(ZstdFrames {
            source: std::io::BufReader::new(r),
            decoder: ruzstd::decoding::FrameDecoder::new(),
            in_frame: false,
        }),
    }
}

/// Every frame of a zstd stream, one after the other, skippable frames skipped (RFC 8878
/// section 3.1: a stream is any number of frames; zstd:chunked layers hold one per file and
/// skippable frames for their table of contents). ruzstd's `StreamingDecoder` reads one frame
/// only, so that a layer's second frame went unread (issue 26).
struct ZstdFrames<R: Read> {
    source: std::io::BufReader<R>,
    decoder: ruzstd::decoding::FrameDecoder,
    in_frame: bool,
}

impl<R: Read> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use ruzstd::decoding::BlockDecodingStrategy;
        use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
        use std::io::BufRead;
        let zstd = |e: FrameDecoderError| std::io::Error::other(format!("zstd: {e}"));
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.in_frame {
                if self.source.fill_buf()?.is_empty() {
                    return Ok(0);
                }
                match self.decoder.reset(&mut self.source) {
                    Ok(()) => self.in_frame = true,
                    Err(FrameDecoderError::ReadFrameHeaderError(
                        ReadFrameHeaderError::SkipFrame { length, .. },
                    )) => {
                        let skipped = std::io::copy(
                            &mut (&mut self.source).take(u64::from(length)),
                            &mut std::io::sink(),
                        )?;
                        if skipped < u64::from(length) {
                            return Err(std::io::Error::other("zstd: a skippable frame cut short"));
                        }
                        continue;
                    }
                    Err(e) => return Err(zstd(e)),
                }
            }
            while self.decoder.can_collect() < buf.len() && !self.decoder.is_finished() {
                let more = buf.len() - self.decoder.can_collect();
                self.decoder
                    .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBytes(more))
                    .map_err(zstd)?;
            }
            let n = self.decoder.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            if self.decoder.is_finished() && self.decoder.can_collect() == 0 {
                self.in_frame = false;
            }
        }
    }
}

/// The longest path kept: Linux's `PATH_MAX` (4096 with its NUL, include/uapi/linux/limits.h).
/// execve and path resolution fail with ENAMETOOLONG beyond it, so a longer name can be no
/// command and no symlink that leads to one: its entry is skipped, and its long-name record is
/// never read into memory.
pub const MAX_PATH: usize = 4095;
/// The largest pax extended header read (path, linkpath, xattrs): one past this cannot be
/// listed, and the layer is refused.
pub const MAX_PAX: u64 = 64 << 10;
/// Bytes of names (paths and link targets) one layer's listing may hold: with [`MAX_ENTRIES`]
/// the bound on its memory and on its cache file. A Debian base layer holds about 1 MB of names,
/// CUDA's largest a few tens of MB.
pub const MAX_NAME_BYTES: usize = 256 << 20;

/// A name from a GNU long-name record or a pax header, for the entry that follows.
enum LongName {
    /// Longer than [`MAX_PATH`]: the entry is skipped.
    TooLong,
    Name(Vec<u8>),
}

/// A long-name record's bytes (up to its NUL), or [`LongName::TooLong`] unread.
fn long_name(entry: &mut impl Read, size: u64) -> std::io::Result<LongName> {
    if size > MAX_PATH as u64 + 1 {
        return Ok(LongName::TooLong);
    }
    let mut b = Vec::with_capacity(size as usize);
    entry.take(size).read_to_end(&mut b)?;
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    b.truncate(end);
    Ok(name_within(b))
}

fn name_within(b: Vec<u8>) -> LongName {
    if b.len() > MAX_PATH {
        LongName::TooLong
    } else {
        LongName::Name(b)
    }
}

/// Lists a tar's entries in raw mode, with GNU long names, long links and pax `path` /
/// `linkpath` read here within [`MAX_PATH`] and [`MAX_PAX`] (the tar crate would read any of
/// them whole into memory, however large: issue 26 had 522 KB of gzip take 1.6 GB).
fn list_tar(r: impl Read) -> std::io::Result<Vec<Change>> {
    let mut out = Vec::new();
    let mut names = 0usize;
    let mut skipped = 0usize;
    let mut archive = tar::Archive::new(r);
    let mut next = NextNames::default();
    for entry in archive.entries()?.raw(true) {
        let mut entry = entry?;
        let kind = entry.header().entry_type();
        if next.read(&mut entry, kind)? {
            continue;
        }
        let (name, link) = (next.name.take(), next.link.take());
        if out.len() >= MAX_ENTRIES {
            return Err(std::io::Error::other(format!(
                "more than {MAX_ENTRIES} entries in one layer"
            )));
        }
        let header = entry.header();
        let raw_path = match name {
            Some(LongName::TooLong) => {
                skipped += 1;
                continue;
            }
            Some(LongName::Name(n)) => n,
            None => header.path_bytes().into_owned(),
        };
        let link = match link {
            Some(LongName::TooLong) => {
                skipped += 1;
                continue;
            }
            Some(LongName::Name(n)) => Some(n),
            None => header.link_name_bytes().map(|l| l.into_owned()),
        };
        names += raw_path.len() + link.as_ref().map_or(0, Vec::len);
        if names > MAX_NAME_BYTES {
            return Err(std::io::Error::other(format!(
                "more than {MAX_NAME_BYTES} bytes of names in one layer"
            )));
        }
        out.push(change_of(header, kind, &raw_path, link.as_deref())?);
        // The entry's data is skipped as the archive moves on: read, never kept.
    }
    if skipped > 0 {
        tracing::debug!(skipped, max = MAX_PATH, "entries with longer names skipped");
    }
    Ok(out)
}

/// The long name and link that GNU and pax entries give the entry after them.
#[derive(Default)]
struct NextNames {
    name: Option<LongName>,
    link: Option<LongName>,
}

impl NextNames {
    /// Reads `entry` when it only names the next one (GNU long names, pax headers) or is read
    /// past (a global pax header): true then. A pax header over [`MAX_PAX`] and a sparse file
    /// with extended headers are errors.
    fn read<R: Read>(
        &mut self,
        entry: &mut tar::Entry<R>,
        kind: tar::EntryType,
    ) -> std::io::Result<bool> {
        let size = entry.size();
        match kind {
            tar::EntryType::GNULongName => self.name = Some(long_name(entry, size)?),
            tar::EntryType::GNULongLink => self.link = Some(long_name(entry, size)?),
            tar::EntryType::XHeader => {
                if size > MAX_PAX {
                    return Err(std::io::Error::other(format!(
                        "a pax header of {size} bytes, more than {MAX_PAX}"
                    )));
                }
                let mut b = Vec::new();
                entry.take(size).read_to_end(&mut b)?;
                for ext in tar::PaxExtensions::new(&b).flatten() {
                    match ext.key_bytes() {
                        b"path" => self.name = Some(name_within(ext.value_bytes().to_vec())),
                        b"linkpath" => self.link = Some(name_within(ext.value_bytes().to_vec())),
                        _ => {}
                    }
                }
            }
            // A global header sets defaults nobody uses for paths: read past.
            tar::EntryType::XGlobalHeader => {}
            tar::EntryType::GNUSparse
                if entry.header().as_gnu().is_some_and(|g| g.is_extended()) =>
            {
                return Err(std::io::Error::other(
                    "a sparse file with extended sparse headers (not read)",
                ));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// What an entry named `raw_path` (linking to `link`) does to the tree.
fn change_of(
    header: &tar::Header,
    kind: tar::EntryType,
    raw_path: &[u8],
    link: Option<&[u8]>,
) -> std::io::Result<Change> {
    let path = normalise(&String::from_utf8_lossy(raw_path));
    let (dir, base) = path.rsplit_once('/').unwrap_or(("", &path));
    let dir = if dir.is_empty() { "/" } else { dir };
    if base == OPAQUE {
        return Ok(Change::Opaque(dir.to_string()));
    }
    if let Some(hidden) = base.strip_prefix(WHITEOUT) {
        return Ok(Change::Whiteout(normalise(&format!("{dir}/{hidden}"))));
    }
    let link = || {
        link.map(|l| String::from_utf8_lossy(l).into_owned())
            .unwrap_or_default()
    };
    Ok(match kind {
        tar::EntryType::Directory => Change::Put(path, Entry::Dir),
        tar::EntryType::Symlink => Change::Put(path, Entry::Symlink(link())),
        tar::EntryType::Link => Change::Link(path, normalise(&link())),
        _ => Change::Put(
            path,
            Entry::File {
                mode: header.mode()?,
            },
        ),
    })
}

/// Removes `path` and everything below it.
fn remove_tree(files: &mut BTreeMap<String, Entry>, path: &str) {
    files.remove(path);
    let prefix = if path == "/" {
        "/".to_string()
    } else {
        format!("{path}/")
    };
    let below: Vec<String> = files
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, _)| k.clone())
        .collect();
    for k in below {
        files.remove(&k);
    }
}

/// Lays `layer` over `files`: its whiteouts and opaque folders hide what lower layers had, then
/// its entries are added (an entry replaces the lower one at its path; a non-folder replaces a
/// lower folder and all it held).
pub fn apply(files: &mut BTreeMap<String, Entry>, layer: &[Change]) -> Result<(), String> {
    for c in layer {
        match c {
            Change::Whiteout(p) => remove_tree(files, p),
            Change::Opaque(dir) => {
                let keep = files.get(dir).cloned();
                remove_tree(files, dir);
                if let Some(k) = keep {
                    files.insert(dir.clone(), k);
                }
            }
            _ => {}
        }
    }
    for c in layer {
        match c {
            Change::Put(p, e) => {
                if e != &Entry::Dir {
                    remove_tree(files, p);
                }
                files.insert(p.clone(), e.clone());
            }
            Change::Link(p, target) => {
                if let Some(e) = files.get(target).cloned() {
                    files.insert(p.clone(), e);
                }
            }
            _ => {}
        }
        if files.len() > MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} files"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_of(entries: &[(&str, tar::EntryType, Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (path, kind, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o755);
            h.set_size(0);
            if let Some(l) = link {
                h.set_link_name(l).unwrap();
            }
            b.append_data(&mut h, path, std::io::empty()).unwrap();
        }
        b.into_inner().unwrap()
    }

    #[test]
    fn whiteouts_and_opaque_folders_hide_lower_layers() {
        use tar::EntryType::*;
        let lower = tar_of(&[
            ("bin/", Directory, None),
            ("bin/sh", Regular, None),
            ("bin/sleep", Regular, None),
            ("opt/tools/", Directory, None),
            ("opt/tools/old", Regular, None),
        ]);
        let upper = tar_of(&[
            ("bin/.wh.sleep", Regular, None),
            ("opt/tools/.wh..wh..opq", Regular, None),
            ("opt/tools/new", Regular, None),
            ("bin/ash", Link, Some("bin/sh")),
        ]);
        let mut files = BTreeMap::new();
        apply(&mut files, &list(&lower[..], Compression::None).unwrap()).unwrap();
        apply(&mut files, &list(&upper[..], Compression::None).unwrap()).unwrap();
        let paths: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(
            paths,
            [
                "/bin",
                "/bin/ash",
                "/bin/sh",
                "/opt/tools",
                "/opt/tools/new"
            ]
        );
    }

    /// Issue 26: GNU long-name records of 100 KB each (a few hundred bytes of gzip each) were
    /// read whole into memory and kept, 1.6 GB for a 522 KB layer. Names past PATH_MAX are
    /// skipped unread, and names within it still list.
    #[test]
    fn long_names_past_path_max_are_skipped_unread_and_long_names_within_it_list() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        {
            let mut b = tar::Builder::new(&mut gz);
            for i in 0..300 {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(0o755);
                h.set_size(0);
                let long = format!("usr/{i}/{}", "a".repeat(100_000));
                b.append_data(&mut h, long, std::io::empty()).unwrap();
            }
            for len in [200, MAX_PATH - 1] {
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                let within = format!("opt/{}", "c".repeat(len - 5));
                b.append_link(&mut h, within, "b".repeat(len)).unwrap();
            }
            b.finish().unwrap();
        }
        let gz = gz.finish().unwrap();
        assert!(gz.len() < 1 << 20, "{}", gz.len());
        let changes = list(&gz[..], Compression::Gzip).unwrap();
        let names: usize = changes
            .iter()
            .map(|c| match c {
                Change::Put(p, Entry::Symlink(l)) => p.len() + l.len(),
                Change::Put(p, _) => p.len(),
                _ => 0,
            })
            .sum();
        assert_eq!(changes.len(), 2, "only the two within PATH_MAX");
        assert!(names < 3 * MAX_PATH, "{names}");
        assert!(
            matches!(&changes[1], Change::Put(p, Entry::Symlink(l)) if p.len() == MAX_PATH - 1 && l.len() == MAX_PATH - 1)
        );
        let tmp = tempfile::tempdir().unwrap();
        let cache = super::super::cache::Cache::at(tmp.path());
        cache.put_layer("sha256:ab", &changes);
        let file = std::fs::read_dir(tmp.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert!(file.metadata().unwrap().len() < 3 * MAX_PATH as u64);
    }

    /// Issue 26: only the first frame of a zstd layer was read. Two frames with a skippable
    /// frame between them (as zstd:chunked writes) list every entry.
    #[test]
    fn every_zstd_frame_is_read_and_skippable_frames_skipped() {
        let first = tar_of(&[("bin/", tar::EntryType::Directory, None)]);
        // The second frame ends the tar (its two zero blocks).
        let second = tar_of(&[("bin/sleep", tar::EntryType::Regular, None)]);
        let first = &first[..first.len() - 1024];
        let mut layer = zstd_frame(first);
        layer.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
        layer.extend_from_slice(&5u32.to_le_bytes());
        layer.extend_from_slice(b"skip!");
        layer.extend_from_slice(&zstd_frame(&second));
        let changes = list(&layer[..], Compression::Zstd).unwrap();
        assert_eq!(
            changes,
            [
                Change::Put("/bin".into(), Entry::Dir),
                Change::Put("/bin/sleep".into(), Entry::File { mode: 0o755 })
            ]
        );
    }

    fn zstd_frame(data: &[u8]) -> Vec<u8> {
        ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
    }

    #[test]
    fn gzip_layers_are_read() {
        use std::io::Write;
        let t = tar_of(&[("usr/bin/envoy", tar::EntryType::Regular, None)]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&t).unwrap();
        let changes = list(&gz.finish().unwrap()[..], Compression::Gzip).unwrap();
        assert_eq!(
            changes,
            [Change::Put(
                "/usr/bin/envoy".into(),
                Entry::File { mode: 0o755 }
            )]
        );
    }
}
