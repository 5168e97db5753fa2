//! Matrix expansion with GitHub Actions `strategy.matrix` semantics: the
//! cartesian product, then `exclude`, then `include`. Owns the checks that
//! need the whole matrix (exclude keys and values, duplicate cells, size);
//! it never looks at workload strings.

use indexmap::IndexMap;

use super::error::{backticked, error, suggest, Result, WithHint};
use super::schema::MatrixSpec;

/// More cells than this is a typo or a runaway matrix, not a campaign that
/// will finish; GitHub stops at 256 jobs, storage runs are cheaper per cell.
pub(crate) const MAX_CELLS: usize = 10_000;

pub(crate) type Params = IndexMap<String, String>;

#[derive(Debug)]
pub(crate) struct Expansion {
    /// Matrix keys, then keys only `include` adds, in first-seen order.
    pub params: Vec<String>,
    pub cells: Vec<Params>,
}

/// Expands the matrix: the product of its parameters, then `exclude`, then `include`,
/// each step checked before the next.
pub(crate) fn expand(m: &MatrixSpec) -> Result<Expansion> {
    let names: Vec<&str> = m.params.iter().map(|p| p.name.as_str()).collect();

    if m.params.is_empty() && m.include.is_empty() {
        return Err(error(m.pos, "matrix", "the matrix has no parameters")
            .hint("add a parameter with its values, e.g. `bs: [4k, 64k]`, or remove `matrix`"));
    }
    check_product_size(m)?;
    let mut combos = product(m);
    apply_excludes(m, &names, &mut combos)?;
    let params = apply_includes(m, &names, &mut combos)?;
    if combos.len() > MAX_CELLS {
        return Err(error(
            m.pos,
            "matrix",
            format!("the matrix has more than {MAX_CELLS} cells"),
        ));
    }

    // Present every cell's parameters in the campaign's parameter order,
    // whatever order include entries wrote them in.
    let cells = combos
        .into_iter()
        .map(|c| {
            params
                .iter()
                .filter_map(|p| c.get(p).map(|v| (p.clone(), v.clone())))
                .collect()
        })
        .collect();
    Ok(Expansion { params, cells })
}

/// Refuses a product of more than [`MAX_CELLS`] combinations, checked before building
/// anything, so a huge matrix costs nothing.
fn check_product_size(m: &MatrixSpec) -> Result<()> {
    let size = m
        .params
        .iter()
        .try_fold(1usize, |acc, p| acc.checked_mul(p.values.len()))
        .filter(|n| *n <= MAX_CELLS);
    if size.is_none() {
        return Err(error(
            m.pos,
            "matrix",
            format!("the matrix has more than {MAX_CELLS} combinations"),
        )
        .hint("split the campaign, or use `include` to list the combinations you need"));
    }
    Ok(())
}

/// The cartesian product, first key slowest. With no parameters at all (an
/// include-only matrix) there is no base combination: GitHub then makes
/// one cell per include entry.
fn product(m: &MatrixSpec) -> Vec<Params> {
    let mut combos: Vec<Params> = if m.params.is_empty() {
        Vec::new()
    } else {
        vec![Params::new()]
    };
    for p in &m.params {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                p.values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.insert(p.name.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    combos
}

/// Removes what each `exclude` entry matches; an entry that names no parameter or
/// value of the matrix, or matches nothing left, is an error, and so is removing all.
fn apply_excludes(m: &MatrixSpec, names: &[&str], combos: &mut Vec<Params>) -> Result<()> {
    for (i, entry) in m.exclude.iter().enumerate() {
        for pair in &entry.pairs {
            let pair_path = format!("{}.{}", entry.path, pair.key);
            let Some(param) = m.params.iter().find(|p| p.name == pair.key) else {
                return Err(error(
                    pair.key_pos,
                    &pair_path,
                    format!(
                        "`{}` is not a matrix parameter, so exclude cannot match it",
                        pair.key
                    ),
                )
                .maybe_hint(suggest(&pair.key, names, "matrix parameters")));
            };
            if !param.values.contains(&pair.value) {
                let values: Vec<&str> = param.values.iter().map(String::as_str).collect();
                return Err(error(
                    pair.value_pos,
                    &pair_path,
                    format!(
                        "this exclude entry matches no combination: `{}` has no value `{}`",
                        pair.key, pair.value
                    ),
                )
                .hint(format!("`{}` takes {}", pair.key, backticked(&values))));
            }
        }
        let before = combos.len();
        combos.retain(|c| !entry.pairs.iter().all(|p| c.get(&p.key) == Some(&p.value)));
        if combos.len() == before {
            return Err(error(
                entry.pos,
                &entry.path,
                "this exclude entry matches no combination: earlier exclude entries already removed every one it matches",
            )
            .hint(format!("remove it; exclude[{i}] is redundant")));
        }
    }
    if combos.is_empty() && !m.params.is_empty() && m.include.is_empty() {
        return Err(error(
            m.exclude_pos,
            "matrix.exclude",
            "exclude removes every combination, so the matrix has no cells",
        ));
    }
    Ok(())
}

/// Joins each `include` entry to the combinations whose original values it keeps, or
/// adds it as a cell of its own; an entry that changes nothing, or adds a cell a second
/// time, is an error. Returns every parameter, matrix keys first, in first-seen order.
fn apply_includes(m: &MatrixSpec, names: &[&str], combos: &mut Vec<Params>) -> Result<Vec<String>> {
    let mut params: Vec<String> = m.params.iter().map(|p| p.name.clone()).collect();
    let originals = combos.len();
    // Index of the include entry that created each added cell, to name it
    // when a later entry creates the same cell again.
    let mut added_by: Vec<usize> = Vec::new();
    for (j, entry) in m.include.iter().enumerate() {
        for pair in &entry.pairs {
            if !params.contains(&pair.key) {
                params.push(pair.key.clone());
            }
        }
        let mut joined = false;
        let mut changed = false;
        for combo in combos.iter_mut().take(originals) {
            // An entry joins a combination unless it would overwrite one of
            // the original matrix values; values added by earlier include
            // entries may be overwritten.
            let conflicts = entry
                .pairs
                .iter()
                .any(|p| names.contains(&p.key.as_str()) && combo.get(&p.key) != Some(&p.value));
            if conflicts {
                continue;
            }
            joined = true;
            for p in &entry.pairs {
                if combo.insert(p.key.clone(), p.value.clone()).as_ref() != Some(&p.value) {
                    changed = true;
                }
            }
        }
        if !joined {
            let cell: Params = entry
                .pairs
                .iter()
                .map(|p| (p.key.clone(), p.value.clone()))
                .collect();
            // Only cells added by include can collide: one identical to an
            // original combination would have joined it instead.
            if let Some(k) = combos[originals..].iter().position(|c| *c == cell) {
                return Err(error(
                    entry.pos,
                    &entry.path,
                    format!(
                        "this include entry adds the cell {} a second time (include[{}] already adds it)",
                        describe(&cell),
                        added_by[k]
                    ),
                )
                .hint("remove one of the two entries"));
            }
            combos.push(cell);
            added_by.push(j);
        } else if !changed {
            return Err(error(
                entry.pos,
                &entry.path,
                "this include entry changes nothing: every combination it matches already has these values",
            )
            .hint("include adds values to the combinations it matches, or adds a new cell when it matches none; remove this entry or change a value"));
        }
    }
    Ok(params)
}

/// `{bs: 4k, sync: none}`, how a cell is named in messages.
pub(crate) fn describe(cell: &Params) -> String {
    let pairs: Vec<String> = cell.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", pairs.join(", "))
}
