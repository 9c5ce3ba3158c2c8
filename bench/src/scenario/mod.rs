//! One module per scenario: (a) ack throughput, (b) end to end, (c) ack cost,
//! (f) cost per step against a floor, (i) a new consumer group's first pop,
//! (h) backlog independence, (g) fan-out to consumer groups.

pub mod ack_cost;
pub mod ack_throughput;
pub mod backlog;
pub mod end_to_end;
pub mod fan_out;
pub mod first_pop;
pub mod step_cost;
