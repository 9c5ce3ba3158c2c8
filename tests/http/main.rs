//! Black-box tests: the real gateway binary against a real PostgreSQL.
//! Run via `make test` (it provides DATABASE_URL and GATEWAY_BIN).

mod access_matrix;
mod ack;
mod broker;
mod browser;
mod config;
mod connections;
mod consumer_groups;
mod cors;
mod dashboard;
mod dlq;
mod encryption;
mod fuzz;
mod health;
mod hostile;
mod housekeeping;
mod inspect;
mod long_poll;
mod maintenance;
mod messages;
mod metrics;
mod operations;
mod produce_consume;
mod queue_options;
mod resilience;
mod resources;
mod retention;
mod routes;
mod status;
mod traces;
mod transaction;
