//! Where a pipeline rank sits: ranks are laid out replica-major (rank = replica × stages +
//! stage), so a pipeline's neighbours are adjacent ranks.

/// Where a rank sits: its pipeline stage and data-parallel replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Position in the pipeline.
    pub stage: usize,
    /// Stages per pipeline (pp).
    pub stages: usize,
    /// Replica of the pipeline.
    pub replica: usize,
    /// Replicas (dp).
    pub replicas: usize,
}

impl Layout {
    /// The layout of `rank` in a world of `stages × replicas` ranks.
    pub fn of(rank: usize, stages: usize, replicas: usize) -> Layout {
        Layout { stage: rank % stages, stages, replica: rank / stages, replicas }
    }

    /// World rank of stage `stage` of this rank's pipeline.
    pub(super) fn rank_of(&self, stage: usize) -> usize {
        self.replica * self.stages + stage
    }
}
