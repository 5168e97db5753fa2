//! The fleet's certificates (`platter certs`): one CA, and certificates for the
//! coordinator, for agents and for operators. A certificate's role is its subject's
//! organizational unit and its name the common name, so `openssl x509 -noout -subject`
//! shows both: `O = platter, OU = agent, CN = rc66`.
//!
//! Each identity has its own directory, `DIR/<role>-<name>`, and nothing here replaces an
//! existing identity or CA unless asked to (`--force`): a silently overwritten key is a
//! coordinator or agent that no longer starts, found only when it restarts.

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
        Validity::lasting(Duration::days(days.into()))
    }

    /// From an hour ago (clocks drift) until `lifetime` from now.
    pub fn lasting(lifetime: Duration) -> Validity {
        let now = OffsetDateTime::now_utc();
        Validity {
            not_before: now - Duration::hours(1),
            not_after: now + lifetime,
        }
    }
}

/// How long a new certificate lasts, as the command line asked: `--days N` (at least one),
/// or `--hours N`, the explicit way to a short-lived certificate (tests, demonstrations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    Days(u32),
    Hours(u32),
}

impl Lifetime {
    pub fn validity(self) -> Validity {
        Validity::lasting(match self {
            Lifetime::Days(d) => Duration::days(d.into()),
            Lifetime::Hours(h) => Duration::hours(h.into()),
        })
    }
}

/// What `platter certs` refuses to do: the caller's request, not a failure, so the command
/// line exits with its usage status.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error(
        "{} already holds a CA; remove it first if you really want a new one (every certificate it issued stops working)",
        .0.display()
    )]
    CaExists(PathBuf),
    #[error(
        "{} already holds an identity (cert.pem, key.pem); `--force` replaces it (whoever uses the old one needs the new files)",
        .0.display()
    )]
    IdentityExists(PathBuf),
    #[error("{0:?} cannot name a directory: a name has no `/` and is not `.` or `..`")]
    BadName(String),
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
        return Err(Refusal::CaExists(ca_dir).into());
    }
    let ca = new_ca(Validity::days(days))?;
    private_dir(&ca_dir)?;
    write(&ca_dir.join("ca-key.pem"), &ca.key_pem, 0o600)?;
    write(&ca_dir.join("ca.pem"), &ca.cert_pem, 0o644)?;
    Ok(ca_dir)
}

/// The directory `platter certs issue ROLE NAME…` writes to: `DIR/coordinator-NAME`,
/// `DIR/agent-HOST`, `DIR/operator-NAME`, one per identity (so two coordinators' identities
/// live side by side).
pub fn identity_dir(dir: &Path, role: Role, name: &str) -> PathBuf {
    dir.join(format!("{}-{name}", role.as_str()))
}

/// Whether `platter certs issue` may replace an identity that exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    Refuse,
    Replace,
}

/// `platter certs issue`: `DIR/<role>-<name>/{ca.pem, cert.pem, key.pem}`, the directory
/// a `--tls-dir` flag takes. An identity already there is refused
/// ([`Refusal::IdentityExists`]) unless `existing` is [`Existing::Replace`].
pub fn issue_to_dir(
    dir: &Path,
    role: Role,
    names: &[String],
    lifetime: Lifetime,
    existing: Existing,
) -> anyhow::Result<PathBuf> {
    let Some(name) = names.first() else {
        bail!("a certificate needs a name");
    };
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Refusal::BadName(name.clone()).into());
    }
    let out = identity_dir(dir, role, name);
    if existing == Existing::Refuse
        && (out.join("cert.pem").exists() || out.join("key.pem").exists())
    {
        return Err(Refusal::IdentityExists(out).into());
    }
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
    let issued = issue(&ca, role, names, lifetime.validity())?;
    private_dir(&out)?;
    write(&out.join("key.pem"), &issued.key_pem, 0o600)?;
    write(&out.join("cert.pem"), &issued.cert_pem, 0o644)?;
    write(&out.join("ca.pem"), &ca.cert_pem, 0o644)?;
    Ok(out)
}

