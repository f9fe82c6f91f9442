//! Links emulated on one machine, so communication-bound cells can be measured where the
//! workers share a host: every worker in a network namespace of its own, joined through
//! veth pairs (a bridge for more than two) shaped with tbf, and a userspace delay line over
//! TUN devices for one-way latency (this kernel has no netem).

pub mod delay_line;
pub mod end;
pub mod namespaces;
pub mod testing;

pub use end::WorkerEnd;
pub use namespaces::{check_feasible, made_by, sweep_leftovers, EmulatedLink, EmulationError};
