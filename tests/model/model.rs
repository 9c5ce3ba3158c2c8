//! A pure-Rust reference model of one (partition, consumer group), written
//! from docs/ack-contract.md (§1–§17), never from the SQL. It models exactly
//! what `pgcursor.ack_group(jsonb)` and `pgcursor.pop(jsonb)` do to one cursor
//! row and its dead letters.
//!
//! `Model::ack` runs the steps of `ack_group` under the SQL's names, in the
//! SQL's order: `refuse_all`, `resolve_ack_items`, the three values of
//! `tally_ack_items` (`lowest_nack`, `effective_status`, `completed_prefix`),
//! `decide_ack`, `write_ack`, `ack_results`.
//!
//! Readings of points the contract leaves open; docs/ack-contract.md §17
//! states them for users, and each is marked `READING` below:
//!
//! * R1 `leaseReleased` is read literally (§10: this group's cursor row holds
//!   no lease after the call; §1: released means the lease columns are
//!   empty): true iff, after the call, the cursor row holds no lease —
//!   whether this call cleared it or it was already clear. So every nack
//!   outcome and a no-nack call reaching the batch end report true, a
//!   no-nack call that keeps a lease reports false, a refused call (invalid
//!   lease) reports true iff the row holds no lease at all (an expired lease
//!   is not released: its columns are still there), and "partition not
//!   found" reports false (there is no cursor row, so no lease of this group
//!   that could have been released). A no-nack outcome releases (and resets
//!   the counter) only when a leased batch exists and the cursor reached its
//!   end; a call that releases no lease keeps the counter (§7).
//! * R2 `dlq:true` only on the items at `N` whose own instruction is in effect
//!   (the effective status at `N`, §4), never on superseded items at `N`,
//!   which are `noop` (§10: no dead-letter row on their account).
//! * R3 `noop` is true exactly for the six situations of §11; every item that
//!   is in effect after the call (a completed item in `(cursor, P]`, or an
//!   item at `N` with the effective status) is `noop:false`, also when
//!   another item of the same call would have moved the cursor as far on its
//!   own.
//! * R4 An explicit `dlq` dead-letters even when dead-lettering is off for the
//!   queue (both flags false): §7 has `dlq` dead-letter whatever the counter,
//!   and the switch of §9 only decides what `failed` does when the budget is
//!   spent.
//! * R5 Dead-letter reason (§9): "a nack item at N" is the first nack item at
//!   `N` in request order with a non-empty error; "the call's nack items" are
//!   all items of the call whose normalised status is a nack, whatever
//!   happened to them (not found, already completed, superseded). An empty
//!   string is no reason.
//! * R6 Several items at `N` with the same (effective) status are all in
//!   effect (none is "weaker", §5): all `success:true`, all `dlq` if
//!   dead-lettered.

use serde_json::Value;
use uuid::Uuid;

pub const ERR_LEASE: &str = "invalid or expired lease";
pub const ERR_NOT_FOUND: &str = "transaction not found";
pub const ERR_PARTITION: &str = "partition not found";
pub const ERR_ALREADY: &str = "already completed";
pub const ERR_SUPERSEDED: &str = "superseded by an earlier nack";
pub const DEFAULT_REASON: &str = "Retries exhausted";

/// A normalised status (§2). The derived order is the precedence at one
/// offset: dlq > failed > retry > completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Completed,
    Retry,
    Failed,
    Dlq,
}

impl Status {
    pub fn is_nack(self) -> bool {
        self != Status::Completed
    }

    /// As the SQL writes a normalised status.
    pub fn name(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Retry => "retry",
            Status::Failed => "failed",
            Status::Dlq => "dlq",
        }
    }
}