/// A certificate of the PKI directory as `platter certs list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its directory inside the PKI directory: `ca`, `coordinator-coord.lab`, `agent-rc66`.
    pub dir: String,
    /// `None` for the fleet CA.
    pub role: Option<Role>,
    pub common_name: String,
    /// What a coordinator is dialled as (its DNS names and IP addresses); the common name
    /// for an agent, an operator or the CA.
    pub names: Vec<String>,
    pub not_after: OffsetDateTime,
}

impl Listed {
    /// "ca", "coordinator", "agent", "operator".
    pub fn role_name(&self) -> &'static str {
        self.role.map_or("ca", Role::as_str)
    }
}

/// What `platter certs list` found in a PKI directory: the CA first, then each identity
/// by directory name, and the certificates it could not read, with why.
#[derive(Debug, Default)]
pub struct Listing {
    pub certificates: Vec<Listed>,
    pub unreadable: Vec<String>,
}

/// Reads `DIR/ca/ca.pem` and every `DIR/*/cert.pem`; keys are never opened.
pub fn list(dir: &Path) -> anyhow::Result<Listing> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    let mut dirs: Vec<String> = Vec::new();
    for e in entries {
        let e = e.with_context(|| format!("reading {}", dir.display()))?;
        if e.path().is_dir() && e.file_name() != CA_DIR {
            dirs.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    dirs.sort();
    let mut listing = Listing::default();
    let ca = dir.join(CA_DIR).join("ca.pem");
    let wanted = (ca.exists().then(|| (CA_DIR.to_string(), ca)).into_iter())
        .chain(dirs.into_iter().map(|d| {
            let cert = dir.join(&d).join("cert.pem");
            (d, cert)
        }))
        .filter(|(_, cert)| cert.exists());
    for (d, cert) in wanted {
        match std::fs::read(&cert)
            .map_err(anyhow::Error::from)
            .and_then(|pem| listed(&d, &pem))
        {
            Ok(l) => listing.certificates.push(l),
            Err(e) => listing
                .unreadable
                .push(format!("{}: {e:#}", cert.display())),
        }
    }
    Ok(listing)
}

/// One certificate in PEM, read for `list`.
fn listed(dir: &str, pem: &[u8]) -> anyhow::Result<Listed> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem)
        .map_err(|e| anyhow::anyhow!("not a PEM certificate: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| anyhow::anyhow!("unreadable certificate: {e}"))?;
    let subject = cert.subject();
    let common_name = (subject.iter_common_name().next())
        .and_then(|a| a.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let role = match (subject.iter_organizational_unit().next())
        .and_then(|a| a.as_str().ok())
        .and_then(Role::parse)
    {
        Some(r) => Some(r),
        None if cert.is_ca() => None,
        None => bail!("{common_name:?} has no platter role (OU coordinator, agent or operator)"),
    };
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            use x509_parser::extensions::GeneralName;
            match n {
                GeneralName::DNSName(d) => names.push(d.to_string()),
                GeneralName::IPAddress(b) => {
                    if let Ok(a) = <[u8; 4]>::try_from(*b) {
                        names.push(std::net::Ipv4Addr::from(a).to_string());
                    } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                        names.push(std::net::Ipv6Addr::from(a).to_string());
                    }
                }
                _ => {}
            }
        }
    }
    if names.is_empty() {
        names.push(common_name.clone());
    }
    Ok(Listed {
        dir: dir.to_string(),
        role,
        common_name,
        names,
        not_after: cert.validity().not_after.to_datetime(),
    })
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
        let err = init(d.path(), 1).unwrap_err();
        assert!(
            matches!(err.downcast_ref(), Some(Refusal::CaExists(_))),
            "{err}"
        );
        assert!(err.to_string().contains("already holds a CA"), "{err}");
        let out = issue_to_dir(
            d.path(),
            Role::Agent,
            &["rc66".into()],
            DAY,
            Existing::Refuse,
        )
        .unwrap();
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
        let two = issue_to_dir(
            d.path(),
            Role::Agent,
            &["a".into(), "b".into()],
            DAY,
            Existing::Refuse,
        );
        assert!(two.is_err());
    }

    const DAY: Lifetime = Lifetime::Days(1);

    #[test]
    fn each_coordinator_has_its_own_directory_and_nothing_is_replaced_unasked() {
        let d = tempfile::tempdir().unwrap();
        init(d.path(), 1).unwrap();
        let coordinator = |n: &[&str], existing| {
            issue_to_dir(d.path(), Role::Coordinator, &names_of(n), DAY, existing)
        };
        let a = coordinator(&["coord-a.lab", "127.0.0.1"], Existing::Refuse).unwrap();
        let b = coordinator(&["coord-b.lab"], Existing::Refuse).unwrap();
        assert_eq!(a, d.path().join("coordinator-coord-a.lab"));
        assert_eq!(b, d.path().join("coordinator-coord-b.lab"));
        let key_a = std::fs::read(a.join("key.pem")).unwrap();
        let again = coordinator(&["coord-a.lab"], Existing::Refuse).unwrap_err();
        assert!(
            matches!(again.downcast_ref(), Some(Refusal::IdentityExists(p)) if *p == a),
            "{again}"
        );
        assert_eq!(std::fs::read(a.join("key.pem")).unwrap(), key_a);
        coordinator(&["coord-a.lab"], Existing::Replace).unwrap();
        assert_ne!(std::fs::read(a.join("key.pem")).unwrap(), key_a);
        for bad in ["../x", ".", ".."] {
            let e = issue_to_dir(
                d.path(),
                Role::Operator,
                &names_of(&[bad]),
                DAY,
                Existing::Refuse,
            )
            .unwrap_err();
            assert!(matches!(e.downcast_ref(), Some(Refusal::BadName(_))), "{e}");
        }
    }

    #[test]
    fn a_listing_names_role_names_and_expiry_of_each_certificate() {
        let d = tempfile::tempdir().unwrap();
        init(d.path(), 10).unwrap();
        let coordinator = names_of(&["coord.lab", "10.0.0.1", "fd00::1"]);
        issue_to_dir(
            d.path(),
            Role::Coordinator,
            &coordinator,
            DAY,
            Existing::Refuse,
        )
        .unwrap();
        issue_to_dir(
            d.path(),
            Role::Agent,
            &names_of(&["rc66"]),
            Lifetime::Hours(2),
            Existing::Refuse,
        )
        .unwrap();
        std::fs::create_dir(d.path().join("notes")).unwrap();
        std::fs::create_dir(d.path().join("operator-broken")).unwrap();
        std::fs::write(d.path().join("operator-broken/cert.pem"), "junk").unwrap();
        let listing = list(d.path()).unwrap();
        let got: Vec<_> = (listing.certificates.iter())
            .map(|l| (l.dir.as_str(), l.role_name(), l.names.clone()))
            .collect();
        let ca_name = listing.certificates[0].common_name.clone();
        assert!(ca_name.starts_with("platter fleet CA "), "{ca_name}");
        assert_eq!(
            got,
            [
                ("ca", "ca", vec![ca_name]),
                ("agent-rc66", "agent", names_of(&["rc66"])),
                ("coordinator-coord.lab", "coordinator", coordinator),
            ]
        );
        let left = |i: usize| listing.certificates[i].not_after - OffsetDateTime::now_utc();
        assert!(left(0) > Duration::days(9) && left(0) <= Duration::days(10));
        assert!(left(1) > Duration::minutes(110) && left(1) <= Duration::hours(2));
        assert_eq!(listing.unreadable.len(), 1, "{:?}", listing.unreadable);
        assert!(listing.unreadable[0].contains("operator-broken/cert.pem"));
    }

    fn names_of(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    fn pem_der(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    }
}
