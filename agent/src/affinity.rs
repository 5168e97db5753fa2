//! Keeps the agent's own threads on one CPU and gives the workloads every CPU the agent
//! was given.
//!
//! Why: between two measurements the agent (and, under `platter run`, the coordinator in
//! the same process) does ~0.75 ms of work per step: the journal, gRPC, the store's
//! commit. The scheduler starts a vfork'd workload on an idle CPU, which was, unpinned,
//! nearly always the one the agent had just run on, so a short workload began with the
//! agent's lines in that CPU's caches and ran ~10% slower than under `hyperfine -N`,
//! whose tiny process leaves the other CPU to the workloads. With the agent's threads on
//! one CPU, a workload starts on another, whose caches hold the previous workload's work
//! (BENCHMARKS.md, "Trivial commands").
//!
//! The workloads are not confined: the spawn helper (and so every workload and every
//! command a step runs), mkfs and the other storage commands (and the gocryptfs daemon),
//! and the in-process fsync loop run inside [`Widened`], with the CPUs the process started
//! with. Only the probes of tool versions, run for the inventory and the provenance, stay
//! on the agent's CPU. What was chosen is in each plan's provenance ([`facts`]).

use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::OnceLock;

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// Where the agent's own threads run (`--agent-cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Placement {
    /// The last CPU the process may use, when it may use two or more.
    #[default]
    Auto,
    /// Wherever the scheduler puts them, like the workloads.
    Off,
    /// This CPU; it must be one the process may use.
    Cpu(usize),
}

impl FromStr for Placement {
    type Err = String;

    /// `auto`, `off` or a CPU number the process may use (checked here, so a wrong one
    /// is a usage error before anything starts).
    fn from_str(s: &str) -> Result<Placement, String> {
        match s {
            "auto" => Ok(Placement::Auto),
            "off" => Ok(Placement::Off),
            _ => {
                let cpu: usize = s
                    .parse()
                    .map_err(|_| format!("{s:?} is not `auto`, `off` or a CPU number"))?;
                let allowed = sched_getaffinity(None)
                    .map_err(|e| format!("cannot read this process's CPUs: {e}"))?;
                if cpu >= CpuSet::MAX_CPU || !allowed.is_set(cpu) {
                    return Err(format!(
                        "CPU {cpu} is not one this process may use ({})",
                        cpu_list(&allowed)
                    ));
                }
                Ok(Placement::Cpu(cpu))
            }
        }
    }
}

/// The CPUs the process started with and the one [`keep_agent`] kept its threads to;
/// unset when it kept them nowhere.
static GIVEN: OnceLock<(CpuSet, usize)> = OnceLock::new();

/// Moves the calling thread, and so every thread it starts afterwards, to the CPU
/// `placement` names. Call it once, first thing in `main`, before any runtime or other
/// thread exists: threads started before keep their CPUs. Returns the CPU chosen, `None`
/// when the threads stay unpinned (`off`, or `auto` with a single CPU).
///
/// `auto` takes the last CPU, a plain choice: on a machine with SMT it is usually the
/// second thread of a core whose first thread a workload may then share caches with
/// (`--agent-cpu N` picks another). The CPUs "given" are read here, once: CPUs a cpuset
/// gains later reach workloads after a restart of the agent.
pub(crate) fn keep_agent(placement: Placement) -> std::io::Result<Option<usize>> {
    if GIVEN.get().is_some() {
        return Err(std::io::Error::other(
            "the agent's threads are already kept to a CPU",
        ));
    }
    let given = sched_getaffinity(None)?;
    let cpu = match placement {
        Placement::Off => return Ok(None),
        Placement::Auto if given.count() < 2 => return Ok(None),
        Placement::Auto => (0..CpuSet::MAX_CPU)
            .rev()
            .find(|&c| given.is_set(c))
            .expect("a non-empty set has a last CPU"),
        Placement::Cpu(c) => c,
    };
    let mut one = CpuSet::new();
    one.set(cpu);
    sched_setaffinity(None, &one)?;
    let _ = GIVEN.set((given, cpu));
    Ok(Some(cpu))
}

/// The calling thread with the CPUs the process started with, until dropped; then the
/// CPUs it had. Does nothing when [`keep_agent`] pinned nothing, or the thread already
/// has them (a thread of a test, say). Silent: it is made inside the measured window,
/// where the agent writes nothing; [`facts`], read between steps, says what a widened
/// thread really gets. Not `Send`: it must be dropped on the thread it widened.
#[must_use = "the thread is widened only while this lives"]
pub(crate) struct Widened(Option<CpuSet>, PhantomData<*const ()>);

impl Widened {
    pub(crate) fn new() -> Widened {
        let before = GIVEN.get().and_then(|(given, _)| {
            let now = sched_getaffinity(None).ok()?;
            // The kernel trims the set to the CPUs the thread's cpuset allows now; it
            // fails only when none of them is left (then the thread stays where it is).
            (now != *given && sched_setaffinity(None, given).is_ok()).then_some(now)
        });
        Widened(before, PhantomData)
    }
}

