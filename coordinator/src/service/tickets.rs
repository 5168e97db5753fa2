//! TLS session tickets that every coordinator of one fleet can open, so that an agent whose
//! coordinator died resumes its session with the next one instead of a full handshake
//! (issue 32: a failover of 10,000 agents was ~6 s of handshake CPU on 2 cores).
//!
//! A ticket is the session's state sealed with AES-256-GCM under a key derived (HKDF-SHA256)
//! from the coordinator's private key and the fleet CA, and from the ticket's epoch: the
//! coordinators that serve one certificate (one service name, as a fleet's coordinators
//! behind one address do) derive the same keys, with nothing to distribute or store;
//! coordinators with keys of their own do not open each other's tickets and their agents
//! handshake in full. Keys turn over every `EPOCH`; a ticket opens during its epoch and
//! the next, then a full handshake takes its place. A new CA or a new coordinator key
//! makes every older ticket unopenable.
//!
//! Written here rather than taken from rustls: its `Ticketer` makes random keys per
//! process, which no other coordinator can open.
//!
//! What resumption skips, and where it is done instead: the client presents no
//! certificate on a resumed session; rustls gives the connection the chain from the
//! ticket, which this coordinator (or one with its key) verified when the session began.
//! `tls::resumed_refusal` checks again what may have changed since: the certificate's
//! validity period (a ticket outlives no certificate) and its platter role.

use std::time::{SystemTime, UNIX_EPOCH};

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::hkdf;
use ring::rand::{SecureRandom, SystemRandom};
use tokio_rustls::rustls::server::ProducesTickets;

/// How long one key seals tickets; a ticket opens for up to twice this.
const EPOCH_SECS: u64 = 6 * 3600;
const SALT: &[u8] = b"platter TLS session tickets v1";

/// `ProducesTickets` with keys every coordinator holding the same secret derives alike.
pub struct FleetTickets {
    prk: hkdf::Prk,
    rng: SystemRandom,
    /// Seconds since the epoch now; a test's clock.
    now: fn() -> u64,
}

impl std::fmt::Debug for FleetTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetTickets")
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl FleetTickets {
    /// Tickets sealed under keys derived from `secret` (the coordinator's private key and
    /// the CA certificate, as bytes).
    pub fn new(secret: &[&[u8]]) -> FleetTickets {
        FleetTickets::with_clock(secret, unix_now)
    }

    fn with_clock(secret: &[&[u8]], now: fn() -> u64) -> FleetTickets {
        let mut ikm = Vec::new();
        for part in secret {
            ikm.extend_from_slice(&(part.len() as u64).to_le_bytes());
            ikm.extend_from_slice(part);
        }
        FleetTickets {
            prk: hkdf::Salt::new(hkdf::HKDF_SHA256, SALT).extract(&ikm),
            rng: SystemRandom::new(),
            now,
        }
    }

    fn key(&self, epoch: u64) -> Option<LessSafeKey> {
        let info = epoch.to_be_bytes();
        let info = [&info[..]];
        let okm = self.prk.expand(&info, &AES_256_GCM).ok()?;
        Some(LessSafeKey::new(UnboundKey::from(okm)))
    }

    fn epoch(&self) -> u64 {
        (self.now)() / EPOCH_SECS
    }
}

impl ProducesTickets for FleetTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        EPOCH_SECS as u32
    }

    /// epoch (8 bytes) ‖ nonce (12) ‖ sealed state and tag.
    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let epoch = self.epoch();
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut out = Vec::with_capacity(8 + NONCE_LEN + plain.len() + 16);
        out.extend_from_slice(&epoch.to_be_bytes());
        out.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        self.key(epoch)?
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(epoch.to_be_bytes()),
                &mut sealed,
            )
            .ok()?;
        out.extend_from_slice(&sealed);
        Some(out)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let (epoch, rest) = cipher.split_first_chunk::<8>()?;
        let (nonce, sealed) = rest.split_first_chunk::<NONCE_LEN>()?;
        let epoch = u64::from_be_bytes(*epoch);
        let now = self.epoch();
        if epoch != now && epoch + 1 != now {
            return None;
        }
        let mut buf = sealed.to_vec();
        let plain = self
            .key(epoch)?
            .open_in_place(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(epoch.to_be_bytes()),
                &mut buf,
            )
            .ok()?;
        Some(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_opens_on_every_coordinator_with_the_same_key_and_only_there() {
        let a = FleetTickets::new(&[b"coordinator key", b"fleet CA"]);
        let b = FleetTickets::new(&[b"coordinator key", b"fleet CA"]);
        let other_ca = FleetTickets::new(&[b"coordinator key", b"another CA"]);
        let other_key = FleetTickets::new(&[b"another key", b"fleet CA"]);
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(b.decrypt(&t).as_deref(), Some(&b"session state"[..]));
        assert_eq!(other_ca.decrypt(&t), None);
        assert_eq!(other_key.decrypt(&t), None);
        // Sealed, not merely encoded; and a changed byte does not open.
        assert!(!t.windows(13).any(|w| w == b"session state"));
        for i in [0, 9, t.len() - 1] {
            let mut bad = t.clone();
            bad[i] ^= 1;
            assert_eq!(b.decrypt(&bad), None, "byte {i} changed");
        }
        assert_eq!(b.decrypt(&t[..10]), None);
        assert_ne!(a.encrypt(b"x"), a.encrypt(b"x"), "a fresh nonce each time");
    }

    #[test]
    fn a_ticket_opens_in_its_epoch_and_the_next_not_after() {
        let sealed_at = |now: fn() -> u64| {
            FleetTickets::with_clock(&[b"k"], now)
                .encrypt(b"s")
                .unwrap()
        };
        let opens_at = |t: &[u8], now: fn() -> u64| {
            FleetTickets::with_clock(&[b"k"], now).decrypt(t).is_some()
        };
        let t = sealed_at(|| 10 * EPOCH_SECS + 5);
        assert!(opens_at(&t, || 10 * EPOCH_SECS + 6));
        assert!(opens_at(&t, || 11 * EPOCH_SECS + EPOCH_SECS - 1));
        assert!(!opens_at(&t, || 12 * EPOCH_SECS));
        assert!(!opens_at(&t, || 9 * EPOCH_SECS), "not from the future");
    }
}
