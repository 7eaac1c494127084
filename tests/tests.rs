//! Integration tests: the real `hooklog` binary, real shells writing, real signals.

mod util;

mod cli;
mod image;
mod k8s;
mod socket;
mod tail;
