//! `hooklog hook`, `sleep`, `install` and `emit` on their own: the wrapper without a daemon.
