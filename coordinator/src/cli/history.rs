//! `platter history SERIES`: a series' runs over time, each against the one before it.

use super::*;

pub(super) async fn history(a: HistoryArgs) -> anyhow::Result<i32> {
    let HistoryArgs {
        series,
        db,
        client,
        metric,
        host,
        cells,
        last,
        threshold,
        format,
        fail_on_regression,
    } = a;
    if let Some(t) = threshold.filter(|t| !(t.is_finite() && *t >= 0.0)) {
        eprintln!("platter: --threshold must be a percentage ≥ 0, not {t}");
        return Ok(EXIT_INVALID);
    }
    // The store when given or here, else the coordinator.
    let mut h = match local_store(db, &client)? {
        Some(db) => {
            let store = open_local(&db)?;
            let h = crate::report::history::History::load(
                &store,
                &series,
                &metric,
                host.as_deref(),
                threshold,
                last,
                None,
            )?;
            if h.runs.is_empty() && h.left_out.is_empty() {
                bail!(
                    "no series {series:?} in {}: no campaign has it as its `series:` or name",
                    db.display()
                );
            }
            h
        }
        None => {
            let req = pb::HistoryRequest {
                series: series.clone(),
                metric: metric.clone(),
                host: host.clone().unwrap_or_default(),
                last: last.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                threshold_pct: threshold,
                until: String::new(),
            };
            let asked = client
                .session()?
                .call("reading the history", |mut c| {
                    let r = req.clone();
                    async move { c.history(r).await }
                })
                .await?;
            match asked {
                Ok(r) => crate::views::history_of(r.into_inner())
                    .context("reading the coordinator's history")?,
                Err(s) if s.code() == tonic::Code::NotFound => {
                    eprintln!("platter: {}", s.message());
                    return Ok(EXIT_INVALID);
                }
                Err(s) => return Err(call_error("reading the history", s)),
            }
        }
    };
    if !cells.is_empty() {
        // Only the lines whose cell has every KEY=VALUE asked for.
        h.lines.retain(|l| {
            let have: Vec<&str> = l.cell.split(' ').collect();
            cells.iter().all(|c| have.contains(&c.as_str()))
        });
        if h.lines.is_empty() {
            eprintln!(
                "platter: no cell of series {series:?} has {}",
                cells.join(" ")
            );
            return Ok(EXIT_INVALID);
        }
    }
    if fail_on_regression {
        if let (Some(newest), Some(judged)) = (h.left_out.last(), h.runs.last()) {
            eprintln!(
                "the series' newest run {} is {}; judged the latest that ended, {}",
                newest.campaign_id, newest.why, judged.campaign_id
            );
        }
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&h)?),
        Format::Csv => print!("{}", crate::views::history_csv(&h)),
        _ => print!("{}", crate::views::render_history(&h)),
    }
    use crate::report::history::Flag;
    let regressed = h.latest_flags().iter().any(|(_, p)| {
        p.since_previous
            .as_ref()
            .is_some_and(|s| s.flag == Flag::Regression)
    });
    // A step or ramp the latest run brought (a creeping regression is under the threshold
    // run to run), said on stderr for CI's log.
    let drifted: Vec<String> = h
        .latest_drift_flags()
        .into_iter()
        .filter(|(_, d)| d.flag == Flag::Regression)
        .map(|(l, d)| format!("{} {}: {}", l.host, l.cell, d.summary()))
        .collect();
    if fail_on_regression {
        for d in &drifted {
            eprintln!("drift: {d}");
        }
    }
    let regressed = regressed || !drifted.is_empty();
    Ok(if fail_on_regression && regressed {
        EXIT_REGRESSION
    } else {
        0
    })
}
