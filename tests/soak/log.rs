//! What the workers record for the checker: every delivery, every ack
//! request with its per-item answers, every push. Each worker keeps its own
//! records and hands them over when it stops (no shared lock on the hot path).
//! Times are offsets from the start of the run on one monotonic clock.

use std::time::Duration;

use uuid::Uuid;

/// Time since the run started.
pub type Time = Duration;

/// One partition's share of a pop answer.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub queue: &'static str,
    pub group: &'static str,
    pub partition: Uuid,
    pub lease: Uuid,
    pub first: i64,
    pub last: i64,
    /// The transactionId delivered at `first` (checked against the table).
    pub first_txid: String,
    /// The pop was sent at `sent` and answered at `received`: the lease was
    /// taken somewhere in between.
    pub sent: Time,
    pub received: Time,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Completed,
    Failed,
    Retry,
    Dlq,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Retry => "retry",
            Status::Dlq => "dlq",
        }
    }

    pub fn is_nack(self) -> bool {
        self != Status::Completed
    }
}

/// How an ack item was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// POST /ack/batch
    Batch,
    /// POST /ack
    Single,
    /// The ack operation of a POST /transaction bundle (with a push to B).
    Transaction,
    /// Sent after a forced transaction-index purge: must not resolve.
    AfterPurge,
    /// Sent with a lease known to have expired: must be refused.
    Stale,
}

/// What the broker said about one item.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// No answer (aborted, timed out, 5xx, gateway killed): it may or may
    /// not have been applied.
    Unknown,
    Item {
        success: bool,
        error: Option<String>,
        lease_released: bool,
        dlq: bool,
        noop: bool,
    },
    /// A transaction bundle that answered `success: false`: nothing applied.
    RolledBack(String),
}

impl Answer {
    /// Definitely applied (`success: true`).
    pub fn succeeded(&self) -> bool {
        matches!(self, Answer::Item { success: true, .. })
    }

    /// Applied, or perhaps applied.
    pub fn maybe_applied(&self) -> bool {
        matches!(self, Answer::Unknown | Answer::Item { success: true, .. })
    }

    pub fn error(&self) -> Option<&str> {
        match self {
            Answer::Item { error, .. } => error.as_deref(),
            Answer::RolledBack(why) => Some(why),
            Answer::Unknown => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct AckedItem {
    pub offset: i64,
    pub txid: String,
    pub status: Status,
    pub answer: Answer,
}

/// One ack request (all its items are of one partition and one lease).
#[derive(Debug, Clone)]
pub struct AckRecord {
    pub kind: AckKind,
    pub group: &'static str,
    pub partition: Uuid,
    pub lease: Option<Uuid>,
    /// When the pop that delivered these messages was sent.
    pub popped: Time,
    pub sent: Time,
    /// When the answer came (None: no answer).
    pub received: Option<Time>,
    pub items: Vec<AckedItem>,
    /// For a transaction bundle: the transactionIds it pushed to queue B.
    pub pushed: Vec<String>,
}

/// What a producer knows about one of its messages in the end.
#[derive(Debug, Clone, PartialEq)]
pub enum PushOutcome {
    /// `queued` or `duplicate` at this place.
    Stored { partition: Uuid, offset: i64 },
    /// Never answered: it may or may not be there.
    InDoubt,
}

#[derive(Debug, Clone)]
pub struct Pushed {
    pub producer: usize,
    pub seq: u64,
    pub outcome: PushOutcome,
    /// First attempt sent, answer received: a purge in between may store it twice.
    pub first_sent: Time,
    pub answered: Option<Time>,
}

/// Everything one worker recorded.
#[derive(Debug, Default)]
pub struct WorkerLog {
    pub deliveries: Vec<Delivery>,
    pub acks: Vec<AckRecord>,
    pub pushed: Vec<Pushed>,
    /// Broken promises seen on the spot (wrong answers, bad batches).
    pub violations: Vec<String>,
    pub requests: u64,
    /// Requests with no answer: aborted on purpose, failed, 5xx.
    pub aborted: u64,
    pub unanswered: u64,
}

impl WorkerLog {
    pub fn merge(&mut self, other: WorkerLog) {
        self.deliveries.extend(other.deliveries);
        self.acks.extend(other.acks);
        self.pushed.extend(other.pushed);
        self.violations.extend(other.violations);
        self.requests += other.requests;
        self.aborted += other.aborted;
        self.unanswered += other.unanswered;
    }
}
