//! Planning: where every tensor of a graph lives for one backend.
//!
//! A [`Plan`] gives each storage root a [`Place`]: leaves that hold data stay
//! in the context (read in place, or copied by the backend when the graph
//! writes them); every other root gets an offset in one backend buffer. The
//! [`Allocator`] makes plans from tensor lifetimes with a best-fit free list and
//! in-place reuse; [`Plan::naive`] gives every root its own range. Executors
//! read placements and know nothing of how they were chosen; the planner asks
//! the backend only through [`ReuseRules`] and knows nothing of kernels.

mod free_list;
mod lifetimes;
mod placement;
mod planner;
mod rules;
mod verify;

pub use placement::{Place, Plan, PlanStats};
pub use planner::Allocator;
pub use rules::{NoReuse, ReuseRules, CPU_ALIGNMENT, CUDA_ALIGNMENT};
