import Synchronization

/// One attempt under the policy: wait for connectivity, then run, all within a deadline.
///
/// ```
///   start ──► reachable? ──yes──► operation ──► completed
///               │ no                 ▲
///               ▼                    │ reachable
///             wait ──────────────────┘
///               │ at noticeAfter: "no network connection"
///   deadline ───┴──► offline (still waiting) | timedOut (operation running)
/// ```
/// When the host is reachable at once (the common case), the operation runs in one task and
/// the deadline is a timer that cancels it. Otherwise the waiting-then-operation task and the
/// deadline task race in one task group; the first to finish decides and the other is
/// cancelled. Either way the attempt returns only when the operation has ended, so nothing of
/// an attempt keeps running after it.
package struct AttemptPolicy: Sendable {
    package let clock: any Clock<Duration>
    package let monitor: any ConnectivityMonitoring
    /// Arms the deadline of an attempt that starts at once.
    package let deadlines: any DeadlineScheduling

    /// `deadlines` defaults to tasks sleeping on `clock`; production passes the process's
    /// `DeadlineTimer`, one thread for every deadline.
    package init(clock: any Clock<Duration> = ContinuousClock(), monitor: any ConnectivityMonitoring, deadlines: (any DeadlineScheduling)? = nil) {
        self.clock = clock
        self.monitor = monitor
        self.deadlines = deadlines ?? ClockDeadlines(clock: clock)
    }

    /// How an attempt ended.
    package enum Outcome<Value: Sendable>: Sendable {
        /// The operation ran to its end, returning or throwing.
        case completed(Result<Value, any Error>)
        /// The deadline came while waiting for connectivity; the operation never started.
        case offline
        /// The deadline came while the operation ran; it was cancelled.
        case timedOut
        /// The caller's task was cancelled.
        case cancelled
    }

    package struct Report<Value: Sendable>: Sendable {
        package var outcome: Outcome<Value>
        /// Time spent waiting for connectivity before the operation started (or until the end).
        package var waitedForNetwork: Duration
    }

    /// Runs `operation` once, when `host` is reachable, within `timeout`.
    /// `onNotice` is called once if the host is still unreachable after `noticeAfter`.
    package func attempt<Value: Sendable>(
        host: String,
        timeout: Duration,
        noticeAfter: Duration,
        onNotice: @escaping @Sendable () -> Void = {},
        onWaiting: () -> Void = {},
        operation: @escaping @Sendable () async throws -> Value
    ) async -> Report<Value> {
        await attempt(
            clock: clock, host: host, timeout: timeout, noticeAfter: noticeAfter, onNotice: onNotice, onWaiting: onWaiting,
            operation: operation)
    }

    /// `attempt` for the engine, whose job runs in one task: when the host is reachable at
    /// once, the operation runs in the calling task and the deadline cancels that task (not a
    /// task made for the attempt). `deadlineCancelledCaller` says when it did: the caller's task
    /// then stays cancelled, and what the job does next must run in another.
    func attemptInCallingTask<Value: Sendable>(
        host: String,
        timeout: Duration,
        noticeAfter: Duration,
        onNotice: @escaping @Sendable () -> Void,
        onWaiting: () -> Void,
        operation: @escaping @Sendable () async throws -> Value
    ) async -> (report: Report<Value>, deadlineCancelledCaller: Bool) {
        guard monitor.isReachable(host: host), let caller = RunningTask.current else {
            let report = await attempt(
                clock: clock, host: host, timeout: timeout, noticeAfter: noticeAfter, onNotice: onNotice, onWaiting: onWaiting,
                operation: operation)
            return (report, false)
        }
        // The caller is cancelled only while the operation runs: the deadline's action and the
        // end of the operation take this lock, so a deadline that comes as it ends is either
        // seen (and the task cancelled) or never acts.
        let deadline = Locked<(armed: Bool, fired: Bool)>((true, false))
        let disarm = deadlines.arm(after: timeout) {
            deadline.withLock { state in
                guard state.armed else { return }
                state.fired = true
                caller.cancel()
            }
        }
        let result: Result<Value, any Error>
        do {
            result = .success(try await operation())
        } catch {
            result = .failure(error)
        }
        let fired = deadline.withLock { state -> Bool in
            state.armed = false
            return state.fired
        }
        disarm()
        if case .failure = result {
            if fired { return (Report(outcome: .timedOut, waitedForNetwork: .zero), true) }
            if Task.isCancelled { return (Report(outcome: .cancelled, waitedForNetwork: .zero), false) }
        }
        return (Report(outcome: .completed(result), waitedForNetwork: .zero), fired)
    }

    private enum Phase { case waiting, running, ended }

    private enum Race<Value: Sendable>: Sendable {
        case completed(Result<Value, any Error>)
        case deadline
        case notice
        case cancelled
    }

    private func attempt<C: Clock, Value: Sendable>(
        clock: C,
        host: String,
        timeout: Duration,
        noticeAfter: Duration,
        onNotice: @escaping @Sendable () -> Void,
        onWaiting: () -> Void,
        operation: @escaping @Sendable () async throws -> Value
    ) async -> Report<Value> where C.Duration == Duration {
        let start = clock.now
        let deadline = start.advanced(by: timeout)
        let phase = Locked<(phase: Phase, waited: Duration)>((.waiting, .zero))
        let monitor = self.monitor
        let reachableNow = monitor.isReachable(host: host)
        if reachableNow {
            return await run(clock: clock, deadline: deadline, operation: operation)
        }
        onWaiting()

        let winner: Race<Value> = await withTaskGroup(of: Race<Value>.self) { group in
            group.addTask {
                if !reachableNow {
                    do {
                        try await monitor.waitUntilReachable(host: host)
                    } catch {
                        return .cancelled
                    }
                }
                let started = phase.withLock { state -> Bool in
                    guard state.phase == .waiting else { return false }
                    state.phase = .running
                    state.waited = start.duration(to: clock.now)
                    return true
                }
                guard started, !Task.isCancelled else { return .cancelled }
                do {
                    return .completed(.success(try await operation()))
                } catch {
                    return .completed(.failure(error))
                }
            }
            group.addTask {
                do {
                    try await clock.sleep(until: deadline, tolerance: nil)
                    return .deadline
                } catch {
                    return .cancelled
                }
            }
            if !reachableNow && noticeAfter < timeout {
                group.addTask {
                    do {
                        try await clock.sleep(until: start.advanced(by: noticeAfter), tolerance: nil)
                    } catch {
                        return .notice
                    }
                    if phase.withLock({ $0.phase == .waiting }) { onNotice() }
                    return .notice
                }
            }
            var decided: Race<Value> = .cancelled
            while let next = await group.next() {
                if case .notice = next { continue }
                if case .cancelled = next, !Task.isCancelled { continue }
                decided = next
                break
            }
            group.cancelAll()
            return decided
        }

        let (finalPhase, waited) = phase.withLock { state -> (Phase, Duration) in
            let before = state.phase
            if before == .waiting { state.waited = start.duration(to: clock.now) }
            state.phase = .ended
            return (before, state.waited)
        }
        switch winner {
        case .completed(let result):
            return Report(outcome: .completed(result), waitedForNetwork: waited)
        case .deadline:
            return Report(outcome: finalPhase == .running ? .timedOut : .offline, waitedForNetwork: waited)
        case .notice, .cancelled:
            return Report(outcome: .cancelled, waitedForNetwork: waited)
        }
    }

    /// The attempt when the host is reachable at once (nearly always): the operation runs in
    /// one task and the deadline is an armed timer that cancels it, rather than a second task
    /// sleeping in a race. An operation that returns a value is completed, even when the
    /// deadline came as it did; one that fails after the deadline came is timed out.
    private func run<C: Clock, Value: Sendable>(
        clock: C, deadline: C.Instant, operation: @escaping @Sendable () async throws -> Value
    ) async -> Report<Value> where C.Duration == Duration {
        let task = Task { try await operation() }
        let expired = Atomic<Bool>(false)
        let disarm = deadlines.arm(after: clock.now.duration(to: deadline)) {
            expired.store(true, ordering: .sequentiallyConsistent)
            task.cancel()
        }
        let result = await withTaskCancellationHandler {
            await task.result
        } onCancel: {
            task.cancel()
        }
        disarm()
        if case .failure = result {
            if expired.load(ordering: .sequentiallyConsistent) { return Report(outcome: .timedOut, waitedForNetwork: .zero) }
            if Task.isCancelled { return Report(outcome: .cancelled, waitedForNetwork: .zero) }
        }
        return Report(outcome: .completed(result), waitedForNetwork: .zero)
    }
}
