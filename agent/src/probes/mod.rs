//! What the agent reads about its host: block devices (`inventory`), their I/O counters
//! (`diskstats`), mounts (`mountinfo`) and what a run ran on (`provenance`). Read-only; nothing here changes
//! the system.

pub(crate) mod diskstats;
pub(crate) mod inventory;
pub(crate) mod mountinfo;
pub(crate) mod provenance;
