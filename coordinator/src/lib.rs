//! platter's coordinator: campaigns (spec), cells and plans (planner), the store, the
//! scheduler (hub), the gRPC services (rpc), reports, and the CLI that drives them.

pub mod cli;
#[doc(hidden)]
pub mod fuzz;
pub mod hub;
pub mod operator;
pub mod pki;
pub mod plan_text;
pub mod planner;
pub mod presence;
pub mod report;
pub mod rounds;
pub mod rpc;
pub mod server;
pub mod spec;
pub mod status;
pub mod store;
pub mod tls;
