//! The expanded matrix made into cells: every template compiled once, then rendered with
//! each cell's parameters and typed, with the checks only a rendered value allows (an empty
//! command, a mount point that is no absolute path, a user name); and the checks on all
//! the cells together (the plan's size, metrics no cell produces). It never reads YAML.

use indexmap::IndexMap;

use super::error::{error, Errors, Pos, SpecError, SpecErrors, WithHint};
use super::matrix::{self, Params};
use super::metrics;
use super::model::{Cell, CommandWorkload, Limits, Phase, Workload};
use super::schema::{PhaseSpec, Spec, WorkloadSpec};
use super::subst;
use super::template::Template;
use super::workload;

/// Renders every cell of the expanded matrix, in order; `names` are its parameters.
pub(crate) fn render(
    spec: &Spec,
    names: &[String],
    cells: Vec<Params>,
) -> Result<Vec<Cell>, SpecError> {
    let templates = Templates::compile(spec, names)?;
    let devices = spec.devices.is_some();
    let mut out = Vec::with_capacity(cells.len());
    for params in cells {
        out.push(templates.cell(params, devices)?);
    }
    Ok(out)
}

/// The size of what would run, checked before anything is expanded into steps: a few
/// lines of YAML can ask for 10⁸ steps. Adaptive repetition is held to its worst case:
/// every cell runs `max` times.
pub(crate) fn check_size(spec: &Spec, cells: usize, limits: &Limits) -> Result<(), SpecErrors> {
    let runs = u64::from(spec.repeat.max) + u64::from(spec.warmup);
    let per_device = (cells as u64)
        .saturating_mul(runs)
        .saturating_mul(1 + spec.before_each.len() as u64);
    let max = limits.max_steps_per_plan;
    if per_device > max {
        return Err(error(
            spec.repeat_pos,
            "repeat",
            format!(
                "{} cell(s) × {runs} repetition(s) × {} step(s) each make {per_device} steps per host and device; \
                 the limit is {max} steps per plan (--max-steps-per-plan): fewer repetitions or matrix values, \
                 split the campaign, or raise the limit",
                cells,
                1 + spec.before_each.len()
            ),
        )
        .into());
    }
    Ok(())
}

/// A threshold or pivot on a metric no cell can produce would only ever say "not
/// measured": each is rejected, now that every cell's workload is known.
pub(crate) fn check_metrics(spec: &Spec, cells: &[Cell]) -> Result<(), SpecErrors> {
    let produced = metrics::Produced::of(cells, spec.devices.is_some());
    let mut errs = Errors::default();
    for r in &spec.metric_refs {
        errs.ok(produced.check(r));
    }
    if !errs.is_empty() {
        return Err(errs.finish());
    }
    Ok(())
}

/// A template with its compiled pieces; the template stays for positions.
type Compiled<'a> = (&'a Template, Vec<subst::Piece>);

/// The workload's strings, compiled but not yet rendered for a cell.
enum WorkloadTemplate<'a> {
    Command {
        setup: Option<Compiled<'a>>,
        clean: Option<Compiled<'a>>,
        run: Compiled<'a>,
        user: Option<Compiled<'a>>,
        home: Option<Compiled<'a>>,
    },
    Tool {
        kind: &'static str,
        pos: Pos,
        fields: Vec<(&'a str, Compiled<'a>)>,
        options: Vec<(&'a str, Compiled<'a>)>,
    },
}

/// A phase whose strings are compiled but not yet rendered for a cell.
enum PhaseTemplate<'a> {
    Fixed(Phase),
    Fstrim(Compiled<'a>),
    Command(Compiled<'a>),
}

/// Every template of the campaign, compiled once for all its cells.
struct Templates<'a> {
    workload: WorkloadTemplate<'a>,
    before_each: Vec<PhaseTemplate<'a>>,
    /// `storage:`'s key and its settings.
    storage: Option<(Pos, Vec<(&'a str, Compiled<'a>)>)>,
}

