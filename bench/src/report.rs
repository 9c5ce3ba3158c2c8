//! Collects the runs, judges the targets, prints the table and writes
//! `latest.json`, `latest.md` and `throughput.svg`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::brokers::System;
use crate::machine::{Machine, Postgres};
use crate::profile::Statement;
use crate::scenario::ack_cost::AckCost;
use crate::scenario::ack_throughput::AckRun;
use crate::scenario::backlog::Backlogs;
use crate::scenario::end_to_end::E2eRun;
use crate::scenario::fan_out;
use crate::scenario::first_pop::{FirstPops, Variant};
use crate::scenario::step_cost::StepCost;
use crate::{Args, Result};

/// (d): the gateway's peak RSS must stay under this many kB at `--batch`,
/// and under the second at the extra batch sizes.
const RSS_LIMIT_KB: u64 = 30 * 1024;
const RSS_LIMIT_EXTRA_KB: u64 = 40 * 1024;
/// (b): pgcursor SQL over pgmq read→archive and read→delete at `--batch`,
/// and over read→delete at batch 1000; pgcursor HTTP over pgcursor SQL.
const E2E_VS_ARCHIVE: f64 = 1.5;
const E2E_VS_DELETE: f64 = 1.2;
const E2E_VS_DELETE_AT_1000: f64 = 1.0;
const HTTP_VS_SQL: f64 = 0.9;
/// (f): pgcursor's one-connection cycle over its floor, and the floor's
/// "put a batch in" over pgmq's send_batch (a message costs one heap row).
const CYCLE_OVER_FLOOR: f64 = 1.3;
const FLOOR_PUT_OVER_SEND: f64 = 1.2;
/// (i): a new group's first pop at the most partitions over the fewest, p50.
const FIRST_POP_LIMIT: f64 = 2.0;
/// (h): pop+ack p50 with the large backlog over with the small one.
const BACKLOG_LIMIT: f64 = 1.5;
/// (g): pgcursor's deliveries/s over pgmq's, fanning out to the groups.
const FAN_OUT_TARGET: f64 = 5.0;

