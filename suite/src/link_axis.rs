//! The suite's `link:` axis: where a multi-worker trial's workers talk. `loopback` (this
//! machine's, unshaped) or an emulated link written like a cluster file's,
//! `{bandwidth: 1 Gbit/s, latency: 1 ms}`, which the runner builds from network namespaces
//! (`stratlab_link_emulation`) for the trial's lifetime.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use anyhow::Context;
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use stratlab_link_emulation::EmulatedLink;
use stratlab_perf_model::{Bandwidth, Latency, Link};

/// Where a trial's workers talk.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TrialLink {
    /// This machine's loopback, as it is.
    #[default]
    Loopback,
    /// An emulated link of this bandwidth and one-way latency.
    Emulated(Link),
}

impl TrialLink {
    /// How tables and reports name it: `loopback`, `1 Gbit/s`, `100 Mbit/s · 1 ms`.
    pub fn label(&self) -> String {
        match self {
            TrialLink::Loopback => "loopback".into(),
            TrialLink::Emulated(link) => link.name(),
        }
    }

    /// Its part of a trial id: empty for loopback (the ids of runs made before the axis
    /// existed stay the same), else `__link-100Mbit-1ms`.
    pub fn id_part(&self) -> String {
        match self {
            TrialLink::Loopback => String::new(),
            TrialLink::Emulated(_) => {
                format!("__link-{}", self.label().replace("/s", "").replace(" · ", "-").replace(' ', ""))
            }
        }
    }

    /// `--link`'s value for a probe over it, exact in the units the parser reads; `None`
    /// on loopback.
    pub fn probe_argument(&self) -> Option<String> {
        self.emulated().map(|link| format!("bandwidth={}B/s,latency={}s", link.bandwidth.0, link.latency.0))
    }

    /// The emulated link, if any.
    pub fn emulated(&self) -> Option<&Link> {
        match self {
            TrialLink::Loopback => None,
            TrialLink::Emulated(link) => Some(link),
        }
    }
}

/// Where a group's rendezvous listens: on loopback a port free now; on an emulated link
/// worker 0's address and torchrun's default port, free in the link's own new namespaces.
pub(crate) fn rendezvous(emulated: Option<&EmulatedLink>) -> anyhow::Result<(IpAddr, u16)> {
    Ok(match emulated {
        Some(emulated) => (IpAddr::V4(emulated.ends()[0].address), 29500),
        None => {
            let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
            (loopback, stratlab_comm::free_port(loopback).context("finding a free port for the rendezvous")?)
        }
    })
}

/// A link on the command line that is neither `loopback` nor `bandwidth=…[,latency=…]`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct LinkArgError(String);

impl FromStr for TrialLink {
    type Err = LinkArgError;

    /// `loopback`, or `bandwidth=100Mbit/s,latency=1ms` (latency optional), as a command
    /// line gives it.
    fn from_str(text: &str) -> Result<TrialLink, LinkArgError> {
        let error = |message: String| LinkArgError(message);
        if text.trim() == "loopback" {
            return Ok(TrialLink::Loopback);
        }
        let (mut bandwidth, mut latency) = (None, Latency(0.0));
        for part in text.split(',').map(str::trim).filter(|part| !part.is_empty()) {
            match part.split_once('=').map(|(key, value)| (key.trim(), value.trim())) {
                Some(("bandwidth", value)) => {
                    bandwidth = Some(value.parse::<Bandwidth>().map_err(|e| error(e.to_string()))?)
                }
                Some(("latency", value)) => latency = value.parse::<Latency>().map_err(|e| error(e.to_string()))?,
                _ => {
                    return Err(error(format!(
                        "`{part}` in link `{text}`: give `loopback` or `bandwidth=<rate>[,latency=<time>]`, \
                         e.g. bandwidth=100Mbit/s,latency=1ms"
                    )))
                }
            }
        }
        let bandwidth =
            bandwidth.ok_or_else(|| error(format!("link `{text}` has no bandwidth=<rate>, e.g. bandwidth=1Gbit/s")))?;
        Ok(TrialLink::Emulated(Link { bandwidth, latency }))
    }
}

impl fmt::Display for TrialLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

impl Serialize for TrialLink {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            TrialLink::Loopback => serializer.serialize_str("loopback"),
            TrialLink::Emulated(link) => link.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for TrialLink {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LinkVisitor;
        impl<'de> Visitor<'de> for LinkVisitor {
            type Value = TrialLink;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`loopback` or a link such as {bandwidth: 1 Gbit/s, latency: 1 ms}")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<TrialLink, E> {
                match name {
                    "loopback" => Ok(TrialLink::Loopback),
                    other => Err(E::custom(format!(
                        "unknown link `{other}`: valid are `loopback` and a map {{bandwidth: 1 Gbit/s, latency: 1 ms}} \
                         (latency optional)"
                    ))),
                }
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<TrialLink, M::Error> {
                Link::deserialize(de::value::MapAccessDeserializer::new(map)).map(TrialLink::Emulated)
            }
        }
        deserializer.deserialize_any(LinkVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_labelled_for_tables_and_ids() {
        let link = |bandwidth: f64, latency: f64| TrialLink::Emulated(Link::new(bandwidth / 8.0, latency));
        assert_eq!(TrialLink::Loopback.label(), "loopback");
        assert_eq!(TrialLink::Loopback.id_part(), "");
        assert_eq!(link(1e9, 0.0).label(), "1 Gbit/s");
        assert_eq!(link(1e9, 0.0).id_part(), "__link-1Gbit");
        assert_eq!(link(100e6, 1e-3).label(), "100 Mbit/s · 1 ms");
        assert_eq!(link(100e6, 1e-3).id_part(), "__link-100Mbit-1ms");
        assert_eq!(link(2.5e9, 50e-6).label(), "2.5 Gbit/s · 50 us");
    }

    #[test]
    fn command_lines_give_links_as_key_value_pairs() {
        let link = |bandwidth: f64, latency: f64| TrialLink::Emulated(Link::new(bandwidth / 8.0, latency));
        assert_eq!("loopback".parse::<TrialLink>(), Ok(TrialLink::Loopback));
        assert_eq!("bandwidth=100Mbit/s,latency=1ms".parse::<TrialLink>(), Ok(link(100e6, 1e-3)));
        assert_eq!("bandwidth=1 Gbit/s".parse::<TrialLink>(), Ok(link(1e9, 0.0)));
        let error = "latency=1ms".parse::<TrialLink>().unwrap_err().to_string();
        assert!(error.contains("no bandwidth"), "{error}");
        let error = "bandwidth=1Gbit/s,jitter=1ms".parse::<TrialLink>().unwrap_err().to_string();
        assert!(error.contains("`jitter=1ms`"), "{error}");
        let error = "bandwidth=fast".parse::<TrialLink>().unwrap_err().to_string();
        assert!(error.contains("fast") && error.contains("Gbit/s"), "{error}");
    }
}
