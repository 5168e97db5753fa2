//! What the scale benches share: the fake agents and the processes they watch.
// Each bench uses a part of these; what one bench leaves unused another uses.
#![allow(dead_code)]

pub mod agents;
pub mod children;
pub mod procs;
