//! (the control plane) The shutdown budget of a pod with hooklog: the inequalities docs/fargate.md ("3. Deploy")
//! states for classic and native sidecars. `hooklog check`, `hooklog inject` and tests/k8s.rs all use this one.

use std::time::Duration;

/// How the hooklog sidecar runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SidecarMode {
    /// An init container with `restartPolicy: Always`: SIGTERM only after the app containers
    /// ended, so hooks and then `--grace` run one after the other.
    Native,
    /// A regular container: SIGTERM at once, and it waits for the hooks itself within `--grace`.
    Classic,
}

/// KEP-753 SidecarContainers: beta and on by default in 1.29. Below, a kubelet drops
/// `restartPolicy: Always` from init containers.
pub const NATIVE_SIDECAR_SINCE: (u32, u32) = (1, 29);

/// The `check` rule for a pod whose grace period cannot hold hooklog ([`Unfit`]); inject's note
/// names it.
pub const UNFIT_RULE: &str = "grace-period-cannot-fit-hooklog";

/// Seconds as a duration flag value, `15s`, or `1500ms` for a fraction.
pub fn secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// An inequality of the budget that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "--grace {grace:?} is not below terminationGracePeriodSeconds ({period:?}): the kubelet's SIGKILL can come before hooks.summary"
    )]
    GraceNotBelowPeriod { grace: Duration, period: Duration },
    #[error(
        "the longest hook ({longest:?}) + --grace {grace:?} is not below terminationGracePeriodSeconds ({period:?}): a native sidecar gets SIGTERM only after the hooks"
    )]
    NativeOverPeriod {
        longest: Duration,
        grace: Duration,
        period: Duration,
    },
    #[error(
        "the longest hook ({longest:?}) is not below --grace {grace:?}: hooklog stops waiting before it ends and reports it unfinished"
    )]
    ClassicHooksOutlastGrace { longest: Duration, grace: Duration },
}

/// Checks the budget: `grace < period` always; native: `longest + grace < period`; classic:
/// `longest < grace`. Returns every inequality that fails.
pub fn check(
    mode: SidecarMode,
    longest_hook: Duration,
    grace: Duration,
    period: Duration,
) -> Vec<BudgetError> {
    let mut out = Vec::new();
    if grace >= period {
        out.push(BudgetError::GraceNotBelowPeriod { grace, period });
    }
    match mode {
        SidecarMode::Native if grace < period && longest_hook + grace >= period => {
            out.push(BudgetError::NativeOverPeriod {
                longest: longest_hook,
                grace,
                period,
            })
        }
        SidecarMode::Classic if longest_hook >= grace => {
            out.push(BudgetError::ClassicHooksOutlastGrace {
                longest: longest_hook,
                grace,
            })
        }
        _ => {}
    }
    out
}

/// How long before the kubelet's own kill a wrapped hook of unknown length is stopped, so that
/// its end is reported: `hooklog hook --timeout` sends SIGTERM, then SIGKILL 1 s later
/// (`hook::KILL_AFTER`), reads what is left of the output and hands `hook.finished` over within
/// [`crate::hook::TIMED_OUT_REPORTED_WITHIN`] (1.5 s), which leaves its write half a second
/// before the kubelet's kill. This is the only time hooklog ever takes off a hook, and only off
/// one whose length nobody knows.
pub const REPORT_MARGIN: Duration = Duration::from_secs(2);

/// Time left within [`REPORT_MARGIN`] for writing `hook.finished` to the socket after it is
/// handed over: a local write, milliseconds even on a loaded node.
const FINISH_WRITE: Duration = Duration::from_millis(500);

// A hook that ignores SIGTERM is killed, drained and reported before the kubelet's kill.
const _: () = assert!(
    crate::hook::TIMED_OUT_REPORTED_WITHIN.as_millis() + FINISH_WRITE.as_millis()
        <= REPORT_MARGIN.as_millis()
);

/// What `inject` writes for one pod: `--grace`, and the `--timeout` of hooks of unknown length
/// (`None`: no such hook, or too short a period to leave a margin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub grace: Duration,
    pub timeout: Option<Duration>,
}

/// A pod whose `terminationGracePeriodSeconds` cannot hold its hooks' known sleeps and
/// hooklog's own time: inject leaves it unchanged, check says so, both with these numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfit {
    /// The longest hook's known length (its sleeps), seconds.
    pub longest_known: Duration,
    pub period: Duration,
}

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the hooks' known sleeps ({}s) and hooklog's {}s do not fit terminationGracePeriodSeconds {}",
            self.longest_known.as_secs_f64(),
            REPORT_MARGIN.as_secs(),
            self.period.as_secs()
        )
    }
}

impl std::error::Error for Unfit {}

impl Unfit {
    /// The smallest `terminationGracePeriodSeconds` that fits.
    pub fn needed(&self) -> u64 {
        (self.longest_known + REPORT_MARGIN).as_secs_f64().ceil() as u64
    }
}

