//! Integration tests: the real `hooklog` binary, real shells writing, real signals.

mod util;

mod cli;
mod cloudwatch;
mod socket;
mod tail;
