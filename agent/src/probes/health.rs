//! Turns one drive's `smartctl --json` output (smartmontools 7.x: `-a`, `-x` or
//! `--info --health --attributes`) into the contract's [`HealthReading`] and the identity
//! smartctl found, or smartctl's own words for why it could not read the drive. A pure
//! function of the document: it does not run smartctl and never touches a device.
//!
//! Every attribute is `None` where the drive or its protocol does not report it, never a
//! zero for "unknown"; a field of an unexpected type counts as not reported. Fields the
//! parser does not know are ignored, so newer smartctl versions still parse.

use platter_proto::provenance::HealthReading;
use serde_json::{Map, Value};
use thiserror::Error;

/// `smartctl.exit_status` bit 0: the command line did not parse (smartctl also uses it when
/// it cannot tell the device type, e.g. a loop device or an unknown USB bridge).
const EXIT_COMMAND_LINE: u64 = 1 << 0;
/// Bit 1: the device could not be opened (or the identify command failed).
const EXIT_DEVICE_OPEN: u64 = 1 << 1;
/// Bit 2: some SMART or other command to the disk failed, or a SMART data structure had a
/// bad checksum. Drives behind RAID controllers and some SSDs set it on every run while
/// answering everything else, so it alone makes a drive unreadable only when nothing was read.
const EXIT_COMMAND_FAILED: u64 = 1 << 2;
// Bits 3 to 7 (failing SMART status, attributes past their thresholds, errors in the logs)
// are the drive's health, read, not a failure to read it.

/// NVMe counts data units of 1,000 blocks of 512 bytes (NVMe base specification, SMART /
/// Health Information log, Data Units Written).
const NVME_DATA_UNIT_BYTES: u64 = 512_000;
/// ATA attribute 241 counts logical blocks; this size when smartctl does not say.
const DEFAULT_LOGICAL_BLOCK_SIZE: u64 = 512;
/// The ATA device statistics entry (page 7, offset 8) that is NVMe's percentage used.
const ATA_PERCENTAGE_USED_STAT: &str = "Percentage Used Endurance Indicator";
/// smartctl's name for attribute 241 when its raw value counts logical blocks; other drives
/// put other units there (Intel's Host_Writes_32MiB, Kingston's Lifetime_Writes_GiB).
const ATA_TOTAL_LBAS_WRITTEN: &str = "Total_LBAs_Written";

#[derive(Debug, Error)]
pub enum HealthError {
    #[error("smartctl output is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("not smartctl --json output: no \"smartctl\" object")]
    NotSmartctl,
}

/// What one `smartctl --json` run says about a drive.
// One is made per drive per snapshot and moved once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// smartctl read the drive (its verdict may still be "failing").
    Read {
        reading: HealthReading,
        identity: Identity,
    },
    /// smartctl could not read the drive: its error messages joined by "; " (or what its
    /// exit status means when it printed none), and that exit status.
    Unreadable { message: String, exit_status: u64 },
}

/// The drive as smartctl names it; "" where it does not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// `model_name` (ATA, NVMe), `scsi_model_name` (SCSI, smartctl 7.3 and later).
    pub model: String,
    pub serial: String,
    /// `firmware_version` (ATA, NVMe), `scsi_revision` / `revision` (SCSI).
    pub firmware: String,
    /// `naa.5000c500a1b2c3d4` from ATA's `wwn` or SCSI's `logical_unit_id`,
    /// `eui.002538b311b35fbb` from an NVMe namespace's EUI-64.
    pub wwn: String,
}

/// Parses one `smartctl --json` document.
pub fn parse(json: &[u8]) -> Result<Reading, HealthError> {
    let doc: Value = serde_json::from_slice(json).map_err(HealthError::Json)?;
    let smartctl = doc
        .get("smartctl")
        .and_then(Value::as_object)
        .ok_or(HealthError::NotSmartctl)?;
    // A document without an exit status (hand-trimmed ones) is taken as a clean run.
    let exit_status = smartctl
        .get("exit_status")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let reading = health(&doc, smartctl);
    // A document naming no device (`smartctl -j -V`, or one cut short by a failure) read
    // nothing, whatever its exit status.
    let no_device = doc.get("device").is_none();
    let failed = exit_status & (EXIT_COMMAND_LINE | EXIT_DEVICE_OPEN) != 0
        || (exit_status & EXIT_COMMAND_FAILED != 0 && !reports_anything(&reading));
    if no_device || failed {
        return Ok(Reading::Unreadable {
            message: unreadable_message(smartctl, exit_status),
            exit_status,
        });
    }
    Ok(Reading::Read {
        reading,
        identity: identity(&doc),
    })
}

