//! A pod's Downward API volume as the kubelet projects it (`labels` and `annotations`, one
//! `key="value"` line each), which `hooklog run --podinfo` reads.

use std::path::Path;

/// Writes the podinfo volume at `dir` (made with its parents) holding `labels` and `annotations`.
pub fn write(dir: &Path, labels: &str, annotations: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("labels"), labels).unwrap();
    std::fs::write(dir.join("annotations"), annotations).unwrap();
}
