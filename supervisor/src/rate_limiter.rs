//! Per-principal rate limits: executions started per minute and tool calls per minute, as
//! token buckets that refill continuously (a principal allowed 60 a minute may burst 60, then
//! gets one a second). Buckets are keyed by principal name and survive a policy reload; a
//! reload that changes a principal's rate gives it a fresh bucket with the new rate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateKind {
    /// `executions_per_minute`.
    Executions,
    /// `tool_calls_per_minute`.
    ToolCalls,
}

impl RateKind {
    /// The policy key that sets this rate.
    pub fn policy_key(self) -> &'static str {
        match self {
            RateKind::Executions => "executions_per_minute",
            RateKind::ToolCalls => "tool_calls_per_minute",
        }
    }
}

/// Refused: the bucket is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimited {
    /// The rate that was exceeded, per minute.
    pub per_minute: u32,
    /// How long until the next one is allowed.
    pub retry_after: Duration,
}

/// One principal's bucket for one kind.
#[derive(Debug)]
pub struct RateBucket {
    per_minute: u32,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    tokens: f64,
    refilled: Instant,
}

impl RateBucket {
    fn new(per_minute: u32) -> Self {
        RateBucket {
            per_minute,
            state: Mutex::new(BucketState {
                tokens: f64::from(per_minute),
                refilled: Instant::now(),
            }),
        }
    }

    /// Takes one token, or says how long until one is available.
    pub fn try_take(&self) -> Result<(), RateLimited> {
        self.try_take_at(Instant::now())
    }

    fn try_take_at(&self, now: Instant) -> Result<(), RateLimited> {
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        // A poisoned lock only means another thread panicked mid-update of two numbers;
        // the numbers are still usable.
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let elapsed = now.saturating_duration_since(state.refilled).as_secs_f64();
        state.tokens = (state.tokens + elapsed * per_second).min(capacity);
        state.refilled = now;
        if state.tokens >= 1.0 {
            state.tokens -= 1.0;
            return Ok(());
        }
        let missing = 1.0 - state.tokens;
        Err(RateLimited {
            per_minute: self.per_minute,
            retry_after: Duration::from_secs_f64(missing / per_second),
        })
    }
}

/// All buckets of the daemon.
#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<(String, RateKind), Arc<RateBucket>>>,
}

impl RateLimiter {
    /// The bucket for `principal`'s `kind` at `per_minute`; `None` when there is no limit.
    pub fn bucket(
        &self,
        principal: &str,
        kind: RateKind,
        per_minute: Option<u32>,
    ) -> Option<Arc<RateBucket>> {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (principal.to_owned(), kind);
        let Some(per_minute) = per_minute else {
            buckets.remove(&key);
            return None;
        };
        let bucket = buckets
            .entry(key)
            .and_modify(|b| {
                if b.per_minute != per_minute {
                    *b = Arc::new(RateBucket::new(per_minute));
                }
            })
            .or_insert_with(|| Arc::new(RateBucket::new(per_minute)));
        Some(bucket.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_allows_a_burst_then_refills_steadily() {
        let bucket = RateBucket::new(60);
        let start = Instant::now();
        for _ in 0..60 {
            bucket.try_take_at(start).unwrap();
        }
        let refused = bucket.try_take_at(start).unwrap_err();
        assert_eq!(refused.per_minute, 60);
        assert!(
            refused.retry_after > Duration::from_millis(990)
                && refused.retry_after <= Duration::from_secs(1),
            "{refused:?}"
        );
        // One per second comes back.
        bucket
            .try_take_at(start + Duration::from_millis(1001))
            .unwrap();
        assert!(
            bucket
                .try_take_at(start + Duration::from_millis(1002))
                .is_err()
        );
        // Never more than the capacity, however long it rested.
        let later = start + Duration::from_secs(3600);
        for _ in 0..60 {
            bucket.try_take_at(later).unwrap();
        }
        assert!(bucket.try_take_at(later).is_err());
    }

    #[test]
    fn buckets_are_per_principal_and_follow_rate_changes() {
        let limiter = RateLimiter::default();
        assert!(limiter.bucket("a", RateKind::Executions, None).is_none());
        let a = limiter.bucket("a", RateKind::Executions, Some(1)).unwrap();
        a.try_take().unwrap();
        assert!(a.try_take().is_err());
        // Same rate: the same (empty) bucket; another principal or kind: its own.
        let again = limiter.bucket("a", RateKind::Executions, Some(1)).unwrap();
        assert!(again.try_take().is_err());
        let b = limiter.bucket("b", RateKind::Executions, Some(1)).unwrap();
        b.try_take().unwrap();
        let calls = limiter.bucket("a", RateKind::ToolCalls, Some(1)).unwrap();
        calls.try_take().unwrap();
        // A reload with a new rate starts a new bucket.
        let raised = limiter.bucket("a", RateKind::Executions, Some(5)).unwrap();
        raised.try_take().unwrap();
    }
}