fn health(doc: &Value, smartctl: &Map<String, Value>) -> HealthReading {
    let nvme = |key: &str| u64_at(doc, &["nvme_smart_health_information_log", key]);
    let ata = AtaAttributes::of(doc);
    HealthReading {
        // "smartctl 7.3" from `smartctl.version` [major, minor].
        tool: tool(smartctl),
        // `device.protocol`: "ATA", "NVMe", "SCSI".
        protocol: str_at(doc, &["device", "protocol"]).to_string(),
        // `smart_status.passed`: the drive's own overall verdict.
        passed: at(doc, &["smart_status", "passed"]).and_then(Value::as_bool),
        // `temperature.current`, °C, for all protocols. Not ATA 194/190, whose raw values
        // pack the minimum and maximum beside the current temperature.
        temperature_c: at(doc, &["temperature", "current"]).and_then(Value::as_i64),
        // `power_on_time.hours`, for all protocols.
        power_on_hours: u64_at(doc, &["power_on_time", "hours"]),
        // NVMe unsafe shutdowns; ATA 192 (Power-Off_Retract_Count, Unsafe_Shutdown_Count on
        // some SSDs) raw, else 174 (Unexpect_Power_Loss_Ct) raw.
        unsafe_shutdowns: nvme("unsafe_shutdowns")
            .or_else(|| ata.raw(192))
            .or_else(|| ata.raw(174)),
        // NVMe media and data integrity errors; ATA 187 (Reported_Uncorrect) raw.
        media_errors: nvme("media_errors").or_else(|| ata.raw(187)),
        // ATA 5 (Reallocated_Sector_Ct) raw; SCSI grown defect list.
        reallocated_sectors: ata
            .raw(5)
            .or_else(|| u64_at(doc, &["scsi_grown_defect_list"])),
        // ATA 197 (Current_Pending_Sector) raw.
        pending_sectors: ata.raw(197),
        // ATA 198 (Offline_Uncorrectable) raw; SCSI total uncorrected read, write and verify
        // errors (the error counter log pages the drive has).
        uncorrectable_errors: ata.raw(198).or_else(|| scsi_uncorrected(doc)),
        // ATA 199 (UDMA_CRC_Error_Count) raw. SAS drives count link errors per phy
        // (`scsi_sas_port_N.phy_M.invalid_dword_count`, `running_disparity_error_count`), but
        // only with `-x` / `--log=sasphy`, which no fixture here has; so SAS gives None.
        crc_errors: ata.raw(199),
        // NVMe critical warning bits.
        critical_warning: nvme("critical_warning"),
        // NVMe percentage used; SCSI percentage used endurance indicator; ATA device
        // statistics' "Percentage Used Endurance Indicator" (only with `-x`).
        percentage_used: nvme("percentage_used")
            .or_else(|| u64_at(doc, &["scsi_percentage_used_endurance_indicator"]))
            .or_else(|| ata_percentage_used(doc)),
        // NVMe available spare, %.
        available_spare: nvme("available_spare"),
        // NVMe data units written × 512,000; ATA 241 (Total_LBAs_Written) raw × the logical
        // block size; SCSI write gigabytes processed × 10⁹.
        data_written_bytes: nvme("data_units_written")
            .and_then(|units| units.checked_mul(NVME_DATA_UNIT_BYTES))
            .or_else(|| ata_bytes_written(doc, &ata))
            .or_else(|| {
                at(
                    doc,
                    &["scsi_error_counter_log", "write", "gigabytes_processed"],
                )
                .and_then(Value::as_str)
                .and_then(giga)
            }),
    }
}

fn tool(smartctl: &Map<String, Value>) -> String {
    let version = smartctl.get("version").and_then(Value::as_array);
    let part = |i: usize| version.and_then(|v| v.get(i)).and_then(Value::as_u64);
    match (part(0), part(1)) {
        (Some(major), Some(minor)) => format!("smartctl {major}.{minor}"),
        _ => "smartctl".to_string(),
    }
}

