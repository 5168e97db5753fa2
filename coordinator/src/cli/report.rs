//! `platter report`: a campaign's report, from a store or a coordinator, and with
//! `--fail-on-regression` the run against the one before it.

use super::*;

pub(super) async fn report(a: ReportArgs) -> anyhow::Result<i32> {
    let ReportArgs {
        campaign,
        db,
        client,
        format,
        output,
        junit,
        fail_on_regression,
        regression_metric,
    } = a;
    let db = local_store(db, &client)?;
    let render = async |format: Format| -> anyhow::Result<(String, u32)> {
        Ok(match &db {
            Some(db) => {
                let store = open_local(db)?;
                let r = crate::report::Report::load_for(&store, &campaign, format)?;
                (format.exporter().render(&r), r.problems())
            }
            None => rendered(&mut client.connect().await?, &campaign, format).await?,
        })
    };
    let failed = match &db {
        // From the store: written as it is rendered, never held whole (a JSON
        // report of every sample can be larger than the report's data).
        Some(db) if format != Format::Table => {
            let store = open_local(db)?;
            let r = crate::report::Report::load_for(&store, &campaign, format)?;
            emit_with(output.as_deref(), |out| format.exporter().write(&r, out))?;
            r.problems()
        }
        _ => {
            let (rendered, failed) = render(format).await?;
            emit(&rendered, output.as_deref(), format)?;
            failed
        }
    };
    if let Some(path) = junit {
        let (xml, _) = render(Format::Junit).await?;
        std::fs::write(&path, xml).with_context(|| format!("writing {}", path.display()))?;
    }
    let regressed = fail_on_regression
        && since_last_run(db.as_deref(), &client, &campaign, &regression_metric).await?;
    Ok(if failed > 0 {
        EXIT_FAILED_STEPS
    } else if regressed {
        EXIT_REGRESSION
    } else {
        0
    })
}

/// `platter report RUN --fail-on-regression`: the run against the run before it in its
/// series on `metric`, said on stderr; whether it regressed. From the store when given,
/// else from the coordinator.
async fn since_last_run(
    db: Option<&std::path::Path>,
    client: &ClientArgs,
    campaign: &str,
    metric: &str,
) -> anyhow::Result<bool> {
    use crate::report::history::{Flag, History};
    let (h, id): (History, String) = match db {
        Some(db) => {
            let store = open_local(db)?;
            // Its id only: the report itself was read (and printed) already.
            let id = store
                .read(|c| crate::store::resolve_campaign(c, campaign))?
                .to_string();
            let h = History::load(&store, campaign, metric, None, None, Some(2), Some(&id))?;
            (h, id)
        }
        None => {
            let req = pb::HistoryRequest {
                series: campaign.into(),
                metric: metric.into(),
                last: Some(2),
                until: campaign.into(),
                ..Default::default()
            };
            let r = client
                .connect()
                .await?
                .history(req)
                .await
                .map_err(|s| call_error("reading the run's series", s))?
                .into_inner();
            let until_id = r.until_id.clone();
            let h = crate::views::history_of(r).context("reading the coordinator's history")?;
            (h, until_id)
        }
    };
    let Some(at) = h.runs.iter().position(|r| r.campaign_id == id) else {
        eprintln!(
            "since the run before: {} ({}) has not ended: not judged",
            h.series, id
        );
        return Ok(false);
    };
    if at == 0 {
        eprintln!(
            "since the run before: {} is the first run of {} that ended: nothing to judge against",
            id, h.series
        );
        return Ok(false);
    }
    let flags: Vec<(
        &crate::report::history::Line,
        &crate::report::history::Since,
    )> = h
        .lines
        .iter()
        .filter_map(|l| {
            let p = l.points.iter().find(|p| p.campaign_id == id)?;
            let s = p.since_previous.as_ref()?;
            (s.flag != Flag::None).then_some((l, s))
        })
        .collect();
    let before = &h.runs[at - 1].campaign_id;
    if flags.is_empty() {
        eprintln!("since the run before ({before}), on {metric}: nothing flagged");
    }
    for (l, s) in &flags {
        eprintln!(
            "since the run before, on {metric}: {} {} {}: {}",
            s.flag.word(),
            l.host,
            l.cell,
            s.summary()
        );
    }
    Ok(flags.iter().any(|(_, s)| s.flag == Flag::Regression))
}
