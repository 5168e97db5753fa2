//! Constants both ends of the AgentLink stream must agree on.

use std::time::Duration;

/// How often an agent sends a heartbeat while its stream is open. The coordinator's
/// heartbeat timeout (after which an agent is lost) defaults to three of these and is
/// never below two.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// The largest message an agent takes (a plan); the coordinator refuses to plan a
/// larger one. tonic's default, 4 MiB, held a plan of 8 cells × 1,000 repetitions of a
/// 600-character command undeliverable for good.
pub const MAX_PLAN_BYTES: usize = 64 << 20;
