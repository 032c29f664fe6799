//! The futures a coroutine awaits in the runtime: a round of verbs and
//! RPCs ([`Round`]), a timer or the end of its passive rounds ([`Wait`]),
//! and one yield ([`YieldNow`]). No wakers: the worker's event loop polls
//! every coroutine whose slot says it is runnable (the parent's module
//! doc), so a future only reads its slot.
//!
//! Invariants: a `Wait` made to yield first returns `Pending` once before
//! it looks at its slot; a round's `failed` flag is consumed by the
//! `Round` that awaits it, so the next round starts clean.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{RoundFailed, Worker};

/// Future of [`Worker::submit`]: the round's [`Wait`], then whether it
/// failed.
pub struct Round<'w> {
    pub(super) wait: Wait<'w>,
    /// When a remote round of verbs only was posted: its round trip feeds
    /// [`Worker::verb_round_trip_ns`].
    pub(super) timed_from_ns: Option<u64>,
}

impl Future for Round<'_> {
    type Output = Result<(), RoundFailed>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.wait).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                let worker = self.wait.worker;
                let slot = &worker.slots[self.wait.co as usize];
                Poll::Ready(if slot.failed.replace(false) {
                    Err(RoundFailed)
                } else {
                    if let Some(posted_ns) = self.timed_from_ns {
                        worker.note_verb_round_trip(
                            worker.scheduled_at_ns.get().saturating_sub(posted_ns),
                        );
                    }
                    Ok(())
                })
            }
        }
    }
}

/// Future of [`Worker::sleep`] and [`Worker::drain`] (and inside [`Round`]).
pub struct Wait<'w> {
    pub(super) worker: &'w Worker,
    pub(super) co: u16,
    pub(super) must_yield: bool,
}

impl Future for Wait<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.must_yield {
            self.must_yield = false;
            return Poll::Pending;
        }
        let slot = &self.worker.slots[self.co as usize];
        if slot.runnable(self.worker.scheduled_at_ns.get()) {
            slot.draining.set(false);
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

pub struct YieldNow {
    pub(super) yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            Poll::Pending
        }
    }
}