#[derive(Debug, Serialize)]
pub struct Stamp {
    pub date_utc: String,
    pub command: String,
    /// Run by `make bench` / `make bench-quick`.
    pub via_make: bool,
    pub git: String,
    pub wall_seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct AckThroughput {
    pub sql: AckRun,
    pub http: AckRun,
    /// http / sql items per second.
    pub ratio: f64,
    pub gateway_peak_rss_kb: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Target {
    pub id: &'static str,
    pub what: String,
    pub value: f64,
    pub goal: String,
    /// PASS, FAIL, or INFO (no goal) / n/a (not measured).
    pub verdict: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Profiled {
    pub run: String,
    pub top_statements: Vec<Statement>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub stamp: Stamp,
    pub machine: Machine,
    pub postgres: Postgres,
    pub args: Args,
    pub targets: Vec<Target>,
    pub ack_throughput: Option<AckThroughput>,
    pub end_to_end: Vec<E2eRun>,
    pub ack_cost: Vec<AckCost>,
    pub step_cost: Vec<StepCost>,
    pub first_pop: FirstPops,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog: Option<Backlogs>,
    /// (g): `measured.done` counts a message once per group that acked it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fan_out: Vec<E2eRun>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<Profiled>,
}

impl Report {
    pub fn new(args: &Args, machine: Machine, postgres: Postgres) -> Report {
        Report {
            stamp: Stamp {
                date_utc: chrono::Utc::now()
                    .format("%Y-%m-%d %H:%M:%S UTC")
                    .to_string(),
                command: std::env::args().collect::<Vec<_>>().join(" "),
                via_make: std::env::var_os("MAKELEVEL").is_some(),
                git: git_describe(),
                wall_seconds: 0.0,
            },
            machine,
            postgres,
            args: args.clone(),
            targets: Vec::new(),
            ack_throughput: None,
            end_to_end: Vec::new(),
            ack_cost: Vec::new(),
            step_cost: Vec::new(),
            first_pop: FirstPops::default(),
            backlog: None,
            fan_out: Vec::new(),
            profile: Vec::new(),
        }
    }

    pub fn ack_throughput(&mut self, sql: AckRun, http: AckRun, rss: Option<u64>) {
        let ratio = http.measured.per_second / sql.measured.per_second.max(1e-9);
        self.ack_throughput = Some(AckThroughput {
            sql,
            http,
            ratio,
            gateway_peak_rss_kb: rss,
        });
    }

    pub fn end_to_end(&mut self, run: E2eRun) {
        self.end_to_end.push(run);
    }

    pub fn ack_cost(&mut self, costs: Vec<AckCost>) {
        self.ack_cost = costs;
    }

    pub fn step_cost(&mut self, costs: Vec<StepCost>) {
        self.step_cost = costs;
    }

    pub fn first_pop(&mut self, runs: FirstPops) {
        self.first_pop = runs;
    }

    pub fn backlog(&mut self, backlogs: Backlogs) {
        self.backlog = Some(backlogs);
    }

    pub fn fan_out(&mut self, runs: Vec<E2eRun>) {
        self.fan_out = runs;
    }

    pub fn profile(&mut self, run: &str, top_statements: Vec<Statement>) {
        self.profile.push(Profiled {
            run: run.to_string(),
            top_statements,
        });
    }

    /// Judges every target.
    pub fn finish(&mut self, wall: Duration) {
        self.stamp.wall_seconds = wall.as_secs_f64();
        versus_pgmq(&mut self.end_to_end);
        versus_pgmq(&mut self.fan_out);
        let mut targets = Vec::new();
        if let Some(a) = &self.ack_throughput {
            targets.push(judge(
                "a",
                format!(
                    "HTTP ack / direct ack_group, items/s ({:.0} / {:.0})",
                    a.http.measured.per_second, a.sql.measured.per_second
                ),
                a.ratio,
                ">= 0.80",
                a.ratio >= 0.8,
            ));
        }
        let e2e = |system, batch| {
            self.end_to_end
                .iter()
                .find(|r| r.system == system && r.batch == batch)
        };
        let batch = self.args.batch;
        let goals = [
            (System::PgmqArchive, batch, E2E_VS_ARCHIVE),
            (System::PgmqDelete, batch, E2E_VS_DELETE),
            (System::PgmqDelete, 1000, E2E_VS_DELETE_AT_1000),
        ];
        for (pgmq, at, goal) in goals {
            if let (Some(ours), Some(theirs)) = (e2e(System::PgcursorSql, at), e2e(pgmq, at)) {
                let ratio = ours.measured.per_second / theirs.measured.per_second.max(1e-9);
                targets.push(judge(
                    "b",
                    format!(
                        "pgcursor SQL / {} at batch {at}, msgs/s ({:.0} / {:.0})",
                        pgmq.name(),
                        ours.measured.per_second,
                        theirs.measured.per_second
                    ),
                    ratio,
                    &format!(">= {goal:.1}"),
                    ratio >= goal,
                ));
            }
        }
        if let (Some(http), Some(sql)) = (
            e2e(System::PgcursorHttp, batch),
            e2e(System::PgcursorSql, batch),
        ) {
            let ratio = http.measured.per_second / sql.measured.per_second.max(1e-9);
            targets.push(judge(
                "b'",
                format!(
                    "pgcursor HTTP / pgcursor SQL at batch {batch}, msgs/s ({:.0} / {:.0})",
                    http.measured.per_second, sql.measured.per_second
                ),
                ratio,
                &format!(">= {HTTP_VS_SQL:.1}"),
                ratio >= HTTP_VS_SQL,
            ));
            targets.push(http_without_gateway(http, sql));
        }
        if let (Some(small), Some(large)) = (self.ack_cost.first(), self.ack_cost.last()) {
            let ratio = large.server.p50_us as f64 / small.server.p50_us.max(1) as f64;
            targets.push(judge(
                "c",
                format!(
                    "ack of the last offset, batch {} / batch {}: server p50 ({} / {} µs; round trip {} / {} µs)",
                    large.batch,
                    small.batch,
                    large.server.p50_us,
                    small.server.p50_us,
                    large.round_trip.p50_us,
                    small.round_trip.p50_us
                ),
                ratio,
                "<= 1.5",
                ratio <= 1.5,
            ));
        }
        let cycle = |name: &str| {
            self.step_cost
                .iter()
                .find(|c| c.system.starts_with(name))
                .map(StepCost::cycle_p50_us)
        };
        if let (Some(floor), Some(ours)) = (cycle("floor"), cycle("pgcursor")) {
            let ratio = ours as f64 / floor.max(1) as f64;
            targets.push(judge(
                "f",
                format!(
                    "pgcursor's cycle over its floor, one connection ({ours} / {floor} µs per batch of {})",
                    self.args.batch
                ),
                ratio,
                &format!("<= {CYCLE_OVER_FLOOR:.1}"),
                ratio <= CYCLE_OVER_FLOOR,
            ));
            for pgmq in [System::PgmqArchive, System::PgmqDelete] {
                if let Some(theirs) = cycle(pgmq.name()) {
                    targets.push(info(
                        "f",
                        format!(
                            "{}'s cycle over pgcursor's floor, one connection ({theirs} / {floor} µs)",
                            pgmq.name()
                        ),
                        theirs as f64 / floor.max(1) as f64,
                    ));
                }
            }
        }
        let put = |name: &str| {
            self.step_cost
                .iter()
                .find(|c| c.system.starts_with(name))
                .map(|c| c.server[0].p50_us)
        };
        if let (Some(floor), Some(send)) = (put("floor"), put(System::PgmqDelete.name())) {
            let ratio = floor as f64 / send.max(1) as f64;
            targets.push(judge(
                "f",
                format!("the floor's put a batch in over pgmq's send_batch ({floor} / {send} µs)"),
                ratio,
                &format!("<= {FLOOR_PUT_OVER_SEND:.1}"),
                ratio <= FLOOR_PUT_OVER_SEND,
            ));
        }
        let batch = self.args.batch;
        let peak = |target_batch: bool| {
            self.ack_throughput
                .iter()
                .filter(|_| target_batch)
                .filter_map(|a| a.gateway_peak_rss_kb)
                .chain(
                    self.end_to_end
                        .iter()
                        .filter(|r| (r.batch == batch) == target_batch)
                        .filter_map(|r| r.gateway_peak_rss_kb),
                )
                .max()
        };
        if let Some(kb) = peak(true) {
            targets.push(judge(
                "d",
                format!("gateway peak RSS (VmHWM) during (a) and (b) at batch {batch}, MB"),
                kb as f64 / 1024.0,
                "<= 30",
                kb <= RSS_LIMIT_KB,
            ));
        }
        if let Some(kb) = peak(false) {
            targets.push(judge(
                "d",
                "gateway peak RSS during (b) at the extra batch sizes, MB".to_string(),
                kb as f64 / 1024.0,
                "<= 40",
                kb <= RSS_LIMIT_EXTRA_KB,
            ));
        }
        for run in self
            .end_to_end
            .iter()
            .filter(|r| r.batch == self.args.batch)
        {
            targets.push(info(
                "e",
                format!(
                    "{}: msgs/s per broker core (PostgreSQL+gateway used {:.2} of {} cores; {:.0} msgs/s per machine core)",
                    run.name,
                    run.measured.cores.broker(),
                    self.machine.nproc,
                    run.measured.per_second / self.machine.nproc as f64
                ),
                run.per_broker_core(),
            ));
        }
        targets.extend(self.fan_out_targets());
        targets.extend(self.backlog_target());
        targets.extend(self.first_pop_targets());
        self.targets = targets;
    }

    /// (i): per subscription variant, the first pop at the most partitions
    /// over the one at the fewest.
    fn first_pop_targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        for variant in Variant::ALL {
            let runs = self.first_pop.runs.iter().filter(|r| r.variant == variant);
            let fewest = runs.clone().min_by_key(|r| r.partitions);
            let most = runs.max_by_key(|r| r.partitions);
            if let (Some(small), Some(large)) = (fewest, most) {
                if small.partitions == large.partitions {
                    continue;
                }
                let ratio = large.round_trip.p50_us as f64 / small.round_trip.p50_us.max(1) as f64;
                targets.push(judge(
                    "i",
                    format!(
                        "a new group's first pop, {}: p50 at {} / at {} partitions \
                         ({:.2} / {:.2} ms; max {:.2} / {:.2} ms; server p50 {:.2} / {:.2} ms)",
                        variant.name(),
                        large.partitions,
                        small.partitions,
                        ms(large.round_trip.p50_us),
                        ms(small.round_trip.p50_us),
                        ms(large.round_trip.max_us),
                        ms(small.round_trip.max_us),
                        ms(large.server.p50_us),
                        ms(small.server.p50_us)
                    ),
                    ratio,
                    "<= 2.0",
                    ratio <= FIRST_POP_LIMIT,
                ));
            }
        }
        targets
    }

    /// (h): pop+ack p50, the large backlog over the small one.
    fn backlog_target(&self) -> Option<Target> {
        let b = self.backlog.as_ref()?;
        let (small, large) = (b.runs.first()?, b.runs.last()?);
        let ratio = large.cycle.p50_us as f64 / small.cycle.p50_us.max(1) as f64;
        Some(judge(
            "h",
            format!(
                "pop+ack of {} with {} / {} messages waiting: p50 ({:.2} / {:.2} ms; p99 {:.2} / {:.2} ms)",
                b.batch,
                large.waiting,
                small.waiting,
                ms(large.cycle.p50_us),
                ms(small.cycle.p50_us),
                ms(large.cycle.p99_us),
                ms(small.cycle.p99_us)
            ),
            ratio,
            "<= 1.5",
            ratio <= BACKLOG_LIMIT,
        ))
    }

    /// (g): deliveries/s against pgmq's, judged; producer msgs/s reported.
    fn fan_out_targets(&self) -> Vec<Target> {
        let run = |system| self.fan_out.iter().find(|r| r.system == system);
        let (Some(ours), Some(theirs)) = (run(System::PgcursorSql), run(System::PgmqDelete)) else {
            return Vec::new();
        };
        let ratio = ours.measured.per_second / theirs.measured.per_second.max(1e-9);
        vec![
            judge(
                "g",
                format!(
                    "fan-out to {} groups: pgcursor SQL / pgmq read→delete (a queue per group), deliveries/s ({:.0} / {:.0})",
                    fan_out::GROUPS,
                    ours.measured.per_second,
                    theirs.measured.per_second
                ),
                ratio,
                ">= 5.0",
                ratio >= FAN_OUT_TARGET,
            ),
            info(
                "g",
                format!(
                    "fan-out: producer msgs/s, pgcursor / pgmq ({:.0} / {:.0}; PostgreSQL cores {:.2} / {:.2})",
                    ours.measured.pushed_per_second,
                    theirs.measured.pushed_per_second,
                    ours.measured.cores.postgres,
                    theirs.measured.cores.postgres
                ),
                ours.measured.pushed_per_second / theirs.measured.pushed_per_second.max(1e-9),
            ),
        ]
    }

    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::create_dir_all(out)?;
        let markdown = self.markdown();
        println!("{markdown}");
        std::fs::write(
            out.join("latest.json"),
            serde_json::to_string_pretty(self)? + "\n",
        )?;
        std::fs::write(out.join("latest.md"), markdown)?;
        crate::chart::throughput(&self.end_to_end, &self.fan_out, &out.join("throughput.svg"))?;
        eprintln!(
            "bench: wrote {}/latest.{{json,md}} and throughput.svg",
            out.display()
        );
        Ok(())
    }

    fn markdown(&self) -> String {
        let mut md = String::new();
        let s = &self.stamp;
        let m = &self.machine;
        let pg = &self.postgres;
        let setting = |k: &str| pg.settings.get(k).map_or("?", String::as_str);
        let _ = writeln!(md, "# pgcursor bench — {}\n", s.date_utc);
        let _ = writeln!(
            md,
            "- command: `{}`{} (git {}, {:.0} s)",
            s.command,
            if s.via_make { " via make" } else { "" },
            s.git,
            s.wall_seconds
        );
        let _ = writeln!(
            md,
            "- machine: {} cores ({}), {} MB, kernel {}, load at start {}",
            m.nproc, m.cpu_model, m.memory_mb, m.kernel, m.load_average_at_start
        );
        let _ = writeln!(
            md,
            "- {}; fsync={}, synchronous_commit={}, full_page_writes={}, shared_buffers={}",
            pg.version.split(" on ").next().unwrap_or(&pg.version),
            setting("fsync"),
            setting("synchronous_commit"),
            setting("full_page_writes"),
            setting("shared_buffers")
        );
        let a = &self.args;
        let _ = writeln!(
            md,
            "- load: batch {}, {} producers, {} consumers (= ack workers), {} partitions, {} B payloads, pool {}, warm-up {} s, measured {} s\n",
            a.batch, a.producers, a.consumers, a.partitions, a.payload_bytes, a.pool_size, a.warmup, a.duration
        );

        let _ = writeln!(md, "## Targets\n");
        let _ = writeln!(
            md,
            "| | what | value | goal | verdict |\n|---|---|---:|---|---|"
        );
        for t in &self.targets {
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} | {} | {} |",
                t.id, t.what, t.value, t.goal, t.verdict
            );
        }