/// Whether any attribute was read, beyond the tool and protocol.
fn reports_anything(reading: &HealthReading) -> bool {
    *reading
        != HealthReading {
            tool: reading.tool.clone(),
            protocol: reading.protocol.clone(),
            ..HealthReading::default()
        }
}

/// `ata_smart_attributes.table[]`: each attribute's `raw.value` by `id`. Only the counters
/// are read from it; some other raw values pack several bytes (194, 190, 240).
struct AtaAttributes<'a>(&'a [Value]);

impl<'a> AtaAttributes<'a> {
    fn of(doc: &'a Value) -> Self {
        let table = at(doc, &["ata_smart_attributes", "table"]).and_then(Value::as_array);
        AtaAttributes(table.map(Vec::as_slice).unwrap_or_default())
    }

    fn attribute(&self, id: u64) -> Option<&'a Value> {
        self.0
            .iter()
            .find(|a| a.get("id").and_then(Value::as_u64) == Some(id))
    }

    fn raw(&self, id: u64) -> Option<u64> {
        self.attribute(id)
            .and_then(|a| u64_at(a, &["raw", "value"]))
    }
}

fn ata_bytes_written(doc: &Value, ata: &AtaAttributes<'_>) -> Option<u64> {
    let attribute = ata.attribute(241)?;
    if attribute.get("name").and_then(Value::as_str) != Some(ATA_TOTAL_LBAS_WRITTEN) {
        return None;
    }
    let block = u64_at(doc, &["logical_block_size"])
        .filter(|&size| size > 0)
        .unwrap_or(DEFAULT_LOGICAL_BLOCK_SIZE);
    u64_at(attribute, &["raw", "value"])?.checked_mul(block)
}

/// `ata_device_statistics.pages[].table[]`, the entry so named, unless flagged invalid.
fn ata_percentage_used(doc: &Value) -> Option<u64> {
    let pages = at(doc, &["ata_device_statistics", "pages"])?.as_array()?;
    pages
        .iter()
        .filter_map(|page| page.get("table").and_then(Value::as_array))
        .flatten()
        .find(|entry| entry.get("name").and_then(Value::as_str) == Some(ATA_PERCENTAGE_USED_STAT))
        .filter(|entry| at(entry, &["flags", "valid"]).and_then(Value::as_bool) != Some(false))
        .and_then(|entry| u64_at(entry, &["value"]))
}

/// The sum of `total_uncorrected_errors` over the read, write and verify error counter log
/// pages the drive has; None when it has none of them.
fn scsi_uncorrected(doc: &Value) -> Option<u64> {
    let counts: Vec<u64> = ["read", "write", "verify"]
        .iter()
        .filter_map(|page| {
            u64_at(
                doc,
                &["scsi_error_counter_log", page, "total_uncorrected_errors"],
            )
        })
        .collect();
    if counts.is_empty() {
        return None;
    }
    counts.iter().try_fold(0u64, |sum, &n| sum.checked_add(n))
}

/// smartctl prints gigabytes (10⁹ bytes) as a decimal string ("13467.004", `%.3f`): read
/// exactly, without a float's rounding.
fn giga(text: &str) -> Option<u64> {
    const FRACTION_DIGITS: usize = 9;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
    if !digits(whole) || !digits(fraction) {
        return None;
    }
    // Digits past the ninth are fractions of a byte.
    let mut fraction = fraction[..fraction.len().min(FRACTION_DIGITS)].to_string();
    while fraction.len() < FRACTION_DIGITS {
        fraction.push('0');
    }
    whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(fraction.parse().ok()?)
}

fn identity(doc: &Value) -> Identity {
    let first = |keys: &[&str]| {
        keys.iter()
            .map(|key| str_at(doc, &[key]))
            .find(|s| !s.is_empty())
            .unwrap_or_default()
            .to_string()
    };
    Identity {
        model: first(&["model_name", "scsi_model_name"]),
        serial: first(&["serial_number"]),
        firmware: first(&["firmware_version", "scsi_revision", "revision"]),
        wwn: ata_wwn(doc)
            .or_else(|| nvme_eui64(doc))
            .or_else(|| scsi_naa(doc))
            .unwrap_or_default(),
    }
}

