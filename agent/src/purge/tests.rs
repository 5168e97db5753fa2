//! The parsers on recorded outputs, and each method's exact command lines against fake
//! tools. A fake tool is found on PATH, as the real one would be: each such test runs again
//! in a child process of this test binary (itself alone) whose PATH starts with a
//! directory of fakes, so no other test, running on another thread, sees them.

use super::*;

use std::ffi::OsString;
use std::path::PathBuf;

use crate::model::{OnFailure, Plan, Step, StepKind};

// ---- recorded outputs ----

/// `hdparm -I` of a SATA SSD, modeled on hdparm 9.65's format (identify.c: each security
/// state a line `\t\tNAME` when it holds, `\tnot\tNAME` when not), its Security section
/// as a drive the BIOS froze at boot has it.
const HDPARM_FROZEN: &str = "
/dev/sdb:

ATA device, with non-removable media
\tModel Number:       Samsung SSD 860 EVO 500GB               
\tSerial Number:      S3Z2NB0K123456A     
\tFirmware Revision:  RVT02B6Q
\tTransport:          Serial, ATA8-AST, SATA 1.0a, SATA II Extensions, SATA Rev 2.5, SATA Rev 2.6, SATA Rev 3.0
Standards:
\tUsed: unknown (minor revision code 0x005e) 
\tSupported: 11 8 7 6 5 
\tLikely used: 11
Configuration:
\tLogical\t\tmax\tcurrent
\tcylinders\t16383\t16383
\theads\t\t16\t16
\tsectors/track\t63\t63
\t--
\tLBA48  user addressable sectors:   976773168
\tLogical  Sector size:                   512 bytes
\tPhysical Sector size:                   512 bytes
\tdevice size with M = 1000*1000:      500107 MBytes (500 GB)
\tNominal Media Rotation Rate: Solid State Device
Capabilities:
\tLBA, IORDY(can be disabled)
\tQueue depth: 32
Commands/features:
\tEnabled\tSupported:
\t   *\tSMART feature set
\t    \tSecurity Mode feature set
\t   *\tPower Management feature set
\t   *\tWrite cache
\t   *\tData Set Management TRIM supported (limit 8 blocks)
\t   *\tDeterministic read ZEROs after TRIM
Security: 
\tMaster password revision code = 65534
\t\tsupported
\tnot\tenabled
\tnot\tlocked
\t\tfrozen
\tnot\texpired: security count
\t\tsupported: enhanced erase
\t2min for SECURITY ERASE UNIT. 8min for ENHANCED SECURITY ERASE UNIT.
Logical Unit WWN Device Identifier: 5002538e40a0b1c2
\tNAA\t\t: 5
\tIEEE OUI\t: 002538
\tUnique ID\t: e40a0b1c2
Checksum: correct
";

/// The same drive after a suspend/resume: not frozen, ready for a security erase.
fn hdparm_ready() -> String {
    HDPARM_FROZEN.replace("\t\tfrozen\n", "\tnot\tfrozen\n")
}

/// Security sections of other drives (hdparm 9.65's format too).
const SECURITY_UNSUPPORTED: &str = "Security: \n\tMaster password revision code = 65534\n\
    \tnot\tsupported\n\tnot\tenabled\n\tnot\tlocked\n\tnot\tfrozen\n\tnot\texpired: security count\n\
    \tnot\tsupported: enhanced erase\nChecksum: correct\n";
const SECURITY_LOCKED: &str = "Security: \n\tMaster password revision code = 65534\n\
    \t\tsupported\n\t\tenabled\n\t\tlocked\n\tnot\tfrozen\n\tnot\texpired: security count\n\
    \t\tsupported: enhanced erase\n\tSecurity level high\n\
    \t4min for SECURITY ERASE UNIT. 4min for ENHANCED SECURITY ERASE UNIT.\nChecksum: correct\n";

