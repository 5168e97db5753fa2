//! Purging a drive (`prepare.purge`), SNIA PTS's first step: a discard of the whole device
//! (not a PTS purge: the drive may keep blocks mapped), ATA SECURITY ERASE UNIT, NVMe
//! Format NVM with user-data erase, NVMe Sanitize (block erase) or SCSI SANITIZE (block
//! erase), each by the drive's own tool (`blkdiscard`, `hdparm`, `nvme`, `sg_sanitize`,
//! found as every program the agent runs itself, `process::command`) and waited for until
//! the drive says it is done. Whether the drive can (its discard limit, its ATA security
//! state, its sanitize capabilities) is judged by preflight when the plan arrives, from
//! the parsers here; whether it may (`--allow-purge`, `--allow-device`, not in use) by
//! `Storage::step_refusal`, judged again by the executor right before the purge runs.
//!
//! What it must not do: give up on a purge it started. A cancel of the plan, or the agent
//! stopping, does not kill the tool: a drive cut off in its security erase is left locked
//! with the password, and a sanitizing drive goes on sanitizing anyway (it is only the
//! wait for the NVMe sanitize that ends when the agent stops: the step runs again when the
//! agent is back, and takes up a sanitize still in progress instead of starting another).

use std::path::Path;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::model::{Purge, PurgeMethod, Sample};

/// How often the NVMe sanitize log is read while a sanitize runs.
pub(crate) const SANITIZE_POLL: Duration = Duration::from_secs(1);
/// How long an NVMe sanitize may take before the step fails: a block erase of a large
/// drive takes minutes, an overwrite hours; a day is past anything a drive should take.
pub(crate) const SANITIZE_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// The ATA security password set for the erase (`--security-erase` needs one set first);
/// a successful erase clears it again. It protects nothing.
const ATA_PASSWORD: &str = "platter";

/// Why a purge failed; the texts are what users read in the step's error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PurgeError {
    #[error(transparent)]
    Tool(#[from] crate::process::ToolError),
    #[error("the sanitize of {device} failed (sanitize log: {status}); the drive stays in its sanitize failure mode until `nvme sanitize {device} --sanact=1` ends it, or a new sanitize succeeds")]
    SanitizeFailed { device: String, status: String },
    #[error("the sanitize of {device} was still in progress after {}s ({progress}); not waiting longer", after.as_secs())]
    SanitizeTimeout {
        device: String,
        after: Duration,
        /// "37% done" or "progress unknown".
        progress: String,
    },
    #[error("cannot read the sanitize state of {device} from `nvme sanitize-log {device} -o json`: {why}")]
    SanitizeLog { device: String, why: String },
    /// The agent is stopping: the step runs again when it is back.
    #[error("the agent stopped while waiting for the sanitize of {device}")]
    Stopped { device: String },
}

/// How an NVMe sanitize is waited for (tests wait less).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    pub poll: Duration,
    pub timeout: Duration,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            poll: SANITIZE_POLL,
            timeout: SANITIZE_TIMEOUT,
        }
    }
}

/// The program `method` runs.
pub(crate) fn program(method: PurgeMethod) -> &'static str {
    match method {
        PurgeMethod::Discard => "blkdiscard",
        PurgeMethod::SecureErase => "hdparm",
        PurgeMethod::NvmeFormat | PurgeMethod::NvmeSanitize => "nvme",
        PurgeMethod::Sanitize => "sg_sanitize",
    }
}

