//! What an endpoint does about a peer the cluster declared dead or a lease
//! that ran out: fails what it has outstanding to that peer and never
//! waits on it again.

use super::*;

impl UcxEndpoint {
    /// Completes a batch to a dead (or failing) `target` as failed.
    pub(super) fn fail_now(&mut self, coroutine: u16, tag: u16, verbs: usize, target: NodeId) {
        let message = self.failed_completion(coroutine, tag, verbs as u16, target);
        self.state().inbox.push(message);
    }

    pub(super) fn failed_completion(
        &mut self,
        coroutine: u16,
        tag: u16,
        verbs: u16,
        target: NodeId,
    ) -> Message {
        let payload = self.state().pool.pop().unwrap_or_default();
        Message {
            src_node: target,
            src_worker: self.worker_index,
            dst_node: self.node,
            dst_worker: self.worker_index,
            coroutine,
            call: tag,
            kind: verbs,
            flags: MSG_COMPLETION | MSG_FAILED,
            deliver_at_ns: 0,
            payload,
        }
    }

    /// Whether this process may post now: its lease (if it has one) has
    /// not run out, or was renewed while it waited here. `false` once the
    /// run is abandoned — this rank was declared failed, and must not act
    /// on the survivors' memory any more.
    #[inline]
    pub(super) fn leased(&self) -> bool {
        let until = self.failure.lease_until_ns();
        until == u64::MAX || self.now_ns() < until || self.wait_for_lease()
    }

    #[cold]
    pub(super) fn wait_for_lease(&self) -> bool {
        loop {
            if self.failure.abandoned() {
                return false;
            }
            if self.now_ns() < self.failure.lease_until_ns() {
                return true;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Drops the messages in `out[first_new..]` that peers declared dead
    /// sent: a process the cluster failed over may still be running (it
    /// was frozen, or its connections stalled, long enough to be declared)
    /// and must not act on the survivors — its requests are not served,
    /// and its replies come to requests already failed (`awaiting` no
    /// longer has them) or about to be (`fail_dead_peers`). The failure
    /// completions this endpoint makes itself carry `MSG_FAILED` and stay.
    /// The order of the rest is kept.
    pub(super) fn drop_from_dead_peers(&mut self, out: &mut Vec<Message>, first_new: usize) {
        let mut keep = first_new;
        for read in first_new..out.len() {
            let msg = &mut out[read];
            if msg.src_node != self.node
                && msg.flags & MSG_FAILED == 0
                && self.failure.is_dead(msg.src_node)
            {
                let payload = std::mem::take(&mut msg.payload);
                self.state().pool.push(payload);
            } else {
                out.swap(keep, read);
                keep += 1;
            }
        }
        out.truncate(keep);
    }

    /// After the cluster declared peers dead: every request still awaiting
    /// their reply and every flight still outstanding to them completes
    /// now, as failed (the runtime then fails the rounds); a flight UCX
    /// still holds is leaked rather than recycled under it.
    pub(super) fn fail_dead_peers(&mut self) {
        let epoch = self.failure.dead_epoch();
        if !self.track || epoch == self.seen_dead_epoch {
            return;
        }
        self.seen_dead_epoch = epoch;
        let mut index = 0;
        while index < self.awaiting.len() {
            let awaited = self.awaiting[index];
            if !self.failure.is_dead(awaited.node) {
                index += 1;
                continue;
            }
            self.awaiting.swap_remove(index);
            let mut payload = self.state().pool.pop().unwrap_or_default();
            payload.clear();
            let message = Message {
                src_node: awaited.node,
                src_worker: self.worker_index,
                dst_node: self.node,
                dst_worker: self.worker_index,
                coroutine: awaited.coroutine,
                call: awaited.call,
                kind: awaited.kind,
                flags: awaited.fail_flags,
                deliver_at_ns: 0,
                payload,
            };
            self.state().inbox.push(message);
        }
        let mut index = 0;
        while index < self.in_flight.len() {
            let raw = self.in_flight[index];
            // SAFETY: a tracked flight is live until delivered or abandoned
            // (callbacks only run inside `progress`, not now).
            let (target, coroutine, tag, verbs) =
                unsafe { ((*raw).target, (*raw).coroutine, (*raw).tag, (*raw).verbs) };
            if !self.failure.is_dead(target) {
                index += 1;
                continue;
            }
            self.in_flight.swap_remove(index);
            // SAFETY: as above; from now on its callbacks never deliver it.
            unsafe { (*raw).abandoned = true };
            self.outstanding -= 1;
            let message = self.failed_completion(coroutine, tag, verbs, target);
            self.state().inbox.push(message);
        }
        for node in 0..self.links.len() {
            if self.failure.is_dead(node as NodeId) {
                self.links[node] = LinkOrder::default();
            }
        }
    }
}
