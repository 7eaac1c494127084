//! (the control plane) YAML text read and edited in place, byte for byte, below [`crate::manifest`]
//! as kustomize's kyaml is below its commands: nothing here names a pod or a hook.
//!
//! [`tree`] reads YAML as Kubernetes does (go-yaml v2, YAML 1.1), with every node's place in the
//! text, [`splice`] writes a change back into that text, [`emit`] writes YAML that YAML 1.1
//! readers (kubectl, Helm) read the same, [`spool`] holds output until it all reads back, and
//! [`digest`] is what that read-back compares.

pub mod digest;
pub mod emit;
pub mod splice;
pub mod spool;
pub mod tree;
