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

route_families! {
    ack,
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
    pop,
    push,
    resources,
    status,
    traces,
    transaction,
}
