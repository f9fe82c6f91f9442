//! Where this process sits in a launched group, read from torchrun's variables so that
//! `srun`, `mpirun` wrappers, torchrun or stratlab's own launcher start the same worker.

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
    /// to 127.0.0.1 and `MASTER_PORT` to 29500, as torchrun's defaults.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Launch, CommError> {
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
        let missing = |name: &'static str| CommError::Launch { name, reason: "is not set".into() };
        let rank = number("RANK")?.ok_or_else(|| missing("RANK"))?;
        let world_size = number("WORLD_SIZE")?.ok_or_else(|| missing("WORLD_SIZE"))?;
        if world_size == 0 {
            return Err(CommError::Launch { name: "WORLD_SIZE", reason: "must be at least 1".into() });
        }
        if rank >= world_size {
            return Err(CommError::Launch { name: "RANK", reason: format!("{rank} is not in 0..{world_size}") });
        }
        let local_rank = number("LOCAL_RANK")?.unwrap_or(rank);
        let master_port = match number("MASTER_PORT")? {
            None => Launch::DEFAULT_PORT,
            Some(port) => u16::try_from(port)
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| CommError::Launch { name: "MASTER_PORT", reason: format!("{port} is not a port") })?,
        };
        let master_addr = lookup("MASTER_ADDR").unwrap_or_else(|| Ipv4Addr::LOCALHOST.to_string());
        Ok(Launch { rank, world_size, local_rank, master_addr, master_port })
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

    #[test]
    fn free_ports_are_bindable() {
        let port = free_port(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
        assert!(port > 0);
        TcpListener::bind((Ipv4Addr::LOCALHOST, port)).unwrap();
    }
}
