//! A coordinator's campaigns: `submit`, `status`, `watch`, `cancel`.

use super::*;

pub(super) async fn submit(a: SubmitArgs) -> anyhow::Result<i32> {
    let SubmitArgs {
        file,
        client,
        watch,
        format,
        max_file_size,
        set,
    } = a;
    // The file is judged here first: one too large is never sent.
    let yaml = match campaign_text(&file, max_file_size, &set) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    submit_yaml(&file, yaml, &client, watch, format).await
}

/// Submits `yaml`, read from `file`; a campaign the coordinator refuses as invalid
/// (INVALID_ARGUMENT, with its mistakes) is the message to show.
pub(super) async fn submit_file(
    client: &mut ControlClient<Channel>,
    file: &Path,
    yaml: String,
    local_host: &str,
    resume: bool,
) -> anyhow::Result<Result<pb::SubmitResponse, String>> {
    let req = pb::SubmitRequest {
        file_name: file.display().to_string(),
        yaml,
        local_host: local_host.into(),
        resume,
    };
    match client.submit(req).await {
        Ok(r) => Ok(Ok(r.into_inner())),
        Err(s) if s.code() == tonic::Code::InvalidArgument => Ok(Err(s.message().to_string())),
        Err(s) => Err(call_error("coordinator refused the campaign", s)),
    }
}

async fn submit_yaml(
    file: &Path,
    yaml: String,
    client: &ClientArgs,
    watch_it: bool,
    format: Format,
) -> anyhow::Result<i32> {
    let mut session = client.session()?;
    let mut client = client.connect().await?;
    let resp = match submit_file(&mut client, file, yaml, "", false).await? {
        Ok(r) => r,
        Err(msg) => {
            print_invalid(&msg);
            return Ok(EXIT_INVALID);
        }
    };
    println!("{}", resp.campaign_id);
    if !watch_it {
        return Ok(0);
    }
    client::watch(&mut session, &resp.campaign_id).await?;
    let mut client = session.connect().await?;
    let (rendered, failed) = rendered(&mut client, &resp.campaign_id, format).await?;
    print!("{rendered}");
    Ok(if failed > 0 { EXIT_FAILED_STEPS } else { 0 })
}

pub(super) async fn status(a: StatusArgs) -> anyhow::Result<i32> {
    let StatusArgs {
        campaign,
        db,
        client,
        output,
    } = a;
    if let Some(db) = local_store(db, &client)? {
        let store = open_local(&db)?;
        // No agent is connected to a store read from a file: hosts show as offline.
        let hub = crate::service::hub::Hub::new(store.clone());
        use crate::service::status::CampaignStatus;
        let list: Vec<pb::CampaignStatus> = match &campaign {
            Some(c) => vec![CampaignStatus::load(&store, &hub, c)?],
            None => CampaignStatus::load_all(&store, &hub)?,
        }
        .into_iter()
        .map(Into::into)
        .collect();
        print!(
            "{}",
            client::render_status(&list, campaign.is_some(), output)
        );
        return Ok(status_exit(&list, campaign.is_some()));
    }
    let mut session = client.session()?;
    let list = match &campaign {
        Some(id) => {
            let request = pb::GetCampaignRequest {
                campaign_id: id.clone(),
            };
            vec![session
                .call("status", |mut c| {
                    let r = request.clone();
                    async move { c.get_campaign(r).await }
                })
                .await?
                .map_err(|s| call_error("status", s))?
                .into_inner()]
        }
        None => {
            let r = session
                .call("status", |mut c| async move {
                    c.list_campaigns(pb::ListCampaignsRequest {}).await
                })
                .await?
                .map_err(|s| call_error("status", s))?
                .into_inner();
            // Each campaign carries the store's fault; with none known, say it here.
            if let (true, Some(f), Format::Table) = (r.campaigns.is_empty(), &r.store_fault, output)
            {
                print!("{}", client::fault_line(f));
                println!(
                    "No campaign is known to this coordinator while its store cannot be read."
                );
            }
            r.campaigns
        }
    };
    print!(
        "{}",
        client::render_status(&list, campaign.is_some(), output)
    );
    Ok(status_exit(&list, campaign.is_some()))
}

/// `platter status CAMPAIGN` fails when a host refused the campaign's plan (nothing of it
/// ran there); the list of every campaign is only a listing.
fn status_exit(list: &[pb::CampaignStatus], one: bool) -> i32 {
    let refused = list
        .iter()
        .any(|c| c.hosts.iter().any(|h| !h.refused.is_empty()));
    if one && refused {
        EXIT_FAILED_STEPS
    } else {
        0
    }
}

pub(super) async fn watch(a: WatchArgs) -> anyhow::Result<i32> {
    let last = client::watch(&mut a.client.session()?, &a.campaign).await?;
    Ok(if last.steps_failed > 0 {
        EXIT_FAILED_STEPS
    } else {
        0
    })
}

pub(super) async fn cancel(a: CancelArgs) -> anyhow::Result<i32> {
    let CancelArgs { campaign, client } = a;
    client
        .connect()
        .await?
        .cancel(pb::CancelRequest {
            campaign_id: campaign.clone(),
        })
        .await
        .map_err(|s| call_error("cancel", s))?;
    eprintln!("campaign {campaign} cancelled");
    Ok(0)
}
