//! A drive model's page (`/models/MODEL`) and the peers section of a drive's page: every
//! drive of the model against its identical peers (`report::peers`, which `platter peers`
//! prints), one strip plot per peer group (server-rendered SVG from
//! `templates/console/strip.svg`, each dot a link to its drive) and a table under it.
//! Nothing here judges: the standings are `report::peers`' own; this only lays them out.
//! (The page's handler is `console::model`, beside the other pages.)

use serde::Deserialize;
use tonic::Status;

use super::fleet::other_answer;
use super::Ctx;
use crate::report::ledger::{Answer, Question};
use crate::report::peers::{Ask, PeerDrive, PeerGroup, Peers};
use crate::report::Scale;

/// `/models/MODEL?firmware=&metric=&series=`: `platter peers`' filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ModelQuery {
    #[serde(default)]
    pub firmware: String,
    #[serde(default)]
    pub metric: String,
    #[serde(default)]
    pub series: String,
}

impl ModelQuery {
    fn ask(&self, model: &str) -> Ask {
        let some = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
        Ask {
            model: model.to_string(),
            firmware: some(&self.firmware),
            metric: some(&self.metric),
            series: some(&self.series),
            max_slower_pct: None,
        }
    }
}

/// The model's drives against their peers, as `platter peers MODEL` answers; NOT_FOUND for
/// a model no drive of the ledger has (a model that has drives but no ended run is an
/// answer without groups).
pub(super) async fn peers(ctx: &Ctx, model: &str, q: &ModelQuery) -> Result<Peers, Status> {
    let p = match ctx.ledger(Question::Peers(q.ask(model))).await? {
        Answer::Peers(p) => *p,
        _ => return Err(other_answer()),
    };
    if p.groups.is_empty() && !known(ctx, model).await? {
        return Err(Status::not_found(format!(
            "no drive of model {model:?} in the ledger"
        )));
    }
    Ok(p)
}

/// Whether a drive of the ledger is of `model` (asked only when it has no results: it
/// reads every drive).
async fn known(ctx: &Ctx, model: &str) -> Result<bool, Status> {
    let (store, model) = (ctx.store.clone(), model.to_string());
    let read = tokio::task::spawn_blocking(move || store.ledger())
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
    let drives = read.map_err(|e| Status::unavailable(e.to_string()))?;
    Ok(drives.iter().any(|d| d.model == model))
}

/// A model's page (`templates/console/model.html`): `Peers` laid out, and the filter
/// asked for; `/api/v1/models/MODEL` answers the `Peers` document itself.
#[derive(askama::Template)]
#[template(path = "console/model.html")]
pub(super) struct ModelView {
    model: String,
    headline: String,
    max_slower_pct: f64,
    query: ModelQuery,
    groups: Vec<GroupView>,
}

/// One peer group: its heading, what it says of itself, its plot and its drives.
struct GroupView {
    heading: String,
    /// "median of drives 20.1 ms, middle 80% 19.5 ms – 20.8 ms".
    spread: String,
    not_judged: String,
    controllers: Vec<String>,
    not_compared: Vec<String>,
    strip: Strip,
    rows: Vec<DriveRow>,
}

/// A drive as a group's table shows it.
struct DriveRow {
    drive: String,
    hosts: String,
    controller: String,
    runs: usize,
    median: String,
    standing: String,
    outlier: bool,
}

impl ModelView {
    pub(super) fn of(p: &Peers, query: ModelQuery) -> ModelView {
        ModelView {
            model: p.model.clone(),
            headline: p.headline(),
            max_slower_pct: p.max_slower_pct,
            query,
            groups: p
                .groups
                .iter()
                .map(|g| GroupView::of(&p.model, g))
                .collect(),
        }
    }
}

impl GroupView {
    fn of(model: &str, g: &PeerGroup) -> GroupView {
        let scale = GroupScale::of(g);
        GroupView {
            heading: heading(model, g),
            spread: format!(
                "median of drives {}, middle 80% {} – {}",
                scale.show(g.median),
                scale.show(g.band.0),
                scale.show(g.band.1)
            ),
            not_judged: g.not_judged.clone(),
            controllers: g.controllers.clone(),
            not_compared: g.not_compared.clone(),
            strip: Strip::of(g, &scale),
            rows: g
                .drives
                .iter()
                .map(|d| DriveRow {
                    drive: d.drive.clone(),
                    hosts: d.hosts.join(", "),
                    controller: controller_words(&d.controller).to_string(),
                    runs: d.runs.len(),
                    median: median_words(d, &scale),
                    standing: d.standing_text(),
                    outlier: d.outlier,
                })
                .collect(),
        }
    }
}

