use std::process::ExitCode;

use gateway::config::Config;

#[actix_web::main]
async fn main() -> ExitCode {
    let config = Config::parse_or_exit();
    gateway::init_tracing();
    match gateway::app::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
