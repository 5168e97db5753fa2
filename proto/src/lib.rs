//! The generated gRPC types of `platter.v1`. Only the coordinator's `rpc` layer and the
//! agent's `link` layer use them; everything else works on domain types.

pub mod v1 {
    tonic::include_proto!("platter.v1");
}