/// Purges `p.device` and waits until the drive is done. Its samples: `purge.seconds`.
/// `stop` (the agent stopping) ends only the wait for an NVMe sanitize.
pub(crate) fn run(
    p: &Purge,
    stop: &CancellationToken,
    pacing: Pacing,
) -> Result<Vec<Sample>, PurgeError> {
    let dev = p.device.as_str();
    let started = Instant::now();
    tracing::info!(device = dev, method = p.method.name(), "purging");
    match p.method {
        // The whole device; `blkdiscard` opens it exclusively (O_EXCL), so a device
        // mounted since the rails judged it is refused by the kernel too. Not --force,
        // which would drop that.
        PurgeMethod::Discard => tool("blkdiscard", &[dev]).map(drop)?,
        PurgeMethod::SecureErase => {
            tool(
                "hdparm",
                &[
                    "--user-master",
                    "u",
                    "--security-set-pass",
                    ATA_PASSWORD,
                    dev,
                ],
            )?;
            // Blocks until the drive finished the erase (hdparm waits as long as the
            // drive's own estimate says, and more).
            tool(
                "hdparm",
                &["--user-master", "u", "--security-erase", ATA_PASSWORD, dev],
            )?;
        }
        // Format NVM with Secure Erase Settings 1, user-data erase (0 erases nothing);
        // --force skips nvme-cli's 10-second "are you sure" pause. It returns when the
        // controller completed the format.
        PurgeMethod::NvmeFormat => {
            tool("nvme", &["format", dev, "--ses=1", "--force"]).map(drop)?
        }
        PurgeMethod::NvmeSanitize => nvme_sanitize(dev, stop, pacing)?,
        // --quick skips sg_sanitize's 15-second pause to reconsider. Without --early (exit
        // once started) nor --wait, sg_sanitize starts the SANITIZE with the IMMED bit set
        // and polls the drive's progress (REQUEST SENSE) until it is done: it waits, and
        // no single SCSI command is outstanding for the hours a sanitize may take, as one
        // is with --wait (IMMED clear), where the command's timeout or the HBA's could end
        // it early.
        PurgeMethod::Sanitize => tool("sg_sanitize", &["--block", "--quick", dev]).map(drop)?,
    }
    let seconds = started.elapsed().as_secs_f64();
    tracing::info!(
        device = dev,
        method = p.method.name(),
        seconds,
        "purge done"
    );
    Ok(vec![crate::workloads::sample(
        "purge.seconds",
        seconds,
        "s",
    )])
}

/// Starts a block-erase sanitize (unless one is in progress already: the agent stopped
/// while waiting for it) and polls the sanitize log until it says the sanitize ended.
fn nvme_sanitize(dev: &str, stop: &CancellationToken, pacing: Pacing) -> Result<(), PurgeError> {
    let log = || -> Result<SanitizeLog, PurgeError> {
        let out = tool("nvme", &["sanitize-log", dev, "-o", "json"])?;
        parse_sanitize_log(&out).map_err(|why| PurgeError::SanitizeLog {
            device: dev.to_string(),
            why,
        })
    };
    let before = log()?;
    if before.status == SanitizeStatus::InProgress {
        tracing::info!(
            device = dev,
            "a sanitize is in progress already (started before the agent restarted): waiting for it"
        );
    } else {
        tool("nvme", &["sanitize", dev, "--sanact=2"])?;
    }
    let started = Instant::now();
    let mut last_said = Instant::now();
    loop {
        // The sanitize log says "completed" for the last sanitize until the next one
        // starts: what is read right after `nvme sanitize` returned is this one's state.
        let now = log()?;
        match now.status {
            SanitizeStatus::Completed => return Ok(()),
            SanitizeStatus::Failed => {
                return Err(PurgeError::SanitizeFailed {
                    device: dev.to_string(),
                    status: now.text,
                })
            }
            SanitizeStatus::InProgress | SanitizeStatus::Other(_) => {}
        }
        if started.elapsed() >= pacing.timeout {
            return Err(PurgeError::SanitizeTimeout {
                device: dev.to_string(),
                after: pacing.timeout,
                progress: now.progress(),
            });
        }
        if last_said.elapsed() >= Duration::from_secs(30) {
            tracing::info!(device = dev, progress = %now.progress(), "sanitizing");
            last_said = Instant::now();
        }
        let until = Instant::now() + pacing.poll;
        while Instant::now() < until {
            if stop.is_cancelled() {
                return Err(PurgeError::Stopped {
                    device: dev.to_string(),
                });
            }
            std::thread::sleep(pacing.poll.min(Duration::from_millis(100)));
        }
    }
}

fn tool(program: &str, args: &[&str]) -> Result<String, PurgeError> {
    Ok(crate::process::output(program, args)?)
}

