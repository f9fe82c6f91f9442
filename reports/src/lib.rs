//! Figures and tables rendered from stored runs (the reports issue fills this crate).