/// "SAMSUNG … firmware HXT7404Q: fio --rw=randwrite … [bs=4k] wall", as `platter peers`
/// heads a group.
fn heading(model: &str, g: &PeerGroup) -> String {
    let state = match g.state.as_str() {
        "" => String::new(),
        s => format!(" [{s}]"),
    };
    format!(
        "{model} firmware {}: {} [{}] {}{state}",
        if g.firmware.is_empty() {
            "(none)"
        } else {
            &g.firmware
        },
        g.workload,
        g.configuration,
        g.metric
    )
}

/// A controller chain as the page says it: "(none)" for a drive behind none.
fn controller_words(chain: &str) -> &str {
    if chain.is_empty() {
        "(none)"
    } else {
        chain
    }
}

/// "20.12 ms (19.80 ms – 20.40 ms)": a drive's median with its interval.
fn median_words(d: &PeerDrive, scale: &GroupScale) -> String {
    match d.ci {
        Some((lo, hi)) => format!(
            "{} ({} – {})",
            scale.show(d.median),
            scale.show(lo),
            scale.show(hi)
        ),
        None => scale.show(d.median),
    }
}

/// One unit for a group's values (its plot, its table): `Scale`, with rates of bytes
/// scaled as bytes.
struct GroupScale {
    scale: Scale,
    /// "/s" for bytes per second, else "".
    per: &'static str,
}

impl GroupScale {
    fn of(g: &PeerGroup) -> GroupScale {
        let (base, per) = match g.unit.as_str() {
            "B/s" => ("B", "/s"),
            u => (u, ""),
        };
        let medians: Vec<f64> = g.drives.iter().map(|d| d.median).collect();
        GroupScale {
            scale: Scale::for_values(&medians, base),
            per,
        }
    }

    fn show(&self, v: f64) -> String {
        format!("{}{}", self.scale.show(v), self.per)
    }

    fn bare(&self, v: f64) -> String {
        self.scale.bare(v)
    }

    /// The unit's name as the axis says it ("ms", "MiB/s", "op/s"; "count" for counts).
    fn name(&self) -> String {
        let one = self.scale.show(self.scale.factor());
        match one.split_once(' ') {
            Some((_, unit)) => format!("{unit}{}", self.per),
            None => "count".into(),
        }
    }
}

/// The strip plot's size, in SVG units (it scales down with the page).
const WIDTH: f64 = 960.0;
/// Left of the plot: the lanes' controller names.
const LABELS: f64 = 170.0;
const RIGHT: f64 = 90.0;
const TOP: f64 = 8.0;
/// Below the plot: ticks, their values and the axis title.
const AXIS: f64 = 46.0;
/// Dots of a lane are spread over this many rows (by their order of value, so drives of
/// nearly equal medians sit on different rows), `ROW` apart.
const ROWS: usize = 8;
const ROW: f64 = 11.0;

/// A group's strip plot (`templates/console/strip.svg`): a lane per controller, a dot per
/// drive at its median with its interval as a line, the band of the middle 80% of the
/// drives' medians shaded with their median as a line, outliers red and named.
pub(super) struct Strip {
    pub width: f64,
    pub height: f64,
    /// The plot's left and right edges, top, and bottom (the axis line).
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    /// The band's left edge and width, and the median's x; none where not finite.
    pub band: Option<(f64, f64)>,
    pub band_title: String,
    pub median: Option<f64>,
    pub lanes: Vec<Lane>,
    pub ticks: Vec<Tick>,
    pub axis_title: String,
    pub dots: Vec<Dot>,
}

pub(super) struct Lane {
    pub label: String,
    pub top: f64,
    pub height: f64,
    /// The y of its label.
    pub middle: f64,
    /// Every other lane is shaded, to tell them apart.
    pub shaded: bool,
}

pub(super) struct Tick {
    pub x: f64,
    pub text: String,
}

pub(super) struct Dot {
    pub drive: String,
    pub x: f64,
    pub y: f64,
    /// The interval's ends, where it has one.
    pub interval: Option<(f64, f64)>,
    pub outlier: bool,
    /// Judged against its peers (else grey).
    pub judged: bool,
    /// Its line in words (a tooltip): drive, median with interval, standing.
    pub title: String,
    /// Written beside an outlier: its serial (the id's last part).
    pub label: String,
}