/// The Sanitize Status field's low 3 bits (NVMe base specification, log page 81h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SanitizeStatus {
    /// 1, and 4 (completed with forced deallocation).
    Completed,
    /// 2.
    InProgress,
    /// 3.
    Failed,
    /// 0 (never sanitized), and what the specification reserves.
    Other(u8),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SanitizeLog {
    pub status: SanitizeStatus,
    /// The status as nvme-cli said it, e.g. "(3) Sanitize Failed.", for the step's error.
    pub text: String,
    /// Sanitize Progress: the fraction done, in 65536ths.
    pub sprog: Option<u64>,
}

impl SanitizeLog {
    fn progress(&self) -> String {
        match self.sprog {
            Some(p) => format!("{}% done", p * 100 / 65536),
            None => "progress unknown".into(),
        }
    }
}

/// Reads `nvme sanitize-log DEV -o json`. nvme-cli 2.x nests the log under the device's
/// name, and gives `sstat` as an object whose status is a string "(N) text": under the key
/// "status" in most versions, under the text itself in others (2.4 to 2.8, Debian 12's);
/// nvme-cli 1.x gave `sstat` as a number. Each of these is read; the status is the low 3
/// bits.
pub(crate) fn parse_sanitize_log(json: &str) -> Result<SanitizeLog, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not JSON ({e}): {:?}", head(json)))?;
    // The log itself: the object with `sstat`, at the root or one level down.
    let log = if doc.get("sstat").is_some() {
        &doc
    } else {
        doc.as_object()
            .and_then(|o| o.values().find(|v| v.get("sstat").is_some()))
            .ok_or_else(|| format!("no sstat in {:?}", head(json)))?
    };
    let sprog = log.get("sprog").and_then(serde_json::Value::as_u64);
    let sstat = &log["sstat"];
    let (code, text) = if let Some(n) = sstat.as_u64() {
        ((n & 0x7) as u8, format!("sstat {n:#x}"))
    } else {
        let said = sstat
            .as_object()
            .and_then(|o| {
                o.get("status")
                    .into_iter()
                    .chain(o.values())
                    .filter_map(serde_json::Value::as_str)
                    .find_map(|s| status_code(s).map(|c| (c, s.to_string())))
            })
            .ok_or_else(|| format!("no status \"(N) …\" in sstat {sstat}"))?;
        said
    };
    let status = match code {
        1 | 4 => SanitizeStatus::Completed,
        2 => SanitizeStatus::InProgress,
        3 => SanitizeStatus::Failed,
        other => SanitizeStatus::Other(other),
    };
    Ok(SanitizeLog {
        status,
        text,
        sprog,
    })
}

/// "(2) Sanitize in Progress." → 2.
fn status_code(s: &str) -> Option<u8> {
    let inner = s.trim().strip_prefix('(')?.split_once(')')?.0;
    inner.trim().parse::<u8>().ok().map(|n| n & 0x7)
}

/// The start of a tool's output, for an error.
fn head(text: &str) -> String {
    text.chars().take(200).collect()
}

/// The Sanitize Capabilities bit of the block-erase sanitize (`nvme id-ctrl`'s `sanicap`).
pub(crate) const SANICAP_BLOCK_ERASE: u64 = 0x2;

/// `sanicap` of `nvme id-ctrl DEV -o json`, whose JSON is flat: `"sanicap" : 3` at the root.
pub(crate) fn parse_sanicap(json: &str) -> Result<u64, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not JSON ({e}): {:?}", head(json)))?;
    doc.get("sanicap")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| "no sanicap in it".to_string())
}