/// `nvme sanitize-log DEV -o json` as nvme-cli 2.x prints it (nvme-print-json.c,
/// json_sanitize_log): nested under the device's name, `sstat` an object whose status is
/// "(N) text".
fn sanitize_log(status: u8, sprog: u32) -> String {
    let text = match status {
        0 => "NVM Subsystem has never been sanitized.",
        1 => "Most Recent Sanitize Command Completed Successfully.",
        2 => "Sanitize in Progress.",
        3 => "Most Recent Sanitize Command Failed.",
        _ => "Unknown",
    };
    format!(
        "{{\n  \"nvme0n1\":{{\n    \"sprog\":{sprog},\n    \"sstat\":{{\n      \
         \"global_erased\":0,\n      \"no_cmplted_passes\":0,\n      \"status\":\"({status}) {text}\"\n    }},\n    \
         \"cdw10_info\":2,\n    \"time_over_write\":4294967295,\n    \"time_block_erase\":120,\n    \
         \"time_crypto_erase\":4294967295\n  }}\n}}\n"
    )
}

// ---- parsers ----

#[test]
fn ata_security_is_read_from_hdparm_identify() {
    let frozen = parse_ata_security(HDPARM_FROZEN).unwrap();
    assert_eq!(
        frozen,
        AtaSecurity {
            supported: true,
            enabled: false,
            locked: false,
            frozen: true
        }
    );
    assert!(!parse_ata_security(&hdparm_ready()).unwrap().frozen);
    let none = parse_ata_security(SECURITY_UNSUPPORTED).unwrap();
    assert!(!none.supported && !none.frozen);
    let locked = parse_ata_security(SECURITY_LOCKED).unwrap();
    assert!(locked.supported && locked.enabled && locked.locked && !locked.frozen);
    // A USB bridge or SCSI disk: no Security section at all.
    assert_eq!(
        parse_ata_security("\n/dev/sdc:\nSG_IO: bad/missing sense data\n"),
        None
    );
}

#[test]
fn every_ata_security_state_that_forbids_an_erase_says_why() {
    let why = |text: &str| ata_security_refusal("/dev/sdb", parse_ata_security(text));
    assert_eq!(why(&hdparm_ready()), None);
    assert_eq!(
        why(HDPARM_FROZEN).as_deref(),
        Some(
            "/dev/sdb's ATA security is frozen: the BIOS froze it at boot, and a frozen drive \
             refuses a security erase; a suspend/resume cycle (`systemctl suspend`) or \
             hot-plugging the drive unfreezes it"
        )
    );
    assert!(why(SECURITY_UNSUPPORTED)
        .unwrap()
        .contains("does not support ATA security"));
    let locked = why(SECURITY_LOCKED).unwrap();
    assert!(locked.contains("password set (locked)"), "{locked}");
    assert!(why("Checksum: correct\n")
        .unwrap()
        .contains("has no Security section"));
}