/// The `--grace` and hook `--timeout` that `inject` writes for a pod whose
/// `terminationGracePeriodSeconds` is `period`, whose hooks sleep at least `longest_known`
/// (their known length: sleeps, `hooklog sleep`, the native sleep action) and of which
/// `unknown` hooks have no known end. Chosen so that [`check`] holds and no hook is cut:
/// - a hook of unknown length gets `--timeout` = period - [`REPORT_MARGIN`], just before the
///   kubelet's own kill, never earlier;
/// - native: a quarter of the period as grace when that fits, else what is left (at least 1 s);
///   classic: three quarters, or just above the longest hook.
///
/// `Err` when the period cannot hold the known sleeps plus [`REPORT_MARGIN`]: cutting a known
/// sleep (a load balancer's drain, a lame duck) is the incident hooklog exists to prevent.
pub fn plan(
    mode: SidecarMode,
    longest_known: Duration,
    unknown: bool,
    period: Duration,
) -> Result<Plan, Unfit> {
    let unfit = Unfit {
        longest_known,
        period,
    };
    if longest_known + REPORT_MARGIN > period {
        return Err(unfit);
    }
    let timeout = (unknown && period > REPORT_MARGIN).then(|| period - REPORT_MARGIN);
    let longest = longest_known.max(timeout.unwrap_or_default());
    let one = Duration::from_secs(1);
    let grace = match mode {
        SidecarMode::Native => {
            let quarter = Duration::from_secs(period.as_secs() / 4).max(one);
            if longest + quarter < period {
                quarter
            } else {
                // Whole seconds, at least one, below what the hooks leave.
                let left = period.saturating_sub(longest).as_secs().saturating_sub(1);
                Duration::from_secs(left.max(1))
            }
        }
        SidecarMode::Classic => {
            let three_quarters = Duration::from_secs(period.as_secs() * 3 / 4);
            let above = Duration::from_secs(longest.as_secs_f64().floor() as u64 + 1);
            three_quarters.max(above)
        }
    };
    if check(mode, longest, grace, period).is_empty() {
        Ok(Plan { grace, timeout })
    } else {
        Err(unfit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn inequalities() {
        assert!(check(SidecarMode::Native, S(30), S(15), S(60)).is_empty());
        assert!(check(SidecarMode::Classic, S(30), S(45), S(60)).is_empty());
        assert_eq!(check(SidecarMode::Native, S(50), S(15), S(60)).len(), 1);
        assert_eq!(check(SidecarMode::Classic, S(50), S(45), S(60)).len(), 1);
        assert_eq!(check(SidecarMode::Classic, S(10), S(60), S(60)).len(), 1);
    }

    #[test]
    fn plans_fit_the_inequalities_and_never_cut_a_known_sleep() {
        // k8s/: 60 s, a known 20 s sleep and a hook of unknown length.
        assert_eq!(
            plan(SidecarMode::Native, S(20), true, S(60)),
            Ok(Plan {
                grace: S(1),
                timeout: Some(S(58))
            })
        );
        assert_eq!(
            plan(SidecarMode::Native, S(20), false, S(60)),
            Ok(Plan {
                grace: S(15),
                timeout: None
            })
        );
        assert_eq!(
            plan(SidecarMode::Classic, S(20), true, S(60)),
            Ok(Plan {
                grace: S(59),
                timeout: Some(S(58))
            })
        );
        for period in [0, 1, 2, 3, 5, 30, 31, 60, 300] {
            for known in [0, 1, 10, 28, 29, 45, 58, 59, 60] {
                for unknown in [false, true] {
                    for mode in [SidecarMode::Native, SidecarMode::Classic] {
                        match plan(mode, S(known), unknown, S(period)) {
                            Ok(p) => {
                                let longest = S(known).max(p.timeout.unwrap_or_default());
                                assert!(check(mode, longest, p.grace, S(period)).is_empty());
                                assert!(p.grace >= S(1));
                                if let Some(t) = p.timeout {
                                    // Never before the kubelet's kill less the margin, never
                                    // before a known sleep ends.
                                    assert_eq!(t + REPORT_MARGIN, S(period));
                                    assert!(t >= S(known));
                                }
                            }
                            Err(u) => {
                                assert!(known + 2 > period, "{mode:?} {known} {period}");
                                assert_eq!(u.needed(), known + 2);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_two_real_cases() {
        // A `curl ... && sleep 20` drain in the default 30 s: the timeout lets the 20 s run.
        let p = plan(SidecarMode::Native, S(20), true, S(30)).unwrap();
        assert_eq!(p.timeout, Some(S(28)));
        // NATS's lame duck, `/bin/sleep 60` with terminationGracePeriodSeconds 60: no room.
        let e = plan(SidecarMode::Native, S(60), false, S(60)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the hooks' known sleeps (60s) and hooklog's 2s do not fit terminationGracePeriodSeconds 60"
        );
        assert_eq!(e.needed(), 62);
    }
}
