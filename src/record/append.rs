//! (the sidecar) Appends bytes to a record buffer in moves of a fixed size, which the compiler
//! writes in line, rather than through a call to libc's `memcpy`.
//!
//! Why (issue 42): `Vec::extend_from_slice` of a slice whose length is known only at run time
//! compiles to a call to `memcpy`; of a `&[u8; N]`, to a few moves in line. The static build
//! links musl, whose x86_64 `memcpy` is a `rep movsq` with `movsb` loops either side: on the
//! bench machine it took 35 to 90 ns a call whatever the size (4 to 450 bytes), glibc's 2.5 to
//! 13 ns, and the encoder made 9 such calls a record. The static sidecar spent 1.9 times the
//! glibc build's CPU per line for it (docs/performance.md, "The static build's copies").
//!
//! So a slice goes in as 32-byte blocks, then one last 32-byte block that ends where the slice
//! ends and overlaps the block before it: the overlap is truncated off the buffer first, so
//! every byte lands once, in order. Shorter slices go in as two overlapping moves of 16, 8 or
//! 4 bytes, or byte by byte under 4: how glibc's `memcpy` itself copies a short tail. Safe code
//! only: `truncate` takes back bytes just written, never more; `append_matches_extend_from_slice`
//! checks every length up to 300 at every alignment against `extend_from_slice`.

/// Appends `s` to `out`, as `out.extend_from_slice(s)` does, without calling `memcpy`.
#[inline]
pub fn append(out: &mut Vec<u8>, s: &[u8]) {
    match s.len() {
        0..4 => {
            for &b in s {
                out.push(b);
            }
        }
        4..8 => overlapping::<4>(out, s),
        8..16 => overlapping::<8>(out, s),
        16..32 => overlapping::<16>(out, s),
        _ => blocks(out, s),
    }
}

/// `s` (N to 2N-1 bytes) as its first N bytes, the overlap taken back, then its last N.
#[inline(always)]
fn overlapping<const N: usize>(out: &mut Vec<u8>, s: &[u8]) {
    let (Some(first), Some(last)) = (s.first_chunk::<N>(), s.last_chunk::<N>()) else {
        return out.extend_from_slice(s); // not reached: `append` sends N to 2N-1 bytes
    };
    out.extend_from_slice(first);
    out.truncate(out.len() - (2 * N - s.len()));
    out.extend_from_slice(last);
}

/// `s` (at least 32 bytes) as whole 32-byte blocks, then its last 32 bytes over the rest.
fn blocks(out: &mut Vec<u8>, s: &[u8]) {
    const BLOCK: usize = 32;
    out.reserve(s.len());
    let mut rest = s;
    while let Some((block, tail)) = rest.split_first_chunk::<BLOCK>() {
        out.extend_from_slice(block);
        rest = tail;
    }
    if !rest.is_empty()
        && let Some(last) = s.last_chunk::<BLOCK>()
    {
        out.truncate(out.len() - (BLOCK - rest.len()));
        out.extend_from_slice(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every length from 0 to 300 (each path and each boundary between them), from every
    /// alignment of the source and onto buffers of every small length: the bytes are those of
    /// `extend_from_slice`.
    #[test]
    fn append_matches_extend_from_slice() {
        let src: Vec<u8> = (0..400u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..=300 {
            for offset in 0..8 {
                for before in 0..3 {
                    let mut want = vec![0xAA; before];
                    let mut got = want.clone();
                    let s = &src[offset..offset + len];
                    want.extend_from_slice(s);
                    append(&mut got, s);
                    assert_eq!(got, want, "len {len}, offset {offset}, before {before}");
                }
            }
        }
    }

    /// Any run of appends, of any slices, builds what `extend_from_slice` builds. Every case
    /// reaches the comparison.
    #[test]
    fn appends_build_what_extend_builds() {
        crate::testkit::property(
            file!(),
            "appends_build_what_extend_builds",
            256,
            1.0,
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..20),
            |pieces, reach| {
                let mut want = Vec::new();
                let mut got = Vec::new();
                for p in &pieces {
                    want.extend_from_slice(p);
                    append(&mut got, p);
                }
                reach.reached();
                prop_assert_eq!(got, want);
                Ok(())
            },
        );
    }
}
