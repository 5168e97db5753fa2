//! platter's coordinator: campaigns (spec), cells and plans (planner), the store, the
//! scheduler (hub), the gRPC services (rpc), reports, and the CLI that drives them.

pub mod cli;
pub mod client;
#[doc(hidden)]
pub mod fuzz;
pub mod pki;
pub mod planning;
pub mod report;
pub mod service;
pub mod spec;
pub mod stats;
pub mod store;
pub mod views;
