//! Black-box tests: the real gateway binary against a real PostgreSQL.
//! Run via `make test` (it provides DATABASE_URL and GATEWAY_BIN).

mod access_levels;
mod ack;
mod broker;
mod config;
mod dlq;
mod health;
mod housekeeping;
mod inspect;
mod long_poll;
mod produce_consume;
mod resources;
mod routes;
mod transaction;
