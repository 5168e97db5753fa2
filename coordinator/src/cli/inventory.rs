//! `platter inventory`: this host's drives as an agent would see them, or every agent's.

use super::*;

pub(super) async fn inventory(a: InventoryArgs) -> anyhow::Result<i32> {
    let InventoryArgs {
        client,
        format,
        health: drives_health,
    } = a;
    if drives_health {
        return health(format);
    }
    let client = client.coordinator.is_some().then_some(client);
    of(client.as_ref(), format).await
}

/// This host's drives (no coordinator) or every agent's, in `format`.
async fn of(coordinator: Option<&ClientArgs>, format: Format) -> anyhow::Result<i32> {
    use platter_proto::inventory::Device;
    // Each host's drives and tools (the drives alone in JSON, whose shape predates tools;
    // `platter agents --output json` has both).
    type Drives = Vec<(String, Vec<Device>)>;
    let (hosts, tools): (Drives, Vec<Vec<pb::ToolVersion>>) = match coordinator {
        None => {
            let tools = if format == Format::Json {
                Vec::new()
            } else {
                platter_agent::scan_tools().iter().map(Into::into).collect()
            };
            (
                vec![(
                    platter_agent::cli::hostname(),
                    platter_agent::scan_inventory()?,
                )],
                vec![tools],
            )
        }
        Some(client) => client
            .connect()
            .await?
            .list_agents(pb::ListAgentsRequest::default())
            .await
            .map_err(|s| call_error("list agents", s))?
            .into_inner()
            .agents
            .into_iter()
            .map(|a| {
                let devices = a.devices.into_iter().map(Device::from).collect();
                ((a.host, devices), a.tools)
            })
            .unzip(),
    };
    if format == Format::Json {
        let map: serde_json::Map<String, serde_json::Value> = hosts
            .into_iter()
            .map(|(h, d)| Ok((h, serde_json::to_value(d)?)))
            .collect::<Result<_, serde_json::Error>>()?;
        println!("{}", serde_json::to_string_pretty(&map)?);
        return Ok(0);
    }
    let header = [
        "host",
        "device",
        "size",
        "model",
        "serial",
        "transport",
        "controller",
        "write cache",
        "in use",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (host, devices) in &hosts {
        for d in devices {
            let in_use = if d.holds_root {
                "holds /".to_string()
            } else if !d.mounted.is_empty() {
                format!("mounted {}", d.mounted.join(" "))
            } else if !d.holders.is_empty() {
                format!("under {}", d.holders.join(" "))
            } else {
                "-".into()
            };
            let cache = match d.write_cache {
                platter_proto::inventory::WriteCache::WriteBack => "write back",
                platter_proto::inventory::WriteCache::WriteThrough => "write through",
                platter_proto::inventory::WriteCache::Unknown => "?",
            };
            rows.push(vec![
                host.clone(),
                d.path.clone(),
                crate::report::human(d.size_bytes as f64, "B"),
                [d.vendor.as_str(), d.model.as_str()]
                    .join(" ")
                    .trim()
                    .to_string(),
                d.serial.clone(),
                d.transport.as_str().to_string(),
                d.controller.join(" > "),
                cache.to_string(),
                in_use,
            ]);
        }
    }
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    let widths = crate::report::widths(&header, &rows);
    println!("{}", crate::report::aligned(&header, &widths, "", "  "));
    for r in &rows {
        println!("{}", crate::report::aligned(r, &widths, "", "  "));
    }
    let tools: Vec<(&str, &[pb::ToolVersion])> = hosts
        .iter()
        .zip(&tools)
        .filter(|(_, t)| !t.is_empty())
        .map(|((host, _), t)| (host.as_str(), t.as_slice()))
        .collect();
    if !tools.is_empty() {
        print!("\ntools:\n{}", crate::client::tool_table(&tools));
    }
    Ok(0)
}

/// `platter inventory --health`: every drive of this machine, its health read now, as a
/// report's health section words it (one reading: no before and after).
pub(super) fn health(format: Format) -> anyhow::Result<i32> {
    let devices = platter_agent::scan_inventory()?;
    let paths: Vec<&str> = devices.iter().map(|d| d.path.as_str()).collect();
    let read = platter_agent::read_health(&paths);
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&read)?);
        return Ok(0);
    }
    let host = platter_agent::cli::hostname();
    // One line per device node, whatever serial smartctl gives it.
    for h in read {
        let snapshot = crate::report::provenance::Snapshot {
            host: host.clone(),
            plan_id: String::new(),
            step_index: 0,
            storage_config: String::new(),
            cells: Vec::new(),
            facts: platter_proto::provenance::Provenance {
                health: vec![h],
                ..Default::default()
            },
        };
        for d in crate::report::health::drives(&[snapshot]) {
            println!("{}", d.reading_text());
        }
    }
    Ok(0)
}
