//! The harness of the tests and the bench: the real gateway binary against a
//! real PostgreSQL.
//!
//! `make test` provides `DATABASE_URL` (a throwaway cluster, already
//! migrated), `GATEWAY_BIN` and `PGCURSOR_PG_BINDIR`. The bench starts its
//! gateway through `GatewayConfig` with its own binary, cluster and pool size.

pub mod fixtures;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a gateway may take to answer `/health` after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The test database, from `DATABASE_URL`.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").expect("DATABASE_URL is not set: run the tests via `make test`")
}

/// A direct connection to the test database (its driver task spawned).
pub async fn db() -> tokio_postgres::Client {
    db_at(&database_url()).await
}

/// A direct connection to the database at `url` (its driver task spawned).
pub async fn db_at(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// An HTTP client with a generous timeout, so a hung gateway fails the test.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("build reqwest client")
}

/// A localhost TCP port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("find a free port")
        .port()
}

/// The workspace root (the parent of this crate).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The gateway binary: `GATEWAY_BIN`, else the workspace's debug build.
pub fn gateway_bin() -> PathBuf {
    std::env::var_os("GATEWAY_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_dir().join("target/debug/gateway"))
}

/// A fresh path under the system temp dir, unique within this process.
pub fn temp_path(prefix: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()))
}

/// A gateway command on a free port against `DATABASE_URL`; `env` entries
/// override (e.g. a different DATABASE_URL, a bad setting).
pub fn gateway_command(env: &[(&str, &str)]) -> (Command, u16) {
    let port = free_port();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cmd = command(&gateway_bin(), port, &env, &[]);
    (cmd, port)
}

/// `bin` bound to 127.0.0.1:`port`, authentication off, `remove` taken out
/// of the inherited environment, then `env` applied (it overrides all of
/// that). Without a DATABASE_URL in `env`, the tests' `DATABASE_URL`.
fn command(bin: &Path, port: u16, env: &[(String, String)], remove: &[String]) -> Command {
    let mut cmd = Command::new(bin);
    // A test with its own database (a PrivateCluster) needs no DATABASE_URL.
    if !env.iter().any(|(key, _)| key == "DATABASE_URL") {
        cmd.env("DATABASE_URL", database_url());
    }
    cmd.env("PGCURSOR_BIND", format!("127.0.0.1:{port}"))
        .env_remove("PGCURSOR_TOKENS");
    for key in remove {
        cmd.env_remove(key);
    }
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// How to start a gateway: which binary, which database, which settings.
/// `GatewayConfig::new()` is what the tests use (`GATEWAY_BIN`,
/// `DATABASE_URL`); the bench names its release binary, its own cluster and
/// a pool size.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    bin: PathBuf,
    /// Applied last, in order: a later entry wins.
    env: Vec<(String, String)>,
    /// Inherited variables the gateway must not see.
    remove: Vec<String>,
    /// Its limit on open files, (soft, hard); else the harness's own.
    open_files: Option<(u64, u64)>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig::new()
    }
}

impl GatewayConfig {
    /// `gateway_bin()` against `DATABASE_URL`, the environment inherited
    /// except `PGCURSOR_TOKENS` (authentication off).
    pub fn new() -> GatewayConfig {
        GatewayConfig {
            bin: gateway_bin(),
            env: Vec::new(),
            remove: Vec::new(),
            open_files: None,
        }
    }

    /// Another gateway binary (the bench's release build).
    pub fn bin(mut self, bin: impl Into<PathBuf>) -> Self {
        self.bin = bin.into();
        self
    }

    /// Another database than `DATABASE_URL`.
    pub fn database_url(self, url: &str) -> Self {
        self.env("DATABASE_URL", url)
    }

    /// `PGCURSOR_POOL_SIZE`.
    pub fn pool_size(self, connections: usize) -> Self {
        self.env("PGCURSOR_POOL_SIZE", &connections.to_string())
    }

    /// One more setting; overrides the port and anything set before.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Keeps an inherited variable (e.g. `RUST_LOG`) from the gateway.
    pub fn env_remove(mut self, key: &str) -> Self {
        self.remove.push(key.to_string());
        self
    }

    /// Starts it with this limit on open files (RLIMIT_NOFILE), as a shell's
    /// `ulimit -Sn soft -Hn hard` would.
    pub fn open_files(mut self, soft: u64, hard: u64) -> Self {
        self.open_files = Some((soft, hard));
        self
    }

    /// Spawns the gateway and waits until `/health` answers 200; panics
    /// (with its stderr) if it does not.
    pub async fn start(self) -> Gateway {
        self.try_start().await.unwrap_or_else(|e| panic!("{e}"))
    }

