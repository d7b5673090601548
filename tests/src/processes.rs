//! Looking at the daemon's worker processes from the outside, through `/proc`.

use std::path::Path;

/// Pids of live (non-zombie) children of `parent` whose command name is `airlock-worker`.
pub fn worker_children(parent: u32) -> Vec<i32> {
    children_named(parent, "airlock-worker")
}

/// Pids of `parent`'s workers that are on a CPU or waiting for one (state `R`): a worker
/// running a program's computation, not one waiting for work or for a tool result.
pub fn busy_worker_children(parent: u32) -> Vec<i32> {
    children(parent)
        .into_iter()
        .filter(|(_, c, state)| c == "airlock-worker" && *state == 'R')
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Pids of live children of `parent` with command name `comm` (the kernel keeps the first
/// 15 bytes of the executable's name).
pub fn children_named(parent: u32, comm: &str) -> Vec<i32> {
    let comm: String = comm.chars().take(15).collect();
    children(parent)
        .into_iter()
        .filter(|(_, c, state)| *c == comm && *state != 'Z')
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Pids of the live tool server processes `parent` started with command name `comm`: its
/// children of that name (an unconfined server) and the children of its `airlock-confine`
/// launchers (a confined server runs as the launcher's child, pid 1 of its own namespace).
pub fn servers_named(parent: u32, comm: &str) -> Vec<i32> {
    let mut servers = children_named(parent, comm);
    for launcher in children_named(parent, "airlock-confine") {
        servers.extend(children_named(launcher.unsigned_abs(), comm));
    }
    servers
}

/// Zombie children of `parent`.
pub fn zombie_children(parent: u32) -> Vec<i32> {
    children(parent)
        .into_iter()
        .filter(|(_, _, state)| *state == 'Z')
        .map(|(pid, _, _)| pid)
        .collect()
}

/// (pid, comm, state) of every child of `parent`.
fn children(parent: u32) -> Vec<(i32, String, char)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Some((comm, rest)) = read_stat(&entry.path().join("stat")) else {
            continue;
        };
        let state = rest.first().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid: u32 = rest.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if ppid == parent {
            out.push((pid, comm, state));
        }
    }
    out
}

/// A `/proc/<pid>/stat` file: the command name and the fields after it (the name is
/// parenthesised and may contain spaces; the fields after it are separated by spaces).
fn read_stat(file: &Path) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(file).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = stat[open + 1..close].to_owned();
    let rest = stat
        .get(close + 2..)?
        .split(' ')
        .map(str::to_owned)
        .collect();
    Some((comm, rest))
}

/// CPU seconds (user and system) used by process `pid` and its children: its own, its reaped
/// children's (`cutime`, `cstime`) and its live children's. The difference between two
/// readings counts every child that ran in between, reaped or not (the daemon reaps its
/// workers; the zygote and the pool stay alive).
pub fn cpu_seconds_with_children(pid: u32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks_per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // Fields 14-17 of stat(5), counted from the state (field 3) at index 0.
    let ticks = |pid: u32, fields: std::ops::Range<usize>| -> u64 {
        read_stat(Path::new(&format!("/proc/{pid}/stat"))).map_or(0, |(_, rest)| {
            rest.get(fields)
                .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum())
        })
    };
    let mut total = ticks(pid, 11..15);
    for (child, _, _) in children(pid) {
        total += ticks(child.unsigned_abs(), 11..13);
    }
    total as f64 / ticks_per_second
}

/// Whether a process exists (and is not a zombie).
pub fn alive(pid: i32) -> bool {
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    read_stat(&stat).is_some_and(|(_, rest)| {
        rest.first()
            .and_then(|state| state.chars().next())
            .is_some_and(|state| state != 'Z')
    })
}

/// Whether the tests run as root, which `test` needs (to act as another uid). If not, says
/// that `test` is skipped and why, unless CI set `AIRLOCK_REQUIRE_ROOT`, where skipping would
/// hide the test: then it fails.
pub fn runs_as_root(test: &str, why: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var_os("AIRLOCK_REQUIRE_ROOT").is_none(),
        "AIRLOCK_REQUIRE_ROOT is set but the tests do not run as root"
    );
    eprintln!("SKIPPED {test}: needs root {why}");
    false
}

/// Polls `cond` every 10 ms for up to `secs` seconds.
pub fn wait_until(secs: u64, cond: impl FnMut() -> bool) -> bool {
    wait_until_every(secs, std::time::Duration::from_millis(10), cond)
}

/// Polls `cond` every `every` for up to `secs` seconds: for a test that must act within a
/// short window after `cond` becomes true.
pub fn wait_until_every(
    secs: u64,
    every: std::time::Duration,
    mut cond: impl FnMut() -> bool,
) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(every);
    }
    cond()
}

/// Open file descriptors of process `pid` (entries of `/proc/<pid>/fd`).
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Resident set size of process `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
