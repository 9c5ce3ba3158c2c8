//! The real gateway binary on a free port, killed when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Result;

pub struct Gateway {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    child: Child,
    log: PathBuf,
}

impl Gateway {
    /// Spawns `bin` against `database_url` with a pool of `pool_size`
    /// connections and waits until `/health` answers 200.
    pub async fn start(bin: &Path, database_url: &str, pool_size: usize) -> Result<Gateway> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = std::env::temp_dir().join(format!("pgcursor-bench-gateway-{port}.log"));
        let child = Command::new(bin)
            .env("DATABASE_URL", database_url)
            .env("PGCURSOR_BIND", format!("127.0.0.1:{port}"))
            .env("PGCURSOR_POOL_SIZE", pool_size.to_string())
            .env_remove("PGCURSOR_TOKENS")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .map_err(|e| format!("spawn {}: {e} (run `make bench`)", bin.display()))?;
        let mut gateway = Gateway {
            base: format!("http://127.0.0.1:{port}"),
            child,
            log,
        };
        gateway.wait_healthy().await?;
        Ok(gateway)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident set size so far, in kB (VmHWM).
    pub fn peak_rss_kb(&self) -> Option<u64> {
        status_field(self.pid(), "VmHWM:")
    }

    /// Starts a new peak: the kernel resets VmHWM to the current RSS.
    pub fn reset_peak_rss(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").is_ok()
    }

    async fn wait_healthy(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = reqwest::Client::new();
        loop {
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                return Err(format!("gateway exited ({status}):\n{log}").into());
            }
            let health = client.get(format!("{}/health", self.base)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("gateway not healthy after 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// A `kB` field of /proc/<pid>/status.
fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}
