//! Planning: what runs where, decided without touching a host or the store. `planner`
//! turns a campaign and the agents' inventories into cells and per-host plans (pure, ids
//! from content hashes); `rounds` is adaptive repetition's rule (when a cell has measured
//! enough), which the store's writer applies when a round's plan ends
//! (`store::rounds::next_round`) and the report states; `text` is what `platter
//! validate` prints of a planned campaign.
//!
//! Beneath the service and the store; above `spec` and `stats`.

pub mod planner;
pub mod rounds;
pub mod steady;
pub mod text;
