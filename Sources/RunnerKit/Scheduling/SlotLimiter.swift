import Synchronization

/// Bounded concurrency: at most `limit` holders at once, waiters served first come, first served.
/// It also sums how long callers waited for a slot and how long slots were held (`usage`).
package final class SlotLimiter: Sendable {
    /// Time summed over every caller: waiting for a slot, and holding one.
    package struct Usage: Sendable {
        package var waited: Duration = .zero
        package var held: Duration = .zero
    }

    private struct State {
        var available: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var head = 0
        var nextID: UInt64 = 0
        var usage = Usage()
        /// When `usage.held` was last brought up to date.
        var counted = ContinuousClock.now

        /// Adds the time since the last change times the slots held meanwhile.
        mutating func countHeld(limit: Int) {
            let now = ContinuousClock.now
            usage.held += counted.duration(to: now) * (limit - available)
            counted = now
        }
    }

    package let limit: Int
    private let state: Mutex<State>

    package init(limit: Int) {
        precondition(limit > 0, "a limiter needs at least one slot")
        self.limit = limit
        self.state = Mutex(State(available: limit))
    }

    /// Waits for a slot. Throws `CancellationError` if the caller is cancelled while waiting.
    /// Returns how long the caller waited in line (zero when a slot was free); `onWait` is
    /// called when it joins the line.
    @discardableResult
    package func acquire(onWait: () -> Void = {}) async throws -> Duration {
        let limit = self.limit
        let id = state.withLock { state -> UInt64? in
            if state.available > 0 {
                state.countHeld(limit: limit)
                state.available -= 1
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return .zero }
        onWait()
        let began = ContinuousClock.now
        defer {
            let waited = began.duration(to: .now)
            state.withLock { $0.usage.waited += waited }
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Looked at again under the lock that joins the line: a slot released since
                // the look above found no waiter, so it is free now, and it is taken here.
                let next = state.withLock { state -> Joining in
                    if Task.isCancelled { return .cancelled }
                    if state.available > 0 {
                        state.countHeld(limit: limit)
                        state.available -= 1
                        return .tookFreeSlot
                    }
                    state.waiters.append((id, continuation))
                    return .waiting
                }
                switch next {
                case .waiting: break
                case .tookFreeSlot: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters[state.head...].firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
        return began.duration(to: .now)
    }

    private enum Joining { case waiting, tookFreeSlot, cancelled }

    /// Gives a slot back, handing it straight to the longest waiter if there is one.
    package func release() {
        let limit = self.limit
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            state.countHeld(limit: limit)
            if state.head < state.waiters.count {
                let waiter = state.waiters[state.head].continuation
                state.head += 1
                if state.head > 64 && state.head * 2 > state.waiters.count {
                    state.waiters.removeFirst(state.head)
                    state.head = 0
                }
                return waiter
            }
            state.available += 1
            return nil
        }
        next?.resume()
    }

    /// Slots free right now.
    package var available: Int { state.withLock { $0.available } }

    /// How long callers waited for a slot and held one, summed, up to now.
    package var usage: Usage {
        let limit = self.limit
        return state.withLock { state in
            state.countHeld(limit: limit)
            return state.usage
        }
    }

    /// Callers waiting in line right now.
    package var waiting: Int { state.withLock { $0.waiters.count - $0.head } }
}
