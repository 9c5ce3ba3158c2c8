//! Waiting pops that can only claim the same messages take turns to look.
//!
//! A push wakes every pop waiting on its queue (notify.rs). Each used to
//! look again at once: 50 consumers of one group long-polling one queue ran
//! 46 pops for every push of one message, 45 of them finding nothing, each
//! reading the group's row on every partition (3 pops a push since). Waiting pops of one consumer
//! group on one queue (or namespace and task, or partition) are one *kind*:
//! what one of them could claim, any could. So they look one at a time,
//! and a pop woken by a push goes back to waiting when a look of its kind
//! that began after it was woken found nothing. Messages no push announces
//! (a lease expiring, delayedProcessing or windowBuffer letting them
//! through) are looked for when the kind's last empty look said they would
//! be due, and at the latest RECHECK after it, whoever made it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;
use tokio::sync::MutexGuard;
use tokio::time::Instant;

/// The kinds that have a waiting pop, by key.
#[derive(Default)]
pub struct Turns {
    kinds: Mutex<HashMap<String, Weak<Kind>>>,
}

/// What the waiting pops of one kind share.
#[derive(Default)]
pub struct Kind {
    turn: tokio::sync::Mutex<()>,
    /// The latest look that found nothing.
    empty: Mutex<Option<Empty>>,
}

/// A look that claimed nothing: when it began, and when a pop of its kind
/// should look again if no push comes first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Empty {
    pub began: Instant,
    pub next: Instant,
}

impl Turns {
    /// The kind of a pop with these `pgcursor.pop` arguments, shared while
    /// any pop of the kind holds it.
    pub fn kind_of(&self, arguments: &Value) -> Arc<Kind> {
        let key = key(arguments);
        let mut kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kind) = kinds.get(&key).and_then(Weak::upgrade) {
            return kind;
        }
        kinds.retain(|_, kind| kind.strong_count() > 0);
        let kind = Arc::new(Kind::default());
        kinds.insert(key, Arc::downgrade(&kind));
        kind
    }
}

/// What decides which messages a pop can claim: where it pops from, and
/// for which group. (Batch, bytes and autoAck say how many and how; the
/// subscription options matter at a group's first pop only, which every
/// waiting pop has made before it waits.)
fn key(arguments: &Value) -> String {
    let part = |name| arguments.get(name).cloned().unwrap_or(Value::Null);
    Value::Array(
        ["queue", "partition", "namespace", "task", "consumerGroup"]
            .into_iter()
            .map(part)
            .collect(),
    )
    .to_string()
}

impl Kind {
    /// Waits until no other pop of the kind is looking.
    pub async fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock().await
    }

    /// A look of the kind that began at `began` claimed nothing; `next` is
    /// when to look again without a push.
    pub fn found_nothing(&self, empty: Empty) {
        let mut latest = self.empty.lock().unwrap_or_else(|e| e.into_inner());
        if latest.is_none_or(|l| l.began < empty.began) {
            *latest = Some(empty);
        }
    }

    /// The latest look of the kind that claimed nothing.
    pub fn last_empty(&self) -> Option<Empty> {
        *self.empty.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn pops_of_one_group_and_queue_are_one_kind_whatever_their_batch() {
        let turns = Turns::default();
        let a = turns.kind_of(&json!({"queue": "q", "consumerGroup": "g", "batch": "5"}));
        let b = turns.kind_of(&json!({"queue": "q", "consumerGroup": "g", "autoAck": "true"}));
        assert!(Arc::ptr_eq(&a, &b));
        for other in [
            json!({"queue": "q", "consumerGroup": "h"}),
            json!({"queue": "q"}),
            json!({"queue": "q", "consumerGroup": "g", "partition": "p"}),
            json!({"namespace": "q", "consumerGroup": "g"}),
        ] {
            assert!(!Arc::ptr_eq(&a, &turns.kind_of(&other)), "{other}");
        }
    }

    #[test]
    fn a_kind_is_forgotten_once_no_pop_holds_it() {
        let turns = Turns::default();
        let first = turns.kind_of(&json!({"queue": "q"}));
        let now = Instant::now();
        first.found_nothing(Empty {
            began: now,
            next: now,
        });
        drop(first);
        assert_eq!(turns.kind_of(&json!({"queue": "q"})).last_empty(), None);
        assert_eq!(turns.kinds.lock().unwrap().len(), 1);
    }

    #[test]
    fn the_latest_empty_look_is_kept() {
        let kind = Kind::default();
        let early = Instant::now();
        let late = early + Duration::from_millis(5);
        let later = Empty {
            began: late,
            next: late + Duration::from_secs(1),
        };
        kind.found_nothing(later);
        kind.found_nothing(Empty {
            began: early,
            next: early,
        });
        assert_eq!(kind.last_empty(), Some(later));
    }
}
