//! Workload kinds other than `command`: which settings each takes, and turning a cell's
//! rendered settings into typed values (sizes, counts, choices), with errors that point
//! at the setting. Does not run anything and does not know how tools are invoked.

use indexmap::IndexMap;

use super::error::{closest, error, Result, WithHint};
use super::model::{
    BonnieWorkload, CompilebenchWorkload, Encryption, Filesystem, FioWorkload, FsyncWorkload,
    Storage, SyncMode, Workload, WriteCacheSetting, BONNIE_MEMORY,
};
use super::template::Template;

pub(crate) const KINDS: [&str; 5] = ["command", "fsync", "fio", "bonnie", "compilebench"];

/// The settings of each kind: (kind, allowed keys, required keys).
pub(crate) fn fields_of(
    kind: &str,
) -> (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
) {
    match kind {
        "fsync" => (
            "fsync",
            &[
                "path", "size", "offset", "count", "sync", "direct", "prealloc", "advance",
            ],
            &["path"],
        ),
        "fio" => ("fio", &["options", "job_file", "directory"], &[]),
        "bonnie" => ("bonnie", &["directory", "args", "memory"], &["directory"]),
        _ => (
            "compilebench",
            &["command", "directory", "args"],
            &["directory"],
        ),
    }
}

/// A setting after substitution, with the template it came from (for positions).
pub(crate) struct Setting<'a> {
    pub value: String,
    pub template: &'a Template,
    /// The cell (`{size: lots}`) when a parameter made the value; "" otherwise.
    pub cell: String,
}

fn bad(s: &Setting<'_>, expected: &str) -> super::SpecError {
    let cell = if s.cell.is_empty() {
        String::new()
    } else {
        format!(" in cell {}", s.cell)
    };
    error(
        s.template.pos,
        &s.template.path,
        format!("expected {expected}, found `{}`{cell}", s.value),
    )
}

/// A byte count: digits with an optional K, M, G or T suffix (powers of 1024).
pub(crate) fn bytes(s: &Setting<'_>) -> Result<u64> {
    parse_bytes(&s.value).ok_or_else(|| {
        bad(
            s,
            "a size in bytes, optionally with K, M, G or T (e.g. 4096, 4K, 1M)",
        )
    })
}

