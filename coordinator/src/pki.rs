//! The fleet's certificates (`platter certs`): one CA, and certificates for the
//! coordinator, for agents and for operators. A certificate's role is its subject's
//! organizational unit and its name the common name, so `openssl x509 -noout -subject`
//! shows both: `O = platter, OU = agent, CN = rc66`.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

/// What a certificate lets its holder do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Serves AgentLink and Control.
    Coordinator,
    /// Runs plans on the host its certificate names.
    Agent,
    /// Submits, watches and cancels campaigns.
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Agent => "agent",
            Role::Operator => "operator",
        }
    }

    /// "an agent", "a coordinator": for messages.
    pub fn with_article(self) -> &'static str {
        match self {
            Role::Coordinator => "a coordinator",
            Role::Agent => "an agent",
            Role::Operator => "an operator",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        [Role::Coordinator, Role::Agent, Role::Operator]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

const ORGANIZATION: &str = "platter";
const CA_DIR: &str = "ca";

/// Who a verified peer certificate says its holder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub role: Role,
    pub name: String,
}

/// Reads role and name from a certificate the TLS layer has already verified.
pub fn peer(der: &[u8]) -> anyhow::Result<Peer> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| anyhow::anyhow!("unreadable certificate: {e}"))?;
    let subject = cert.subject();
    let name = (subject.iter_common_name().next())
        .and_then(|a| a.as_str().ok())
        .map(str::to_string)
        .context("the certificate's subject has no common name")?;
    let role = (subject.iter_organizational_unit().next())
        .and_then(|a| a.as_str().ok())
        .and_then(Role::parse)
        .with_context(|| {
            format!("certificate {name:?} has no platter role (OU coordinator, agent or operator)")
        })?;
    Ok(Peer { role, name })
}

