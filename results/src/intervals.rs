//! Exact lengths of unions and intersections of time intervals (sort, then merge).
//!
//! The per-rank breakdown asks "how long was the rank computing, communicating, both?".
//! Summing event durations would count nested or overlapping events twice; merging the
//! intervals first counts every instant once.

/// A half-open span of time `[start_s, end_s)` in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    /// Where it starts, seconds.
    pub start_s: f64,
    /// Where it ends, seconds; greater than `start_s` for a non-empty interval.
    pub end_s: f64,
}

/// The union of `intervals` as sorted, disjoint, non-touching intervals.
///
/// Empty, reversed or non-finite intervals cover no time and are dropped.
pub(crate) fn merge(intervals: &[Interval]) -> Vec<Interval> {
    let mut sorted: Vec<Interval> = intervals
        .iter()
        .copied()
        .filter(|i| i.start_s.is_finite() && i.end_s.is_finite() && i.end_s > i.start_s)
        .collect();
    sorted.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    let mut merged: Vec<Interval> = Vec::with_capacity(sorted.len());
    for interval in sorted {
        match merged.last_mut() {
            Some(last) if interval.start_s <= last.end_s => last.end_s = last.end_s.max(interval.end_s),
            _ => merged.push(interval),
        }
    }
    merged
}

/// Total length of intervals already merged (sorted and disjoint).
pub(crate) fn total_length(merged: &[Interval]) -> f64 {
    merged.iter().map(|i| i.end_s - i.start_s).sum()
}

/// Length of the time covered by both `a` and `b`, each already merged.
///
/// A two-pointer walk over the sorted lists: each overlap is measured directly rather than
/// as `|a| + |b| − |a ∪ b|`, which would lose precision to cancellation.
pub(crate) fn intersection_length(a: &[Interval], b: &[Interval]) -> f64 {
    let (mut i, mut j, mut total) = (0, 0, 0.0);
    while i < a.len() && j < b.len() {
        let start = a[i].start_s.max(b[j].start_s);
        let end = a[i].end_s.min(b[j].end_s);
        if end > start {
            total += end - start;
        }
        // Whichever ends first cannot overlap anything further in the other list.
        if a[i].end_s <= b[j].end_s {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(pairs: &[(f64, f64)]) -> Vec<Interval> {
        pairs.iter().map(|&(start_s, end_s)| Interval { start_s, end_s }).collect()
    }

    #[test]
    fn nested_overlapping_and_touching_intervals_merge_into_one() {
        // [0,4] contains [1,2]; [3,5] overlaps its end; [5,6] touches; [8,9] is apart.
        let merged = merge(&spans(&[(3.0, 5.0), (0.0, 4.0), (8.0, 9.0), (1.0, 2.0), (5.0, 6.0)]));
        assert_eq!(merged, spans(&[(0.0, 6.0), (8.0, 9.0)]));
        assert_eq!(total_length(&merged), 7.0);
    }

    #[test]
    fn empty_reversed_and_nan_intervals_cover_nothing() {
        let merged = merge(&spans(&[(1.0, 1.0), (3.0, 2.0), (f64::NAN, 4.0), (0.0, f64::INFINITY)]));
        assert!(merged.is_empty());
        assert_eq!(total_length(&merged), 0.0);
    }

    #[test]
    fn intersections_count_each_shared_instant_once() {
        let a = merge(&spans(&[(0.0, 2.0), (3.0, 7.0), (9.0, 10.0)]));
        let b = merge(&spans(&[(1.0, 4.0), (5.0, 6.0), (6.5, 9.5)]));
        // Shared: [1,2] + [3,4] + [5,6] + [6.5,7] + [9,9.5] = 1 + 1 + 1 + 0.5 + 0.5.
        assert_eq!(intersection_length(&a, &b), 4.0);
        assert_eq!(intersection_length(&b, &a), 4.0);
        assert_eq!(intersection_length(&a, &[]), 0.0);
        // Disjoint lists share nothing.
        assert_eq!(intersection_length(&spans(&[(0.0, 1.0)]), &spans(&[(1.0, 2.0)])), 0.0);
    }
}
