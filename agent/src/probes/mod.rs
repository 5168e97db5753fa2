//! What the agent reads about its host: block devices (`inventory`), their I/O counters
//! (`diskstats`), mounts (`mountinfo`), what a run ran on (`provenance`) and the programs
//! plans may run (`tools`). Read-only; nothing here changes the system.

pub(crate) mod diskstats;
pub(crate) mod health;
pub(crate) mod inventory;
pub(crate) mod mountinfo;
pub(crate) mod provenance;
pub(crate) mod tools;