impl<'a> Templates<'a> {
    /// Compiles the workload's templates, then the phases', then storage's.
    fn compile(spec: &'a Spec, names: &[String]) -> Result<Templates<'a>, SpecError> {
        let compile = |t| compile(t, names);
        let workload = match &spec.workload {
            WorkloadSpec::Command(c) => WorkloadTemplate::Command {
                setup: c.setup.as_ref().map(compile).transpose()?,
                clean: c.clean.as_ref().map(compile).transpose()?,
                run: compile(&c.run)?,
                user: c.user.as_ref().map(compile).transpose()?,
                home: c.home.as_ref().map(compile).transpose()?,
            },
            WorkloadSpec::Tool(t) => WorkloadTemplate::Tool {
                kind: t.kind,
                pos: t.pos,
                fields: t
                    .fields
                    .iter()
                    .map(|(k, v)| Ok((k.as_str(), compile(v)?)))
                    .collect::<Result<_, SpecError>>()?,
                options: t
                    .options
                    .iter()
                    .map(|(k, v)| Ok((k.as_str(), compile(v)?)))
                    .collect::<Result<_, SpecError>>()?,
            },
        };
        let before_each = spec
            .before_each
            .iter()
            .map(|phase| {
                Ok(match phase {
                    PhaseSpec::Sync => PhaseTemplate::Fixed(Phase::Sync),
                    PhaseSpec::DropCaches => PhaseTemplate::Fixed(Phase::DropCaches),
                    PhaseSpec::Reboot => PhaseTemplate::Fixed(Phase::Reboot),
                    PhaseSpec::Clean { .. } => PhaseTemplate::Fixed(Phase::Clean),
                    PhaseSpec::Fstrim(t) => PhaseTemplate::Fstrim(compile(t)?),
                    PhaseSpec::Command(t) => PhaseTemplate::Command(compile(t)?),
                })
            })
            .collect::<Result<Vec<_>, SpecError>>()?;
        let storage = match &spec.storage {
            Some(st) => Some((
                st.pos,
                st.fields
                    .iter()
                    .map(|(k, v)| Ok((k.as_str(), compile(v)?)))
                    .collect::<Result<Vec<_>, SpecError>>()?,
            )),
            None => None,
        };
        Ok(Templates {
            workload,
            before_each,
            storage,
        })
    }

    /// One cell: its workload, then its phases, then its storage, rendered with `params`;
    /// `devices` is whether `devices:` is given.
    fn cell(&self, params: Params, devices: bool) -> Result<Cell, SpecError> {
        let workload = self.workload(&params)?;
        let mut before_each = Vec::with_capacity(self.before_each.len());
        for phase in &self.before_each {
            before_each.push(match phase {
                PhaseTemplate::Fixed(p) => p.clone(),
                PhaseTemplate::Fstrim(c) => Phase::Fstrim(mount_point(c, &params)?),
                PhaseTemplate::Command(c) => Phase::Command(command(c, &params)?),
            });
        }
        let storage = match &self.storage {
            Some((pos, fields)) => Some(workload::storage(
                &settings(fields, &params)?,
                *pos,
                devices,
            )?),
            None => None,
        };
        Ok(Cell {
            params,
            workload,
            before_each,
            storage,
        })
    }

    /// The cell's workload: a command's strings rendered, or a tool's settings typed.
    fn workload(&self, params: &Params) -> Result<Workload, SpecError> {
        Ok(match &self.workload {
            WorkloadTemplate::Command {
                setup,
                clean,
                run,
                user,
                home,
            } => Workload::Command(CommandWorkload {
                setup: setup.as_ref().map(|c| command(c, params)).transpose()?,
                clean: clean.as_ref().map(|c| command(c, params)).transpose()?,
                run: command(run, params)?,
                user: user.as_ref().map(|u| user_name(u, params)).transpose()?,
                home: home
                    .as_ref()
                    .map(|h| home_dir(h, params, self.storage.is_some()))
                    .transpose()?,
            }),
            WorkloadTemplate::Tool {
                kind,
                pos,
                fields,
                options,
            } => workload::build(
                kind,
                &settings(fields, params)?,
                &settings(options, params)?,
                *pos,
            )?,
        })
    }
}

/// A command (the workload's or a phase's) rendered for one cell; one that comes out
/// empty is an error that names the cell.
fn command((t, pieces): &Compiled<'_>, params: &Params) -> Result<String, SpecError> {
    let s = subst::render(t, pieces, params)?;
    if s.trim().is_empty() {
        return Err(error(
            t.pos,
            &t.path,
            format!("the command is empty in cell {}", matrix::describe(params)),
        ));
    }
    Ok(s)
}

/// Renders a tool workload's settings for one cell.
fn settings<'a>(
    list: &[(&str, Compiled<'a>)],
    params: &IndexMap<String, String>,
) -> Result<IndexMap<String, workload::Setting<'a>>, SpecError> {
    list.iter()
        .map(|(k, (t, pieces))| {
            let value = subst::render(t, pieces, params)?;
            // Name the cell only when a parameter made the value what it is.
            let cell = if value == t.text {
                String::new()
            } else {
                matrix::describe(params)
            };
            Ok((
                k.to_string(),
                workload::Setting {
                    value,
                    template: t,
                    cell,
                },
            ))
        })
        .collect()
}

/// One template compiled against the campaign's parameter names.
fn compile<'a>(t: &'a Template, params: &[String]) -> Result<Compiled<'a>, SpecError> {
    Ok((t, subst::compile(t, params)?))
}

