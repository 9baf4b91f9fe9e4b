//! The protocol crate's integration tests: a snapshot of every wire type (so any change to
//! the wire is visible in review), encode→decode identity for every frame, and the fuzz
//! corpus run through the decoder.

mod corpus;
mod roundtrip;
mod snapshots;