/// Digits with an optional K, M, G or T suffix (powers of 1024; `KiB`, `KB`, `512B`…
/// too), as sizes are written in campaigns, matrix values and flags like
/// `--max-file-size 20M`. The one size parser of the coordinator (reports order matrix
/// values such as `bs: [4k, 1M]` with it).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let v = text.trim();
    let v = v.strip_suffix(['B', 'b']).unwrap_or(v);
    let v = v.strip_suffix('i').unwrap_or(v);
    let (digits, mult) = match v.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let mult: u64 = match c.to_ascii_lowercase() {
                'k' => 1 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                _ => return None,
            };
            (&v[..i], mult)
        }
        _ => (v, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

fn flag(s: &Setting<'_>) -> Result<bool> {
    match s.value.trim() {
        "true" | "yes" | "on" => Ok(true),
        "false" | "no" | "off" => Ok(false),
        _ => Err(bad(s, "true or false")),
    }
}

fn words(s: Option<&Setting<'_>>) -> Vec<String> {
    s.map(|s| s.value.split_whitespace().map(String::from).collect())
        .unwrap_or_default()
}

fn nonempty(s: &Setting<'_>, what: &str) -> Result<String> {
    if s.value.trim().is_empty() {
        return Err(error(
            s.template.pos,
            &s.template.path,
            format!("the {what} is empty"),
        ));
    }
    Ok(s.value.clone())
}

/// Builds the typed workload of `kind` from one cell's settings.
pub(crate) fn build(
    kind: &str,
    settings: &IndexMap<String, Setting<'_>>,
    options: &IndexMap<String, Setting<'_>>,
    kind_pos: super::error::Pos,
) -> Result<Workload> {
    let get = |k: &str| settings.get(k);
    Ok(match kind {
        "fsync" => {
            // `path` is required by the schema.
            let path = get("path")
                .map(|s| nonempty(s, "path"))
                .transpose()?
                .unwrap_or_default();
            let size = get("size").map(bytes).transpose()?.unwrap_or(1);
            let count = get("count").map(bytes).transpose()?.unwrap_or(1000);
            for (name, v) in [("size", size), ("count", count)] {
                if v == 0 {
                    let s = &settings[name];
                    return Err(error(
                        s.template.pos,
                        &s.template.path,
                        format!("{name} must be at least 1"),
                    ));
                }
            }
            const SYNCS: [&str; 4] = ["fdatasync", "fsync", "dsync", "none"];
            let sync = match get("sync") {
                None => SyncMode::Fdatasync,
                Some(s) => match s.value.as_str() {
                    "fdatasync" => SyncMode::Fdatasync,
                    "fsync" => SyncMode::Fsync,
                    "dsync" => SyncMode::Dsync,
                    "none" => SyncMode::None,
                    other => {
                        return Err(bad(s, "one of `fdatasync`, `fsync`, `dsync`, `none`")
                            .maybe_hint(
                                closest(other, &SYNCS).map(|c| format!("did you mean `{c}`?")),
                            ))
                    }
                },
            };
            Workload::Fsync(FsyncWorkload {
                path,
                size,
                offset: get("offset").map(bytes).transpose()?.unwrap_or(0),
                count,
                sync,
                direct: get("direct").map(flag).transpose()?.unwrap_or(false),
                prealloc: get("prealloc").map(flag).transpose()?.unwrap_or(true),
                advance: get("advance").map(flag).transpose()?.unwrap_or(false),
            })
        }
        "fio" => {
            let job_file = get("job_file")
                .map(|s| nonempty(s, "job file path"))
                .transpose()?;
            if job_file.is_some() != options.is_empty() {
                return Err(error(kind_pos, "workload.fio", "give fio either `options:` or `job_file:`, not both and not neither")
                    .hint("e.g. `fio: { directory: /mnt/test, options: { rw: randwrite, bs: 4k, size: 64M } }`"));
            }
            Workload::Fio(FioWorkload {
                job_file,
                directory: get("directory")
                    .map(|s| nonempty(s, "directory"))
                    .transpose()?,
                options: options
                    .iter()
                    .map(|(k, v)| (k.clone(), v.value.clone()))
                    .collect(),
            })
        }
        "bonnie" => {
            let args = words(get("args"));
            let sized = args.iter().any(|a| a == "-s" || a == "-r");
            let memory = match (get("memory"), sized) {
                (Some(m), true) => {
                    return Err(error(
                        m.template.pos,
                        &m.template.path,
                        "give `memory:` or bonnie++'s own -s/-r in `args`, not both",
                    )
                    .hint("`memory: 512M` means `-r 512M -s 1024M` under a 512 MiB memory limit"))
                }
                (Some(m), false) => Some(bytes(m)?),
                (None, false) => Some(BONNIE_MEMORY),
                (None, true) => None,
            };
            if memory.is_some_and(|m| m < 1 << 20) {
                let m = &settings["memory"];
                return Err(error(
                    m.template.pos,
                    &m.template.path,
                    "memory must be at least 1M",
                ));
            }
            Workload::Bonnie(BonnieWorkload {
                directory: nonempty(&settings["directory"], "directory")?,
                args,
                memory,
            })
        }
        _ => Workload::Compilebench(CompilebenchWorkload {
            command: get("command")
                .map(|s| nonempty(s, "command"))
                .transpose()?
                .unwrap_or_else(|| "compilebench".into()),
            directory: nonempty(&settings["directory"], "directory")?,
            args: words(get("args")),
        }),
    })
}

/// Builds one cell's storage configuration from its settings.
pub(crate) fn storage(
    settings: &IndexMap<String, Setting<'_>>,
    pos: super::error::Pos,
    has_devices: bool,
) -> Result<Storage> {
    const FILESYSTEMS: [&str; 6] = ["ext2", "ext4", "xfs", "btrfs", "tmpfs", "none"];
    let ramdisk_size = settings.get("ramdisk.size").map(bytes).transpose()?;
    let fs = match settings.get("fs") {
        None if ramdisk_size.is_some() => Filesystem::Tmpfs,
        None => {
            return Err(
                error(pos, "storage.fs", "missing required key `fs` in `storage`")
                    .hint("choose one of `ext2`, `ext4`, `xfs`, `btrfs`, `tmpfs`, `none`"),
            )
        }
        Some(s) => match s.value.as_str() {
            "ext2" => Filesystem::Ext2,
            "ext4" => Filesystem::Ext4,
            "xfs" => Filesystem::Xfs,
            "btrfs" => Filesystem::Btrfs,
            "tmpfs" => Filesystem::Tmpfs,
            "none" => Filesystem::None,
            other => {
                return Err(
                    bad(s, "one of `ext2`, `ext4`, `xfs`, `btrfs`, `tmpfs`, `none`").maybe_hint(
                        closest(other, &FILESYSTEMS).map(|c| format!("did you mean `{c}`?")),
                    ),
                )
            }
        },
    };
    if ramdisk_size.is_some() && fs != Filesystem::Tmpfs {
        let s = &settings["fs"];
        return Err(error(
            s.template.pos,
            &s.template.path,
            format!("a ramdisk is tmpfs, but `fs` is `{}`", fs.name()),
        )
        .hint("remove `fs:` or `ramdisk:`"));
    }
    let write_cache = match settings.get("write_cache") {
        None => WriteCacheSetting::Keep,
        Some(s) => match s.value.as_str() {
            "on" | "true" => WriteCacheSetting::On,
            "off" | "false" => WriteCacheSetting::Off,
            "keep" => WriteCacheSetting::Keep,
            _ => return Err(bad(s, "`on`, `off` or `keep`")),
        },
    };
    if !has_devices {
        let needs = if fs.needs_device() {
            settings
                .get("fs")
                .map(|s| (s, format!("`fs: {}` formats a device", fs.name())))
        } else if write_cache != WriteCacheSetting::Keep {
            settings
                .get("write_cache")
                .map(|s| (s, "setting the write cache needs a device".to_string()))
        } else {
            None
        };
        if let Some((s, what)) = needs {
            return Err(error(s.template.pos, &s.template.path, format!("{what}, but the campaign selects none"))
                .hint("add `devices:` (e.g. `devices: { path: /dev/loop7 }`), or use `ramdisk: { size: 1G }`"));
        }
    }
    let encryption = match settings.get("encryption") {
        None => Encryption::None,
        Some(s) => match s.value.as_str() {
            "gocryptfs" => Encryption::Gocryptfs,
            "none" => Encryption::None,
            _ => return Err(bad(s, "`gocryptfs` or `none`")),
        },
    };
    if !encryption.is_none() && fs == Filesystem::None {
        let s = &settings["encryption"];
        return Err(error(
            s.template.pos,
            &s.template.path,
            "encryption needs a filesystem to hold the encrypted files, but `fs` is `none`",
        ));
    }
    Ok(Storage {
        encryption,
        fs,
        mkfs_options: words(settings.get("mkfs_options")),
        mount_options: settings
            .get("mount_options")
            .map(|s| s.value.trim().to_string())
            .unwrap_or_default(),
        write_cache,
        ramdisk_size,
    })
}
