//! Reports and comparisons to stdout or a file.

use super::*;

/// A campaign's report as the coordinator renders it, and how many problems it has.
pub(super) async fn rendered(
    client: &mut ControlClient<Channel>,
    campaign: &str,
    format: Format,
) -> anyhow::Result<(String, u32)> {
    let name = clap::ValueEnum::to_possible_value(&format)
        .expect("every format has a name")
        .get_name()
        .to_string();
    let r = client
        .report(pb::ReportRequest {
            campaign_id: campaign.into(),
            // Both ways: a coordinator older than `report_format` reads the words.
            format: name,
            report_format: crate::service::rpc::control::report_format_to_wire(format) as i32,
        })
        .await
        .map_err(|s| call_error("report", s))?
        .into_inner();
    Ok((
        r.rendered,
        r.steps_failed
            + r.plans_refused
            + u32::from(r.qualification_failed)
            + r.measurements_missing
            + r.comparisons_not_made
            + r.drives_not_steady,
    ))
}

pub(super) fn emit(rendered: &str, output: Option<&Path>, format: Format) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    match output {
        Some(p) => {
            std::fs::write(p, rendered).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("report written to {}", p.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            let colour = format == Format::Table
                && out.is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            let text = if colour {
                std::borrow::Cow::Owned(crate::report::table::colorize(rendered))
            } else {
                std::borrow::Cow::Borrowed(rendered)
            };
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                // Whoever read the report stopped (`platter run FILE | head`): nothing
                // is left to say, and `run` still stops its agent and coordinator.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r?,
            }
        }
    }
    Ok(())
}

/// `emit` for an exporter that writes as it renders.
pub(super) fn emit_with(
    output: Option<&Path>,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    match output {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?;
            let mut out = std::io::BufWriter::new(f);
            write(&mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", p.display()))?;
            eprintln!("report written to {}", p.display());
        }
        None => {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            match write(&mut out).and_then(|()| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r?,
            }
        }
    }
    Ok(())
}
