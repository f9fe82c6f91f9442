//! Size, cost and activation footprint of a network, stage by stage, without running it.

use std::fmt;

use crate::input_shape::InputShape;
use crate::layout::Layout;
use crate::op::OpWork;

/// How FLOPs are counted, printed under every analysis table so the numbers are never
/// read against a different convention.
pub const FLOP_CONVENTION: &str = "FLOPs: forward pass, one multiply-add = 2 FLOPs; batch norm, pooling and \
element-wise ops counted too; conv+linear shown separately";

/// The details behind [`FLOP_CONVENTION`].
const FLOP_DETAILS: &str = "(batch norm = 2 per element, inference-style scale+shift; ReLU/ReLU6 and residual \
add = 1 per element; max-pool = k² per output element; avg-pool = 1 per input element; dropout and flatten = 0)";

/// One stage's row of an [`Analysis`]. Counts are for the whole batch except
/// `parameters`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StageAnalysis {
    /// Stage name.
    pub name: String,
    /// Shape of the stage's output, batch axis first.
    pub output_shape: Vec<i64>,
    /// Trainable parameters of the stage.
    pub parameters: u64,
    /// Forward FLOPs of the stage for the batch, per [`FLOP_CONVENTION`].
    pub forward_flops: u64,
    /// The part of `forward_flops` spent in convolutions and linear layers.
    pub conv_linear_flops: u64,
    /// Bytes of the stage's output tensor in f32: what crosses a pipeline cut after it.
    pub activation_bytes: u64,
    /// Each op's FLOPs and memory traffic for the batch, in execution order: a roofline
    /// per op, since a stage mixes compute-bound convolutions with memory-bound
    /// normalisation and activations.
    pub ops: Vec<OpWork>,
}

/// Per-stage statistics of a network for one input and batch size, plus totals; what
/// partitioners balance and what reports print next to measured times.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Analysis {
    /// Network name.
    pub network: String,
    /// Input the network was specified for.
    pub input: InputShape,
    /// Layout chosen for that input.
    pub layout: Layout,
    /// Batch size every count except parameters is scaled by.
    pub batch: i64,
    /// One row per stage, in order.
    pub stages: Vec<StageAnalysis>,
    /// Sum of the stages' parameters: the network's trainable parameter count.
    pub total_parameters: u64,
    /// Sum of the stages' forward FLOPs.
    pub total_forward_flops: u64,
    /// Sum of the stages' conv+linear FLOPs.
    pub total_conv_linear_flops: u64,
    /// Sum of the stages' output bytes (tensors inside a stage are not included).
    pub total_activation_bytes: u64,
}

impl Analysis {
    pub(crate) fn new(
        network: String,
        input: InputShape,
        layout: Layout,
        batch: i64,
        stages: Vec<StageAnalysis>,
    ) -> Self {
        let sum = |field: fn(&StageAnalysis) -> u64| stages.iter().map(field).sum();
        Analysis {
            total_parameters: sum(|s| s.parameters),
            total_forward_flops: sum(|s| s.forward_flops),
            total_conv_linear_flops: sum(|s| s.conv_linear_flops),
            total_activation_bytes: sum(|s| s.activation_bytes),
            network,
            input,
            layout,
            batch,
            stages,
        }
    }
}

impl fmt::Display for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} on {}, {} layout, batch {}", self.network, self.input, self.layout, self.batch)?;
        let rows: Vec<[String; 6]> = self
            .stages
            .iter()
            .map(|s| {
                row(
                    &s.name,
                    &format!("{:?}", s.output_shape),
                    s.parameters,
                    s.forward_flops,
                    s.conv_linear_flops,
                    s.activation_bytes,
                )
            })
            .collect();
        let total = row(
            "total",
            "",
            self.total_parameters,
            self.total_forward_flops,
            self.total_conv_linear_flops,
            self.total_activation_bytes,
        );
        let header = ["stage", "output shape", "params", "GFLOPs", "conv+lin GFLOPs", "act MB"].map(String::from);
        let mut widths = [0; 6];
        for cells in std::iter::once(&header).chain(&rows).chain([&total]) {
            for (width, cell) in widths.iter_mut().zip(cells) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String; 6]| {
            // Names and shapes read left to right; numbers line up on the right.
            let [name, shape, numbers @ ..] = cells;
            write!(f, "{name:<w0$}  {shape:<w1$}", w0 = widths[0], w1 = widths[1])?;
            for (cell, width) in numbers.iter().zip(&widths[2..]) {
                write!(f, "  {cell:>width$}")?;
            }
            writeln!(f)
        };
        line(f, &header)?;
        for cells in &rows {
            line(f, cells)?;
        }
        let rule_width = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        writeln!(f, "{}", "-".repeat(rule_width))?;
        line(f, &total)?;
        writeln!(f, "{FLOP_CONVENTION}")?;
        write!(f, "{FLOP_DETAILS}")
    }
}

/// One table row's cells.
fn row(name: &str, shape: &str, parameters: u64, flops: u64, conv_linear_flops: u64, bytes: u64) -> [String; 6] {
    [
        name.to_string(),
        shape.to_string(),
        thousands(parameters),
        format!("{:.3}", flops as f64 / 1e9),
        format!("{:.3}", conv_linear_flops as f64 / 1e9),
        format!("{:.2}", bytes as f64 / 1e6),
    ]
}

/// `25557032` → `25,557,032`, so parameter counts can be read at a glance.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits_in_threes() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(25_557_032), "25,557,032");
    }

    #[test]
    fn table_has_a_row_per_stage_totals_and_the_convention() {
        let stage = |name: &str| StageAnalysis {
            name: name.into(),
            output_shape: vec![2, 10],
            parameters: 1234,
            forward_flops: 2_000_000_000,
            conv_linear_flops: 1_500_000_000,
            activation_bytes: 80,
            ops: Vec::new(),
        };
        let analysis =
            Analysis::new("toy".into(), InputShape::MNIST, Layout::SmallImage, 2, vec![stage("a"), stage("b")]);
        let text = analysis.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + 2 + 1 + 1 + 2);
        assert!(lines[2].starts_with("a ") && lines[2].contains("1,234") && lines[2].contains("2.000"));
        assert!(lines[5].starts_with("total") && lines[5].contains("2,468") && lines[5].contains("4.000"));
        assert!(text.contains(FLOP_CONVENTION));
        // Every table line has the same width, so columns line up.
        assert_eq!(lines[1].len(), lines[2].len());
    }
}
