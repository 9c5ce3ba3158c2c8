//! Black-box tests: the real gateway binary against a real PostgreSQL.
//! Run via `make test` (it provides DATABASE_URL and GATEWAY_BIN).

mod ack;
mod config;
mod health;
mod routes;