/// fstrim takes a mount point: an absolute path, or the reserved `${mount}`
/// (or another reserved name) that the agent fills in.
fn mount_point(
    (t, pieces): &Compiled<'_>,
    params: &IndexMap<String, String>,
) -> Result<String, SpecError> {
    let path = subst::render(t, pieces, params)?;
    if path.trim().is_empty() {
        return Err(error(
            t.pos,
            &t.path,
            format!(
                "the fstrim mount point is empty in cell {}",
                matrix::describe(params)
            ),
        ));
    }
    if !path.starts_with('/') && !path.starts_with("${") {
        return Err(error(
            t.pos,
            &t.path,
            format!("the fstrim mount point `{path}` is not an absolute path"),
        )
        .hint("write the full path of the mount point, e.g. `/mnt/test`, or `${mount}`"));
    }
    Ok(path)
}

/// `workload.command.user`: a user name as `useradd` takes it (letters, digits, `_`, `.`,
/// `-`, not first; at most 32), so it can only name a user, never hold shell syntax.
fn user_name(
    (t, pieces): &Compiled<'_>,
    params: &IndexMap<String, String>,
) -> Result<String, SpecError> {
    let name = subst::render(t, pieces, params)?;
    let valid = !name.is_empty()
        && name.len() <= 32
        && !name.starts_with('-')
        && !name.bytes().all(|b| b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !valid {
        return Err(error(
            t.pos,
            &t.path,
            format!(
                "`{name}` is not a user name (in cell {})",
                matrix::describe(params)
            ),
        )
        .hint("name a user of the host, e.g. `user: builder` (letters, digits, `_`, `.`, `-`)"));
    }
    Ok(name)
}

/// `workload.command.home`: an absolute path, or one under `${mount}` with `storage:`.
fn home_dir(
    (t, pieces): &Compiled<'_>,
    params: &IndexMap<String, String>,
    has_storage: bool,
) -> Result<String, SpecError> {
    let path = subst::render(t, pieces, params)?;
    if path.contains("${mount}") && !has_storage {
        return Err(error(
            t.pos,
            &t.path,
            "`${mount}` is the storage under test, but the campaign has no `storage:`",
        )
        .hint("add `storage:` (e.g. `storage: { fs: tmpfs }`), or give an absolute path"));
    }
    if !path.starts_with('/') && !path.starts_with("${mount}") {
        return Err(error(
            t.pos,
            &t.path,
            format!("the home directory `{path}` is not an absolute path"),
        )
        .hint("put it on the storage under test, e.g. `home: \"${mount}/home/builder\"`"));
    }
    Ok(path)
}