/// Validity of a new certificate.
#[derive(Debug, Clone, Copy)]
pub struct Validity {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

impl Validity {
    /// From an hour ago (clocks drift) for `days`.
    pub fn days(days: u32) -> Validity {
        let now = OffsetDateTime::now_utc();
        Validity {
            not_before: now - Duration::hours(1),
            not_after: now + Duration::days(days.into()),
        }
    }
}

/// A certificate and its key in PEM.
pub struct Pem {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The fleet CA's certificate and key.
pub type Ca = Pem;
/// An issued certificate and its key.
pub type Issued = Pem;

/// Parameters every platter certificate shares: subject `O = platter[, OU = role], CN =
/// name`, and its validity.
fn params(role: Option<Role>, name: &str, validity: Validity) -> CertificateParams {
    let mut params = CertificateParams::default();
    let dn = &mut params.distinguished_name;
    dn.push(DnType::OrganizationName, ORGANIZATION);
    if let Some(role) = role {
        dn.push(DnType::OrganizationalUnitName, role.as_str());
    }
    dn.push(DnType::CommonName, name);
    params.not_before = validity.not_before;
    params.not_after = validity.not_after;
    params
}

pub fn new_ca(validity: Validity) -> anyhow::Result<Ca> {
    let key = KeyPair::generate()?;
    let mut params = params(None, &format!("platter fleet CA {}", ca_tag()), validity);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key)?;
    Ok(Ca {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Issues a certificate for `role`. `names[0]` is the subject's name; a coordinator's
/// names are also its DNS names or IP addresses (what agents dial).
pub fn issue(ca: &Ca, role: Role, names: &[String], validity: Validity) -> anyhow::Result<Issued> {
    let Some(name) = names.first() else {
        bail!("a certificate needs a name");
    };
    if role != Role::Coordinator && names.len() > 1 {
        bail!(
            "{} certificate names one {}",
            role.with_article(),
            role.as_str()
        );
    }
    let ca_key = KeyPair::from_pem(&ca.key_pem).context("reading the CA key")?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).context("reading the CA")?;
    let key = KeyPair::generate()?;
    let mut params = params(Some(role), name, validity);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    if role == Role::Coordinator {
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        for n in names {
            params.subject_alt_names.push(match n.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => {
                    SanType::DnsName(n.clone().try_into().with_context(|| {
                        format!("{n:?} is neither a DNS name nor an IP address")
                    })?)
                }
            });
        }
    } else {
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    }
    let cert = params.signed_by(&key, &issuer)?;
    Ok(Issued {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// A random tag that makes each CA's name unique, so two fleets' CAs are never mistaken
/// for each other by name (verifiers look issuers up by name).
fn ca_tag() -> String {
    use rand::Rng;
    format!("{:08x}", rand::rng().random::<u32>())
}

/// `platter certs init`: a new CA in `DIR/ca/`. Never overwrites one.
pub fn init(dir: &Path, days: u32) -> anyhow::Result<PathBuf> {
    let ca_dir = dir.join(CA_DIR);
    if ca_dir.join("ca.pem").exists() || ca_dir.join("ca-key.pem").exists() {
        bail!(
            "{} already holds a CA; remove it first if you really want a new one (every certificate it issued stops working)",
            ca_dir.display()
        );
    }
    let ca = new_ca(Validity::days(days))?;
    private_dir(&ca_dir)?;
    write(&ca_dir.join("ca-key.pem"), &ca.key_pem, 0o600)?;
    write(&ca_dir.join("ca.pem"), &ca.cert_pem, 0o644)?;
    Ok(ca_dir)
}

/// The directory `platter certs issue ROLE NAME` writes to.
pub fn identity_dir(dir: &Path, role: Role, name: &str) -> PathBuf {
    match role {
        Role::Coordinator => dir.join("coordinator"),
        r => dir.join(format!("{}-{name}", r.as_str())),
    }
}

/// `platter certs issue`: `DIR/<role>[-name]/{ca.pem, cert.pem, key.pem}`, the directory
/// a `--tls-dir` flag takes.
pub fn issue_to_dir(
    dir: &Path,
    role: Role,
    names: &[String],
    days: u32,
) -> anyhow::Result<PathBuf> {
    let ca_dir = dir.join(CA_DIR);
    let read = |f: &str| {
        std::fs::read_to_string(ca_dir.join(f)).with_context(|| {
            format!(
                "reading {} (run `platter certs init --dir {}` first)",
                ca_dir.join(f).display(),
                dir.display()
            )
        })
    };
    let ca = Ca {
        cert_pem: read("ca.pem")?,
        key_pem: read("ca-key.pem")?,
    };
    let issued = issue(&ca, role, names, Validity::days(days))?;
    let out = identity_dir(dir, role, &names[0]);
    private_dir(&out)?;
    write(&out.join("key.pem"), &issued.key_pem, 0o600)?;
    write(&out.join("cert.pem"), &issued.cert_pem, 0o644)?;
    write(&out.join("ca.pem"), &ca.cert_pem, 0o644)?;
    Ok(out)
}

fn private_dir(p: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
        .with_context(|| format!("creating {}", p.display()))
}

/// Writes a file created with `mode` from the start, so a key is never readable by others,
/// not even for a moment.
pub fn write(p: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    let tmp = p.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, p).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_carry_role_and_name() {
        let ca = new_ca(Validity::days(1)).unwrap();
        for (role, names) in [
            (Role::Agent, vec!["rc66".to_string()]),
            (Role::Operator, vec!["alice".to_string()]),
            (
                Role::Coordinator,
                vec!["coord.lab".to_string(), "127.0.0.1".to_string()],
            ),
        ] {
            let c = issue(&ca, role, &names, Validity::days(1)).unwrap();
            let der = pem_der(&c.cert_pem);
            assert_eq!(
                peer(&der).unwrap(),
                Peer {
                    role,
                    name: names[0].clone()
                }
            );
        }
        // The CA itself has no role: it cannot be used as a peer identity.
        let err = peer(&pem_der(&ca.cert_pem)).unwrap_err().to_string();
        assert!(
            err.contains("no common name") || err.contains("no platter role"),
            "{err}"
        );
    }

    #[test]
    fn files_are_written_with_safe_permissions_and_a_ca_is_never_overwritten() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        init(d.path(), 1).unwrap();
        let err = init(d.path(), 1).unwrap_err().to_string();
        assert!(err.contains("already holds a CA"), "{err}");
        let out = issue_to_dir(d.path(), Role::Agent, &["rc66".into()], 1).unwrap();
        assert_eq!(out, d.path().join("agent-rc66"));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d.path().join("ca/ca-key.pem")), 0o600);
        assert_eq!(mode(&d.path().join("ca")), 0o700);
        assert_eq!(mode(&out.join("key.pem")), 0o600);
        assert_eq!(mode(&out.join("cert.pem")), 0o644);
        assert_eq!(
            std::fs::read_to_string(out.join("ca.pem")).unwrap(),
            std::fs::read_to_string(d.path().join("ca/ca.pem")).unwrap()
        );
        let two = issue_to_dir(d.path(), Role::Agent, &["a".into(), "b".into()], 1);
        assert!(two.is_err());
    }

    fn pem_der(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    }
}
