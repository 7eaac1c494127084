//! Benchmark helper: reads stdin until N newlines have arrived (optionally copying what it read
//! to a file), prints the count and exits 0, or 1 if stdin ended first. A Python reader tops out
//! near 600 MB/s on the benchmark machine, below what `cat` and hooklog write; this one keeps up
//! with a pipe. Built by bench/run.py with plain `rustc -O`, standard library only.

use std::io::{Read, Write};

/// Bytes per read: the pipe is enlarged to 1 MiB, so one read can drain it.
const READ_BUF: usize = 1 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let want: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .expect("usage: count_lines N [COPY_FILE]");
    let mut copy = args
        .get(2)
        .map(|p| std::fs::File::create(p).expect("cannot create the copy file"));
    let mut buf = vec![0u8; READ_BUF];
    let mut stdin = std::io::stdin().lock();
    let mut seen = 0u64;
    while seen < want {
        let n = match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("cannot read stdin: {e}"),
        };
        seen += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        if let Some(f) = copy.as_mut() {
            f.write_all(&buf[..n]).expect("cannot write the copy file");
        }
    }
    println!("{seen}");
    std::process::exit(if seen >= want { 0 } else { 1 });
}
