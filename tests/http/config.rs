//! A bad setting stops the gateway at once, with one line naming it.

use std::process::Stdio;
use std::time::Duration;

use pgcursor_tests::gateway_command;

/// Runs the gateway with `env`; returns (exit code, stderr).
async fn run_expecting_exit(env: &[(&str, &str)]) -> (Option<i32>, String) {
    let (cmd, _) = gateway_command(env);
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(10), cmd.output())
        .await
        .expect("the gateway should exit at once")
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn bad_settings_fail_startup_with_one_line() {
    for (var, value) in [
        ("PGCURSOR_POOL_SIZE", "abc"),
        ("PGCURSOR_POOL_SIZE", "0"),
        ("PGCURSOR_TOKENS", "x:superuser"),
        ("PGCURSOR_DB_TIMEOUT_MS", "-5"),
        ("PGCURSOR_BIND", "not-an-address"),
        ("PGCURSOR_ENCRYPTION_KEY", "abc123"),
        ("QUEEN_ENCRYPTION_KEY", "not hex at all"),
    ] {
        let (code, stderr) = run_expecting_exit(&[(var, value)]).await;
        assert_eq!(code, Some(2), "{var}={value}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{var}={value}: {stderr}");
        assert!(stderr.contains(var), "{var}={value}: {stderr}");
    }
}

#[tokio::test]
async fn a_bad_token_is_not_printed() {
    let (code, stderr) = run_expecting_exit(&[("PGCURSOR_TOKENS", "hunter2:root")]).await;
    assert_eq!(code, Some(2));
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

#[tokio::test]
async fn a_bad_encryption_key_is_not_printed() {
    let (code, stderr) = run_expecting_exit(&[("PGCURSOR_ENCRYPTION_KEY", "hunter2")]).await;
    assert_eq!(code, Some(2));
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// wire.md: without tokens, the gateway says loudly at start that anyone
/// who reaches it may do anything; with tokens, it does not.
#[tokio::test]
async fn authentication_off_is_said_at_start() {
    let open = pgcursor_tests::Gateway::start().await;
    let log = open.stderr();
    assert!(log.contains("WARN"), "{log}");
    assert!(log.contains("authentication is OFF"), "{log}");
    let closed = pgcursor_tests::Gateway::start_with(&[("PGCURSOR_TOKENS", "t:admin")]).await;
    let log = closed.stderr();
    assert!(!log.contains("authentication is OFF"), "{log}");
}
