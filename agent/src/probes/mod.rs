//! What the agent reads about its host: block devices (`inventory`) and their I/O
//! counters (`diskstats`). Read-only; nothing here changes the system.

pub mod diskstats;
pub mod inventory;
