//! The bench's own throwaway PostgreSQL cluster (scripts/pg.sh), stopped and
//! removed when dropped: at the end, on an error, on a panic or on Ctrl-C
//! (main drops the run future).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

pub struct Cluster {
    dir: PathBuf,
    pub url: String,
    workspace: PathBuf,
}

impl Cluster {
    /// `scripts/pg.sh start <tmpdir>/pg`. With `profile`, the cluster is
    /// restarted once with pg_stat_statements and auto_explain loaded
    /// (plans of statements slower than 50 ms go to the server log).
    pub fn start(workspace: &Path, profile: bool) -> Result<Cluster> {
        let dir = std::env::temp_dir().join(format!("pgcursor-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut cluster = Cluster {
            dir,
            url: String::new(),
            workspace: workspace.to_path_buf(),
        };
        cluster.url = cluster.pg("start")?;
        if profile {
            cluster.psql(
                "ALTER SYSTEM SET shared_preload_libraries = pg_stat_statements, auto_explain",
            )?;
            cluster.pg("stop")?;
            cluster.url = cluster.pg("start")?;
            // Known only once the libraries are loaded; all reloadable.
            for setting in [
                "pg_stat_statements.track = 'all'",
                "auto_explain.log_min_duration = '50ms'",
                "auto_explain.log_nested_statements = on",
            ] {
                cluster.psql(&format!("ALTER SYSTEM SET {setting}"))?;
            }
            cluster.psql("SELECT pg_reload_conf()")?;
        }
        Ok(cluster)
    }

    /// The postmaster's pid (first line of postmaster.pid).
    pub fn postmaster_pid(&self) -> Option<u32> {
        let pidfile = std::fs::read_to_string(self.dir.join("pg/postmaster.pid")).ok()?;
        pidfile.lines().next()?.trim().parse().ok()
    }

    /// Copies the server log (slow plans, with `profile`) to `to`.
    pub fn save_log(&self, to: &Path) -> Result<()> {
        std::fs::copy(self.dir.join("log/postgres.log"), to)?;
        Ok(())
    }

    /// One statement through psql (setup only; the load uses tokio-postgres).
    fn psql(&self, sql: &str) -> Result<()> {
        let out = Command::new("psql")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &self.url, "-c", sql])
            .output()?;
        if !out.status.success() {
            return Err(format!("psql {sql}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(())
    }

    fn pg(&self, action: &str) -> Result<String> {
        let out = Command::new("bash")
            .arg(self.workspace.join("scripts/pg.sh"))
            .arg(action)
            .arg(self.dir.join("pg"))
            .output()?;
        if !out.status.success() {
            return Err(format!(
                "scripts/pg.sh {action} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        Ok(stdout.lines().last().unwrap_or_default().trim().to_string())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.pg("stop");
        let _ = std::fs::remove_dir_all(&self.dir);
        eprintln!(
            "bench: cluster in {} stopped and removed",
            self.dir.display()
        );
    }
}
