//! Launching the processes of a multi-process run.
//!
//! * Any launcher: `verbena node --rank R --nodes N --bootstrap HOST:PORT`.
//!   Rank and size may instead come from the environment of `srun`
//!   (`SLURM_PROCID`/`SLURM_NTASKS`), `mpirun` (`OMPI_COMM_WORLD_RANK`/
//!   `OMPI_COMM_WORLD_SIZE`) or a PMI launcher (`PMI_RANK`/`PMI_SIZE`);
//!   flags win over the environment, and a flag that contradicts it is an
//!   error.
//! * `verbena launch --local N`: N processes on this host, rank 0's output
//!   is the run's output.
//! * `verbena launch --hosts FILE`: one process per line of FILE (a host
//!   name, `#` comments), started with `ssh HOST`; rank 0 runs on the first
//!   host, which is also the bootstrap address. The remote command is this
//!   binary's path unless `--remote-exe` names another. `VERBENA_RSH`
//!   replaces `ssh -o BatchMode=yes` with another remote shell (a command
//!   and its arguments, split on whitespace, then given `HOST COMMAND` as
//!   ssh is): e.g. `ip netns exec` behind a script, as the tests do.
//!
//! `verbena launch` makes each run a job of its own (`cluster::auth`): a
//! random key and job id, handed to every rank in its environment
//! (`VERBENA_CLUSTER_KEY`, `VERBENA_JOB_ID`), never on a command line,
//! where `ps` would show the key. Over ssh the environment does not travel,
//! so the remote shell reads the key from its standard input.
//!
//! The launcher waits for every process; once one fails it gives the others
//! the bootstrap's own fault bound (they stop by themselves with an error
//! naming the rank at fault) and then kills what is left, so a launch never
//! hangs.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::auth::ClusterKey;

/// Which node this process is, where rank 0 listens, and what admits it
/// to the job (`cluster::auth`).
#[derive(Clone, Debug)]
pub struct NodeOptions {
    pub rank: u32,
    pub bootstrap: String,
    /// The job's key (`--cluster-key` / `VERBENA_CLUSTER_KEY`).
    pub key: Option<ClusterKey>,
    /// The launcher's job id (`auth::job_id_from_env`), empty if none.
    pub job: String,
}

/// What makes the launched ranks one job (`cluster::auth`).
pub struct Job<'a> {
    pub key: &'a ClusterKey,
    pub id: &'a str,
}

/// The remote shell `--hosts` starts ranks with: `VERBENA_RSH` split on
/// whitespace, or `ssh -o BatchMode=yes`.
pub fn remote_shell(lookup: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let words: Vec<String> = lookup("VERBENA_RSH")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if words.is_empty() {
        ["ssh", "-o", "BatchMode=yes"].map(String::from).to_vec()
    } else {
        words
    }
}

/// Where a rank's number and the run's size came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankSource {
    pub rank: u32,
    pub size: u32,
    /// The variables (or "flags") that gave them.
    pub origin: &'static str,
}

/// The rank and size a launcher put in the environment (`lookup` reads a
/// variable). A variable that is set but not a number is an error.
pub fn rank_from_env(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<RankSource>, String> {
    const SOURCES: [(&str, &str, &str); 3] = [
        (
            "SLURM_PROCID",
            "SLURM_NTASKS",
            "SLURM_PROCID/SLURM_NTASKS (srun)",
        ),
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK/SIZE (mpirun)",
        ),
        ("PMI_RANK", "PMI_SIZE", "PMI_RANK/PMI_SIZE (PMI)"),
    ];
    for (rank_var, size_var, origin) in SOURCES {
        let (Some(rank), Some(size)) = (lookup(rank_var), lookup(size_var)) else {
            continue;
        };
        let parse = |name: &str, text: &str| {
            text.trim()
                .parse::<u32>()
                .map_err(|_| format!("{name}={text} is not a whole number"))
        };
        let rank = parse(rank_var, &rank)?;
        let size = parse(size_var, &size)?;
        if size == 0 || rank >= size {
            return Err(format!(
                "{rank_var}={rank} with {size_var}={size}: a rank must be below the size"
            ));
        }
        return Ok(Some(RankSource { rank, size, origin }));
    }
    Ok(None)
}

/// Reads a hosts file: one host per line, blank lines and `#` comments
/// skipped.
pub fn read_hosts(path: &str) -> Result<Vec<String>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read hosts file {path}: {e}"))?;
    let hosts: Vec<String> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(|line| {
            if line.contains(char::is_whitespace) {
                Err(format!(
                    "hosts file {path}: `{line}` is not one host name (one host per line; repeat a host for several ranks)"
                ))
            } else {
                Ok(line.to_string())
            }
        })
        .collect::<Result<_, _>>()?;
    if hosts.is_empty() {
        return Err(format!("hosts file {path} names no host"));
    }
    Ok(hosts)
}

