//! (the sidecar) Line framing: turns a byte stream into lines, capping each at a maximum length so that memory
//! stays bounded whatever a writer sends. A line longer than the cap comes out as several frames.

/// How a frame ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameEnd {
    /// A newline ended the line.
    Newline,
    /// The line was longer than the cap: it continues in the next frame.
    Cut,
    /// The stream ended (writer gone, file rotated away, shutdown) before a newline came.
    Eof,
}

/// One piece of a line, borrowed from the framer or the input chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The bytes, without the newline.
    pub bytes: &'a [u8],
    /// True when an earlier frame of the same line was cut.
    pub continued: bool,
    /// How this frame ended.
    pub end: FrameEnd,
}

/// Splits a byte stream into frames. One framer per stream (file or connection): it holds at most
/// `max` bytes of an unfinished line.
#[derive(Debug)]
pub struct Framer {
    /// The unfinished tail of the last chunk, always shorter than `max`.
    pending: Vec<u8>,
    /// The cap on one frame's length, in bytes.
    max: usize,
    /// True when the line in progress already had a frame cut off.
    continued: bool,
}

impl Framer {
    /// A framer whose frames are at most `max` bytes (at least 4, so a UTF-8 character fits).
    pub fn new(max: usize) -> Self {
        Framer {
            pending: Vec::new(),
            max: max.max(4),
            continued: false,
        }
    }