/// §2: exact, case-sensitive; absent or null is completed; anything else
/// (other strings, numbers, objects, booleans, arrays) is failed.
pub fn normalise(status: Option<&Value>) -> Status {
    match status {
        None | Some(Value::Null) => Status::Completed,
        Some(Value::String(s)) => match s.as_str() {
            "completed" => Status::Completed,
            "failed" => Status::Failed,
            "retry" => Status::Retry,
            "dlq" => Status::Dlq,
            _ => Status::Failed,
        },
        Some(_) => Status::Failed,
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub id: Uuid,
    /// `lease_expires_at <= now()`: the columns are still there (an expiry
    /// changes nothing by itself) but the lease is not live.
    pub expired: bool,
    pub batch_start: i64,
    pub batch_end: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    pub offset: i64,
    pub reason: String,
}

/// One ack item as `ack_group` sees it, status already normalised.
#[derive(Clone, Debug)]
pub struct AckItem {
    pub index: i64,
    pub transaction_id: String,
    pub status: Status,
    pub error: Option<String>,
}

/// One element of `ack_group`'s answer (§10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemResult {
    pub index: i64,
    pub transaction_id: String,
    pub success: bool,
    pub error: Option<String>,
    pub lease_released: bool,
    pub dlq: bool,
    pub noop: bool,
}

/// The state of one (partition, group) plus the partition's messages.
#[derive(Clone, Debug)]
pub struct Model {
    /// transactionId of offset `i` at index `i - 1`; `head = len`.
    pub txids: Vec<String>,
    pub cursor: i64,
    pub lease: Option<Lease>,
    pub retry_count: i64,
    pub retry_limit: i64,
    /// Off only when both flags are explicitly false.
    pub dead_lettering: bool,
    pub dead_letters: Vec<DeadLetter>,
    pub discarded: i64,
}

/// What one pop handed out: `start..=end` under `lease`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Popped {
    pub start: i64,
    pub end: i64,
}

impl Model {
    pub fn new(
        txids: Vec<String>,
        retry_limit: i64,
        dead_letter_queue: Option<bool>,
        dlq_after_max_retries: Option<bool>,
    ) -> Model {
        Model {
            txids,
            cursor: 0,
            lease: None,
            retry_count: 0,
            retry_limit,
            dead_lettering: !(dead_letter_queue == Some(false)
                && dlq_after_max_retries == Some(false)),
            dead_letters: Vec::new(),
            discarded: 0,
        }
    }

    pub fn head(&self) -> i64 {
        self.txids.len() as i64
    }

