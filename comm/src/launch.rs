//! Where this process sits in a launched group, read from torchrun's variables so that
//! `srun`, `mpirun` wrappers, torchrun or stratlab's own launcher start the same worker.
//! Inside a Slurm job step the variables Slurm sets stand in for those not given: a plain
//! `srun -N 2 stratlab probe` forms its group with rank 0 on the step's first host.

use std::net::{IpAddr, Ipv4Addr, TcpListener};

use crate::CommError;

/// The launch variables of one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// `RANK`: this process's index in `0..world_size`.
    pub rank: usize,
    /// `WORLD_SIZE`: processes in the group.
    pub world_size: usize,
    /// `LOCAL_RANK`: index among the processes of this node (picks `cuda:LOCAL_RANK`).
    pub local_rank: usize,
    /// `MASTER_ADDR`: host of rank 0, which serves the rendezvous store.
    pub master_addr: String,
    /// `MASTER_PORT`: port of the store.
    pub master_port: u16,
}

impl Launch {
    /// The default store port of torchrun, used when `MASTER_PORT` is unset.
    pub const DEFAULT_PORT: u16 = 29500;

    /// Reads the variables from the environment.
    pub fn from_env() -> Result<Launch, CommError> {
        Launch::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (the environment, or a map in tests).
    /// `RANK` and `WORLD_SIZE` are required; `LOCAL_RANK` defaults to `RANK`, `MASTER_ADDR`
    /// to 127.0.0.1 and `MASTER_PORT` to 29500, as torchrun's defaults. In a Slurm job step,
    /// `SLURM_PROCID`, `SLURM_NTASKS` and `SLURM_LOCALID` stand in for the first three, the
    /// step's first host (`SLURM_STEP_NODELIST`) for `MASTER_ADDR`, and a port derived from
    /// the job and step ids, so two steps of one job do not meet, for `MASTER_PORT`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Launch, CommError> {
        // Only a job step's tasks are ranks: a batch script sees SLURM_PROCID 0 of its tasks too.
        let in_step = lookup("SLURM_STEP_ID").is_some();
        let lookup = |name: &str| lookup(name).or_else(|| slurm_name(name).filter(|_| in_step).and_then(&lookup));
        let number = |name: &'static str| -> Result<Option<usize>, CommError> {
            match lookup(name) {
                None => Ok(None),
                Some(text) => text
                    .trim()
                    .parse::<usize>()
                    .map(Some)
                    .map_err(|_| CommError::Launch { name, reason: format!("`{text}` is not a non-negative integer") }),
            }
        };
        let missing = |name: &'static str| CommError::Launch {
            name,
            reason: format!("is not set (nor Slurm's {})", slurm_name(name).unwrap_or("variable")),
        };
        let rank = number("RANK")?.ok_or_else(|| missing("RANK"))?;
        let world_size = number("WORLD_SIZE")?.ok_or_else(|| missing("WORLD_SIZE"))?;
        if world_size == 0 {
            return Err(CommError::Launch { name: "WORLD_SIZE", reason: "must be at least 1".into() });
        }
        if rank >= world_size {
            return Err(CommError::Launch { name: "RANK", reason: format!("{rank} is not in 0..{world_size}") });
        }
        let local_rank = number("LOCAL_RANK")?.unwrap_or(rank);
        let step_port = || {
            let (job, step) =
                (lookup("SLURM_JOB_ID")?.parse::<u64>().ok()?, lookup("SLURM_STEP_ID")?.parse::<u64>().ok()?);
            Some((20_000 + (job * 97 + step) % 20_000) as u16)
        };
        let master_port = match number("MASTER_PORT")? {
            None => step_port().unwrap_or(Launch::DEFAULT_PORT),
            Some(port) => u16::try_from(port)
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| CommError::Launch { name: "MASTER_PORT", reason: format!("{port} is not a port") })?,
        };
        let master_addr = lookup("MASTER_ADDR")
            .or_else(|| lookup("SLURM_STEP_NODELIST").as_deref().and_then(first_host))
            .unwrap_or_else(|| Ipv4Addr::LOCALHOST.to_string());
        Ok(Launch { rank, world_size, local_rank, master_addr, master_port })
    }

    /// Whether this process is one rank of a launched group: torchrun's variables are set, or
    /// it is one task of a Slurm job step of several (not a batch script, which sees its
    /// job's task count too).
    pub fn is_launched(lookup: impl Fn(&str) -> Option<String>) -> bool {
        let several = lookup("SLURM_NTASKS").and_then(|n| n.trim().parse::<usize>().ok()).is_some_and(|n| n > 1);
        lookup("RANK").is_some() || lookup("WORLD_SIZE").is_some() || (lookup("SLURM_STEP_ID").is_some() && several)
    }

    /// Whether every rank runs on this machine's loopback (the local launcher's default).
    pub fn is_loopback(&self) -> bool {
        self.master_addr.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) || self.master_addr == "localhost"
    }

    /// The variables to give rank `rank` of a local group of `world_size` on `addr:port`.
    pub fn local_env(rank: usize, world_size: usize, addr: IpAddr, port: u16) -> Vec<(&'static str, String)> {
        vec![
            ("RANK", rank.to_string()),
            ("LOCAL_RANK", rank.to_string()),
            ("WORLD_SIZE", world_size.to_string()),
            ("MASTER_ADDR", addr.to_string()),
            ("MASTER_PORT", port.to_string()),
        ]
    }
}

