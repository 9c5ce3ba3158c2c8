//! One module per route family, each with `pub fn configure(cfg)`.
//! Adding a family = one line in the list below.

use actix_web::web;

pub mod call;
pub mod pop_answer;

macro_rules! route_families {
    ($($family:ident),* $(,)?) => {
        $(pub mod $family;)*

        /// Mounts every family's routes.
        pub fn configure(cfg: &mut web::ServiceConfig) {
            $($family::configure(cfg);)*
        }
    };
}

// The hot paths first: actix tries routes in the order they are mounted, and
// every route with a {parameter} before the one that matches costs a regex
// match per request (4% of the gateway's CPU under bench (b') with push
// mounted after fourteen of them).
route_families! {
    ack,
    push,
    pop,
    configure,
    consumer_groups,
    dashboard,
    dlq,
    health,
    inspect,
    lease,
    maintenance,
    messages,
    metrics,
    openapi,
    resources,
    status,
    traces,
    transaction,
}