/// A free TCP port on this host for a local run's bootstrap.
pub fn free_local_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free local port: {e}"))
}

/// Quotes `text` for a POSIX shell.
pub fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// How one rank is started.
pub enum Spawn<'a> {
    Local,
    Ssh { host: &'a str, remote_exe: &'a str },
}

/// Starts rank `rank` of `nodes` of `job` with `run_args` (the run's own
/// flags).
pub fn spawn_rank(
    spawn: &Spawn,
    rank: u32,
    nodes: u32,
    bootstrap: &str,
    run_args: &[String],
    job: &Job,
) -> Result<Child, String> {
    let mut args: Vec<String> = vec![
        "node".into(),
        "--rank".into(),
        rank.to_string(),
        "--nodes".into(),
        nodes.to_string(),
        "--bootstrap".into(),
        bootstrap.into(),
    ];
    args.extend(run_args.iter().cloned());
    let mut command = match spawn {
        Spawn::Local => {
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot find this program's path: {e}"))?;
            let mut command = Command::new(exe);
            command
                .args(&args)
                .env("VERBENA_CLUSTER_KEY", job.key.expose())
                .env("VERBENA_JOB_ID", job.id);
            command
        }
        Spawn::Ssh { host, remote_exe } => {
            let cwd = std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| ".".into());
            // The key arrives on standard input (see the module docs).
            let mut remote = format!(
                "cd {} && IFS= read -r VERBENA_CLUSTER_KEY && export VERBENA_CLUSTER_KEY VERBENA_JOB_ID={} && exec {}",
                shell_quote(&cwd),
                shell_quote(job.id),
                shell_quote(remote_exe)
            );
            for arg in &args {
                remote.push(' ');
                remote.push_str(&shell_quote(arg));
            }
            let rsh = remote_shell(|name| std::env::var(name).ok());
            let mut command = Command::new(&rsh[0]);
            command.args(&rsh[1..]).arg(host).arg(&remote);
            command.stdin(Stdio::piped());
            command
        }
    };
    if rank != 0 {
        // Only rank 0 reports; the others' errors still reach stderr.
        command.stdout(Stdio::null());
    }
    let mut child = command.spawn().map_err(|e| match spawn {
        Spawn::Local => format!("starting rank {rank}: {e}"),
        Spawn::Ssh { host, .. } => format!(
            "starting rank {rank} on {host} with {}: {e}",
            remote_shell(|name| std::env::var(name).ok()).join(" ")
        ),
    })?;
    if let Some(mut stdin) = child.stdin.take() {
        // A remote shell that died before reading it is reported as that
        // rank's failure by `wait_all`.
        let _ = stdin.write_all(format!("{}\n", job.key.expose()).as_bytes());
    }
    Ok(child)
}