impl Drop for Widened {
    fn drop(&mut self) {
        if let Some(before) = &self.0 {
            let _ = sched_setaffinity(None, before);
        }
    }
}

/// `(agent_cpus, workload_cpus)` for the provenance: the CPU the agent's threads are
/// kept to ("" when they are not), and the CPUs workloads may run on (what a widened
/// thread gets now), as lists (`0-3,6`). Call it from an agent thread, between steps.
pub(crate) fn facts() -> (String, String) {
    let current = || {
        sched_getaffinity(None)
            .map(|s| cpu_list(&s))
            .unwrap_or_default()
    };
    match GIVEN.get() {
        Some((given, cpu)) => {
            let _wide = Widened::new();
            let workload = current();
            if workload == cpu.to_string() && given.count() > 1 {
                tracing::warn!(
                    "workloads cannot be given the CPUs the agent started with ({}): they run on CPU {cpu}, the agent's",
                    cpu_list(given)
                );
            }
            (cpu.to_string(), workload)
        }
        None => (String::new(), current()),
    }
}

/// A CPU set the way the kernel writes one (`Cpus_allowed_list`, `taskset -c`): `0-3,6`.
pub(crate) fn cpu_list(set: &CpuSet) -> String {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for c in (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)) {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == c => *end = c,
            _ => ranges.push((c, c)),
        }
    }
    let parts: Vec<String> = ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> CpuSet {
        let mut s = CpuSet::new();
        for &c in cpus {
            s.set(c);
        }
        s
    }

    #[test]
    fn cpu_lists_are_written_as_the_kernel_writes_them() {
        assert_eq!(cpu_list(&set(&[])), "");
        assert_eq!(cpu_list(&set(&[0])), "0");
        assert_eq!(cpu_list(&set(&[0, 1, 2, 3, 6])), "0-3,6");
        assert_eq!(cpu_list(&set(&[1, 3, 4, 1023])), "1,3-4,1023");
    }

    #[test]
    fn placements_are_auto_off_or_a_cpu_this_process_may_use() {
        assert_eq!("auto".parse(), Ok(Placement::Auto));
        assert_eq!("off".parse(), Ok(Placement::Off));
        let allowed = sched_getaffinity(None).unwrap();
        let first = (0..CpuSet::MAX_CPU).find(|&c| allowed.is_set(c)).unwrap();
        assert_eq!(first.to_string().parse(), Ok(Placement::Cpu(first)));
        let err = "1023".parse::<Placement>().unwrap_err();
        assert!(
            allowed.is_set(1023) || err.contains("CPU 1023 is not one this process may use"),
            "{err}"
        );
        let err = "first".parse::<Placement>().unwrap_err();
        assert!(err.contains("not `auto`, `off` or a CPU number"), "{err}");
        assert!("4096".parse::<Placement>().is_err());
    }

    /// One test, in order: `GIVEN` is for the whole process, and other tests' threads
    /// must find a `Widened` a no-op (their CPUs are the given ones) whenever it is set.
    #[test]
    fn the_agent_is_kept_to_one_cpu_and_what_it_starts_gets_them_all() {
        let all = sched_getaffinity(None).unwrap();
        let list = cpu_list(&all);
        // Nothing kept yet: a Widened is a no-op, the facts say the agent is not apart.
        drop(Widened::new());
        assert_eq!(sched_getaffinity(None).unwrap(), all);
        assert_eq!(facts(), (String::new(), list.clone()));
        let last = (0..CpuSet::MAX_CPU).rev().find(|&c| all.is_set(c)).unwrap();
        // keep_agent pins the calling thread: a thread of this test's own.
        std::thread::spawn(move || {
            let kept = keep_agent(Placement::Auto).unwrap();
            if all.count() < 2 {
                assert_eq!(kept, None, "one CPU is left to be shared");
                assert_eq!(facts(), (String::new(), list));
                return;
            }
            assert_eq!(kept, Some(last));
            let again = keep_agent(Placement::Cpu(last)).unwrap_err().to_string();
            assert!(again.contains("already kept"), "{again}");
            let only = last.to_string();
            let cpus = || cpu_list(&sched_getaffinity(None).unwrap());
            assert_eq!(cpus(), only);
            let started_after = std::thread::spawn(cpus).join().unwrap();
            assert_eq!(started_after, only, "threads started later inherit it");
            let process_cpus = || {
                let out = std::process::Command::new("grep")
                    .args(["Cpus_allowed_list", "/proc/self/status"])
                    .output()
                    .unwrap();
                let out = String::from_utf8(out.stdout).unwrap();
                out.split_whitespace().last().unwrap().to_string()
            };
            assert_eq!(process_cpus(), only);
            {
                let _wide = Widened::new();
                assert_eq!(cpus(), list);
                assert_eq!(process_cpus(), list, "what the agent starts gets every CPU");
            }
            assert_eq!(cpus(), only, "and the agent's thread goes back to its own");
            assert_eq!(facts(), (only, list.clone()));
        })
        .join()
        .unwrap();
        // This thread was never pinned: a Widened leaves it as it is.
        drop(Widened::new());
        assert_eq!(sched_getaffinity(None).unwrap(), all);
    }
}