impl Strip {
    fn of(g: &PeerGroup, scale: &GroupScale) -> Strip {
        // Lanes: the controllers in the order their first drive comes.
        let mut lanes: Vec<(&str, Vec<&PeerDrive>)> = Vec::new();
        for d in &g.drives {
            match lanes.iter_mut().find(|(c, _)| *c == d.controller) {
                Some((_, ds)) => ds.push(d),
                None => lanes.push((&d.controller, vec![d])),
            }
        }
        let values: Vec<f64> = g
            .drives
            .iter()
            .flat_map(|d| {
                std::iter::once(d.median).chain(d.ci.into_iter().flat_map(|(l, h)| [l, h]))
            })
            .chain([g.band.0, g.band.1])
            .filter(|v| v.is_finite())
            .collect();
        let (lo, hi) = padded(&values);
        let (left, right) = (LABELS, WIDTH - RIGHT);
        let x = |v: f64| left + (v - lo) / (hi - lo) * (right - left);
        let mut top = TOP;
        let mut lane_views = Vec::new();
        let mut dots = Vec::new();
        for (i, (controller, drives)) in lanes.iter().enumerate() {
            let rows = drives.len().min(ROWS);
            let height = rows as f64 * ROW + 14.0;
            // By value, so that neighbours in value sit on different rows.
            let mut order: Vec<&&PeerDrive> = drives.iter().collect();
            order.sort_by(|a, b| a.median.total_cmp(&b.median));
            for (k, d) in order.into_iter().enumerate() {
                if !d.median.is_finite() {
                    continue;
                }
                let y = top + 7.0 + ROW / 2.0 + (k % rows) as f64 * ROW;
                dots.push(Dot {
                    drive: d.drive.clone(),
                    x: x(d.median),
                    y,
                    interval: d.ci.map(|(l, h)| (x(l), x(h))),
                    outlier: d.outlier,
                    judged: d.standing.is_some(),
                    title: format!(
                        "{}: {}; {}",
                        d.drive,
                        median_words(d, scale),
                        d.standing_text()
                    ),
                    label: d.drive.rsplit('/').next().unwrap_or_default().to_string(),
                });
            }
            lane_views.push(Lane {
                label: format!("{} ({})", controller_words(controller), drives.len()),
                top,
                height,
                middle: top + height / 2.0 + 4.0,
                shaded: i % 2 == 1,
            });
            top += height;
        }
        let bottom = top;
        let finite = |a: f64, b: f64| a.is_finite() && b.is_finite();
        Strip {
            width: WIDTH,
            height: bottom + AXIS,
            left,
            right,
            top: TOP,
            bottom,
            band: finite(g.band.0, g.band.1)
                .then(|| (x(g.band.0), (x(g.band.1) - x(g.band.0)).max(1.0))),
            band_title: format!(
                "middle 80% of the drives' medians: {} – {}; their median {}",
                scale.show(g.band.0),
                scale.show(g.band.1),
                scale.show(g.median)
            ),
            median: g.median.is_finite().then(|| x(g.median)),
            lanes: lane_views,
            ticks: ticks(lo, hi, scale.scale.factor())
                .into_iter()
                .map(|t| Tick {
                    x: x(t),
                    text: scale.bare(t),
                })
                .collect(),
            axis_title: format!("{} [{}]", g.metric, scale.name()),
            dots,
        }
    }
}

/// The x range of `values`, padded 5% each side; a range of one value is widened by 10%.
fn padded(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let span = if hi > lo {
        hi - lo
    } else if lo != 0.0 {
        lo.abs() * 0.1
    } else {
        1.0
    };
    (lo - span * 0.05, hi + span * 0.05)
}

/// About six round ticks within `lo..hi` (base units), round in the unit `factor` times
/// the base: 19, 20, 21 ms, not 19.37.
fn ticks(lo: f64, hi: f64, factor: f64) -> Vec<f64> {
    let span = (hi - lo) / factor;
    if !(span.is_finite() && span > 0.0) {
        return Vec::new();
    }
    let raw = span / 6.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * magnitude >= raw)
        .unwrap_or(10.0)
        * magnitude;
    let mut t = (lo / factor / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi / factor && out.len() < 20 {
        out.push(t * factor);
        t += step;
    }
    out
}

/// A drive's line in a peer group, for its page: the group, its median and its standing.
pub(super) struct Standing {
    pub group: String,
    pub median: String,
    pub standing: String,
    pub not_judged: String,
    pub outlier: bool,
}

