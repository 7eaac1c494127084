//! Integration tests: the real `hooklog` binary, real shells writing, real signals.

mod util;

mod cli;
mod socket;
mod tail;
