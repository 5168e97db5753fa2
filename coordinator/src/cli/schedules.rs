//! `platter schedule …` and `platter trigger`: gRPC calls to a coordinator, whose store
//! keeps the schedules (so every coordinator on it fires them).

use super::args::Schedule;
use super::*;
use crate::views;

pub(super) async fn schedule(cmd: Schedule) -> anyhow::Result<i32> {
    match cmd {
        Schedule::Add {
            file,
            name,
            every,
            cron,
            on_trigger,
            policy,
            max_file_size,
            set,
            client,
        } => {
            let yaml = match campaign_text(&file, max_file_size, &set) {
                Ok(t) => t,
                Err(code) => return Ok(code),
            };
            let req = pb::AddScheduleRequest {
                name: name.unwrap_or_default(),
                file_name: file.display().to_string(),
                yaml,
                every: every.unwrap_or_default(),
                cron: cron.unwrap_or_default(),
                on_trigger: on_trigger.unwrap_or_default(),
                policy,
            };
            match client.connect().await?.add_schedule(req).await {
                Ok(s) => {
                    let s = s.into_inner();
                    eprintln!(
                        "schedule {} added: series {}, fires {}{}",
                        s.name,
                        s.series,
                        s.when,
                        match s.next_due_unix_ms {
                            0 => String::new(),
                            at => format!(", first at {}", views::clock(at)),
                        }
                    );
                    println!("{}", s.name);
                    Ok(0)
                }
                Err(s) if s.code() == tonic::Code::InvalidArgument => {
                    print_invalid(s.message());
                    Ok(EXIT_INVALID)
                }
                Err(s) if s.code() == tonic::Code::AlreadyExists => {
                    eprintln!("platter: {}", s.message());
                    Ok(EXIT_INVALID)
                }
                Err(s) => Err(call_error("adding the schedule", s)),
            }
        }
        Schedule::List { client, format } => {
            let all = client
                .connect()
                .await?
                .list_schedules(pb::ListSchedulesRequest {})
                .await
                .map_err(|s| call_error("listing schedules", s))?
                .into_inner()
                .schedules;
            if format == Format::Json {
                let json: Vec<_> = all.iter().map(views::schedule_json).collect();
                println!("{}", serde_json::to_string_pretty(&json)?);
            } else {
                print!("{}", views::render_schedules(&all));
            }
            Ok(0)
        }
        Schedule::Show {
            name,
            client,
            format,
        } => {
            let s = match client
                .connect()
                .await?
                .get_schedule(pb::GetScheduleRequest { name })
                .await
            {
                Ok(s) => s.into_inner(),
                Err(s) if s.code() == tonic::Code::NotFound => {
                    eprintln!("platter: {}", s.message());
                    return Ok(EXIT_INVALID);
                }
                Err(s) => return Err(call_error("reading the schedule", s)),
            };
            if format == Format::Json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&views::schedule_json(&s))?
                );
            } else {
                print!("{}", views::render_schedule(&s));
            }
            Ok(0)
        }
        Schedule::Pause { name, client } => paused(name, client, true).await,
        Schedule::Resume { name, client } => paused(name, client, false).await,
        Schedule::Remove { name, client } => {
            match client
                .connect()
                .await?
                .remove_schedule(pb::GetScheduleRequest { name: name.clone() })
                .await
            {
                Ok(_) => {
                    eprintln!("schedule {name} removed (its runs stay: `platter history`)");
                    Ok(0)
                }
                Err(s) if s.code() == tonic::Code::NotFound => {
                    eprintln!("platter: {}", s.message());
                    Ok(EXIT_INVALID)
                }
                Err(s) => Err(call_error("removing the schedule", s)),
            }
        }
    }
}

async fn paused(name: String, client: ClientArgs, pause: bool) -> anyhow::Result<i32> {
    let req = pb::SetSchedulePausedRequest {
        name,
        paused: pause,
    };
    match client.connect().await?.set_schedule_paused(req).await {
        Ok(s) => {
            let s = s.into_inner();
            if pause {
                eprintln!("schedule {} paused", s.name);
            } else {
                eprintln!(
                    "schedule {} resumed; next: {}",
                    s.name,
                    match s.next_due_unix_ms {
                        0 => "on trigger".to_string(),
                        at => views::clock(at),
                    }
                );
            }
            Ok(0)
        }
        Err(s) if s.code() == tonic::Code::NotFound => {
            eprintln!("platter: {}", s.message());
            Ok(EXIT_INVALID)
        }
        Err(s) => Err(call_error("pausing or resuming the schedule", s)),
    }
}

pub(super) async fn trigger(a: TriggerArgs) -> anyhow::Result<i32> {
    let TriggerArgs {
        name,
        labels,
        client,
        format,
    } = a;
    let req = pb::TriggerRequest {
        name,
        labels: labels.into_iter().collect(),
    };
    let r = match client.connect().await?.trigger(req).await {
        Ok(r) => r.into_inner(),
        Err(s)
            if matches!(
                s.code(),
                tonic::Code::NotFound | tonic::Code::InvalidArgument
            ) =>
        {
            eprintln!("platter: {}", s.message());
            return Ok(EXIT_INVALID);
        }
        Err(s) => return Err(call_error("pulling the trigger", s)),
    };
    if format == Format::Json {
        let json = serde_json::json!({
            "fired": r.fired.iter().map(views::firing_json).collect::<Vec<_>>(),
            "not_fired": r.not_fired,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for f in &r.fired {
            match f.campaign_id.as_str() {
                "" => eprintln!("schedule {}: {} — {}", f.schedule, f.outcome, f.note),
                id => {
                    eprintln!("schedule {}: {} run {id}", f.schedule, f.outcome);
                    println!("{id}");
                }
            }
        }
        for n in &r.not_fired {
            eprintln!("not fired: {n}");
        }
    }
    // A run that could not be submitted is something to act on; a skip (policy) or a
    // paused schedule is what was asked for.
    Ok(if r.fired.iter().any(|f| f.outcome == "failed") {
        1
    } else {
        0
    })
}
