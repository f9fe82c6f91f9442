//! Drawing pieces shared by the figure kinds: legends outside the plot, hatching, bar panels
//! with error bars and failure stubs, panel grids and hand-placed axis labels.

pub(crate) mod axes;
pub(crate) mod bars;
pub(crate) mod curves;
pub(crate) mod hatch;
pub(crate) mod legend;
pub(crate) mod title;
