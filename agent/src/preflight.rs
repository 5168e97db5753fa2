//! What a plan needs of its host, judged when the plan arrives, so that a plan this host
//! cannot run is refused whole before anything of it runs: the programs its steps exec
//! (tools, mkfs, mount, gocryptfs, write-cache tools, fstrim, purge tools, a command's own
//! program) and the users its workloads run as, whether it needs root the agent lacks
//! (storage setup, purge and precondition, bonnie++'s memory cgroup, other users), and
//! whether each drive to purge supports the purge's method. It runs nothing but the
//! drives' own identify queries for that (`hdparm -I`, `nvme id-ctrl`, which change
//! nothing): a program is looked up as the agent will find it (`process::search_path`:
//! PATH, then the sbin directories), a user in the password database. Also the two things
//! running as a user needs: the user's account (`account`) and its home made on the
//! storage under test (`make_home`).

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::model::{
    Filesystem, Plan, Precondition, Purge, Step, StepKind, StorageConfig, Tool, Workload,
};
use crate::storage::Storage;
use crate::workloads::memlimit;
use crate::{precondition, process, purge};

/// A user of this host, as a workload running as it needs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Account {
    pub uid: u32,
    pub gid: u32,
    /// Its home directory in the password database.
    pub home: PathBuf,
    /// Its groups, as `initgroups(3)` would set them (the primary group included).
    pub groups: Vec<u32>,
}

/// The user `name`, or `None` if this host has none of that name.
pub(crate) fn account(name: &str) -> std::io::Result<Option<Account>> {
    let cname = CString::new(name)?;
    let mut buf = vec![0u8; 4096];
    loop {
        let mut pwd = std::mem::MaybeUninit::<libc::passwd>::uninit();
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: the name is NUL-terminated, `pwd`
        // and `found` are writable, `buf` has `buf.len()` writable bytes.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                pwd.as_mut_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 2, 0);
            continue;
        }
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        if found.is_null() {
            return Ok(None);
        }
        // SAFETY: on success `found` points at `pwd`, filled in, its strings in `buf`,
        // which lives until the end of this block.
        let (uid, gid, home) = unsafe {
            let pwd = &*found;
            let home = CStr::from_ptr(pwd.pw_dir).to_bytes();
            (
                pwd.pw_uid,
                pwd.pw_gid,
                PathBuf::from(OsStr::from_bytes(home)),
            )
        };
        return Ok(Some(Account {
            uid,
            gid,
            home,
            groups: groups(&cname, gid)?,
        }));
    }
}

/// `getgrouplist(3)`: the groups `initgroups` would give the user.
fn groups(name: &CStr, gid: u32) -> std::io::Result<Vec<u32>> {
    let mut room: libc::c_int = 32;
    loop {
        let mut groups = vec![0 as libc::gid_t; room as usize];
        let mut count = room;
        // SAFETY: `groups` has room for `count` entries; getgrouplist writes at most that
        // many and sets `count` to how many there are.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if rc >= 0 {
            groups.truncate(count.max(0) as usize);
            return Ok(groups);
        }
        room = if count > room { count } else { room * 2 };
        if room > 1 << 16 {
            return Err(std::io::Error::other("the user is in too many groups"));
        }
    }
}

/// Makes `home` (and what is missing above it, owned by the agent) and gives it to the
/// user. A home that exists is only given to the user again.
pub(crate) fn make_home(home: &Path, account: &Account) -> std::io::Result<()> {
    std::fs::create_dir_all(home)?;
    std::os::unix::fs::chown(home, Some(account.uid), Some(account.gid))
}

/// One need of the plan the host does not meet, with what needs it.
struct Lack {
    what: String,
    uses: Vec<String>,
}

/// Collects lacks of the same thing under one name, in the order they are first found.
#[derive(Default)]
struct Lacks(Vec<Lack>);

impl Lacks {
    fn add(&mut self, what: &str, used_for: String) {
        match self.0.iter_mut().find(|l| l.what == what) {
            Some(l) if !l.uses.contains(&used_for) => l.uses.push(used_for),
            Some(_) => {}
            None => self.0.push(Lack {
                what: what.to_string(),
                uses: vec![used_for],
            }),
        }
    }