#[test]
fn the_sanitize_log_is_read_as_each_nvme_cli_prints_it() {
    let log = parse_sanitize_log(&sanitize_log(2, 16384)).unwrap();
    assert_eq!(log.status, SanitizeStatus::InProgress);
    assert_eq!(log.progress(), "25% done");
    assert_eq!(
        parse_sanitize_log(&sanitize_log(1, 65535)).unwrap().status,
        SanitizeStatus::Completed
    );
    let failed = parse_sanitize_log(&sanitize_log(3, 0)).unwrap();
    assert_eq!(failed.status, SanitizeStatus::Failed);
    assert_eq!(failed.text, "(3) Most Recent Sanitize Command Failed.");
    assert_eq!(
        parse_sanitize_log(&sanitize_log(0, 0)).unwrap().status,
        SanitizeStatus::Other(0)
    );
    // nvme-cli 2.4 to 2.8 (Debian 12's 2.4) keyed the status by its own text.
    let keyed = r#"{"nvme0n1":{"sprog":0,"sstat":{"global_erased":1,"no_cmplted_passes":1,
        "Most Recent Sanitize Command Completed Successfully.":"(1) Most Recent Sanitize Command Completed Successfully."},
        "cdw10_info":2}}"#;
    assert_eq!(
        parse_sanitize_log(keyed).unwrap().status,
        SanitizeStatus::Completed
    );
    // With No-Deallocate After Sanitize: status 4, completed too; nvme-cli 1.x: a number.
    assert_eq!(
        parse_sanitize_log(r#"{"nvme0n1":{"sprog":65535,"sstat":260}}"#)
            .unwrap()
            .status,
        SanitizeStatus::Completed
    );
    assert_eq!(
        parse_sanitize_log(r#"{"sprog":0,"sstat":2}"#)
            .unwrap()
            .status,
        SanitizeStatus::InProgress
    );
    assert!(parse_sanitize_log("{}").unwrap_err().contains("no sstat"));
    assert!(parse_sanitize_log("NVMe status: INVALID_FIELD(0x2)")
        .unwrap_err()
        .starts_with("not JSON"));
}

#[test]
fn sanicap_is_read_from_id_ctrl() {
    let id_ctrl = r#"{"vid":5197,"ssvid":5197,"sn":"S4EWNX0R123456","mn":"Samsung SSD 980 PRO 1TB","fr":"5B2QGXA7","sanicap":3,"fna":0,"hmpre":0}"#;
    assert_eq!(parse_sanicap(id_ctrl), Ok(3));
    assert_ne!(parse_sanicap(id_ctrl).unwrap() & SANICAP_BLOCK_ERASE, 0);
    assert_eq!(
        parse_sanicap(r#"{"sanicap":1}"#).unwrap() & SANICAP_BLOCK_ERASE,
        0
    );
    assert!(parse_sanicap(r#"{"vid":1}"#).is_err());
}

// ---- fake tools ----

/// Where a child's fakes are, set by the parent; its absence makes a test the parent.
const FAKES_ENV: &str = "PLATTER_TEST_FAKES";
/// A device no tool can touch, should a real one be run by mistake.
const DEVICE: &str = "/nonexistent/platter-test/sdq";

/// Runs the test `test` (its path in this binary: `purge::tests::NAME`) again, alone, in a
/// child process whose PATH starts with a directory of the `fakes` (program name, shell
/// code run after the fake logged its command line to `calls` beside it), with `env`
/// added. In the parent it checks the child passed and returns None; in the child it
/// returns that directory, where the test's body runs.
fn with_fakes(test: &str, fakes: &[(&str, &str)], env: &[(&str, &str)]) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = std::env::var_os(FAKES_ENV) {
        let dir = PathBuf::from(dir);
        // Never a real tool: the device is fake, and so must be the program.
        for (name, _) in fakes {
            let found = crate::process::find_program(name.as_ref()).unwrap();
            assert!(
                found.starts_with(&dir),
                "{name} found at {}",
                found.display()
            );
        }
        return Some(dir);
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (name, body) in fakes {
        let script = bin.join(name);
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> \"${FAKES_ENV}/calls\"\n{body}\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut path = OsString::from(&bin);
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env("PATH", path)
        .env(FAKES_ENV, &dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{said}");
    assert!(said.contains("1 passed"), "the child ran no test:\n{said}");
    None
}

/// The command lines the fakes were run with, in order.
fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

fn purge(method: PurgeMethod) -> Purge {
    Purge {
        device: DEVICE.into(),
        method,
    }
}

/// Waits for a sanitize as a test can afford.
const QUICK: Pacing = Pacing {
    poll: Duration::from_millis(10),
    timeout: Duration::from_secs(10),
};

#[test]
fn secure_erase_sets_the_password_then_erases_with_it() {
    let Some(dir) = with_fakes(
        "purge::tests::secure_erase_sets_the_password_then_erases_with_it",
        &[("hdparm", "exit 0")],
        &[],
    ) else {
        return;
    };
    let samples = run(
        &purge(PurgeMethod::SecureErase),
        &CancellationToken::new(),
        QUICK,
    )
    .unwrap();
    assert_eq!(
        calls(&dir),
        [
            format!("hdparm --user-master u --security-set-pass platter {DEVICE}"),
            format!("hdparm --user-master u --security-erase platter {DEVICE}"),
        ]
    );
    assert_eq!(samples.len(), 1);
    assert_eq!(
        (samples[0].metric.as_str(), samples[0].unit.as_str()),
        ("purge.seconds", "s")
    );
}

/// A tool that fails fails the step with its command line and what it said.
#[test]
fn a_failed_erase_says_the_command_and_its_error() {
    let Some(dir) = with_fakes(
        "purge::tests::a_failed_erase_says_the_command_and_its_error",
        &[(
            "hdparm",
            "case \"$*\" in *--security-erase*) echo 'SECURITY_ERASE: Input/output error' >&2; exit 5;; esac",
        )],
        &[],
    ) else {
        return;
    };
    let err = run(
        &purge(PurgeMethod::SecureErase),
        &CancellationToken::new(),
        QUICK,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        format!(
            "`hdparm --user-master u --security-erase platter {DEVICE}` failed (exit status: 5): \
             SECURITY_ERASE: Input/output error"
        )
    );
    assert_eq!(calls(&dir).len(), 2);
}

#[test]
fn nvme_format_erases_user_data() {
    let Some(dir) = with_fakes(
        "purge::tests::nvme_format_erases_user_data",
        &[("nvme", "exit 0")],
        &[],
    ) else {
        return;
    };
    run(
        &purge(PurgeMethod::NvmeFormat),
        &CancellationToken::new(),
        QUICK,
    )
    .unwrap();
    assert_eq!(
        calls(&dir),
        [format!("nvme format {DEVICE} --ses=1 --force")]
    );
}

#[test]
fn scsi_sanitize_block_erases_and_waits() {
    let Some(dir) = with_fakes(
        "purge::tests::scsi_sanitize_block_erases_and_waits",
        &[("sg_sanitize", "exit 0")],
        &[],
    ) else {
        return;
    };
    run(
        &purge(PurgeMethod::Sanitize),
        &CancellationToken::new(),
        QUICK,
    )
    .unwrap();
    assert_eq!(
        calls(&dir),
        [format!("sg_sanitize --block --quick {DEVICE}")]
    );
}

/// A fake nvme whose sanitize log says "never sanitized" until a sanitize starts, then "in
/// progress" for `$FAKE_POLLS` reads, then `$FAKE_END` (1 completed, 3 failed; 2 forever).
const FAKE_NVME_SANITIZE: &str = r#"
case "$1" in
  sanitize) touch "$PLATTER_TEST_FAKES/started"; exit 0;;
  sanitize-log)
    if [ ! -e "$PLATTER_TEST_FAKES/started" ]; then status=0
    else
      n=$(cat "$PLATTER_TEST_FAKES/polls" 2>/dev/null || echo 0); n=$((n + 1))
      echo $n > "$PLATTER_TEST_FAKES/polls"
      if [ $n -le "$FAKE_POLLS" ]; then status=2; else status=$FAKE_END; fi
    fi
    cat "$PLATTER_TEST_FAKES/log$status.json";;
esac"#;

/// The logs the fake prints, written where it finds them (in the child).
fn write_logs(dir: &Path) {
    for status in 0..=3 {
        std::fs::write(
            dir.join(format!("log{status}.json")),
            sanitize_log(status, if status == 2 { 32768 } else { 0 }),
        )
        .unwrap();
    }
}

#[test]
fn nvme_sanitize_starts_a_block_erase_and_polls_until_done() {
    let Some(dir) = with_fakes(
        "purge::tests::nvme_sanitize_starts_a_block_erase_and_polls_until_done",
        &[("nvme", FAKE_NVME_SANITIZE)],
        &[("FAKE_POLLS", "3"), ("FAKE_END", "1")],
    ) else {
        return;
    };
    write_logs(&dir);
    run(
        &purge(PurgeMethod::NvmeSanitize),
        &CancellationToken::new(),
        QUICK,
    )
    .unwrap();
    let log = format!("nvme sanitize-log {DEVICE} -o json");
    assert_eq!(
        calls(&dir),
        [
            log.clone(),
            format!("nvme sanitize {DEVICE} --sanact=2"),
            log.clone(),
            log.clone(),
            log.clone(),
            log,
        ]
    );
}

#[test]
fn a_failed_nvme_sanitize_fails_the_purge_saying_why() {
    let Some(dir) = with_fakes(
        "purge::tests::a_failed_nvme_sanitize_fails_the_purge_saying_why",
        &[("nvme", FAKE_NVME_SANITIZE)],
        &[("FAKE_POLLS", "1"), ("FAKE_END", "3")],
    ) else {
        return;
    };
    write_logs(&dir);
    let err = run(
        &purge(PurgeMethod::NvmeSanitize),
        &CancellationToken::new(),
        QUICK,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        format!(
            "the sanitize of {DEVICE} failed (sanitize log: (3) Most Recent Sanitize Command \
             Failed.); the drive stays in its sanitize failure mode until `nvme sanitize {DEVICE} \
             --sanact=1` ends it, or a new sanitize succeeds"
        )
    );
    assert_eq!(calls(&dir).len(), 4);
}

/// A sanitize that never ends is given up after the timeout, saying how far it got; one in
/// progress when the purge starts (the agent restarted) is waited for, not started again.
#[test]
fn a_sanitize_in_progress_is_waited_for_until_the_timeout() {
    let Some(dir) = with_fakes(
        "purge::tests::a_sanitize_in_progress_is_waited_for_until_the_timeout",
        &[("nvme", FAKE_NVME_SANITIZE)],
        &[("FAKE_POLLS", "1000000"), ("FAKE_END", "2")],
    ) else {
        return;
    };
    write_logs(&dir);
    std::fs::write(dir.join("started"), "").unwrap();
    let pacing = Pacing {
        poll: Duration::from_millis(10),
        timeout: Duration::from_millis(200),
    };
    let err = run(
        &purge(PurgeMethod::NvmeSanitize),
        &CancellationToken::new(),
        pacing,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        format!(
            "the sanitize of {DEVICE} was still in progress after 0s (50% done); not waiting longer"
        )
    );
    assert!(!calls(&dir).iter().any(|c| c.starts_with("nvme sanitize ")));
}

/// Preflight asks the drive before the plan is accepted: a drive whose ATA security the
/// BIOS froze refuses the plan, saying why and how to unfreeze it.
#[test]
fn a_frozen_drive_refuses_a_secure_erase_in_preflight() {
    let Some(dir) = with_fakes(
        "purge::tests::a_frozen_drive_refuses_a_secure_erase_in_preflight",
        &[(
            "hdparm",
            "case \"$1\" in -I) cat \"$PLATTER_TEST_FAKES/identify.txt\";; esac",
        )],
        &[],
    ) else {
        return;
    };
    std::fs::write(dir.join("identify.txt"), HDPARM_FROZEN).unwrap();
    let storage = crate::storage::Storage {
        mount_dir: dir.join("mnt"),
        state_dir: dir.clone(),
        allowed: vec![DEVICE.into()],
        allow_purge: true,
        inventory_roots: crate::probes::inventory::Roots {
            sys: dir.join("no-sys"),
            dev: dir.join("no-dev"),
            mountinfo: "/proc/self/mountinfo".into(),
        },
    };
    let plan = Plan {
        id: "p".into(),
        campaign_id: "c".into(),
        campaign_name: "c".into(),
        host: "vm".into(),
        steps: vec![Step {
            index: 0,
            cell_id: "a".into(),
            repetition: 0,
            warmup: false,
            kind: StepKind::Purge(purge(PurgeMethod::SecureErase)),
        }],
        on_failure: OnFailure::Continue,
        run_as: Default::default(),
    };
    let check = crate::preflight::Check {
        host: "vm",
        storage: &storage,
        substitute: &|s, _, _| s.to_string(),
        agent_uid: 0,
    };
    assert_eq!(
        check.refusal(&plan).as_deref(),
        Some(
            format!(
                "host vm: {DEVICE}'s ATA security is frozen: the BIOS froze it at boot, and a \
                 frozen drive refuses a security erase; a suspend/resume cycle (`systemctl \
                 suspend`) or hot-plugging the drive unfreezes it"
            )
            .as_str()
        )
    );
    assert_eq!(calls(&dir), [format!("hdparm -I {DEVICE}")]);
    // Unfrozen, it is accepted; as another user than root, refused for that, and the drive
    // is not asked.
    std::fs::write(dir.join("identify.txt"), hdparm_ready()).unwrap();
    assert_eq!(check.refusal(&plan), None);
    let user = crate::preflight::Check {
        agent_uid: 1000,
        ..check
    };
    assert!(user
        .refusal(&plan)
        .unwrap()
        .starts_with(&format!("host vm: `prepare:` needs root to purge {DEVICE}")));
    assert_eq!(calls(&dir).len(), 2);
}