/// The variable a Slurm job step sets for torchrun's `name`, where it sets one.
fn slurm_name(name: &str) -> Option<&'static str> {
    match name {
        "RANK" => Some("SLURM_PROCID"),
        "WORLD_SIZE" => Some("SLURM_NTASKS"),
        "LOCAL_RANK" => Some("SLURM_LOCALID"),
        _ => None,
    }
}

/// The first host of a Slurm host list (`node[1-4,7]`, `gpu-[01-02],login1`, `node3`):
/// each bracket's first entry in turn, zero padding kept. `None` for an empty list.
pub fn first_host(list: &str) -> Option<String> {
    let mut depth = 0usize;
    let end = list
        .char_indices()
        .find(|&(_, c)| {
            depth = match c {
                '[' => depth + 1,
                ']' => depth.saturating_sub(1),
                _ => depth,
            };
            c == ',' && depth == 0
        })
        .map_or(list.len(), |(at, _)| at);
    let mut host = list[..end].trim().to_owned();
    while let (Some(open), Some(close)) = (host.find('['), host.find(']')) {
        let first = host[open + 1..close].split([',', '-']).next().unwrap_or_default().to_owned();
        host = format!("{}{first}{}", &host[..open], &host[close + 1..]);
    }
    (!host.is_empty()).then_some(host)
}

/// A TCP port free on `addr` now, for a local group's store. (Another process could take it
/// before rank 0 binds it, as with torchrun's own choice; rendezvous then fails cleanly.)
pub fn free_port(addr: IpAddr) -> std::io::Result<u16> {
    Ok(TcpListener::bind((addr, 0))?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn launch(vars: &[(&str, &str)]) -> Result<Launch, CommError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Launch::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn torchrun_variables_are_read_with_torchrun_defaults() {
        let read = launch(&[("RANK", "1"), ("WORLD_SIZE", "4"), ("MASTER_ADDR", "10.0.0.7")]).unwrap();
        assert_eq!(
            read,
            Launch { rank: 1, world_size: 4, local_rank: 1, master_addr: "10.0.0.7".into(), master_port: 29500 }
        );
        assert!(!read.is_loopback());
        let local =
            launch(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("MASTER_PORT", "4242")]).unwrap();
        assert!(local.is_loopback());
        assert_eq!(local.master_port, 4242);
    }

    #[test]
    fn bad_variables_name_the_variable() {
        let cases: [(&[(&str, &str)], &str); 4] = [
            (&[("WORLD_SIZE", "2")], "RANK"),
            (&[("RANK", "2"), ("WORLD_SIZE", "2")], "RANK"),
            (&[("RANK", "0"), ("WORLD_SIZE", "two")], "WORLD_SIZE"),
            (&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "70000")], "MASTER_PORT"),
        ];
        for (vars, variable) in cases {
            match launch(vars) {
                Err(CommError::Launch { name, .. }) => assert_eq!(name, variable, "{vars:?}"),
                other => panic!("{vars:?} gave {other:?}"),
            }
        }
    }

    /// `srun -N 2 stratlab probe` with nothing exported: Slurm's variables form the group,
    /// rank 0 on the step's first host, a port of the job's step; torchrun's win where given.
    #[test]
    fn a_slurm_step_s_variables_stand_in_for_torchrun_s() {
        let step = [
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_STEP_NODELIST", "node[1-2]"),
            ("SLURM_JOB_ID", "12"),
            ("SLURM_STEP_ID", "2"),
        ];
        let read = launch(&step).unwrap();
        let lookup =
            |vars: &[(&str, &str)], name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
        assert!(Launch::is_launched(|name| lookup(&step, name)));
        assert_eq!((read.rank, read.world_size, read.local_rank), (3, 4, 1));
        assert_eq!((read.master_addr.as_str(), read.master_port), ("node1", 20_000 + (12 * 97 + 2)));
        let next_step = launch(&[&step[..5], &[("SLURM_STEP_ID", "3")]].concat()).unwrap();
        assert_ne!(next_step.master_port, read.master_port, "two steps of a job rendezvous apart");
        let given = launch(&[&step[..], &[("RANK", "0"), ("MASTER_ADDR", "10.0.0.7")]].concat()).unwrap();
        assert_eq!((given.rank, given.master_addr.as_str()), (0, "10.0.0.7"));
        // A batch script sees its job's tasks but is no rank of them.
        let batch = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2"), ("SLURM_JOB_ID", "12")];
        assert!(!Launch::is_launched(|name| lookup(&batch, name)));
        match launch(&[("SLURM_NTASKS", "2"), ("SLURM_STEP_ID", "0")]) {
            Err(CommError::Launch { name, reason }) => {
                assert_eq!((name, reason.as_str()), ("RANK", "is not set (nor Slurm's SLURM_PROCID)"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_first_host_of_slurm_host_lists() {
        assert_eq!(first_host("node3").as_deref(), Some("node3"));
        assert_eq!(first_host("node[1-4,7]").as_deref(), Some("node1"));
        assert_eq!(first_host("gpu-[01-02],login1").as_deref(), Some("gpu-01"));
        assert_eq!(first_host("rack[2-3]-n[05-06]").as_deref(), Some("rack2-n05"));
        assert_eq!(first_host("a,b").as_deref(), Some("a"));
        assert_eq!(first_host(""), None);
    }

    #[test]
    fn free_ports_are_bindable() {
        let port = free_port(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        assert!(port > 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