    pub fn lease_is_live(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| !l.expired)
    }

    /// The transaction index of this partition.
    pub fn resolve(&self, txid: &str) -> Option<i64> {
        self.txids
            .iter()
            .position(|t| t == txid)
            .map(|i| i as i64 + 1)
    }

    /// docs/http-api.md "Popping": nothing when the group's lease is live or nothing is
    /// pending; else lease `cursor+1 ..= min(cursor+batch, head)` under the
    /// new id. The retry counter is never touched.
    pub fn pop(&mut self, batch: i64, new_lease: Uuid) -> Option<Popped> {
        if self.lease_is_live() || self.cursor >= self.head() {
            return None;
        }
        let start = self.cursor + 1;
        let end = (self.cursor + batch).min(self.head());
        self.lease = Some(Lease {
            id: new_lease,
            expired: false,
            batch_start: start,
            batch_end: end,
        });
        Some(Popped { start, end })
    }

    /// §8: a lease that expires changes nothing in the database by itself.
    pub fn expire(&mut self) {
        if let Some(l) = self.lease.as_mut() {
            l.expired = true;
        }
    }

    /// A seek of the group (docs/http-api.md "Consumer groups"): the cursor
    /// moves to `to`, a lease is released, the retry counter reset; dead
    /// letters and totals stay.
    pub fn seek(&mut self, to: i64) {
        self.cursor = to;
        self.lease = None;
        self.retry_count = 0;
    }

    fn release(&mut self) {
        self.lease = None;
    }

    /// One `ack_group` call (docs/ack-contract.md §3–§9), in the steps and
    /// under the names of the SQL function, so a divergence names its step.
    pub fn ack(
        &mut self,
        partition_known: bool,
        lease_id: Option<Uuid>,
        items: &[AckItem],
    ) -> Vec<ItemResult> {
        if let Some((error, released)) = self.refusal(partition_known, lease_id) {
            return self.refuse_all(items, error, released);
        }
        let (offsets, decision) = self.ack_steps(items);
        let before = self.cursor;
        self.write_ack(&decision);
        self.ack_results(items, &offsets, before, &decision)
    }

    /// Why the whole call is refused, if it is: the error and whether the
    /// row holds no lease.
    pub fn refusal(
        &self,
        partition_known: bool,
        lease_id: Option<Uuid>,
    ) -> Option<(&'static str, bool)> {
        // §3 step 2: there is no cursor row, so no lease was released.
        if !partition_known {
            return Some((ERR_PARTITION, false));
        }
        // §3 step 3: only when a leaseId is given; it must be the live lease.
        let given = lease_id?;
        let live = self
            .lease
            .as_ref()
            .is_some_and(|l| l.id == given && !l.expired);
        // READING R1: released iff the row holds no lease at all.
        (!live).then_some((ERR_LEASE, self.lease.is_none()))
    }

    /// What the call resolves and decides before it writes anything
    /// (`resolve_ack_items`, then `decide_ack`), for a call that got past
    /// the partition and lease checks: the test compares these with the
    /// SQL's own steps so a divergence names the step.
    pub fn ack_steps(&self, items: &[AckItem]) -> (Vec<Option<i64>>, AckDecision) {
        let offsets = self.resolve_ack_items(items);
        let decision = self.decide_ack(items, &offsets);
        (offsets, decision)
    }

    /// §3 steps 2–3, §11: every item refused with `error`, nothing moves.
    fn refuse_all(&self, items: &[AckItem], error: &str, lease_released: bool) -> Vec<ItemResult> {
        items
            .iter()
            .map(|it| ItemResult {
                index: it.index,
                transaction_id: it.transaction_id.clone(),
                success: false,
                error: Some(error.to_string()),
                lease_released,
                dlq: false,
                noop: true,
            })
            .collect()
    }

    /// §2, §3 step 4: each item's offset through the transaction index (None:
    /// not found), in request order. Statuses arrive normalised
    /// (`normalise`), as `ack_group` normalises before resolving.
    fn resolve_ack_items(&self, items: &[AckItem]) -> Vec<Option<i64>> {
        items
            .iter()
            .map(|it| self.resolve(&it.transaction_id))
            .collect()
    }

    /// The items that still decide something (§3 step 6): resolved and above
    /// the cursor, as (item index, offset) in request order.
    fn live_ack_items<'a>(
        &'a self,
        offsets: &'a [Option<i64>],
    ) -> impl Iterator<Item = (usize, i64)> + 'a {
        offsets
            .iter()
            .enumerate()
            .filter_map(|(i, off)| off.map(|off| (i, off)))
            .filter(|(_, off)| *off > self.cursor)
    }

    /// §5: N, the lowest live offset whose effective status is a nack.
    fn lowest_nack(&self, items: &[AckItem], offsets: &[Option<i64>]) -> Option<i64> {
        self.live_ack_items(offsets)
            .filter(|(i, _)| items[*i].status.is_nack())
            .map(|(_, off)| off)
            .min()
    }

    /// §4: the strongest status at N (None without a nack).
    fn effective_status(
        &self,
        items: &[AckItem],
        offsets: &[Option<i64>],
        n: Option<i64>,
    ) -> Option<Status> {
        let n = n?;
        self.live_ack_items(offsets)
            .filter(|(_, off)| *off == n)
            .map(|(i, _)| items[i].status)
            .max()
    }

    /// §6: P = max(cursor, H), H the highest completed live offset below N
    /// (or overall without a nack).
    fn completed_prefix(&self, items: &[AckItem], offsets: &[Option<i64>], n: Option<i64>) -> i64 {
        self.live_ack_items(offsets)
            .filter(|(i, off)| items[*i].status == Status::Completed && n.is_none_or(|n| *off < n))
            .map(|(_, off)| off)
            .max()
            .map_or(self.cursor, |h| h.max(self.cursor))
    }

    /// §7–§9: what the call does to the cursor row, decided before anything
    /// is written.
    fn decide_ack(&self, items: &[AckItem], offsets: &[Option<i64>]) -> AckDecision {
        let nack_at = self.lowest_nack(items, offsets);
        let nack_status = self.effective_status(items, offsets, nack_at);
        let prefix = self.completed_prefix(items, offsets, nack_at);
        let mut d = AckDecision {
            nack_at,
            nack_status,
            prefix,
            cursor: prefix,
            retry_count: self.retry_count,
            release: true,
            terminal: false,
            dead_lettered: false,
            reason: None,
        };
        let (Some(n), Some(status)) = (nack_at, nack_status) else {
            // No nack. READING R1: a batch has to exist to be "reached"; a
            // call that releases nothing keeps the counter (§7).
            d.release = self.lease.as_ref().is_some_and(|l| prefix >= l.batch_end);
            if d.release {
                d.retry_count = 0;
            }
            return d;
        };
        match status {
            Status::Retry => {}
            Status::Failed if self.retry_count < self.retry_limit => d.retry_count += 1,
            // §9: both flags false, budget spent: N is discarded.
            Status::Failed if !self.dead_lettering => d.terminal = true,
            // READING R4 for dlq: dead-letters whatever the switch says.
            Status::Failed | Status::Dlq => {
                d.terminal = true;
                d.dead_lettered = true;
                d.reason = Some(self.dead_letter_reason(items, offsets, n));
            }
            Status::Completed => unreachable!("N is a nack"),
        }
        if d.terminal {
            d.cursor = n;
            d.retry_count = 0;
        }
        d
    }

    /// Applies a decision: cursor, retry counter, lease, the dead letter or
    /// the discarded count.
    fn write_ack(&mut self, d: &AckDecision) {
        self.cursor = d.cursor;
        self.retry_count = d.retry_count;
        if d.release {
            self.release();
        }
        if d.dead_lettered {
            self.dead_letters.push(DeadLetter {
                offset: d.nack_at.expect("a dead letter is at N"),
                reason: d.reason.clone().expect("a dead letter has a reason"),
            });
        } else if d.terminal {
            self.discarded += 1;
        }
    }

    /// §10, §11: the per-item answers, after `write_ack`; `before` is the
    /// cursor the call started from.
    fn ack_results(
        &self,
        items: &[AckItem],
        offsets: &[Option<i64>],
        before: i64,
        d: &AckDecision,
    ) -> Vec<ItemResult> {
        // READING R1: the state of the row after the call.
        let lease_released = self.lease.is_none();
        items
            .iter()
            .zip(offsets)
            .map(|(it, off)| {
                let mut r = ItemResult {
                    index: it.index,
                    transaction_id: it.transaction_id.clone(),
                    success: false,
                    error: None,
                    lease_released,
                    dlq: false,
                    noop: false,
                };
                match (*off, d.nack_at) {
                    (None, _) => {
                        r.error = Some(ERR_NOT_FOUND.into());
                        r.noop = true;
                    }
                    (Some(off), _) if off <= before => {
                        r.noop = true;
                        if it.status.is_nack() {
                            r.error = Some(ERR_ALREADY.into());
                        } else {
                            r.success = true;
                        }
                    }
                    // No nack: every live item is a completed one inside P.
                    (Some(_), None) => r.success = true,
                    // Below N: completed (N is the lowest nack), inside P.
                    (Some(off), Some(n)) if off < n => r.success = true,
                    // READING R6, R2: every item at N with the effective status.
                    (Some(off), Some(n)) if off == n && Some(it.status) == d.nack_status => {
                        r.success = true;
                        r.dlq = d.dead_lettered;
                    }
                    // §5: above N, or weaker at N.
                    (Some(_), Some(_)) => {
                        r.error = Some(ERR_SUPERSEDED.into());
                        r.noop = true;
                    }
                }
                r
            })
            .collect()
    }

    /// §9 dead-letter reason, READING R5: a nack item at N, else the first
    /// nack item of the call, in request order, with a non-empty error.
    fn dead_letter_reason(&self, items: &[AckItem], offsets: &[Option<i64>], n: i64) -> String {
        let usable = |i: usize| {
            let it = &items[i];
            if it.status.is_nack() {
                it.error.clone().filter(|e| !e.is_empty())
            } else {
                None
            }
        };
        (0..items.len())
            .filter(|i| offsets[*i] == Some(n))
            .find_map(usable)
            .or_else(|| (0..items.len()).find_map(usable))
            .unwrap_or_else(|| DEFAULT_REASON.to_string())
    }
}

