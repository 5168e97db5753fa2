//! A campaign made ready to store: parsed, its label selectors resolved against the known
//! agents, planned against their inventories, each host's plan held to one message. The
//! one path a submission takes, whether an operator sends it (`rpc::control`) or a
//! schedule fires it (`schedules`).

use crate::planning::planner::{self, PlannedCampaign};
use crate::spec;
use crate::store::{Store, StoreError};

/// Why a campaign cannot be planned.
#[derive(Debug)]
pub enum Unplanned {
    /// The campaign file itself: every mistake found.
    Invalid(spec::SpecErrors),
    /// It parsed, but cannot run on this fleet (no host matches, a plan too large): the
    /// words are the whole message.
    Refused(String),
    Store(StoreError),
}

/// The content hash a campaign is stored under: of the campaign with its label selectors
/// resolved, as `expand` plans it, so that its generation and a resumable run are looked
/// up under the hash its runs were stored with. (Hashed as written, a campaign that
/// selects hosts by label was never found again: every later submission or firing of it
/// was given generation 1 and refused as a duplicate.)
pub fn stored_hash(
    store: &Store,
    limits: &spec::Limits,
    file_name: &str,
    yaml: &str,
    local_host: &str,
) -> Result<String, Unplanned> {
    let campaign = resolved(store, limits, file_name, yaml)?;
    planner::content_hash(&campaign, local_host).map_err(|e| Unplanned::Refused(e.to_string()))
}

/// The campaign parsed, its label selectors resolved against the known agents.
fn resolved(
    store: &Store,
    limits: &spec::Limits,
    file_name: &str,
    yaml: &str,
) -> Result<spec::Campaign, Unplanned> {
    let mut campaign = spec::parse_with(file_name, yaml, limits).map_err(Unplanned::Invalid)?;
    let labels = store.labels().map_err(Unplanned::Store)?;
    campaign
        .select_hosts(&labels)
        .map_err(|e| Unplanned::Refused(format!("{file_name}:{e}")))?;
    Ok(campaign)
}

/// Parses a campaign, resolves its label selectors against the known agents and plans it
/// against their inventories.
pub fn expand(
    store: &Store,
    limits: &spec::Limits,
    file_name: &str,
    yaml: &str,
    local_host: &str,
    generation: u32,
) -> Result<(spec::Campaign, PlannedCampaign), Unplanned> {
    let campaign = resolved(store, limits, file_name, yaml)?;
    let inventories = store.inventories().map_err(Unplanned::Store)?;
    let planned = planner::plan(&campaign, local_host, store.id(), generation, &inventories)
        .map_err(|e| match e {
            planner::PlanError::LocalWithoutRun => e.to_string(),
            e => format!("{file_name}:{e}"),
        })
        .map_err(Unplanned::Refused)?;
    // A plan must fit one message to its agent (with room for the envelope).
    for p in &planned.plans {
        let bytes = platter_proto::wire::plan_wire_len(p);
        if bytes + 1024 > platter_proto::protocol::MAX_PLAN_BYTES {
            return Err(Unplanned::Refused(format!(
                "{file_name}: the plan for host {} would be {:.1} MiB on the wire; the limit is {} MiB (MAX_PLAN_BYTES): fewer repetitions, cells or shorter commands",
                p.host,
                bytes as f64 / 1048576.0,
                platter_proto::protocol::MAX_PLAN_BYTES >> 20
            )));
        }
    }
    Ok((campaign, planned))
}
