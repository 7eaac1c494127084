//! A layer's tar, streamed: each entry becomes a [`Change`] (a file, a folder, a link or a
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
        Compression::Zstd => {
            let d = ruzstd::decoding::StreamingDecoder::new(r)
                .map_err(|e| std::io::Error::other(format!("zstd: {e}")))?;
            list_tar(d)
        }
    }
}

fn list_tar(r: impl Read) -> std::io::Result<Vec<Change>> {
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(r);
    for entry in archive.entries()? {
        let entry = entry?;
        if out.len() >= MAX_ENTRIES {
            return Err(std::io::Error::other(format!(
                "more than {MAX_ENTRIES} entries in one layer"
            )));
        }
        let path = normalise(&entry.path()?.to_string_lossy());
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", &path));
        let dir = if dir.is_empty() { "/" } else { dir };
        if name == OPAQUE {
            out.push(Change::Opaque(dir.to_string()));
            continue;
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            out.push(Change::Whiteout(normalise(&format!("{dir}/{hidden}"))));
            continue;
        }
        let header = entry.header();
        let link = || -> std::io::Result<String> {
            Ok(entry
                .link_name()?
                .map(|l| l.to_string_lossy().to_string())
                .unwrap_or_default())
        };
        out.push(match header.entry_type() {
            tar::EntryType::Directory => Change::Put(path, Entry::Dir),
            tar::EntryType::Symlink => Change::Put(path, Entry::Symlink(link()?)),
            tar::EntryType::Link => Change::Link(path, normalise(&link()?)),
            _ => Change::Put(
                path,
                Entry::File {
                    mode: header.mode()?,
                },
            ),
        });
        // The entry's data is skipped as the archive moves on: read, never kept.
    }
    Ok(out)
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
