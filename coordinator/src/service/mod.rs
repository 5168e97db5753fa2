//! The coordinator as a service: what runs inside `platter serve` (and, on loopback,
//! inside `platter run`). `server` starts it (listener first, then the store, then both
//! gRPC services); `rpc` holds the services, the only code here that touches generated
//! proto types; `hub` keeps the connected agents and dispatches plans to them;
//! `presence` tells, on a shared store, which coordinator holds which agent; `status`
//! adds up a campaign's progress from the store and the hub; `task_stream` feeds the
//! answers that go on (watch, a console page's events); `tls` is the server side of
//! mutual TLS and the role each call needs; `http` serves health, readiness and Prometheus
//! metrics (`--http`); `alerts` raises flags and delivers the alerts they owe.
//!
//! Beneath the service: the store (`crate::store`), planning (`crate::planning`) and the
//! reports (`crate::report`); nothing there imports the service.

pub mod alerts;
pub mod campaigns;
pub mod http;
pub mod hub;
pub mod presence;
pub mod rpc;
pub mod schedules;
pub mod server;
pub mod status;
pub mod task_stream;
pub mod tickets;
pub mod tls;