/// ATA `wwn` {naa, oui, id}: smartctl prints it as "LU WWN Device Id: 5 002538 e40a22954",
/// a 4-bit NAA, a 24-bit OUI and a 36-bit id; platter writes the 16 digits as one.
fn ata_wwn(doc: &Value) -> Option<String> {
    let naa = u64_at(doc, &["wwn", "naa"]).filter(|&n| n <= 0xf)?;
    let oui = u64_at(doc, &["wwn", "oui"]).filter(|&n| n <= 0xff_ffff)?;
    let id = u64_at(doc, &["wwn", "id"]).filter(|&n| n <= 0xf_ffff_ffff)?;
    Some(format!("naa.{naa:x}{oui:06x}{id:09x}"))
}

/// The first NVMe namespace's EUI-64 {oui, ext_id}: a 24-bit OUI and a 40-bit extension, as
/// Linux names it (`nvme-eui.002538…`).
fn nvme_eui64(doc: &Value) -> Option<String> {
    let namespaces = doc.get("nvme_namespaces")?.as_array()?;
    namespaces.iter().find_map(|ns| {
        let oui = u64_at(ns, &["eui64", "oui"]).filter(|&n| n <= 0xff_ffff)?;
        let ext = u64_at(ns, &["eui64", "ext_id"]).filter(|&n| n <= 0xff_ffff_ffff)?;
        Some(format!("eui.{oui:06x}{ext:010x}"))
    })
}

/// SCSI `logical_unit_id` ("0x5000c500d7c94dff"), when it is an IEEE registered NAA name
/// (NAA 5, or 6 for the 32-digit extended form).
fn scsi_naa(doc: &Value) -> Option<String> {
    let hex = str_at(doc, &["logical_unit_id"]).strip_prefix("0x")?;
    let naa = matches!(
        (hex.len(), hex.as_bytes().first()),
        (16, Some(b'5')) | (32, Some(b'6'))
    );
    (naa && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("naa.{}", hex.to_ascii_lowercase()))
}

/// smartctl's error-severity messages joined by "; "; what the exit status means when it
/// printed none.
fn unreadable_message(smartctl: &Map<String, Value>, exit_status: u64) -> String {
    let errors: Vec<&str> = smartctl
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|m| m.get("severity").and_then(Value::as_str) == Some("error"))
        .filter_map(|m| m.get("string").and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
        .collect();
    if !errors.is_empty() {
        return errors.join("; ");
    }
    let meanings: Vec<&str> = [
        (EXIT_COMMAND_LINE, "the command line did not parse"),
        (EXIT_DEVICE_OPEN, "the device could not be opened"),
        (EXIT_COMMAND_FAILED, "a command to the device failed"),
    ]
    .iter()
    .filter(|(bit, _)| exit_status & bit != 0)
    .map(|(_, meaning)| *meaning)
    .collect();
    if meanings.is_empty() {
        format!("smartctl named no device (exit status {exit_status})")
    } else {
        format!(
            "smartctl exit status {exit_status}: {}",
            meanings.join(", ")
        )
    }
}

fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, key| v.get(key))
}