    /// "fio (for the measure of cell a), mkfs.xfs (for storage setup)".
    fn list(&self) -> String {
        const SHOWN: usize = 3;
        self.0
            .iter()
            .map(|l| {
                let mut uses = l.uses[..l.uses.len().min(SHOWN)].join(", ");
                if l.uses.len() > SHOWN {
                    uses.push_str(&format!(" and {} more", l.uses.len() - SHOWN));
                }
                format!("{} (for {uses})", l.what)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the host needs to run `plan`, as the executor will run it. `substitute` fills in
/// what only the agent knows (`${mount}`, …) as the step will see it.
pub(crate) struct Check<'a> {
    pub host: &'a str,
    pub storage: &'a Storage,
    pub substitute: &'a dyn Fn(&str, &Step, Option<&StorageConfig>) -> String,
    /// The agent's effective user id (`geteuid`; tests pretend another): storage setup and
    /// workloads of other users need root.
    pub agent_uid: u32,
}

impl Check<'_> {
    /// Why `plan` cannot run on this host (root it needs and is not given first, then every
    /// missing program and user named), or None.
    pub(crate) fn refusal(&self, plan: &Plan) -> Option<String> {
        let mut root_for: Vec<&str> = Vec::new();
        // Purges and preconditions, judged after the walk (the drive is asked only when
        // its program is here and the agent is root).
        let mut purges: Vec<&Purge> = Vec::new();
        let mut preconditions: Vec<&Precondition> = Vec::new();
        let mut cgroups = Lacks::default();
        let mut programs = Lacks::default();
        let mut found = std::collections::HashMap::<String, bool>::new();
        let mut need = |program: &str, used_for: String| {
            let here = *found
                .entry(program.to_string())
                .or_insert_with(|| self.available(program));
            if !here {
                programs.add(program, used_for);
            }
        };
        // The storage in effect (`Plan::storage_at`), followed along the steps rather than
        // looked up for each (a walk back per step cost a plan of 8,000 steps without
        // storage 32 million steps' looks at its acceptance).
        let mut storage = None;
        for step in &plan.steps {
            let cell = &step.cell_id;
            match &step.kind {
                StepKind::StorageSetup(c) => storage = Some(c.clone()),
                StepKind::StorageTeardown(_) => storage = None,
                _ => {}
            }
            let script = |s: &str| (self.substitute)(s, step, storage.as_ref());
            match &step.kind {
                StepKind::Setup(s) | StepKind::Clean(s) | StepKind::Command(s) => {
                    let what = match &step.kind {
                        StepKind::Command(_) => "a command phase",
                        kind => kind.name(),
                    };
                    need(
                        process::program_of(&script(s)),
                        format!("{what} of cell {cell}"),
                    )
                }
                StepKind::Measure(Workload::Command(s)) => need(
                    process::program_of(&script(s)),
                    format!("the measure of cell {cell}"),
                ),
                StepKind::Measure(Workload::Tool { tool, argv }) => {
                    if let Some(program) = argv.first() {
                        need(&script(program), format!("the measure of cell {cell}"));
                    }
                    let argv: Vec<String> = argv.iter().map(|a| script(a)).collect();
                    if *tool == Tool::Bonnie && self.bonnie_cgroup(&argv, storage.as_ref()) {
                        cgroups.add("bonnie++", format!("the measure of cell {cell}"));
                    }
                }
                StepKind::Fstrim(_) => need("fstrim", "the fstrim phase".into()),
                StepKind::Purge(p) => {
                    need(
                        purge::program(p.method),
                        format!("the purge of {}", p.device),
                    );
                    purges.push(p);
                }
                StepKind::Precondition(p) => preconditions.push(p),
                StepKind::StorageSetup(c) => {
                    for what in Storage::root_needed_for(c) {
                        if !root_for.contains(&what) {
                            root_for.push(what);
                        }
                    }
                    for program in self.storage.programs(c) {
                        need(program, "storage setup".into());
                    }
                }
                _ => {}
            }
        }
        let not_root = self.users(plan, &mut programs);
        let drives = self.drives(&purges, &preconditions, |program| {
            found.get(program).copied().unwrap_or(false)
        });
        let mut reasons = Vec::new();
        // Said first: a user running a storage campaign unprivileged must learn that it
        // needs root, not only that mkfs.ext4 is off its PATH (the second is true too, and
        // still said).
        if self.agent_uid != 0 && !root_for.is_empty() {
            reasons.push(format!(
                "host {}: storage setup needs root to {} (the agent runs as uid {}); run the agent \
                 as root, or use a campaign without `storage:`",
                self.host,
                root_for.join(", "),
                self.agent_uid
            ));
        }
        // Else bonnie++'s step fails when it cannot make the cgroup, after the plan's
        // storage and preparation ran (memlimit.rs makes one for every run sized by -r).
        if self.agent_uid != 0 && !cgroups.0.is_empty() {
            reasons.push(format!(
                "host {}: {} needs root to make the memory cgroup that holds it to its -r (the \
                 agent runs as uid {}); run the agent as root, or size bonnie++ yourself: give \
                 `-s` of at least twice the host's RAM in `args:` and neither `memory:` nor `-r`, \
                 so no cgroup is made",
                self.host,
                cgroups.list(),
                self.agent_uid
            ));
        }
        // Purging or overwriting a drive opens its device for writing, and the purge
        // tools send the drive admin commands: root's.
        if self.agent_uid != 0 && !(purges.is_empty() && preconditions.is_empty()) {
            let what: Vec<String> = purges
                .iter()
                .map(|p| format!("purge {}", p.device))
                .chain(
                    preconditions
                        .iter()
                        .map(|p| format!("precondition {}", p.device)),
                )
                .collect();
            reasons.push(format!(
                "host {}: `prepare:` needs root to {} (the agent runs as uid {}); run the agent \
                 as root, or use a campaign without `prepare:`",
                self.host,
                what.join(", "),
                self.agent_uid
            ));
        }
        if !programs.0.is_empty() {
            reasons.push(format!("host {} lacks: {}", self.host, programs.list()));
        }
        if !drives.is_empty() {
            reasons.push(format!("host {}: {}", self.host, drives.join("; ")));
        }
        reasons.extend(not_root);
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }

    /// What the drives to purge or precondition cannot do: a purge's method the drive does
    /// not support (asked of a root agent that has the method's program, `has`), a
    /// precondition's block size direct writes to the drive cannot use.
    fn drives(
        &self,
        purges: &[&Purge],
        preconditions: &[&Precondition],
        has: impl Fn(&str) -> bool,
    ) -> Vec<String> {
        let sys = &self.storage.inventory_roots.sys;
        let mut out = Vec::new();
        for p in purges {
            if self.agent_uid == 0 && has(purge::program(p.method)) {
                out.extend(purge::unsupported(p, sys));
            }
        }
        for p in preconditions {
            let name = crate::probes::inventory::disk_name(&p.device);
            // Unreadable (not a device this host has): the rails say so; the fill checks
            // again when it runs.
            let logical = std::fs::read_to_string(
                sys.join("block")
                    .join(name)
                    .join("queue/logical_block_size"),
            )
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(512);
            out.extend(precondition::block_size_refusal(
                &p.device,
                p.block_size,
                logical,
            ));
        }
        out
    }

    /// Whether bonnie++ run as `argv` (substituted) on `storage` is held in a memory cgroup,
    /// as `workloads::measure` will decide it: its directory is judged in memory if it is on
    /// the plan's ramdisk (not mounted yet) or on a memory filesystem now.
    fn bonnie_cgroup(&self, argv: &[String], storage: Option<&StorageConfig>) -> bool {
        let ramdisk = storage
            .filter(|c| c.fs == Filesystem::Tmpfs)
            .map(|c| self.storage.mount_point(c));
        memlimit::bonnie_limit(argv, |dir| {
            ramdisk
                .as_ref()
                .is_some_and(|m| Path::new(dir).starts_with(m))
                || memlimit::in_memory(dir)
        })
        .is_some()
    }

    /// Whether `program` can be run: found in PATH, or (an absolute path) an executable
    /// file. A path under the agent's mount points is made by the plan itself, and a
    /// relative one depends on where the command runs: neither is judged.
    fn available(&self, program: &str) -> bool {
        use std::os::unix::fs::PermissionsExt;
        let path = Path::new(program);
        if !program.contains('/') {
            return process::find_program(OsStr::new(program)).is_ok();
        }
        if !path.is_absolute() || path.starts_with(&self.storage.mount_dir) {
            return true;
        }
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }

    /// Adds the plan's users the host lacks to `missing`; returns why none can be had if
    /// the agent is not root.
    fn users(&self, plan: &Plan, missing: &mut Lacks) -> Option<String> {
        let first = plan.run_as.values().next()?;
        if self.agent_uid != 0 {
            return Some(format!(
                "platter-agent on {} runs as uid {}, not root, so it cannot run workloads as user {} \
                 (workload.command.user): run the agent as root, or drop `user:`",
                self.host, self.agent_uid, first.user
            ));
        }
        for (cell, r) in &plan.run_as {
            let used_for = format!("the workload of cell {cell}");
            match account(&r.user) {
                Ok(Some(_)) => {}
                Ok(None) => missing.add(&format!("user {}", r.user), used_for),
                Err(e) => missing.add(
                    &format!("user {} (cannot look it up: {e})", r.user),
                    used_for,
                ),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Encryption, Filesystem, OnFailure, RunAs, WriteCacheSetting};
    use crate::probes::inventory::Roots;

    const HOST: &str = "vm";

    fn storage(dir: &Path) -> Storage {
        Storage {
            mount_dir: dir.join("mnt"),
            state_dir: dir.to_path_buf(),
            allowed: Vec::new(),
            allow_purge: false,
            inventory_roots: Roots {
                sys: dir.join("no-sys"),
                dev: dir.join("no-dev"),
                mountinfo: "/proc/self/mountinfo".into(),
            },
        }
    }

    fn config(device: Option<&str>, fs: Filesystem) -> StorageConfig {
        StorageConfig {
            device: device.map(String::from),
            fs,
            mkfs_options: vec![],
            mount_options: String::new(),
            write_cache: WriteCacheSetting::Keep,
            ramdisk_size: None,
            encryption: Encryption::None,
        }
    }

    fn plan(kinds: Vec<StepKind>) -> Plan {
        Plan {
            id: "p".into(),
            campaign_id: "c".into(),
            campaign_name: "c".into(),
            host: HOST.into(),
            steps: kinds
                .into_iter()
                .enumerate()
                .map(|(i, kind)| Step {
                    index: i as u32,
                    cell_id: "a".into(),
                    repetition: 1,
                    warmup: false,
                    kind,
                })
                .collect(),
            on_failure: OnFailure::Continue,
            run_as: Default::default(),
        }
    }

    fn refusal(plan: &Plan, agent_uid: u32) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        refusal_in(dir.path(), plan, agent_uid)
    }

    /// `refusal` by an agent whose state directory is `dir`.
    fn refusal_in(dir: &Path, plan: &Plan, agent_uid: u32) -> Option<String> {
        let storage = storage(dir);
        let check = Check {
            host: HOST,
            storage: &storage,
            substitute: &|script, _, _| script.to_string(),
            agent_uid,
        };
        check.refusal(plan)
    }

    fn measure(script: &str) -> StepKind {
        StepKind::Measure(Workload::Command(script.into()))
    }

    /// A plan whose storage setup mounts or formats, given to an agent that is not root, is
    /// refused first for that (a normal user was told only "lacks mkfs.ext4"), and still
    /// names every program the host lacks; a root agent is refused only for the programs.
    #[test]
    fn storage_setup_by_an_agent_that_is_not_root_is_refused_as_needing_root() {
        let p = plan(vec![
            StepKind::StorageSetup(config(None, Filesystem::Tmpfs)),
            StepKind::StorageSetup(config(Some("/dev/loop7"), Filesystem::Ext4)),
            measure("platter-no-such-tool --fast"),
        ]);
        let lacks = format!("host {HOST} lacks: platter-no-such-tool (for the measure of cell a)");
        assert_eq!(
            refusal(&p, 1000).as_deref(),
            Some(
                format!(
                    "host {HOST}: storage setup needs root to mount, format a device (the agent \
                     runs as uid 1000); run the agent as root, or use a campaign without \
                     `storage:`; {lacks}"
                )
                .as_str()
            )
        );
        assert_eq!(refusal(&p, 0), Some(lacks));
    }

    /// Storage that makes nothing (a directory as it is) needs no root; neither does a plan
    /// without storage, whose missing programs are all a normal user is told.
    #[test]
    fn a_plan_that_mounts_nothing_does_not_need_root() {
        let p = plan(vec![
            StepKind::StorageSetup(config(None, Filesystem::None)),
            measure("true"),
        ]);
        assert_eq!(refusal(&p, 1000), None);
        let p = plan(vec![measure("platter-no-such-tool")]);
        let r = refusal(&p, 1000).unwrap();
        assert!(!r.contains("needs root"), "{r}");
    }

    fn bonnie(args: &str) -> StepKind {
        StepKind::Measure(Workload::Tool {
            tool: Tool::Bonnie,
            argv: args.split_whitespace().map(String::from).collect(),
        })
    }

    /// bonnie++ sized by -r (from `memory:`, the default, or its args) runs in a memory
    /// cgroup only root can make: an agent that is not root refuses the plan up front,
    /// naming the cells and the way out, instead of failing at the step. Sized by -s alone,
    /// or on a ramdisk (no cgroup there), it needs no root for that.
    #[test]
    fn bonnie_held_to_its_memory_by_an_agent_that_is_not_root_is_refused_as_needing_root() {
        // Without bonnie++ every refusal would name it as missing too.
        if !crate::executor::tests::tool_or_skip("bonnie++", "bonnie++") {
            return;
        }
        // The crate's own directory: on a drive (a temporary one may be tmpfs).
        let d = env!("CARGO_MANIFEST_DIR");
        let p = plan(vec![
            bonnie(&format!("bonnie++ -q -d {d} -r 512 -s 1024")),
            bonnie(&format!("bonnie++ -q -d {d} -r 512 -s 1024")),
        ]);
        let r = refusal(&p, 1000).unwrap();
        assert_eq!(
            r,
            format!(
                "host {HOST}: bonnie++ (for the measure of cell a) needs root to make the memory \
                 cgroup that holds it to its -r (the agent runs as uid 1000); run the agent as \
                 root, or size bonnie++ yourself: give `-s` of at least twice the host's RAM in \
                 `args:` and neither `memory:` nor `-r`, so no cgroup is made"
            )
        );
        assert_eq!(refusal(&p, 0), None);
        let sized = plan(vec![bonnie(&format!("bonnie++ -q -d {d} -s 8192"))]);
        assert_eq!(refusal(&sized, 1000), None);
        let shm = plan(vec![bonnie("bonnie++ -q -d /dev/shm -r 64 -s 128")]);
        assert_eq!(refusal(&shm, 1000), None);
        // On a ramdisk the storage setup is what needs root, and only that is said.
        let dir = tempfile::tempdir().unwrap();
        let mnt = storage(dir.path()).mount_point(&config(None, Filesystem::Tmpfs));
        let ramdisk = plan(vec![
            StepKind::StorageSetup(config(None, Filesystem::Tmpfs)),
            bonnie(&format!("bonnie++ -q -d {} -r 64 -s 128", mnt.display())),
        ]);
        let r = refusal_in(dir.path(), &ramdisk, 1000).unwrap();
        assert!(!r.contains("cgroup"), "{r}");
    }

    /// Workloads of another user need root too, said as such for any user named.
    #[test]
    fn workloads_of_another_user_by_an_agent_that_is_not_root_are_refused() {
        let mut p = plan(vec![measure("true")]);
        p.run_as.insert(
            "a".into(),
            RunAs {
                user: "builder".into(),
                home: String::new(),
            },
        );
        let r = refusal(&p, 1000).unwrap();
        assert!(
            r.starts_with("platter-agent on vm runs as uid 1000, not root, so it cannot run workloads as user builder"),
            "{r}"
        );
    }
}