        if let Some(ack) = &self.ack_throughput {
            let _ = writeln!(
                md,
                "\n## (a) Ack throughput ({} items per request, one partition, lease-less, each moves a cursor)\n",
                a.batch
            );
            let _ = writeln!(md, "| via | items/s | p50 ms | p99 ms | cores pg | cores gw | bench cores | machine cores | items/s per pg+gw core | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for run in [&ack.sql, &ack.http] {
                let c = &run.measured.cores;
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {} |",
                    run.via,
                    run.measured.per_second,
                    ms(run.latency.p50_us),
                    ms(run.latency.p99_us),
                    c.postgres,
                    c.gateway,
                    c.bench,
                    c.machine,
                    run.measured.per_second / c.broker().max(1e-9),
                    run.measured.errors
                );
            }
        }

        if !self.end_to_end.is_empty() {
            let _ = writeln!(md, "\n## (b) End to end: push → pop → ack (msgs/s acked)\n");
            let _ = writeln!(md, "| system | batch | msgs/s | vs pgmq archive / delete | pushed/s | push p50/p99 ms | pop p50/p99 ms | ack p50/p99 ms | cores pg+gw | bench cores | machine cores | msgs/s per broker core | gw peak MB |\n|---|---:|---:|---|---:|---|---|---|---:|---:|---:|---:|---:|");
            for r in &self.end_to_end {
                let c = &r.measured.cores;
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {} |",
                    r.name,
                    r.batch,
                    r.measured.per_second,
                    match (r.vs_pgmq_archive, r.vs_pgmq_delete) {
                        (Some(a), Some(d)) => format!("{a:.2} / {d:.2}"),
                        _ => "-".to_string(),
                    },
                    r.measured.pushed_per_second,
                    ms(r.push.p50_us),
                    ms(r.push.p99_us),
                    ms(r.pop.p50_us),
                    ms(r.pop.p99_us),
                    ms(r.ack.p50_us),
                    ms(r.ack.p99_us),
                    c.broker(),
                    c.bench,
                    c.machine,
                    r.per_broker_core(),
                    r.gateway_peak_rss_kb
                        .map_or("-".to_string(), |kb| format!("{:.1}", kb as f64 / 1024.0))
                );
            }
        }

        if !self.ack_cost.is_empty() {
            let _ = writeln!(
                md,
                "\n## (c) Ack of a batch's last offset (one item, leased batch)\n"
            );
            let _ = writeln!(md, "| batch | calls | server p50 µs | server p99 µs | round trip p50 µs | round trip p99 µs |\n|---:|---:|---:|---:|---:|---:|");
            for c in &self.ack_cost {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} |",
                    c.batch,
                    c.server.count,
                    c.server.p50_us,
                    c.server.p99_us,
                    c.round_trip.p50_us,
                    c.round_trip.p99_us
                );
            }
        }

        if !self.step_cost.is_empty() {
            let _ = writeln!(
                md,
                "\n## (f) Cost per step, one connection, batch {}: server time p50 / p99 µs\n",
                a.batch
            );
            let _ = writeln!(md, "The floor is the work a pgcursor push, pop and ack cannot avoid, as plain SQL on copies of its tables. pgcursor's cycle over the floor is what its functions add (validation, jsonb answers, PL/pgSQL); pgmq's cycle over the floor is what pgcursor could gain per connection if they added nothing. Under (b)'s concurrent load every system loses efficiency differently, so these one-connection ratios explain (b) but do not bound it.\n");
            let _ = writeln!(md, "| system | put a batch in | take it out | complete it | cycle (sum of p50) | µs per message |\n|---|---|---|---|---:|---:|");
            for c in &self.step_cost {
                let step = |i: usize| {
                    format!(
                        "{}: {} / {}",
                        c.calls[i], c.server[i].p50_us, c.server[i].p99_us
                    )
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {:.1} |",
                    c.system,
                    step(0),
                    step(1),
                    step(2),
                    c.cycle_p50_us(),
                    c.cycle_p50_us() as f64 / a.batch as f64
                );
            }
        }

        self.fan_out_markdown(&mut md);
        self.backlog_markdown(&mut md);
        self.first_pop_markdown(&mut md);

        for p in &self.profile {
            let _ = writeln!(md, "\n### pg_stat_statements: {}\n", p.run);
            let _ = writeln!(
                md,
                "| total ms | calls | mean ms | rows | query |\n|---:|---:|---:|---:|---|"
            );
            for st in &p.top_statements {
                let _ = writeln!(
                    md,
                    "| {:.0} | {} | {:.3} | {} | `{}` |",
                    st.total_ms,
                    st.calls,
                    st.mean_ms,
                    st.rows,
                    st.query.replace('|', "\\|")
                );
            }
        }
        md
    }

    fn first_pop_markdown(&self, md: &mut String) {
        if self.first_pop.runs.is_empty() {
            return;
        }
        let _ = writeln!(
            md,
            "\n## (i) A new consumer group's first pop (writes cursor rows only where it claims; 5 other groups with a row on every partition)\n"
        );
        let _ = writeln!(md, "| subscription | partitions | pops | p50 ms | max ms | server p50 ms | server max ms | µs per partition (p50) |\n|---|---:|---:|---:|---:|---:|---:|---:|");
        for r in &self.first_pop.runs {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} |",
                r.name,
                r.partitions,
                r.round_trip.count,
                ms(r.round_trip.p50_us),
                ms(r.round_trip.max_us),
                ms(r.server.p50_us),
                ms(r.server.max_us),
                r.round_trip.p50_us as f64 / r.partitions.max(1) as f64
            );
        }
        let _ = writeln!(
            md,
            "\nCursor rows in the database (every queue): {} before the timed pops, {} after \
             (each round's fresh groups are deleted and the table vacuumed before the next).",
            self.first_pop.cursor_rows_before, self.first_pop.cursor_rows_after
        );
    }

    fn backlog_markdown(&self, md: &mut String) {
        let Some(b) = &self.backlog else {
            return;
        };
        let _ = writeln!(
            md,
            "\n## (h) Backlog independence: pop + ack of {} (SQL, one connection) by messages waiting over {} partitions\n",
            b.batch, b.partitions
        );
        let _ = writeln!(md, "| waiting | cycles | pop+ack p50 ms | p99 ms | max ms | pop p50 ms | ack p50 ms |\n|---:|---:|---:|---:|---:|---:|---:|");
        for r in &b.runs {
            let _ = writeln!(
                md,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r.waiting,
                r.cycle.count,
                ms(r.cycle.p50_us),
                ms(r.cycle.p99_us),
                ms(r.cycle.max_us),
                ms(r.pop.p50_us),
                ms(r.ack.p50_us)
            );
        }
        let _ = writeln!(
            md,
            "\nSeeding (untimed for the target): {} messages through `pgcursor.push` in {:.1} s ({:.0} msgs/s); \
             VACUUM (ANALYZE) and CHECKPOINT after it, {:.1} s. Each popped batch is pushed back, untimed, \
             so the backlog stays as seeded; both queues share the tables.",
            b.seed_messages,
            b.seed_seconds,
            b.seed_messages as f64 / b.seed_seconds.max(1e-9),
            b.settle_seconds
        );
    }

    fn fan_out_markdown(&self, md: &mut String) {
        if self.fan_out.is_empty() {
            return;
        }
        let a = &self.args;
        let _ = writeln!(
            md,
            "\n## (g) Fan-out: {} consumer groups each consuming everything, {} producers, batch {}\n",
            fan_out::GROUPS,
            a.producers,
            a.batch
        );
        let _ = writeln!(md, "pgcursor: one queue of {} partitions, a consumerGroup per group. pgmq: a queue per group, each batch sent to all of them in one statement, read→delete. Deliveries count a message once per group that acked it.\n", a.partitions);
        let _ = writeln!(md, "| system | deliveries/s | vs pgmq | producer msgs/s | push p50/p99 ms | pop p50/p99 ms | ack p50/p99 ms | cores pg | bench cores | machine cores | deliveries/s per pg core |\n|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|");
        for r in &self.fan_out {
            let c = &r.measured.cores;
            let _ = writeln!(
                md,
                "| {} | {:.0} | {} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2} | {:.2} | {:.2} | {:.0} |",
                r.name,
                r.measured.per_second,
                r.vs_pgmq_delete.map_or("-".to_string(), |v| format!("{v:.2}")),
                r.measured.pushed_per_second,
                ms(r.push.p50_us),
                ms(r.push.p99_us),
                ms(r.pop.p50_us),
                ms(r.pop.p99_us),
                ms(r.ack.p50_us),
                ms(r.ack.p99_us),
                c.postgres,
                c.bench,
                c.machine,
                r.per_broker_core()
            );
        }
    }
}

