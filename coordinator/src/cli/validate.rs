//! `platter validate`, and reading a campaign file as every command that takes one does.

use super::*;

pub(super) async fn validate(a: ValidateArgs) -> anyhow::Result<i32> {
    let ValidateArgs {
        file,
        local_host,
        client,
        limits,
        set,
    } = a;
    let text = match campaign_text(&file, limits.max_file_size, &set) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    if client.coordinator.is_some() {
        validate_remote(&file, text, &client).await
    } else {
        validate_here(&file, &text, local_host, &limits.into())
    }
}

/// The campaign file's text (read only if it is at most `max_bytes` long) with the
/// `--set`s applied: what is validated, submitted and stored. Err: the exit status, the
/// reason printed.
pub(super) fn campaign_text(file: &Path, max_bytes: u64, set: &SetArgs) -> Result<String, i32> {
    let text = spec::read_file(file, max_bytes).map_err(|e| {
        eprintln!("{e}");
        EXIT_INVALID
    })?;
    spec::set::apply(&text, &set.sets).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_INVALID
    })
}

/// Every mistake, each on its own `error:` line (at most `spec::MAX_SHOWN`).
pub(super) fn load_spec(
    file: &Path,
    text: &str,
    limits: &spec::Limits,
) -> Result<spec::Campaign, i32> {
    spec::parse_with(&file.display().to_string(), text, limits).map_err(|e| {
        eprintln!("{e}");
        EXIT_INVALID
    })
}

/// A campaign the coordinator refused as invalid: its message already has one `error:`
/// line per mistake; anything else (a planning error) gets the prefix here.
pub(super) fn print_invalid(message: &str) {
    if message.starts_with("error: ") {
        eprintln!("{message}");
    } else {
        eprintln!("error: {message}");
    }
}

/// Without a coordinator: the file planned for this machine.
fn validate_here(
    file: &Path,
    text: &str,
    local_host: Option<String>,
    limits: &spec::Limits,
) -> anyhow::Result<i32> {
    let campaign = match load_spec(file, text, limits) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let this_host = local_host.unwrap_or_else(platter_agent::cli::hostname);
    // Only this machine's devices are known without a coordinator.
    let mut inventories = planner::Inventories::new();
    if campaign.devices.is_some() {
        inventories.insert(this_host.clone(), platter_agent::scan_inventory()?);
    }
    // Other hosts' drives (and label selections) are known only to the coordinator: the
    // file is valid as far as it can be checked here, and says how to check the rest.
    let remote: Vec<&str> = campaign
        .hosts
        .iter()
        .map(String::as_str)
        .filter(|h| *h != "local" && *h != this_host)
        .collect();
    if (campaign.devices.is_some() && !remote.is_empty()) || campaign.host_labels.is_some() {
        println!(
            "campaign {}: valid as far as this machine can tell
  {} cell(s) × {}",
            campaign.name,
            campaign.cells.len(),
            campaign.repetitions_text()
        );
        let what = match (campaign.host_labels.is_some(), remote.is_empty()) {
            (true, true) => "which hosts have the labels".to_string(),
            (true, false) => format!(
                "which hosts have the labels and the drives of {}",
                remote.join(", ")
            ),
            (false, _) => format!("the drives of {}", remote.join(", ")),
        };
        println!("  {what}: only the coordinator knows;");
        println!(
            "  `platter validate {} --coordinator URL` shows which hosts and drives it touches",
            file.display()
        );
        return Ok(0);
    }
    // No store plans here: the ids are never shown, and nothing runs.
    let planned = match planner::plan(&campaign, &this_host, "validate", 1, &inventories) {
        Ok(p) => p,
        Err(planner::PlanError::LocalWithoutRun) => {
            eprintln!(
                "error: {}: {}",
                file.display(),
                planner::PlanError::LocalWithoutRun
            );
            return Ok(EXIT_INVALID);
        }
        Err(e) => {
            eprintln!("error: {}:{e}", file.display());
            return Ok(EXIT_INVALID);
        }
    };
    print!("{}", crate::planning::text::render(&campaign, &planned));
    Ok(0)
}

/// `platter validate --coordinator …`: the coordinator expands the campaign against its
/// agents (labels, inventories) and returns the plan text; nothing is stored.
async fn validate_remote(file: &Path, yaml: String, client: &ClientArgs) -> anyhow::Result<i32> {
    let req = pb::SubmitRequest {
        file_name: file.display().to_string(),
        yaml,
        local_host: String::new(),
        resume: false,
    };
    match client.connect().await?.plan(req).await {
        Ok(r) => {
            print!("{}", r.into_inner().rendered);
            Ok(0)
        }
        Err(s) if s.code() == tonic::Code::InvalidArgument => {
            print_invalid(s.message());
            Ok(EXIT_INVALID)
        }
        Err(s) => Err(call_error("validate", s)),
    }
}
