//! Test-only: how many of a property's generated cases reached its assertion. A property that
//! filters almost every case away (an `if let` that rarely matches, a `prop_assume!`) passes
//! while checking nothing; [`Reach::check`] fails it below a stated share and prints the count.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts a property's cases and those that reached its assertion.
pub(crate) struct Reach {
    /// The property's name, for the report.
    name: &'static str,
    /// Cases generated and run.
    cases: AtomicU64,
    /// Cases that reached the assertion the property is named for.
    reached: AtomicU64,
}

impl Reach {
    /// A counter for the property `name`.
    pub(crate) const fn new(name: &'static str) -> Reach {
        Reach {
            name,
            cases: AtomicU64::new(0),
            reached: AtomicU64::new(0),
        }
    }

    /// One case ran.
    pub(crate) fn case(&self) {
        self.cases.fetch_add(1, Ordering::Relaxed);
    }

    /// The case reached its assertion.
    pub(crate) fn reached(&self) {
        self.reached.fetch_add(1, Ordering::Relaxed);
    }

    /// Prints `reached/cases` and panics when fewer than `min_share` (0 to 1) of the cases
    /// reached their assertion.
    pub(crate) fn check(&self, min_share: f64) {
        let cases = self.cases.load(Ordering::Relaxed);
        let reached = self.reached.load(Ordering::Relaxed);
        let share = reached as f64 / cases.max(1) as f64;
        eprintln!(
            "property {}: {reached} of {cases} cases reached the assertion ({:.0}%, at least {:.0}% needed)",
            self.name,
            share * 100.0,
            min_share * 100.0
        );
        assert!(
            cases > 0 && share >= min_share,
            "property {}: only {reached} of {cases} cases reached the assertion, under {:.0}%",
            self.name,
            min_share * 100.0
        );
    }
}

/// Runs `test` on `cases` values of `strategy` (proptest's runner, with shrinking; what fails is
/// kept in `proptest-regressions/` beside `source`, the caller's `file!()`), counts the cases that
/// call [`Reach::reached`], and fails below `min_share`.
pub(crate) fn property<S: proptest::strategy::Strategy>(
    source: &'static str,
    name: &'static str,
    cases: u32,
    min_share: f64,
    strategy: S,
    test: impl Fn(S::Value, &Reach) -> proptest::test_runner::TestCaseResult,
) {
    let reach = Reach::new(name);
    let config = proptest::test_runner::Config {
        cases,
        source_file: Some(source),
        ..Default::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&strategy, |v| {
        reach.case();
        test(v, &reach)
    });
    if let Err(e) = result {
        panic!("property {name}: {e}");
    }
    reach.check(min_share);
}
