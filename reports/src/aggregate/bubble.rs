//! The pipeline bubble: the measured idle share of a timeline next to GPipe's
//! theoretical (p − 1) / (m + p − 1).

use std::collections::BTreeSet;

use stratlab_results::EventKind;

use crate::PipelineTimeline;

/// A timeline's bubble: what was measured and what the schedule predicts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BubbleShare {
    /// Idle time over all workers ÷ (workers × the timeline's span), 0–1: the mean of
    /// [`PipelineTimeline::idle_share`] over the workers (each is measured over the same span).
    pub measured: f64,
    /// GPipe's (p − 1) / (m + p − 1) for p stages and m micro-batches; `None` when the
    /// timeline has no micro-batches (not a pipeline).
    pub theoretical: Option<f64>,
}

/// The bubble of GPipe (and of 1F1B, which reorders but keeps it) with `stages` stages and
/// `micro_batches` micro-batches of equal cost ([`stratlab_results::theoretical_bubble`],
/// the one definition); `None` when either is zero (not a pipeline).
pub fn gpipe_bubble(stages: u32, micro_batches: u32) -> Option<f64> {
    (stages > 0 && micro_batches > 0).then(|| stratlab_results::theoretical_bubble(stages, micro_batches, 1))
}

/// Measured and theoretical bubble of `timeline`. The stage count is the timeline's worker
/// count and the micro-batch count the distinct micro-batches of its forward passes; use
/// [`bubble_share_of`] where the schedule is known otherwise.
pub fn bubble_share(timeline: &PipelineTimeline) -> BubbleShare {
    let micro_batches: BTreeSet<u32> = timeline
        .events
        .iter()
        .filter(|event| event.kind == EventKind::Forward)
        .filter_map(|event| event.micro_batch)
        .collect();
    bubble_share_of(timeline, timeline.workers, micro_batches.len() as u32)
}

/// Measured bubble of `timeline`, theoretical one for `stages` stages and `micro_batches`
/// micro-batches.
pub fn bubble_share_of(timeline: &PipelineTimeline, stages: u32, micro_batches: u32) -> BubbleShare {
    let measured = if timeline.workers == 0 {
        1.0
    } else {
        (0..timeline.workers).map(|worker| timeline.idle_share(worker)).sum::<f64>() / f64::from(timeline.workers)
    };
    BubbleShare { measured, theoretical: gpipe_bubble(stages, micro_batches) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TimelineEvent;

    #[test]
    fn theoretical_bubble_follows_gpipe() {
        assert_eq!(gpipe_bubble(2, 4), Some(0.2));
        assert_eq!(gpipe_bubble(1, 8), Some(0.0));
        assert_eq!(gpipe_bubble(4, 0), None);
    }

    #[test]
    fn a_timeline_without_micro_batches_has_no_theoretical_bubble() {
        let event = |worker, start_s, end_s| TimelineEvent {
            worker,
            kind: EventKind::AllReduce,
            micro_batch: None,
            pipeline_stage: None,
            start_s,
            end_s,
        };
        let timeline = PipelineTimeline {
            title: "dp".into(),
            workers: 2,
            worker_labels: Vec::new(),
            events: vec![event(0, 0.0, 4.0), event(1, 1.0, 4.0)],
        };
        let share = bubble_share(&timeline);
        assert_eq!(share.theoretical, None);
        assert!((share.measured - 0.125).abs() < 1e-12);
    }
}