/// Where the drive `id` of `model` stands in each peer group it is in (none when no run
/// of it has ended), or why that could not be read.
pub(super) async fn standings(ctx: &Ctx, model: &str, id: &str) -> Result<Vec<Standing>, String> {
    let ask = ModelQuery::default().ask(model);
    let p = match ctx.ledger(Question::Peers(ask)).await {
        Ok(Answer::Peers(p)) => p,
        Ok(_) => return Err(other_answer().message().to_string()),
        Err(s) => return Err(s.message().to_string()),
    };
    Ok(p.groups
        .iter()
        .filter_map(|g| {
            let d = g.drives.iter().find(|d| d.drive == id)?;
            Some(Standing {
                group: heading(model, g),
                median: median_words(d, &GroupScale::of(g)),
                standing: d.standing_text(),
                not_judged: g.not_judged.clone(),
                outlier: d.outlier,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::peers::Standing as Judged;

    fn drive(id: &str, controller: &str, median: f64, outlier: bool) -> PeerDrive {
        PeerDrive {
            drive: id.into(),
            hosts: vec!["rc66".into()],
            controller: controller.into(),
            runs: vec![median; 6],
            median,
            ci: Some((median * 0.98, median * 1.02)),
            standing: Some(Judged {
                ratio: if outlier { 1.15 } else { 1.0 },
                ci: if outlier { (1.1, 1.2) } else { (0.97, 1.03) },
                level: 0.99,
                p: 0.001,
                p_holm: if outlier { 0.001 } else { 1.0 },
                significant: outlier,
                runs: 6,
                peer_runs: 30,
            }),
            slower_pct: Some(if outlier { 15.0 } else { 0.0 }),
            outlier,
        }
    }

    fn group() -> PeerGroup {
        PeerGroup {
            firmware: "HXT7404Q".into(),
            workload: "fio --rw=randwrite".into(),
            configuration: "bs=4k".into(),
            metric: "wall".into(),
            unit: "s".into(),
            state: String::new(),
            median: 0.020,
            band: (0.019, 0.021),
            not_judged: String::new(),
            controllers: vec![],
            drives: vec![
                drive("M/<A>", "sd>ahci", 0.020, false),
                drive("M/B", "sd>ahci", 0.0201, false),
                drive("M/C", "sd>mpt3sas", 0.0199, false),
                drive("M/SLOW", "sd>ahci", 0.023, true),
            ],
            not_compared: vec!["M/D: no steady state, so not compared".into()],
        }
    }

    #[test]
    fn a_groups_strip_plot_has_a_lane_per_controller_and_a_linked_dot_per_drive() {
        let p = Peers {
            model: "M".into(),
            firmware: String::new(),
            series: String::new(),
            max_slower_pct: 10.0,
            alpha: 0.01,
            groups: vec![group()],
        };
        let view = ModelView::of(&p, ModelQuery::default());
        let strip = &view.groups[0].strip;
        assert_eq!(strip.lanes.len(), 2);
        assert_eq!(strip.lanes[0].label, "sd>ahci (3)");
        assert_eq!(strip.dots.len(), 4);
        // Every dot within the plot, the slow one furthest right.
        for d in &strip.dots {
            assert!(d.x > strip.left && d.x < strip.right, "{}", d.x);
        }
        let slow = strip.dots.iter().find(|d| d.outlier).unwrap();
        assert!(strip.dots.iter().all(|d| d.x <= slow.x));
        assert_eq!(slow.label, "SLOW");
        assert_eq!(strip.axis_title, "wall [ms]");
        assert!(!strip.ticks.is_empty());
        let html = askama::Template::render(&view).unwrap();
        for part in [
            "<a class=\"dot outlier\" href=\"/drives/M%2FSLOW\">",
            "<a class=\"dot\" href=\"/drives/M%2F%3CA%3E\">",
            // (The level as `PeerDrive::standing_text` writes it.)
            "<title>M/&#60;A&#62;: 20.00 ms (19.60 ms – 20.40 ms); ×1.000 (0.970–1.030, 99",
            ">SLOW</text>",
            "class=\"band\"",
            "<tr class=\"outlier\"><td><a href=\"/drives/M%2FSLOW\">M/SLOW</a></td>",
            "M/D: no steady state, so not compared",
            "median of drives 20.00 ms, middle 80% 19.00 ms – 21.00 ms",
        ] {
            assert!(html.contains(part), "{part}\n{html}");
        }
        assert!(!html.contains("<A>"), "{html}");
    }

    #[test]
    fn ticks_are_round_in_the_axis_unit() {
        let t = ticks(0.0193, 0.0231, 1e-3);
        let ms: Vec<String> = t.iter().map(|v| format!("{:.1}", v * 1e3)).collect();
        assert_eq!(ms, ["20.0", "21.0", "22.0", "23.0"]);
        assert!(ticks(1.0, 1.0, 1.0).is_empty());
    }
}