/// Sets each run's msgs/s over pgmq's at the same batch size, in one list.
fn versus_pgmq(runs: &mut [E2eRun]) {
    let rate = |runs: &[E2eRun], system, batch| {
        runs.iter()
            .find(|r: &&E2eRun| r.system == system && r.batch == batch)
            .map(|r| r.measured.per_second)
    };
    let all = runs.to_vec();
    for run in runs.iter_mut() {
        let ours = run.measured.per_second;
        run.vs_pgmq_archive =
            rate(&all, System::PgmqArchive, run.batch).map(|t| ours / t.max(1e-9));
        run.vs_pgmq_delete = rate(&all, System::PgmqDelete, run.batch).map(|t| ours / t.max(1e-9));
    }
}

/// (b') as it would read if the gateway cost no CPU, on a machine whose
/// cores the load generator shares: PostgreSQL's and the bench client's CPU
/// per message through SQL over the same through HTTP. The machine runs
/// near its cores in both, so msgs/s follows CPU per message; this is the
/// part of (b') the gateway cannot win back (bench/README.md).
fn http_without_gateway(http: &E2eRun, sql: &E2eRun) -> Target {
    let per_message = |run: &E2eRun, cores: f64| cores / run.measured.per_second.max(1e-9) * 1e6;
    let (h, s) = (&http.measured.cores, &sql.measured.cores);
    let sql_us = per_message(sql, s.postgres + s.bench);
    let http_us = per_message(http, h.postgres + h.bench);
    info(
        "b'",
        format!(
            "what (b') would read if the gateway used no CPU: PostgreSQL + bench client, \
             CPU µs per message, SQL / HTTP ({:.1} + {:.1} / {:.1} + {:.1}; the gateway {:.1})",
            per_message(sql, s.postgres),
            per_message(sql, s.bench),
            per_message(http, h.postgres),
            per_message(http, h.bench),
            per_message(http, h.gateway)
        ),
        sql_us / http_us.max(1e-9),
    )
}

fn judge(id: &'static str, what: String, value: f64, goal: &str, pass: bool) -> Target {
    Target {
        id,
        what,
        value,
        goal: goal.to_string(),
        verdict: if pass { "PASS" } else { "FAIL" },
    }
}

fn info(id: &'static str, what: String, value: f64) -> Target {
    Target {
        id,
        what,
        value,
        goal: "report".to_string(),
        verdict: "INFO",
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn git_describe() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty = git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{rev} + uncommitted changes")
    } else {
        rev
    }
}