    /// As `start`, but a gateway that cannot be spawned, exits or stays
    /// unhealthy is an `Err` carrying its stderr.
    pub async fn try_start(self) -> Result<Gateway, String> {
        let port = free_port();
        let log = temp_path("pgcursor-gateway-log");
        let child = spawn(&self, port, &log).inspect_err(|_| {
            let _ = std::fs::remove_file(&log);
        })?;
        let mut gateway = Gateway {
            base: format!("http://127.0.0.1:{port}"),
            child,
            log,
            port,
            config: self,
        };
        gateway.wait_healthy().await?;
        Ok(gateway)
    }
}

fn spawn(config: &GatewayConfig, port: u16, log: &Path) -> Result<Child, String> {
    let mut cmd = command(&config.bin, port, &config.env, &config.remove);
    if let Some((soft, hard)) = config.open_files {
        limit_open_files(&mut cmd, soft, hard);
    }
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("open gateway log {}: {e}", log.display()))?;
    cmd.stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| {
            format!(
                "spawn {}: {e} (run `make build`, or `make bench` for the release binary)",
                config.bin.display()
            )
        })
}

#[cfg(unix)]
fn limit_open_files(cmd: &mut Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;
    let limit = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed; setrlimit is one.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

#[cfg(not(unix))]
fn limit_open_files(_: &mut Command, _: u64, _: u64) {
    panic!("open-files limits are set only on unix");
}

/// A running gateway process, killed when dropped.
pub struct Gateway {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    child: Child,
    log: PathBuf,
    /// Kept across `restart`.
    port: u16,
    /// What it was started with, so `restart` can repeat it.
    config: GatewayConfig,
}

impl Gateway {
    /// `GatewayConfig::new().start()`: the tests' gateway.
    pub async fn start() -> Gateway {
        GatewayConfig::new().start().await
    }

    /// The tests' gateway with `env` entries added (they override).
    pub async fn start_with(env: &[(&str, &str)]) -> Gateway {
        env.iter()
            .fold(GatewayConfig::new(), |config, (k, v)| config.env(k, v))
            .start()
            .await
    }

    /// The process id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: a crash, no chance to clean up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again, same port and settings (after `kill` or an exit),
    /// and waits until it is healthy.
    pub async fn restart(&mut self) {
        self.kill();
        self.child = spawn(&self.config, self.port, &self.log).unwrap_or_else(|e| panic!("{e}"));
        self.wait_healthy().await.unwrap_or_else(|e| panic!("{e}"));
    }

    /// Waits up to `within` for the process to exit by itself.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `base` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What the gateway wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Peak resident set size so far, in kB (VmHWM of /proc/<pid>/status);
    /// None where there is no /proc.
    pub fn peak_rss_kb(&self) -> Option<u64> {
        proc_status_kb(self.pid(), "VmHWM:")
    }

    /// Starts a new peak: writing 5 to /proc/<pid>/clear_refs makes the
    /// kernel reset VmHWM to the current RSS. False if that was refused.
    pub fn reset_peak_rss(&self) -> bool {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").is_ok()
    }

    async fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let client = client();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "gateway exited ({status}) before it was healthy:\n{}",
                    self.stderr()
                ));
            }
            let health = client.get(self.url("/health")).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "gateway not healthy after {START_TIMEOUT:?}:\n{}",
                    self.stderr()
                ));
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

/// A `kB` field of /proc/<pid>/status, e.g. `VmHWM:`.
fn proc_status_kb(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    line[name.len()..].split_whitespace().next()?.parse().ok()
}

/// A second, private PostgreSQL cluster (scripts/pg.sh) that a test may stop
/// and start; stopped and removed when dropped.
pub struct PrivateCluster {
    dir: PathBuf,
    url: String,
}

impl PrivateCluster {
    pub fn start() -> PrivateCluster {
        let dir = temp_path("pgcursor-cluster");
        std::fs::create_dir_all(&dir).expect("create cluster dir");
        let mut cluster = PrivateCluster {
            dir,
            url: String::new(),
        };
        cluster.url = cluster.pg("start");
        cluster
    }

    /// `postgres://postgres@127.0.0.1:PORT/pgcursor`
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn stop(&self) {
        self.pg("stop");
    }

    /// Starts it again after `stop`, on the same port.
    pub fn start_again(&self) {
        let url = self.pg("start");
        assert_eq!(url, self.url, "the cluster came back on another port");
    }

    /// `pg_ctl restart -m immediate`: every backend dies at once, nothing is
    /// flushed or checkpointed, and the start replays the WAL (crash recovery).
    pub fn restart_immediate(&self) {
        self.pg("crash");
        self.start_again();
    }

    /// Runs `scripts/pg.sh <action> <dir>/pg`; returns its last stdout line.
    fn pg(&self, action: &str) -> String {
        let out = Command::new("bash")
            .arg(workspace_dir().join("scripts/pg.sh"))
            .arg(action)
            .arg(self.dir.join("pg"))
            .output()
            .expect("run scripts/pg.sh");
        assert!(
            out.status.success(),
            "scripts/pg.sh {action} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout.lines().last().unwrap_or_default().trim().to_string()
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(workspace_dir().join("scripts/pg.sh"))
            .arg("stop")
            .arg(self.dir.join("pg"))
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