/// Why `p.device` cannot be purged with `p.method`, or None: what the drive itself says
/// (its discard limit in sysfs under `sys`, its ATA security state from `hdparm -I`, its
/// sanitize capabilities from `nvme id-ctrl`), for preflight, which asks only an agent
/// that is root and has the method's program. It changes nothing.
pub(crate) fn unsupported(p: &Purge, sys: &Path) -> Option<String> {
    let dev = p.device.as_str();
    match p.method {
        PurgeMethod::Discard => {
            let file = sys
                .join("block")
                .join(crate::probes::inventory::disk_name(dev))
                .join("queue/discard_max_bytes");
            match std::fs::read_to_string(&file).map(|s| s.trim().parse::<u64>()) {
                Ok(Ok(0)) => Some(format!(
                    "{dev} does not support discard (its queue/discard_max_bytes is 0)"
                )),
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(format!(
                    "cannot tell whether {dev} supports discard: {}: {e}",
                    file.display()
                )),
                Err(e) => Some(format!(
                    "cannot tell whether {dev} supports discard: reading {}: {e}",
                    file.display()
                )),
            }
        }
        PurgeMethod::SecureErase => match tool("hdparm", &["-I", dev]) {
            Ok(out) => ata_security_refusal(dev, parse_ata_security(&out)),
            Err(e) => Some(format!("cannot read the ATA security state of {dev}: {e}")),
        },
        PurgeMethod::NvmeSanitize => {
            let out = match tool("nvme", &["id-ctrl", dev, "-o", "json"]) {
                Ok(out) => out,
                Err(e) => {
                    return Some(format!(
                        "cannot read the sanitize capabilities of {dev}: {e}"
                    ))
                }
            };
            match parse_sanicap(&out) {
                Ok(cap) if cap & SANICAP_BLOCK_ERASE != 0 => None,
                Ok(cap) => Some(format!(
                    "{dev} does not support the block-erase sanitize (`nvme id-ctrl`: sanicap \
                     {cap:#x}, without bit 1); purge it with nvme-format instead"
                )),
                Err(why) => Some(format!(
                    "cannot read the sanitize capabilities of {dev} from `nvme id-ctrl {dev} -o json`: {why}"
                )),
            }
        }
        // What the drive supports is found when it runs: nvme-cli has no cheaper question
        // for a format with user-data erase, nor sg3_utils for a sanitize.
        PurgeMethod::NvmeFormat | PurgeMethod::Sanitize => None,
    }
}

/// The ATA security state `hdparm -I DEV` reports in its "Security:" section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AtaSecurity {
    pub supported: bool,
    pub enabled: bool,
    pub locked: bool,
    pub frozen: bool,
}

/// Reads the "Security:" section of `hdparm -I`: hdparm prints each state as a line
/// `\t\tNAME` when it holds and `\tnot\tNAME` when it does not. None without the section
/// (a drive that does not speak ATA security, or not ATA at all).
pub(crate) fn parse_ata_security(identify: &str) -> Option<AtaSecurity> {
    let mut lines = identify.lines().skip_while(|l| !l.starts_with("Security:"));
    lines.next()?;
    let mut s = AtaSecurity::default();
    for line in lines.take_while(|l| l.starts_with('\t')) {
        let line = line.trim_start_matches('\t');
        let (holds, name) = match line.strip_prefix("not\t") {
            Some(rest) => (false, rest.trim()),
            None => (true, line.trim()),
        };
        match name {
            "supported" => s.supported = holds,
            "enabled" => s.enabled = holds,
            "locked" => s.locked = holds,
            "frozen" => s.frozen = holds,
            _ => {}
        }
    }
    Some(s)
}

/// Why ATA `security` keeps `device` from a secure erase, or None.
pub(crate) fn ata_security_refusal(device: &str, security: Option<AtaSecurity>) -> Option<String> {
    let Some(s) = security else {
        return Some(format!(
            "{device} reports no ATA security (`hdparm -I {device}` has no Security section): \
             it cannot be secure-erased; purge it another way (discard, nvme-format, \
             nvme-sanitize or sanitize, as its kind allows)"
        ));
    };
    if !s.supported {
        return Some(format!(
            "{device} does not support ATA security: it cannot be secure-erased"
        ));
    }
    if s.frozen {
        return Some(format!(
            "{device}'s ATA security is frozen: the BIOS froze it at boot, and a frozen drive \
             refuses a security erase; a suspend/resume cycle (`systemctl suspend`) or \
             hot-plugging the drive unfreezes it"
        ));
    }
    if s.enabled || s.locked {
        return Some(format!(
            "{device} has an ATA security password set ({}): the agent erases only a drive \
             without one; disable it with `hdparm --user-master u --security-disable PASSWORD \
             {device}`",
            if s.locked { "locked" } else { "enabled" }
        ));
    }
    None
}

#[cfg(test)]
mod tests;