/// What `decide_ack` decided for one call (§7): the row after the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckDecision {
    /// N (§5); None when the call holds no live nack.
    pub nack_at: Option<i64>,
    /// The effective status at N (§4).
    pub nack_status: Option<Status>,
    /// P, the completed prefix (§6).
    pub prefix: i64,
    /// The new cursor: P (§6), or N when N is terminal.
    pub cursor: i64,
    /// The new retry counter (§8).
    pub retry_count: i64,
    /// The lease on the row is released (whoever holds it, §7).
    pub release: bool,
    /// N is dead-lettered or discarded: the cursor moves onto it.
    pub terminal: bool,
    /// N is dead-lettered (terminal and not discarded).
    pub dead_lettered: bool,
    /// The dead letter's error (§9), when dead-lettered.
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    //! The docs/ack-contract.md §16 worked example: cursor 9, lease L over
    //! 10–19, retryLimit 3, counter 0 — plus the §2 table and the
    //! budget/discard/reason rules (§8, §9).
    use super::*;
    use serde_json::json;

    const L: Uuid = Uuid::from_u128(0x0198_f2c1_9a7b_7d20_8e31_4c5d_6e7f_8a90);

    fn example() -> Model {
        let mut m = Model::new((1..=25).map(|i| format!("t{i}")).collect(), 3, None, None);
        m.cursor = 9;
        m.lease = Some(Lease {
            id: L,
            expired: false,
            batch_start: 10,
            batch_end: 19,
        });
        m
    }

    fn item(index: i64, off: i64, status: Status) -> AckItem {
        AckItem {
            index,
            transaction_id: format!("t{off}"),
            status,
            error: None,
        }
    }

    fn kept(m: &Model) -> bool {
        m.lease.as_ref().is_some_and(|l| l.id == L)
    }

    /// (success, error, noop, dlq) of one result.
    fn sum(r: &ItemResult) -> (bool, Option<&str>, bool, bool) {
        (r.success, r.error.as_deref(), r.noop, r.dlq)
    }

    const OK: (bool, Option<&str>, bool, bool) = (true, None, false, false);
    const SUPERSEDED: (bool, Option<&str>, bool, bool) = (false, Some(ERR_SUPERSEDED), true, false);

    #[test]
    fn normalisation_table() {
        use Status::*;
        assert_eq!(normalise(Some(&json!("completed"))), Completed);
        assert_eq!(normalise(Some(&json!("failed"))), Failed);
        assert_eq!(normalise(Some(&json!("retry"))), Retry);
        assert_eq!(normalise(Some(&json!("dlq"))), Dlq);
        assert_eq!(normalise(None), Completed);
        assert_eq!(normalise(Some(&Value::Null)), Completed);
        for v in [
            json!("success"),
            json!("Completed"),
            json!("FAILED"),
            json!(""),
            json!(" dlq"),
            json!(1),
            json!({"status": "completed"}),
            json!(true),
        ] {
            assert_eq!(normalise(Some(&v)), Failed, "{v}");
        }
    }

    #[test]
    fn completed_19_with_lease_releases() {
        let mut m = example();
        let r = m.ack(true, Some(L), &[item(0, 19, Status::Completed)]);
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (19, true, 0));
        assert_eq!(sum(&r[0]), OK);
        assert!(r[0].lease_released);
    }

    #[test]
    fn completed_19_resets_counter() {
        let mut m = example();
        m.retry_count = 2;
        m.ack(true, Some(L), &[item(0, 19, Status::Completed)]);
        assert_eq!(m.retry_count, 0);
    }

    #[test]
    fn completed_14_keeps_lease() {
        let mut m = example();
        m.retry_count = 2;
        let r = m.ack(true, Some(L), &[item(0, 14, Status::Completed)]);
        assert_eq!((m.cursor, kept(&m), m.retry_count), (14, true, 2));
        assert_eq!(sum(&r[0]), OK);
        assert!(!r[0].lease_released);
    }

    #[test]
    fn completed_failed_completed() {
        let mut m = example();
        let r = m.ack(
            true,
            Some(L),
            &[
                item(0, 12, Status::Completed),
                item(1, 15, Status::Failed),
                item(2, 18, Status::Completed),
            ],
        );
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (12, true, 1));
        assert_eq!(sum(&r[0]), OK);
        assert_eq!(sum(&r[1]), OK);
        assert_eq!(sum(&r[2]), SUPERSEDED);
        assert!(r.iter().all(|r| r.lease_released));
        assert!(m.dead_letters.is_empty());
    }

    #[test]
    fn failed_15() {
        let mut m = example();
        let r = m.ack(true, Some(L), &[item(0, 15, Status::Failed)]);
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (9, true, 1));
        assert_eq!(sum(&r[0]), OK);
        assert!(r[0].lease_released);
    }

    #[test]
    fn retry_and_failed_at_15_failed_wins() {
        let mut m = example();
        let r = m.ack(
            true,
            Some(L),
            &[item(0, 15, Status::Retry), item(1, 15, Status::Failed)],
        );
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (9, true, 1));
        assert_eq!(sum(&r[0]), SUPERSEDED);
        assert_eq!(sum(&r[1]), OK);
    }

    #[test]
    fn dlq_15_completed_13() {
        let mut m = example();
        m.retry_count = 1;
        let r = m.ack(
            true,
            Some(L),
            &[item(0, 15, Status::Dlq), item(1, 13, Status::Completed)],
        );
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (15, true, 0));
        assert_eq!(sum(&r[0]), (true, None, false, true));
        assert_eq!(sum(&r[1]), OK);
        assert_eq!(
            m.dead_letters,
            vec![DeadLetter {
                offset: 15,
                reason: DEFAULT_REASON.into()
            }]
        );
    }

    #[test]
    fn completed_19_without_lease_while_l_held() {
        let mut m = example();
        let r = m.ack(true, None, &[item(0, 19, Status::Completed)]);
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (19, true, 0));
        assert_eq!(sum(&r[0]), OK);
        assert!(r[0].lease_released);
    }

    #[test]
    fn completed_19_after_l_expired() {
        let mut m = example();
        m.expire();
        let r = m.ack(true, Some(L), &[item(0, 19, Status::Completed)]);
        assert_eq!((m.cursor, m.retry_count), (9, 0));
        assert!(m.lease.as_ref().is_some_and(|l| l.expired));
        assert_eq!(sum(&r[0]), (false, Some(ERR_LEASE), true, false));
        assert!(!r[0].lease_released);
    }

    #[test]
    fn completed_8_is_a_noop_success() {
        for lease in [Some(L), None] {
            let mut m = example();
            let r = m.ack(true, lease, &[item(0, 8, Status::Completed)]);
            assert_eq!((m.cursor, kept(&m), m.retry_count), (9, true, 0));
            assert_eq!(sum(&r[0]), (true, None, true, false));
            assert!(!r[0].lease_released);
        }
    }

    #[test]
    fn failed_8_is_already_completed() {
        for lease in [Some(L), None] {
            let mut m = example();
            let r = m.ack(true, lease, &[item(0, 8, Status::Failed)]);
            assert_eq!((m.cursor, kept(&m), m.retry_count), (9, true, 0));
            assert_eq!(sum(&r[0]), (false, Some(ERR_ALREADY), true, false));
            assert!(!r[0].lease_released);
        }
    }

    #[test]
    fn wrong_lease_and_unknown_partition_refuse_everything() {
        let mut m = example();
        let r = m.ack(
            true,
            Some(Uuid::from_u128(7)),
            &[item(0, 19, Status::Completed), item(1, 99, Status::Failed)],
        );
        assert!(r
            .iter()
            .all(|r| sum(r) == (false, Some(ERR_LEASE), true, false)));
        let r = m.ack(false, None, &[item(0, 19, Status::Completed)]);
        assert_eq!(sum(&r[0]), (false, Some(ERR_PARTITION), true, false));
        assert_eq!((m.cursor, kept(&m)), (9, true));
    }

    #[test]
    fn unknown_transaction_is_reported() {
        let mut m = example();
        let r = m.ack(
            true,
            Some(L),
            &[item(0, 99, Status::Failed), item(1, 12, Status::Completed)],
        );
        assert_eq!(sum(&r[0]), (false, Some(ERR_NOT_FOUND), true, false));
        assert_eq!(sum(&r[1]), OK);
        assert_eq!((m.cursor, kept(&m), m.retry_count), (12, true, 0));
    }

    #[test]
    fn budget_runs_out_then_dead_letters_with_reason() {
        let mut m = example();
        m.retry_count = 3;
        let mut f = item(0, 15, Status::Failed);
        f.error = Some("downstream 502".into());
        let mut other = item(1, 17, Status::Retry);
        other.error = Some("other".into());
        let r = m.ack(true, None, &[other.clone(), f]);
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (15, true, 0));
        assert_eq!(sum(&r[0]), SUPERSEDED);
        assert_eq!(sum(&r[1]), (true, None, false, true));
        assert_eq!(m.dead_letters[0].reason, "downstream 502");

        // no reason at N: the first non-empty nack reason in request order
        let mut m = example();
        let mut empty = item(0, 12, Status::Dlq);
        empty.error = Some(String::new());
        let r = m.ack(true, None, &[empty, other]);
        assert!(r[0].dlq);
        assert_eq!((m.cursor, m.dead_letters[0].reason.as_str()), (12, "other"));
    }

    #[test]
    fn failed_counts_once_per_call() {
        let mut m = example();
        m.ack(
            true,
            Some(L),
            &[
                item(0, 15, Status::Failed),
                item(1, 15, Status::Failed),
                item(2, 16, Status::Failed),
            ],
        );
        assert_eq!(m.retry_count, 1);
    }

    #[test]
    fn discard_when_both_flags_false() {
        let mut m = example();
        m.dead_lettering = false;
        m.retry_count = 3;
        let r = m.ack(true, Some(L), &[item(0, 15, Status::Failed)]);
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (15, true, 0));
        assert_eq!((m.discarded, m.dead_letters.len()), (1, 0));
        assert_eq!(sum(&r[0]), OK);
        assert!(r[0].lease_released);
        assert!(Model::new(vec![], 3, Some(false), None).dead_lettering);
        assert!(Model::new(vec![], 3, None, Some(false)).dead_lettering);
        assert!(!Model::new(vec![], 3, Some(false), Some(false)).dead_lettering);
    }

    #[test]
    fn retry_limit_zero_dead_letters_first_failure() {
        let mut m = example();
        m.retry_limit = 0;
        m.ack(true, Some(L), &[item(0, 10, Status::Failed)]);
        assert_eq!((m.cursor, m.dead_letters.len()), (10, 1));
    }

    #[test]
    fn retry_keeps_counter_and_releases() {
        let mut m = example();
        m.retry_count = 2;
        let r = m.ack(
            true,
            Some(L),
            &[item(0, 11, Status::Completed), item(1, 13, Status::Retry)],
        );
        assert_eq!((m.cursor, m.lease.is_none(), m.retry_count), (11, true, 2));
        assert!(r.iter().all(|r| r.success && r.lease_released));
    }

    #[test]
    fn lease_released_is_the_state_after_the_call() {
        // no lease on the row: even a noop or a refused call ends released
        let mut m = example();
        m.lease = None;
        let r = m.ack(true, None, &[item(0, 8, Status::Completed)]);
        assert!(r[0].lease_released && r[0].noop);
        let r = m.ack(true, Some(L), &[item(0, 12, Status::Completed)]);
        assert_eq!(sum(&r[0]), (false, Some(ERR_LEASE), true, false));
        assert!(r[0].lease_released);
        let r = m.ack(true, None, &[item(0, 12, Status::Completed)]);
        assert!(r[0].lease_released && r[0].success && !r[0].noop);
        assert_eq!((m.cursor, m.retry_count), (12, 0));
        // unknown partition: no row, nothing released
        let r = m.ack(false, None, &[item(0, 13, Status::Completed)]);
        assert!(!r[0].lease_released);
    }

    #[test]
    fn pop_respects_live_lease_and_head() {
        let mut m = Model::new((1..=5).map(|i| format!("t{i}")).collect(), 3, None, None);
        let a = Uuid::from_u128(1);
        assert_eq!(m.pop(3, a), Some(Popped { start: 1, end: 3 }));
        assert_eq!(m.pop(3, Uuid::from_u128(2)), None);
        m.expire();
        assert_eq!(
            m.pop(6, Uuid::from_u128(3)),
            Some(Popped { start: 1, end: 5 })
        );
        m.ack(true, None, &[item(0, 5, Status::Completed)]);
        assert_eq!(m.pop(1, Uuid::from_u128(4)), None);
    }
}
