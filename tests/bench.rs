//! Smoke test of the benchmark (bench/run.py): on a tiny input it runs end to end against the
//! binary under test and prints a table with every row and a number for hooklog in each. It
//! proves the benchmark works; it asserts no performance figure (this machine is noisy).

use std::path::Path;
use std::process::Command;

/// The rows bench/run.py must print, by the start of their label.
const ROWS: [&str; 16] = [
    "Throughput, pre-written file",
    "CPU per 1M lines",
    "Peak RSS during that run",
    "Exec → first line on stdout",
    "Idle CPU",
    "Idle RSS",
    "Idle wake-ups",
    "Follow latency p50",
    "Follow latency p99",
    "Follow latency max",
    "Socket, 8 concurrent writers",
    "Socket lines interleaved",
    "Exec → socket accepts connections",
    "SIGTERM → exit",
    "Exit after the quiet period",
    "Binary size on disk",
];

/// A table cell as a number: `1,234.5`, `0.07`, `2.5×`.
fn number(cell: &str) -> Option<f64> {
    cell.trim()
        .trim_end_matches('×')
        .replace(',', "")
        .parse()
        .ok()
}

#[test]
fn bench_runs_on_a_tiny_input_and_prints_every_row() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().expect("temp dir");
    let python =
        which("python3").expect("python3 is needed to run bench/run.py: apt-get install python3");
    let run = Command::new(python)
        .arg(root.join("bench/run.py"))
        .args([
            "--lines",
            "2000",
            "--quick",
            "--bin",
            env!("CARGO_BIN_EXE_hooklog"),
        ])
        .arg("--out")
        .arg(out.path())
        .current_dir(root)
        .output()
        .expect("cannot run bench/run.py");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "bench/run.py failed: {}\n{stdout}\n{stderr}",
        run.status
    );

    let written = std::fs::read_to_string(out.path().join("results.md"))
        .expect("bench/out/results.md written");
    assert!(
        stdout.contains(written.trim()),
        "the printed table is the one written to results.md"
    );

    let header: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("| Metric"))
        .expect("a markdown table header")
        .split('|')
        .map(str::trim)
        .collect();
    let hooklog_col = header
        .iter()
        .position(|c| *c == "hooklog")
        .expect("a hooklog column");
    let ratio_cols: Vec<usize> = (0..header.len())
        .filter(|&i| header[i].starts_with("hooklog ÷"))
        .collect();
    assert_eq!(
        ratio_cols.len(),
        3,
        "a ratio column for cat, GNU tail and busybox tail: {header:?}"
    );

    for row in ROWS {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {row}")))
            .unwrap_or_else(|| panic!("row {row:?} missing from:\n{stdout}"));
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(
            cells.len(),
            header.len(),
            "row {row:?} has every column: {line}"
        );
        let value = number(cells[hooklog_col])
            .unwrap_or_else(|| panic!("row {row:?}: hooklog cell is not a number: {line}"));
        assert!(value.is_finite() && value >= 0.0, "row {row:?}: {value}");
        for &i in &ratio_cols {
            let c = cells[i];
            assert!(
                c == "–" || number(c).is_some(),
                "row {row:?}: ratio cell {c:?} is neither a number nor –"
            );
        }
    }
    // The socket check found every line whole and in order.
    let bad = stdout
        .lines()
        .find(|l| l.starts_with("| Socket lines interleaved"))
        .and_then(|l| number(l.split('|').nth(hooklog_col)?))
        .expect("interleaving row");
    assert_eq!(bad, 0.0, "socket lines were interleaved or lost:\n{stdout}");
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}