    /// Bytes of an unfinished line held.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Feeds a chunk, calling `emit` for every frame it completes.
    pub fn feed(&mut self, chunk: &[u8], mut emit: impl FnMut(Frame<'_>)) {
        let used = self.feed_some(chunk, |f| {
            emit(f);
            true
        });
        debug_assert_eq!(used, chunk.len());
    }

    /// Feeds a chunk until `emit` returns false after a whole line: returns how many bytes of
    /// `chunk` were consumed, so the caller can hand the rest in again (after sending a full
    /// batch, say). Everything is consumed when `emit` never returns false.
    pub fn feed_some(&mut self, chunk: &[u8], mut emit: impl FnMut(Frame<'_>) -> bool) -> usize {
        let mut rest = chunk;
        while let Some(i) = memchr::memchr(b'\n', rest) {
            let line = &rest[..i];
            rest = &rest[i + 1..];
            let more = if self.pending.is_empty() {
                self.emit_long(line, FrameEnd::Newline, &mut emit)
            } else {
                self.append(line, &mut emit);
                let pending = std::mem::take(&mut self.pending);
                let more = emit(Frame {
                    bytes: &pending,
                    continued: self.continued,
                    end: FrameEnd::Newline,
                });
                self.pending = pending;
                self.pending.clear();
                more
            };
            self.continued = false;
            if !more {
                return chunk.len() - rest.len();
            }
        }
        self.append(rest, &mut emit);
        chunk.len()
    }

    /// Ends the stream: a held unfinished line comes out as a frame ending in `Eof`.
    pub fn finish(&mut self, mut emit: impl FnMut(Frame<'_>)) {
        if !self.pending.is_empty() || self.continued {
            emit(Frame {
                bytes: &self.pending,
                continued: self.continued,
                end: FrameEnd::Eof,
            });
        }
        self.pending.clear();
        self.continued = false;
    }

    /// Appends to the unfinished line, cutting off frames while it reaches the cap.
    fn append(&mut self, mut bytes: &[u8], emit: &mut impl FnMut(Frame<'_>) -> bool) {
        while self.pending.len() + bytes.len() >= self.max {
            if self.pending.is_empty() {
                let cut = whole_chars(&bytes[..cut_point(bytes, self.max)]);
                emit(Frame {
                    bytes: &bytes[..cut],
                    continued: self.continued,
                    end: FrameEnd::Cut,
                });
                bytes = &bytes[cut..];
            } else {
                let take = self.max - self.pending.len();
                self.pending.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                let cut = whole_chars(&self.pending[..cut_point(&self.pending, self.max)]);
                emit(Frame {
                    bytes: &self.pending[..cut],
                    continued: self.continued,
                    end: FrameEnd::Cut,
                });
                self.pending.drain(..cut);
            }
            self.continued = true;
        }
        self.pending.extend_from_slice(bytes);
    }

    /// Emits a whole line that may be longer than the cap; returns what `emit` said of its last
    /// frame.
    fn emit_long(
        &mut self,
        mut line: &[u8],
        end: FrameEnd,
        emit: &mut impl FnMut(Frame<'_>) -> bool,
    ) -> bool {
        while line.len() > self.max {
            let cut = cut_point(line, self.max);
            emit(Frame {
                bytes: &line[..cut],
                continued: self.continued,
                end: FrameEnd::Cut,
            });
            self.continued = true;
            line = &line[cut..];
        }
        emit(Frame {
            bytes: line,
            continued: self.continued,
            end,
        })
    }
}

/// Where to cut `bytes` to at most `max` bytes without splitting a UTF-8 character.
pub fn cut_point(bytes: &[u8], max: usize) -> usize {
    if bytes.len() <= max {
        return bytes.len();
    }
    // Step back over at most three continuation bytes (10xxxxxx) to a character start.
    (max.saturating_sub(3)..=max)
        .rev()
        .find(|&i| i > 0 && bytes[i] & 0xC0 != 0x80)
        .unwrap_or(max)
}

/// The length of `bytes` without a character begun in its last three bytes and not finished
/// there: a frame cut at exactly the cap, with the rest of the line not read yet, must leave a
/// character that straddles the cap to the next frame (`F0 | 9F 98 80` came out as four U+FFFD
/// instead of 😀: found by record's property). Never 0: a frame of only such bytes stays whole.
fn whole_chars(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let b = bytes[len - back];
        if b & 0xC0 == 0x80 {
            continue;
        }
        let need = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if need > back && len > back {
            len - back
        } else {
            len
        };
    }
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames(max: usize, chunks: &[&[u8]], finish: bool) -> Vec<(Vec<u8>, bool, FrameEnd)> {
        let mut f = Framer::new(max);
        let mut out = Vec::new();
        for c in chunks {
            f.feed(c, |fr| out.push((fr.bytes.to_vec(), fr.continued, fr.end)));
        }
        if finish {
            f.finish(|fr| out.push((fr.bytes.to_vec(), fr.continued, fr.end)));
        }
        out
    }

    #[test]
    fn splits_lines_across_chunks() {
        let out = frames(100, &[b"ab", b"c\nde\n\nf"], true);
        assert_eq!(
            out,
            vec![
                (b"abc".to_vec(), false, FrameEnd::Newline),
                (b"de".to_vec(), false, FrameEnd::Newline),
                (b"".to_vec(), false, FrameEnd::Newline),
                (b"f".to_vec(), false, FrameEnd::Eof),
            ]
        );
    }

    #[test]
    fn cuts_long_lines_and_marks_continuations() {
        let out = frames(4, &[b"0123456789\nxy\n"], false);
        assert_eq!(
            out,
            vec![
                (b"0123".to_vec(), false, FrameEnd::Cut),
                (b"4567".to_vec(), true, FrameEnd::Cut),
                (b"89".to_vec(), true, FrameEnd::Newline),
                (b"xy".to_vec(), false, FrameEnd::Newline),
            ]
        );
    }

    #[test]
    fn never_cuts_inside_a_utf8_character() {
        let line = "aé€😀é".repeat(20);
        let mut input = line.clone().into_bytes();
        input.push(b'\n');
        for max in 4..16 {
            for piece in frames(max, &[&input], false) {
                assert!(piece.0.len() <= max);
                assert!(
                    std::str::from_utf8(&piece.0).is_ok(),
                    "max {max}: {:?}",
                    piece.0
                );
            }
        }
    }

    /// A frame cut at exactly the cap (the pending part and the new chunk fill it) used to cut
    /// a 4-byte character after its first byte; every frame must be valid UTF-8 when the input is.
    #[test]
    fn a_character_across_the_cap_stays_whole() {
        let smile = "😀".as_bytes();
        for max in 4..12 {
            for lead in 0..max + 4 {
                let mut line = vec![b'x'; lead];
                line.extend_from_slice(smile);
                line.extend_from_slice(b"yy\n");
                for split in 0..line.len() {
                    let (a, b) = line.split_at(split);
                    for piece in frames(max, &[a, b], true) {
                        assert!(
                            std::str::from_utf8(&piece.0).is_ok(),
                            "max {max}, lead {lead}, split {split}: {:?}",
                            piece.0
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn eof_without_data_after_a_cut_still_ends_the_line() {
        let out = frames(4, &[b"abcd"], true);
        assert_eq!(
            out,
            vec![
                (b"abcd".to_vec(), false, FrameEnd::Cut),
                (b"".to_vec(), true, FrameEnd::Eof),
            ]
        );
    }

    #[test]
    fn feed_some_stops_after_a_whole_line_and_resumes() {
        let mut f = Framer::new(100);
        let input = b"one\ntwo\nthree\npart";
        let mut got = Vec::new();
        let used = f.feed_some(input, |fr| {
            got.push(fr.bytes.to_vec());
            got.len() < 2
        });
        assert_eq!(used, 8, "stopped after \"two\\n\"");
        assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
        let used2 = f.feed_some(&input[used..], |fr| {
            got.push(fr.bytes.to_vec());
            true
        });
        assert_eq!(used + used2, input.len());
        f.finish(|fr| got.push(fr.bytes.to_vec()));
        assert_eq!(
            got,
            vec![
                b"one".to_vec(),
                b"two".to_vec(),
                b"three".to_vec(),
                b"part".to_vec()
            ]
        );
    }

    /// Whatever the chunking, the frames reassemble to exactly the input lines, each frame
    /// is within the cap, and the framer never holds more than the cap. Counts the cases with
    /// at least one line.
    #[test]
    fn frames_reassemble_to_the_input() {
        let strategy = (
            proptest::collection::vec(
                prop_oneof![
                    Just(b'\n'),
                    Just(b'a'),
                    Just(0xC3u8),
                    Just(0xA9u8),
                    any::<u8>()
                ],
                0..400,
            ),
            proptest::collection::vec(0usize..400, 0..8),
            4usize..40,
        );
        crate::testkit::property(
            file!(),
            "frames_reassemble_to_the_input",
            256,
            0.9,
            strategy,
            |(data, cuts, max), reach| {
                let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
                bounds.push(0);
                bounds.push(data.len());
                bounds.sort();
                let mut f = Framer::new(max);
                let mut lines: Vec<Vec<u8>> = Vec::new();
                let mut current: Vec<u8> = Vec::new();
                let mut open = false;
                let mut on_frame = |fr: Frame<'_>, lines: &mut Vec<Vec<u8>>| {
                    assert!(fr.bytes.len() <= max);
                    assert_eq!(fr.continued, open, "continued flag must track cut frames");
                    current.extend_from_slice(fr.bytes);
                    if fr.end == FrameEnd::Cut {
                        open = true;
                    } else {
                        open = false;
                        lines.push(std::mem::take(&mut current));
                    }
                };
                for w in bounds.windows(2) {
                    f.feed(&data[w[0]..w[1]], |fr| on_frame(fr, &mut lines));
                    prop_assert!(f.pending_len() < max);
                }
                f.finish(|fr| on_frame(fr, &mut lines));
                let mut expected: Vec<Vec<u8>> =
                    data.split(|&b| b == b'\n').map(|l| l.to_vec()).collect();
                if data.last() == Some(&b'\n') || data.is_empty() {
                    expected.pop();
                }
                if !expected.is_empty() {
                    reach.reached();
                }
                prop_assert_eq!(lines, expected);
                Ok(())
            },
        );
    }
}
