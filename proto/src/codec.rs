//! The protobuf codec of platter's gRPC services: tonic's prost codec with small buffers.
//!
//! tonic gives every stream an 8 KiB encode and an 8 KiB decode buffer up front, whatever
//! its messages weigh; a coordinator holding 10,000 agent streams paid ~16 KiB per agent
//! for buffers that carry 50-byte heartbeats (BENCHMARKS.md, fleet scale: heaptrack). A
//! buffer still grows as a message needs: a plan of megabytes arrives whole
//! (tests/limits.rs).

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// What a stream's encode and decode buffers start with; tonic's yield threshold (32 KiB,
/// how much a stream encodes before it lets other work run) is kept.
const SETTINGS: (usize, usize) = (1024, 32 << 10);

/// `tonic_prost::ProstCodec` with `SETTINGS` (the generated services' `codec_path`).
pub struct SmallBuffers<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SmallBuffers<T, U> {
    fn default() -> Self {
        SmallBuffers(PhantomData)
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(SETTINGS.0, SETTINGS.1)
}

impl<T, U> Codec for SmallBuffers<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
