//! platter's contract: what the coordinator and the agent both speak. The gRPC schema
//! (`v1`, generated from `platter/v1/*.proto`), the domain model of plans and results
//! (`model`, with its ids in `ids`), what an agent reports about its drives (`inventory`) and about what a run
//! ran on (`provenance`), the conversions between the domain types and the wire
//! (`wire`: the one place both meet), the constants of the protocol (`protocol`), the
//! client side of mutual TLS that agents and operator commands share (`tls`), and the
//! lock that keeps a second process off a store or an agent's state directory (`lock`).
//! Both sides depend on this crate; neither reaches into the other.

pub mod codec;
pub mod ids;
pub mod inventory;
pub mod lock;
pub mod model;
pub mod protocol;
pub mod provenance;
pub mod tls;
pub mod wire;

/// The generated gRPC types of `platter.v1`. Only `wire`, the coordinator's `rpc` layer,
/// and the agent's `link` use them; everything else works on the domain types.
// prost lays out a oneof as an enum of its messages: a provenance record's host facts make
// one variant large. These values live for one message's encoding or decoding; boxing
// them (prost's `boxed`) would buy nothing but allocations.
#[allow(clippy::large_enum_variant)]
pub mod v1 {
    tonic::include_proto!("platter.v1");
}