fn u64_at(value: &Value, path: &[&str]) -> Option<u64> {
    at(value, path).and_then(Value::as_u64)
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    at(value, path).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    macro_rules! fixture {
        ($name:literal) => {
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/smartctl/",
                $name
            ))
        };
    }

    const SSD_860EVO: &[u8] = fixture!("ata-ssd-samsung-860evo.json");
    const HDD_SEAGATE: &[u8] = fixture!("ata-hdd-seagate-st3500418as.json");
    const SSD_MICRON: &[u8] = fixture!("ata-ssd-micron-5300.json");
    const SSD_KINGSTON_EXIT4: &[u8] = fixture!("ata-ssd-kingston-a400-exit4.json");
    const USB_HITACHI_FAILING: &[u8] = fixture!("ata-usb-jmicron-hitachi-failing.json");
    const NVME_PM9A1: &[u8] = fixture!("nvme-samsung-pm9a1.json");
    const NVME_FAILING: &[u8] = fixture!("nvme-samsung-pm1725a-failing.json");
    const SAS_SSD: &[u8] = fixture!("scsi-sas-ssd-samsung-mzilt960.json");
    const SAS_HDD: &[u8] = fixture!("scsi-sas-hdd-seagate-st18000nm004j.json");
    const FAIL_LOOP: &[u8] = fixture!("fail-loop-device.json");
    const FAIL_DETECT: &[u8] = fixture!("fail-unable-to-detect.json");
    const FAIL_OPEN: &[u8] = fixture!("fail-windows-open-error.json");

    const ALL: [(&str, &[u8]); 12] = [
        ("ata-ssd-samsung-860evo", SSD_860EVO),
        ("ata-hdd-seagate-st3500418as", HDD_SEAGATE),
        ("ata-ssd-micron-5300", SSD_MICRON),
        ("ata-ssd-kingston-a400-exit4", SSD_KINGSTON_EXIT4),
        ("ata-usb-jmicron-hitachi-failing", USB_HITACHI_FAILING),
        ("nvme-samsung-pm9a1", NVME_PM9A1),
        ("nvme-samsung-pm1725a-failing", NVME_FAILING),
        ("scsi-sas-ssd-samsung-mzilt960", SAS_SSD),
        ("scsi-sas-hdd-seagate-st18000nm004j", SAS_HDD),
        ("fail-loop-device", FAIL_LOOP),
        ("fail-unable-to-detect", FAIL_DETECT),
        ("fail-windows-open-error", FAIL_OPEN),
    ];

    fn read(json: &[u8]) -> (HealthReading, Identity) {
        match parse(json) {
            Ok(Reading::Read { reading, identity }) => (reading, identity),
            other => panic!("want a reading, got {other:?}"),
        }
    }

    fn unreadable(json: &[u8]) -> (String, u64) {
        match parse(json) {
            Ok(Reading::Unreadable {
                message,
                exit_status,
            }) => (message, exit_status),
            other => panic!("want an unreadable drive, got {other:?}"),
        }
    }

    fn identity(model: &str, serial: &str, firmware: &str, wwn: &str) -> Identity {
        Identity {
            model: model.into(),
            serial: serial.into(),
            firmware: firmware.into(),
            wwn: wwn.into(),
        }
    }

    // Every expected reading below lists all fields, the numbers as the fixture has them.

    #[test]
    fn sata_ssd_with_device_statistics() {
        let (reading, id) = read(SSD_860EVO);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.0".into(),
                protocol: "ATA".into(),
                passed: Some(true),
                temperature_c: Some(36),
                power_on_hours: Some(14551),
                // Neither 192 nor 174 in its table.
                unsafe_shutdowns: None,
                // 187 Uncorrectable_Error_Cnt.
                media_errors: Some(0),
                reallocated_sectors: Some(0),
                pending_sectors: None,
                uncorrectable_errors: None,
                crc_errors: Some(0),
                critical_warning: None,
                // Device statistics page 7; `-x` output.
                percentage_used: Some(19),
                available_spare: None,
                // 241 Total_LBAs_Written 64777770148 × 512 (its "Logical Sectors Written"
                // statistic says the same count).
                data_written_bytes: Some(64_777_770_148 * 512),
            }
        );
        // smartctl prints it "LU WWN Device Id: 5 002538 e40a22954".
        assert_eq!(
            id,
            identity(
                "Samsung SSD 860 EVO 500GB",
                "S3YZNB0KB00864E",
                "RVT02B6Q",
                "naa.5002538e40a22954"
            )
        );
    }

    #[test]
    fn sata_hdd() {
        let (reading, id) = read(HDD_SEAGATE);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "ATA".into(),
                passed: Some(true),
                temperature_c: Some(33),
                power_on_hours: Some(44668),
                unsafe_shutdowns: None,
                media_errors: Some(0),
                reallocated_sectors: Some(304),
                pending_sectors: Some(0),
                uncorrectable_errors: Some(0),
                crc_errors: Some(0),
                critical_warning: None,
                percentage_used: None,
                available_spare: None,
                data_written_bytes: Some(3_022_432_698 * 512),
            }
        );
        // The exporter's collector redacts serial, firmware and the WWN's id.
        assert_eq!(
            id,
            identity(
                "ST3500418AS",
                "REDACTED",
                "REDACTED",
                "naa.5000c500499602d2"
            )
        );
    }

    #[test]
    fn sata_ssd_counting_power_loss_in_174() {
        let (reading, id) = read(SSD_MICRON);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "ATA".into(),
                passed: Some(true),
                temperature_c: Some(24),
                power_on_hours: Some(4175),
                // No 192: 174 Unexpect_Power_Loss_Ct.
                unsafe_shutdowns: Some(16),
                media_errors: Some(0),
                reallocated_sectors: Some(0),
                pending_sectors: Some(0),
                uncorrectable_errors: Some(0),
                crc_errors: Some(24),
                critical_warning: None,
                percentage_used: None,
                available_spare: None,
                // Its Total_LBAs_Written is attribute 246, not 241.
                data_written_bytes: None,
            }
        );
        assert_eq!(id.wwn, "naa.500a0750499602d2");
        assert_eq!(id.model, "Micron_5300_MTFDDAK1T9TDS");
    }

    #[test]
    fn command_failed_bit_with_a_reading_is_read() {
        // exit status 4 (a SMART command failed), yet the drive answered the rest.
        let (reading, id) = read(SSD_KINGSTON_EXIT4);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "ATA".into(),
                passed: Some(true),
                temperature_c: Some(38),
                power_on_hours: Some(4994),
                // 192 Unsafe_Shutdown_Count.
                unsafe_shutdowns: Some(3),
                media_errors: Some(0),
                reallocated_sectors: None,
                pending_sectors: None,
                uncorrectable_errors: None,
                crc_errors: Some(0),
                critical_warning: None,
                percentage_used: None,
                available_spare: None,
                // 241 is Lifetime_Writes_GiB here: not logical blocks.
                data_written_bytes: None,
            }
        );
        assert_eq!(id.model, "KINGSTON SA400M8120G");
        assert_eq!(id.wwn, "naa.50026b70499602d2");
    }

    #[test]
    fn failing_drive_behind_a_usb_bridge_is_read() {
        // exit status 216: failing SMART status, attributes past threshold, errors logged.
        let (reading, id) = read(USB_HITACHI_FAILING);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.1".into(),
                protocol: "ATA".into(),
                passed: Some(false),
                temperature_c: Some(25),
                power_on_hours: Some(65592),
                unsafe_shutdowns: Some(6244),
                media_errors: None,
                reallocated_sectors: Some(1975),
                pending_sectors: Some(8),
                uncorrectable_errors: Some(0),
                crc_errors: Some(0),
                critical_warning: None,
                percentage_used: None,
                available_spare: None,
                data_written_bytes: None,
            }
        );
        assert_eq!(
            id,
            identity(
                "Hitachi HDS721050DLE630",
                "MSK423Y20S3HBC",
                "MS1OA650",
                "naa.5000cca37fca81a8"
            )
        );
    }

    #[test]
    fn nvme() {
        let (reading, id) = read(NVME_PM9A1);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "NVMe".into(),
                passed: Some(true),
                temperature_c: Some(30),
                power_on_hours: Some(10407),
                unsafe_shutdowns: Some(1),
                media_errors: Some(0),
                reallocated_sectors: None,
                pending_sectors: None,
                uncorrectable_errors: None,
                crc_errors: None,
                critical_warning: Some(0),
                percentage_used: Some(16),
                available_spare: Some(100),
                data_written_bytes: Some(118_137_665 * 512_000),
            }
        );
        // Namespace 1's EUI-64: OUI 9528 (0x002538), extension 769096114107.
        assert_eq!(
            id,
            identity(
                "SAMSUNG MZVL21T0HCLR-00B00",
                "REDACTED",
                "REDACTED",
                "eui.002538b311b35fbb"
            )
        );
    }

    #[test]
    fn nvme_with_a_critical_warning() {
        // exit status 8: the drive says it is failing (volatile memory backup failed).
        let (reading, id) = read(NVME_FAILING);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "NVMe".into(),
                passed: Some(false),
                temperature_c: Some(40),
                power_on_hours: Some(18376),
                unsafe_shutdowns: Some(4),
                media_errors: Some(0),
                reallocated_sectors: None,
                pending_sectors: None,
                uncorrectable_errors: None,
                crc_errors: None,
                critical_warning: Some(16),
                percentage_used: Some(0),
                available_spare: Some(100),
                data_written_bytes: Some(147_556_750 * 512_000),
            }
        );
        // `--info` without namespaces: no EUI-64 to name it by.
        assert_eq!(
            id,
            identity("SAMSUNG MZWLL3T2HAJQ-00005", "REDACTED", "REDACTED", "")
        );
    }

    #[test]
    fn sas_ssd() {
        let (reading, id) = read(SAS_SSD);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "SCSI".into(),
                passed: Some(true),
                temperature_c: Some(35),
                power_on_hours: Some(3862),
                unsafe_shutdowns: None,
                media_errors: None,
                reallocated_sectors: Some(0),
                pending_sectors: None,
                // read + write + verify, all 0.
                uncorrectable_errors: Some(0),
                crc_errors: None,
                critical_warning: None,
                percentage_used: Some(0),
                available_spare: None,
                // write.gigabytes_processed "6082.745".
                data_written_bytes: Some(6_082_745_000_000),
            }
        );
        assert_eq!(
            id,
            identity(
                "SAMSUNG MZILT960HBHQ/007",
                "S5G1NC0W102239",
                "GXA0",
                "naa.5002538b731302a0"
            )
        );
    }

    #[test]
    fn sas_hdd() {
        let (reading, id) = read(SAS_HDD);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.4".into(),
                protocol: "SCSI".into(),
                passed: Some(true),
                temperature_c: Some(33),
                power_on_hours: Some(1249),
                unsafe_shutdowns: None,
                media_errors: None,
                reallocated_sectors: Some(0),
                pending_sectors: None,
                // read + write; it has no verify page.
                uncorrectable_errors: Some(0),
                crc_errors: None,
                critical_warning: None,
                percentage_used: None,
                available_spare: None,
                data_written_bytes: Some(13_467_004_000_000),
            }
        );
        assert_eq!(
            id,
            identity(
                "SEAGATE ST18000NM004J",
                "ZR51ZEKN0000C2061A1W",
                "E002",
                "naa.5000c500d7c94dff"
            )
        );
    }

    #[test]
    fn unreadable_devices_in_smartctls_words() {
        assert_eq!(
            unreadable(FAIL_LOOP),
            ("/dev/loop0: Unable to detect device type".to_string(), 1)
        );
        assert_eq!(
            unreadable(FAIL_DETECT),
            (
                "/dev/nonexistent: Unable to detect device type".to_string(),
                1
            )
        );
        assert_eq!(
            unreadable(FAIL_OPEN),
            (
                r"Smartctl open device: /dev/sda failed: \\.\PhysicalDrive0: Open failed, Error=5"
                    .to_string(),
                2
            )
        );
    }

    #[test]
    fn several_errors_are_joined_and_warnings_left_out() {
        let doc = br#"{"smartctl": {"version": [7, 3], "exit_status": 2, "messages": [
            {"string": "first", "severity": "error"},
            {"string": "only a warning", "severity": "warning"},
            {"string": "second", "severity": "error"}]}}"#;
        assert_eq!(unreadable(doc), ("first; second".to_string(), 2));
    }

    #[test]
    fn exit_status_without_messages_says_what_it_means() {
        let doc = br#"{"smartctl": {"version": [7, 3], "exit_status": 6}}"#;
        assert_eq!(
            unreadable(doc),
            (
                "smartctl exit status 6: the device could not be opened, \
                 a command to the device failed"
                    .to_string(),
                6
            )
        );
        // A clean run that names no device (`smartctl -j -V`) read nothing either.
        let doc = br#"{"smartctl": {"version": [7, 3], "exit_status": 0}}"#;
        assert_eq!(
            unreadable(doc),
            ("smartctl named no device (exit status 0)".to_string(), 0)
        );
    }

    #[test]
    fn command_failed_bit_without_a_reading_is_unreadable() {
        let doc = br#"{"smartctl": {"version": [7, 3], "exit_status": 4, "messages": [
            {"string": "Read SMART Data failed: scsi error aborted command", "severity": "error"}]},
            "device": {"name": "/dev/sdb", "protocol": "ATA"}}"#;
        assert_eq!(
            unreadable(doc),
            (
                "Read SMART Data failed: scsi error aborted command".to_string(),
                4
            )
        );
    }

    #[test]
    fn zero_media_errors_are_some_zero() {
        assert_eq!(read(NVME_PM9A1).0.media_errors, Some(0));
        assert_eq!(read(HDD_SEAGATE).0.media_errors, Some(0));
        // …while a drive without the counter has none at all.
        assert_eq!(read(USB_HITACHI_FAILING).0.media_errors, None);
    }

    #[test]
    fn truncated_output_is_a_json_error() {
        for (name, json) in ALL {
            let half = &json[..json.len() / 2];
            let err = parse(half).unwrap_err();
            assert!(matches!(err, HealthError::Json(_)), "{name}: {err:?}");
            let text = err.to_string();
            assert!(
                text.starts_with("smartctl output is not JSON: EOF while parsing"),
                "{name}: {text}"
            );
        }
        assert_eq!(
            parse(b"").unwrap_err().to_string(),
            "smartctl output is not JSON: EOF while parsing a value at line 1 column 0"
        );
    }

    #[test]
    fn garbage_is_an_error() {
        // What smartctl prints without --json.
        let text = b"smartctl 7.3 2022-02-28 r5338 [x86_64-linux-6.1.0-13-amd64] (local build)\n";
        let err = parse(text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "smartctl output is not JSON: expected value at line 1 column 1"
        );
        assert!(matches!(
            parse(b"\xff\xfe\x00garbage"),
            Err(HealthError::Json(_))
        ));
        assert!(matches!(
            parse(b"{\"smartctl\": {}} trailing"),
            Err(HealthError::Json(_))
        ));
    }

    #[test]
    fn json_that_is_not_smartctls_is_an_error() {
        for doc in [
            &br#"{"jobs": []}"#[..],
            b"[]",
            b"3",
            b"null",
            br#"{"smartctl": 7}"#,
            br#"{"smartctl": [7, 3]}"#,
        ] {
            let err = parse(doc).unwrap_err();
            assert!(matches!(err, HealthError::NotSmartctl), "{err:?}");
            assert_eq!(
                err.to_string(),
                "not smartctl --json output: no \"smartctl\" object"
            );
        }
    }

    #[test]
    fn unknown_fields_are_ignored() {
        for (name, json) in ALL {
            let mut doc: Value = serde_json::from_slice(json).unwrap();
            let extra = serde_json::json!({"nested": [1, "two", {"three": null}]});
            let root = doc.as_object_mut().unwrap();
            root.insert("platter_future_field".into(), extra.clone());
            root["smartctl"]
                .as_object_mut()
                .unwrap()
                .insert("pre_release".into(), Value::Bool(false));
            for section in [
                "nvme_smart_health_information_log",
                "scsi_error_counter_log",
            ] {
                if let Some(s) = root.get_mut(section).and_then(Value::as_object_mut) {
                    s.insert("new_counter".into(), extra.clone());
                }
            }
            let more = serde_json::to_vec(&doc).unwrap();
            assert_eq!(parse(&more).unwrap(), parse(json).unwrap(), "{name}");
        }
    }

    #[test]
    fn fields_of_another_type_are_not_reported() {
        let doc = br#"{"smartctl": {"version": [7, 3], "exit_status": 0},
            "device": {"protocol": "NVMe"},
            "temperature": {"current": "hot"},
            "smart_status": {"passed": 1},
            "power_on_time": {"hours": -5},
            "nvme_smart_health_information_log": {"media_errors": 0, "unsafe_shutdowns": 1.5}}"#;
        let (reading, id) = read(doc);
        assert_eq!(
            reading,
            HealthReading {
                tool: "smartctl 7.3".into(),
                protocol: "NVMe".into(),
                media_errors: Some(0),
                ..HealthReading::default()
            }
        );
        assert_eq!(id, Identity::default());
    }

    #[test]
    fn gigabytes_are_read_exactly() {
        assert_eq!(giga("13467.004"), Some(13_467_004_000_000));
        assert_eq!(giga("0.001"), Some(1_000_000));
        assert_eq!(giga("12"), Some(12_000_000_000));
        assert_eq!(giga("1.0000000019"), Some(1_000_000_001));
        for bad in [
            "",
            ".5",
            "1.",
            "-1.0",
            "1e3",
            "1.2.3",
            " 1.0",
            "99999999999999999999.0",
        ] {
            assert_eq!(giga(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn world_wide_names_out_of_range_are_left_out() {
        let doc = br#"{"smartctl": {"version": [7, 3], "exit_status": 0},
            "device": {"protocol": "ATA"}, "smart_status": {"passed": true},
            "wwn": {"naa": 5, "oui": 16777216, "id": 1},
            "logical_unit_id": "0x1234567890abcdef"}"#;
        assert_eq!(read(doc).1.wwn, "");
    }
}
