//! What a strategy asks of workers and batches: the pipeline's shape, the samples of a
//! step and of one stage, and whether a cell is feasible at all.

use super::Strategy;
use crate::{check_balance, micro_batches_fit, Infeasible};

impl Strategy {
    /// Samples one stage runs at once with a per-worker (per-pipeline) batch of `batch`:
    /// a pipeline's micro-batch (at least 1), the whole batch otherwise.
    pub fn stage_samples(&self, batch: usize) -> usize {
        match self.schedule() {
            Some(_) => (batch / self.micro_batches()).max(1),
            None => batch,
        }
    }

    /// `(stages, replicas)` of a pipeline over `workers` workers: hybrid's pp stages and
    /// workers ÷ pp replicas, a layout of replicated stages its stages in one pipeline,
    /// every other pipeline one stage per worker.
    pub fn pipeline_shape(&self, workers: usize) -> Result<(usize, usize), Infeasible> {
        if let Some(layout) = self.stage_replicas() {
            return match layout.workers() == workers {
                true => Ok((layout.stages(), 1)),
                false => Err(Infeasible(format!(
                    "stage_replicas {layout} runs on {} workers; the cell has {workers}",
                    layout.workers()
                ))),
            };
        }
        let stages = match self {
            Strategy::Hybrid { pipeline_stages, .. } => *pipeline_stages,
            _ => workers,
        };
        if stages == 0 || !workers.is_multiple_of(stages) {
            return Err(Infeasible(format!(
                "{workers} workers cannot form pipelines of {stages} stages (workers = dp × pp)"
            )));
        }
        Ok((stages, workers / stages))
    }

    /// Pipeline stages the network is cut into for `workers` workers: one per worker of a
    /// pipeline, or `v` per worker when interleaved.
    pub fn pipeline_stage_count(&self, workers: usize) -> Result<usize, Infeasible> {
        let (ranks, _) = self.pipeline_shape(workers)?;
        Ok(self.schedule().map_or(ranks, |schedule| schedule.stage_count(ranks)))
    }

    /// The workers each of the pipeline stages the network is cut into runs on: one each,
    /// or a replicated layout's counts. A cut by cost gives a stage on r workers r times
    /// the work.
    pub fn stage_shares(&self, workers: usize) -> Result<Vec<usize>, Infeasible> {
        match self.stage_replicas() {
            Some(layout) => self.pipeline_shape(workers).map(|_| layout.counts().to_vec()),
            None => Ok(vec![1; self.pipeline_stage_count(workers)?]),
        }
    }

    /// Samples per optimizer step over all workers for a per-worker `batch`: every
    /// data-parallel worker trains on its own batch; a pipeline's stages share one
    /// (hybrid: one per replica).
    pub fn global_batch(&self, batch: usize, workers: usize) -> usize {
        if self.kind().shards_batch() {
            batch * workers
        } else {
            batch * self.pipeline_shape(workers).map_or(1, |(_, replicas)| replicas)
        }
    }

    /// The per-worker batch that makes a step of `workers` workers consume exactly
    /// `global_batch` samples (the inverse of [`Self::global_batch`]); `None` where the
    /// workers (or replicas) do not divide it.
    pub fn batch_per_worker(&self, global_batch: usize, workers: usize) -> Option<usize> {
        let per_sample = self.global_batch(1, workers);
        (global_batch.is_multiple_of(per_sample) && global_batch >= per_sample).then(|| global_batch / per_sample)
    }

    /// Why `workers` workers cannot train `network` (of `network_stages` stages) with a
    /// per-worker `batch` under this strategy, if they cannot.
    pub fn check(&self, workers: usize, batch: usize, network: &str, network_stages: usize) -> Result<(), Infeasible> {
        self.kind().check_workers(workers)?;
        if let Some(micro_batches) = self.parameters().micro_batches {
            micro_batches_fit(micro_batches, batch)?;
        }
        if let Some(schedule) = self.schedule() {
            let (ranks, _) = self.pipeline_shape(workers)?;
            schedule.check(ranks, self.micro_batches()).map_err(Infeasible)?;
            if let Some(layout) = self.stage_replicas() {
                layout.check(self.micro_batches()).map_err(Infeasible)?;
            }
            check_balance(network_stages, &self.balance(), schedule.stage_count(ranks))
                .map_err(|error| Infeasible(format!("{network}: {error}")))?;
        }
        Ok(())
    }
}
