use std::process::ExitCode;

use gateway::config::Config;

/// glibc raises its mmap threshold (up to 32 MB) each time a large block is
/// freed, after which every push body and pop answer of a few hundred kB is
/// carved from the heap, which fragments and does not shrink: at batch
/// 1,000 the gateway's peak RSS was 41 MB with the default, 35.6 MB with a
/// fixed 128 kB (bench --only b --systems pgcursor-http --batch 1000, same
/// throughput). A MALLOC_MMAP_THRESHOLD_ the operator set wins.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_large_buffers_out_of_the_heap() {
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets an allocator parameter; it takes glibc's own lock.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024) };
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_large_buffers_out_of_the_heap() {}

#[actix_web::main]
async fn main() -> ExitCode {
    keep_large_buffers_out_of_the_heap();
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
