//! Flags on the wire (`ListFlags`, `SetFlagState`) and back: the same `store::flags::Flag`
//! whether `platter flags` reads the store or asks a coordinator.

use platter_proto::v1 as pb;

use crate::store::flags::{Flag, FlagKind, FlagState, Severity};

pub fn kind_to_pb(k: FlagKind) -> pb::FlagKind {
    match k {
        FlagKind::Regression => pb::FlagKind::Regression,
        FlagKind::Drift => pb::FlagKind::Drift,
        FlagKind::Qualification => pb::FlagKind::Qualification,
        FlagKind::Health => pb::FlagKind::Health,
        FlagKind::Peer => pb::FlagKind::Peer,
        FlagKind::Host => pb::FlagKind::Host,
        FlagKind::Firing => pb::FlagKind::Firing,
        FlagKind::Store => pb::FlagKind::Store,
    }
}

/// None for UNSPECIFIED, and for a kind a later build added.
pub fn kind_of(k: i32) -> Option<FlagKind> {
    Some(match pb::FlagKind::try_from(k).ok()? {
        pb::FlagKind::Unspecified => return None,
        pb::FlagKind::Regression => FlagKind::Regression,
        pb::FlagKind::Drift => FlagKind::Drift,
        pb::FlagKind::Qualification => FlagKind::Qualification,
        pb::FlagKind::Health => FlagKind::Health,
        pb::FlagKind::Peer => FlagKind::Peer,
        pb::FlagKind::Host => FlagKind::Host,
        pb::FlagKind::Firing => FlagKind::Firing,
        pb::FlagKind::Store => FlagKind::Store,
    })
}

pub fn state_to_pb(s: FlagState) -> pb::FlagState {
    match s {
        FlagState::Open => pb::FlagState::Open,
        FlagState::Acknowledged => pb::FlagState::Acknowledged,
        FlagState::FalsePositive => pb::FlagState::FalsePositive,
        FlagState::Fixed => pb::FlagState::Fixed,
    }
}

/// None for UNSPECIFIED, and for a state a later build added.
pub fn state_of(s: i32) -> Option<FlagState> {
    Some(match pb::FlagState::try_from(s).ok()? {
        pb::FlagState::Unspecified => return None,
        pb::FlagState::Open => FlagState::Open,
        pb::FlagState::Acknowledged => FlagState::Acknowledged,
        pb::FlagState::FalsePositive => FlagState::FalsePositive,
        pb::FlagState::Fixed => FlagState::Fixed,
    })
}

pub fn flag_to_pb(f: &Flag) -> pb::Flag {
    pb::Flag {
        id: f.id.clone(),
        kind: kind_to_pb(f.kind) as i32,
        severity: match f.severity {
            Severity::Info => pb::FlagSeverity::Info,
            Severity::Warning => pb::FlagSeverity::Warning,
            Severity::Critical => pb::FlagSeverity::Critical,
        } as i32,
        state: state_to_pb(f.state) as i32,
        series: f.series.clone(),
        host: f.host.clone(),
        model: f.model.clone(),
        drive: f.drive.clone(),
        metric: f.metric.clone(),
        cell: f.cell.clone(),
        campaign_id: f.campaign_id.clone(),
        summary: f.summary.clone(),
        evidence_json: f.evidence.to_string(),
        link: f.link.clone(),
        note: f.note.clone(),
        state_by: f.state_by.clone(),
        raised_unix_ms: f.raised_unix_ms,
        updated_unix_ms: f.updated_unix_ms,
        state_unix_ms: f.state_unix_ms,
    }
}

/// A flag as a coordinator answered it. A kind or state this build does not know reads as
/// the nearest it does (a later kind as a host flag, needing a look; a later state as
/// open), severity as a warning: shown, never dropped.
pub fn flag_of(f: pb::Flag) -> Flag {
    Flag {
        kind: kind_of(f.kind).unwrap_or(FlagKind::Host),
        severity: match pb::FlagSeverity::try_from(f.severity) {
            Ok(pb::FlagSeverity::Info) => Severity::Info,
            Ok(pb::FlagSeverity::Critical) => Severity::Critical,
            _ => Severity::Warning,
        },
        state: state_of(f.state).unwrap_or(FlagState::Open),
        // Evidence that is not JSON is kept as the text it is.
        evidence: serde_json::from_str(&f.evidence_json)
            .unwrap_or(serde_json::Value::String(f.evidence_json)),
        id: f.id,
        series: f.series,
        host: f.host,
        model: f.model,
        drive: f.drive,
        metric: f.metric,
        cell: f.cell,
        campaign_id: f.campaign_id,
        summary: f.summary,
        link: f.link,
        note: f.note,
        state_by: f.state_by,
        raised_unix_ms: f.raised_unix_ms,
        updated_unix_ms: f.updated_unix_ms,
        state_unix_ms: f.state_unix_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_state_and_severity_goes_on_the_wire_and_back() {
        for kind in FlagKind::ALL {
            for state in FlagState::ALL {
                for severity in [Severity::Info, Severity::Warning, Severity::Critical] {
                    let f = Flag {
                        id: "0123456789ab".into(),
                        kind,
                        severity,
                        state,
                        series: "nightly".into(),
                        host: "rc66".into(),
                        model: "INTEL SSDSC2BW120A4".into(),
                        drive: "S3Z9".into(),
                        metric: "wall".into(),
                        cell: "bs=4k".into(),
                        campaign_id: "c-1".into(),
                        summary: "REGRESSION …".into(),
                        evidence: serde_json::json!({"runs": ["c-0", "c-1"], "before": 0.05}),
                        link: "/campaigns/c-1".into(),
                        note: "seen".into(),
                        state_by: "vera".into(),
                        raised_unix_ms: 1,
                        updated_unix_ms: 2,
                        state_unix_ms: 3,
                    };
                    assert_eq!(flag_of(flag_to_pb(&f)), f);
                }
            }
        }
        // What a later coordinator may send reads as something to look at.
        let later = pb::Flag {
            kind: 99,
            state: 99,
            severity: 99,
            evidence_json: "not json".into(),
            ..Default::default()
        };
        let f = flag_of(later);
        assert_eq!(
            (f.kind, f.state, f.severity),
            (FlagKind::Host, FlagState::Open, Severity::Warning)
        );
        assert_eq!(f.evidence, serde_json::json!("not json"));
    }
}
