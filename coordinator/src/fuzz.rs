//! Fuzz target bodies for what reaches the coordinator from outside: campaign files and
//! the messages of the AgentLink stream (decoded and converted as either side receives
//! them). Each takes arbitrary bytes and panics only on a bug. The libFuzzer targets in
//! `fuzz/` and the short budget in `tests/fuzz_short.rs` both call these; the agent's own
//! targets (journal, tool parsers) are in `platter_agent::fuzz`. Nothing here is used by
//! the coordinator itself.

use platter_agent::testing::Entry;
use platter_proto::inventory::Device;
use platter_proto::model::{Plan, Record, RecordKind};
use platter_proto::v1 as pb;
use prost::Message;

use crate::spec;

/// The campaign parser: any text is a campaign or an error that points into the file (a
/// line of the text, or the line just after its end for "missing" errors) and renders.
pub fn spec(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match spec::parse("fuzz.yaml", &text) {
        Ok(campaign) => {
            assert!(!campaign.cells.is_empty(), "a campaign without cells");
        }
        Err(errors) => {
            let rendered = errors.to_string();
            let lines = yaml_lines(&text);
            assert!(!errors.is_empty(), "an error without a mistake");
            for e in errors.all() {
                assert_eq!(e.file, "fuzz.yaml", "{rendered}");
                assert!(
                    (1..=lines + 1).contains(&e.line),
                    "line {} outside the file's {lines} lines: {rendered}",
                    e.line
                );
                assert!(e.column >= 1, "column 0: {rendered}");
            }
            // Every mistake, in file order.
            let at: Vec<(usize, usize)> = errors.all().iter().map(|e| (e.line, e.column)).collect();
            assert!(
                at.windows(2).all(|w| w[0] <= w[1]),
                "not in file order: {rendered}"
            );
        }
    }
}

/// How many lines the text has as YAML counts them (`\n`, `\r\n` and a lone `\r` each
/// end one; a last line without a break counts too), so an error's line can be checked.
fn yaml_lines(text: &str) -> usize {
    let mut breaks = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' || (c == '\r' && chars.peek() != Some(&'\n')) {
            breaks += 1;
        }
    }
    let unterminated = !text.is_empty() && !text.ends_with(['\n', '\r']);
    breaks + usize::from(unterminated)
}

/// The AgentLink stream: `data` decoded as an `AgentMessage` (what the coordinator
/// receives) and as a `CoordinatorMessage` (what the agent receives), then converted to
/// domain types as `rpc::agent_link` and the agent's link do. A message either converts
/// or is rejected; one that converts survives domain → proto → domain unchanged, and a
/// plan or record survives the agent's journal (JSON) unchanged.
pub fn wire(data: &[u8]) {
    if let Ok(m) = pb::AgentMessage::decode(data) {
        use pb::agent_message::Kind;
        match m.kind {
            Some(Kind::Hello(h)) => h.devices.into_iter().for_each(device),
            Some(Kind::Inventory(i)) => i.devices.into_iter().for_each(device),
            Some(Kind::Record(r)) => record(r),
            Some(Kind::Heartbeat(_)) | None => {}
        }
    }
    if let Ok(m) = pb::CoordinatorMessage::decode(data) {
        if let Some(pb::coordinator_message::Kind::Plan(p)) = m.kind {
            plan(p);
        }
    }
}

fn record(r: pb::Record) {
    let Ok(rec) = Record::try_from(r) else { return };
    let again = Record::try_from(pb::Record::from(&rec)).expect("a converted record converts back");
    assert_eq!(again, rec, "record round trip");
    // The agent journals the records it makes; their values are finite, or NaN when
    // missing (the parsers' targets check that they make no infinite ones).
    let finite_or_missing = match &rec.kind {
        RecordKind::Step(e) => e.samples.iter().all(|s| !s.value.is_infinite()),
        _ => true,
    };
    if finite_or_missing {
        journal_round_trip(Entry::Record(rec));
    }
}

fn plan(p: pb::Plan) {
    let Ok(plan) = Plan::try_from(p) else { return };
    let again = Plan::try_from(pb::Plan::from(&plan)).expect("a converted plan converts back");
    assert_eq!(again, plan, "plan round trip");
    // The agent journals every plan it receives before it acknowledges it.
    journal_round_trip(Entry::Plan(plan));
}

/// What the agent journals reads back as it was (`Journal::append` writes an entry as one
/// JSON line, replay reads it).
fn journal_round_trip(entry: Entry) {
    let line = serde_json::to_vec(&entry).expect("journal entries serialize");
    let back: Entry = serde_json::from_slice(&line).unwrap_or_else(|e| {
        panic!(
            "a journaled entry does not read back ({e}): {}",
            String::from_utf8_lossy(&line)
        )
    });
    assert_eq!(back, entry, "journal round trip");
}

fn device(d: pb::Device) {
    let device = Device::from(d);
    let again = Device::from(pb::Device::from(&device));
    assert_eq!(again, device, "device round trip");
}
