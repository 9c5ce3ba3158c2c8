//! The test harness: the real gateway binary against a real PostgreSQL.
//!
//! `make test` provides `DATABASE_URL` (a throwaway cluster, already
//! migrated), `GATEWAY_BIN` and `PGCURSOR_PG_BINDIR`.

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
    let (client, connection) = tokio_postgres::connect(&database_url(), tokio_postgres::NoTls)
        .await
        .expect("connect to DATABASE_URL");
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
    let mut cmd = Command::new(gateway_bin());
    // A test with its own database (a PrivateCluster) needs no DATABASE_URL.
    if !env.iter().any(|(key, _)| *key == "DATABASE_URL") {
        cmd.env("DATABASE_URL", database_url());
    }
    cmd.env("PGCURSOR_BIND", format!("127.0.0.1:{port}"))
        .env_remove("PGCURSOR_TOKENS");
    for (key, value) in env {
        cmd.env(key, value);
    }
    (cmd, port)
}

/// A running gateway process, killed when dropped.
pub struct Gateway {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    child: Child,
    log: PathBuf,
    /// What it was started with, its port pinned, so `restart` can repeat it.
    env: Vec<(String, String)>,
}

impl Gateway {
    pub async fn start() -> Gateway {
        Gateway::start_with(&[]).await
    }

    /// Spawns the gateway and waits until `/health` answers 200.
    pub async fn start_with(env: &[(&str, &str)]) -> Gateway {
        let port = free_port();
        // The port first: `env` entries still override everything.
        let bind = ("PGCURSOR_BIND".to_string(), format!("127.0.0.1:{port}"));
        let env: Vec<(String, String)> = std::iter::once(bind)
            .chain(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .collect();
        let log = temp_path("pgcursor-gateway-log");
        let mut gateway = Gateway {
            base: format!("http://127.0.0.1:{port}"),
            child: Gateway::spawn(&env, &log),
            log,
            env,
        };
        gateway.wait_healthy().await;
        gateway
    }

    fn spawn(env: &[(String, String)], log: &Path) -> Child {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (mut cmd, _) = gateway_command(&env);
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open gateway log");
        cmd.stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e} (run `make build`)", gateway_bin().display()))
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
        self.child = Gateway::spawn(&self.env, &self.log);
        self.wait_healthy().await;
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

    async fn wait_healthy(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let client = client();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "gateway exited ({status}) before it was healthy:\n{}",
                    self.stderr()
                );
            }
            let health = client.get(self.url("/health")).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "gateway not healthy after {START_TIMEOUT:?}:\n{}",
                    self.stderr()
                );
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