/// Waits for every child; returns rank 0's exit code, or the first
/// failure's if rank 0 succeeded but another rank did not. Once a rank has
/// failed, the rest get `grace` to stop by themselves, then are killed.
/// In a fault-tolerant run (`tolerant`: the survivors fail a dead rank
/// over) a rank other than 0 may die — killed by a signal from outside,
/// or told it was declared failed (exit code 4) — and the run goes on:
/// rank 0's exit code is the run's. A rank that aborts (a panic) or exits
/// with an error fails the run, fault-tolerant or not.
pub fn wait_all(mut children: Vec<(u32, Child)>, grace: Duration, tolerant: bool) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let mut codes: Vec<Option<i32>> = vec![None; children.len()];
    let mut kill_at: Option<Instant> = None;
    loop {
        for (index, (rank, child)) in children.iter_mut().enumerate() {
            if codes[index].is_some() {
                continue;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let code = status.code().unwrap_or(1);
                // Only a kill from outside is a crash fault the run fails
                // over (`--fault crash` is a SIGKILL too); a rank that
                // exits with an error or aborts (a panic) failed the run.
                const SIGHUP: i32 = 1;
                const SIGINT: i32 = 2;
                const SIGKILL: i32 = 9;
                const SIGTERM: i32 = 15;
                let killed = matches!(status.signal(), Some(SIGKILL | SIGTERM | SIGINT | SIGHUP));
                let crashed = killed || code == crate::base::exit::EXIT_DECLARED_FAILED;
                let how = match status.signal() {
                    Some(signal) => format!("was killed by signal {signal}"),
                    None => format!("exited with code {code}"),
                };
                if code != 0 && tolerant && crashed && *rank != 0 {
                    eprintln!(
                        "verbena launch: rank {rank} {how}; the run fails it over and goes on"
                    );
                    codes[index] = Some(0);
                    continue;
                }
                if code != 0 && kill_at.is_none() {
                    eprintln!("verbena launch: rank {rank} {how}");
                    kill_at = Some(Instant::now() + grace);
                }
                codes[index] = Some(code);
            }
        }
        if codes.iter().all(Option::is_some) {
            break;
        }
        if kill_at.is_some_and(|t| Instant::now() >= t) {
            for (index, (rank, child)) in children.iter_mut().enumerate() {
                if codes[index].is_none() {
                    eprintln!("verbena launch: rank {rank} did not stop by itself; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    codes[index] = Some(1);
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let rank0 = codes[0].unwrap_or(1);
    if rank0 != 0 {
        return rank0;
    }
    codes.into_iter().flatten().find(|&c| c != 0).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn ranks_come_from_slurm_mpirun_or_pmi() {
        let slurm = rank_from_env(env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]));
        assert_eq!(slurm.unwrap().unwrap().rank, 3);
        let ompi = rank_from_env(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((ompi.rank, ompi.size), (1, 2));
        assert!(ompi.origin.contains("mpirun"));
        let pmi = rank_from_env(env(&[("PMI_RANK", "0"), ("PMI_SIZE", "8")]));
        assert_eq!(pmi.unwrap().unwrap().size, 8);
        assert_eq!(rank_from_env(env(&[])).unwrap(), None);
        let bad = rank_from_env(env(&[("PMI_RANK", "x"), ("PMI_SIZE", "2")])).unwrap_err();
        assert!(bad.contains("PMI_RANK=x"), "{bad}");
        let beyond = rank_from_env(env(&[("PMI_RANK", "2"), ("PMI_SIZE", "2")])).unwrap_err();
        assert!(beyond.contains("below the size"), "{beyond}");
    }

    #[test]
    fn hosts_files_and_quoting() {
        let dir = std::env::temp_dir().join(format!("verbena-hosts-{}", std::process::id()));
        std::fs::write(&dir, "# cluster\nnode1\n\nnode2  # second\nnode1\n").unwrap();
        assert_eq!(
            read_hosts(dir.to_str().unwrap()).unwrap(),
            ["node1", "node2", "node1"]
        );
        std::fs::write(&dir, "node1 slots=2\n").unwrap();
        assert!(read_hosts(dir.to_str().unwrap())
            .unwrap_err()
            .contains("one host per line"));
        std::fs::write(&dir, "# nothing\n").unwrap();
        assert!(read_hosts(dir.to_str().unwrap())
            .unwrap_err()
            .contains("names no host"));
        let _ = std::fs::remove_file(&dir);
        assert_eq!(shell_quote("--nodes"), "--nodes");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn the_remote_shell_is_ssh_unless_verbena_rsh_names_another() {
        assert_eq!(remote_shell(env(&[])), ["ssh", "-o", "BatchMode=yes"]);
        assert_eq!(remote_shell(env(&[("VERBENA_RSH", "  ")]))[0], "ssh");
        let rsh = remote_shell(env(&[("VERBENA_RSH", "/opt/netns-rsh --quiet")]));
        assert_eq!(rsh, ["/opt/netns-rsh", "--quiet"]);
    }

    fn shell(script: &str) -> Child {
        Command::new("sh").args(["-c", script]).spawn().unwrap()
    }

    #[test]
    fn a_fault_tolerant_run_survives_kills_but_not_a_crashing_rank() {
        let grace = Duration::from_secs(5);
        // Rank 1 killed from outside, rank 2 told it was declared failed:
        // crash faults the survivors fail over; rank 0's code is the run's.
        let ranks = vec![
            (0, shell("sleep 0.2; exit 0")),
            (1, shell("kill -9 $$")),
            (2, shell("exit 4")),
        ];
        assert_eq!(wait_all(ranks, grace, true), 0);
        // A rank that aborts (what a panic does to a node) is a bug, not a
        // fault to fail over: the run fails, and rank 0 is stopped.
        let ranks = vec![(0, shell("sleep 30")), (1, shell("kill -6 $$"))];
        assert_ne!(wait_all(ranks, Duration::from_millis(100), true), 0);
        // Without fault tolerance every death fails the run.
        let ranks = vec![(0, shell("exit 0")), (1, shell("kill -9 $$"))];
        assert_ne!(wait_all(ranks, grace, false), 0);
    }
}
