//! The gRPC layer: the only code of the coordinator that touches generated proto types.

pub mod agent_link;
pub mod control;
mod schedules;
