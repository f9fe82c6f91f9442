//! What a worker does for itself when srun started it as one rank of a Slurm job step, on a
//! node where the runner watches nothing: it reports its node, holds itself to the trial's
//! memory limit (the address-space guard the runner would set before exec, the resident
//! guard the runner would poll), times the speed reference on its node and samples its
//! own telemetry.

use std::time::Duration;

use stratlab_results::Outcome;
use stratlab_strategies::DeviceChoice;
use stratlab_telemetry::{choose_sampler, CudaEnv, TelemetryRecorder};

use crate::memory_guard::{MemoryLimit, ResidentGuard};
use crate::protocol::WorkerEvent;
use crate::trial::WorkerTrial;

/// A job step's rank, watching itself while it trains.
pub(crate) struct JobStepRank {
    recorder: TelemetryRecorder,
}

impl JobStepRank {
    /// Reports this node, applies the trial's memory limit to this process and starts its
    /// telemetry every `interval_ms`; `emit` writes an event line.
    pub(crate) fn start(
        spec: &WorkerTrial,
        local_rank: usize,
        interval_ms: u64,
        emit: fn(&WorkerEvent),
    ) -> JobStepRank {
        emit(&WorkerEvent::Node(Box::new(crate::fingerprint::collect(None))));
        // The runner times the machine before a trial; here the node is the machine. Slurm
        // starts the node's ranks together, so their shares of its cores load it at once.
        let ranks_on_node = std::env::var("SLURM_STEP_TASKS_PER_NODE")
            .ok()
            .and_then(|tasks| tasks.split(['(', ',']).next()?.trim().parse::<usize>().ok())
            .unwrap_or(1);
        let copies = crate::fingerprint::cores_here() / ranks_on_node.max(1);
        emit(&WorkerEvent::SpeedReference { seconds: crate::speed_reference::reference_seconds_on(copies) });
        let cuda = matches!(spec.train.device, DeviceChoice::Cuda(_));
        let limit = MemoryLimit::for_trial(spec.memory_limit_bytes, cuda);
        if let Some(bytes) = limit.address_space_guard() {
            let rlimit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
            // SAFETY: setrlimit reads the struct it is given and nothing else.
            if unsafe { libc::setrlimit(libc::RLIMIT_AS, &rlimit) } != 0 {
                eprintln!("stratlab worker: could not limit the address space: {}", std::io::Error::last_os_error());
            }
        }
        if let MemoryLimit::Resident(bytes) = limit {
            std::thread::spawn(move || {
                let mut guard = ResidentGuard::new(bytes, &[std::process::id()]);
                loop {
                    std::thread::sleep(Duration::from_millis(100));
                    if let Some(reason) = guard.check() {
                        emit(&WorkerEvent::Failed { outcome: Outcome::Oom, reason, detail: None });
                        std::process::exit(1);
                    }
                }
            });
        }
        // Rank i of a node trains on cuda:LOCAL_RANK, as the runner's local workers do.
        let ordinals: Vec<usize> = if cuda { vec![local_rank] } else { Vec::new() };
        let sampler = choose_sampler(std::process::id(), &ordinals, &CudaEnv::from_env());
        JobStepRank { recorder: TelemetryRecorder::start(sampler, Duration::from_millis(interval_ms)) }
    }

    /// Stops the telemetry and reports what it sampled.
    pub(crate) fn finish(self, emit: fn(&WorkerEvent)) {
        emit(&WorkerEvent::Telemetry { samples: self.recorder.stop() });
    }
}
