//! Executors. Each runs a planned [`Graph`](crate::Graph) node by node on one
//! device; they read tensor headers and placements, never the builder API.

pub mod cpu;
pub mod cuda;
