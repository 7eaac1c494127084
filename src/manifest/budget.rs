//! The shutdown budget of a pod with hooklog: the inequalities the README states for classic
//! and native sidecars. `hooklog check`, `hooklog inject` and tests/k8s.rs all use this one.

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

/// The `--grace` and hook `--timeout` (for hooks of unknown length) that `inject` writes for a
/// pod whose `terminationGracePeriodSeconds` is `period`, when its known hooks last at most
/// `longest_known`. Chosen so that [`check`] holds: native gets a quarter of the period as
/// grace, classic three quarters; unknown hooks get half the period (k8s/: 60 s gives 15 s or
/// 45 s and 30 s). `None` when no choice fits (a known hook as long as the period).
pub fn plan(
    mode: SidecarMode,
    longest_known: Duration,
    period: Duration,
) -> Option<(Duration, Duration)> {
    let secs = period.as_secs();
    let timeout = Duration::from_secs((secs / 2).max(1));
    let longest = longest_known.max(timeout);
    let grace = match mode {
        SidecarMode::Native => {
            let g = Duration::from_secs((secs / 4).max(1));
            if longest + g < period {
                g
            } else {
                // Whatever is left, if anything.
                period.checked_sub(longest + Duration::from_secs(1))?
            }
        }
        SidecarMode::Classic => {
            let g = Duration::from_secs(secs * 3 / 4);
            if longest < g {
                g
            } else {
                longest + Duration::from_secs(1)
            }
        }
    };
    (grace > Duration::ZERO && check(mode, longest, grace, period).is_empty())
        .then_some((grace, timeout))
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
    fn plans_fit_the_inequalities() {
        assert_eq!(
            plan(SidecarMode::Native, S(20), S(60)),
            Some((S(15), S(30)))
        );
        assert_eq!(
            plan(SidecarMode::Classic, S(20), S(60)),
            Some((S(45), S(30)))
        );
        for period in [1, 2, 5, 30, 31, 60, 300] {
            for known in [0, 1, 10, 29, 45, 59] {
                for mode in [SidecarMode::Native, SidecarMode::Classic] {
                    if let Some((g, t)) = plan(mode, S(known), S(period)) {
                        assert!(check(mode, S(known).max(t), g, S(period)).is_empty());
                    } else {
                        assert!(
                            known + 1 >= period || period <= 2,
                            "{mode:?} {known} {period}"
                        );
                    }
                }
            }
        }
    }
}
