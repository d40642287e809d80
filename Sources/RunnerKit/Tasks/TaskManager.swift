import Foundation
import Synchronization

/// Holds at most one running task per key, and cancels on request.
///
/// A second `run` with a key that is running returns nil at once (the caller records
/// `duplicate`); the key is forgotten the moment its task ends, so memory does not grow with
/// the number of keys seen. The operation runs in the caller's own task (no task of its own):
/// a cancel by key cancels that task.
package final class TaskManager: Sendable {
    private struct Entry {
        let token: UInt64
        let startedAt: Date
        let cancellation: JobCancellation
    }

    private let state = Mutex<(entries: [String: Entry], nextToken: UInt64)>(([:], 0))

    package init() {}

    /// Runs `operation` as the task of `key`, unless a task with that key is running:
    /// then returns nil without running anything. Cancelling the caller cancels the task.
    package func run<T: Sendable>(key: String, _ operation: @escaping @Sendable () async -> T) async -> T? {
        await run(key: key, continuations: nil) { _ in await operation() }
    }

    /// `run(key:_:)` for the engine: `operation` gets the job's cancellation, through which it
    /// may go on in a fresh task once a deadline has used the cancellation of its own.
    func run<T: Sendable>(
        key: String, continuations: Continuations?, _ operation: @Sendable (JobCancellation) async -> T
    ) async -> T? {
        let cancellation = JobCancellation(continuations: continuations)
        let admitted: Bool = state.withLock { state in
            guard state.entries[key] == nil else { return false }
            state.nextToken += 1
            state.entries[key] = Entry(token: state.nextToken, startedAt: Date(), cancellation: cancellation)
            return true
        }
        guard admitted else { return nil }
        let value = await cancellation.running { await operation(cancellation) }
        state.withLock { state in
            if state.entries[key]?.cancellation === cancellation { state.entries[key] = nil }
        }
        return value
    }

    /// Cancels the running task of `key`; returns whether one was running. A job an engine
    /// admitted but that waits for a slot is not running yet: `JobEngine.cancel(key:reason:)`
    /// reaches it too.
    @discardableResult
    package func cancel(key: String) -> Bool { cancel(key: key, reason: nil) }

    /// Cancels the running task of `key`, its record saying `reason`; whether one was running.
    func cancel(key: String, reason: String?) -> Bool {
        guard let cancellation = state.withLock({ $0.entries[key]?.cancellation }) else { return false }
        cancellation.cancel(reason: reason)
        return true
    }

    /// Cancels every running task.
    package func cancelAll() {
        for cancellation in state.withLock({ $0.entries.values.map(\.cancellation) }) { cancellation.cancel() }
    }

    /// Stops every running task because the runner stops, not because the jobs should end: each
    /// stops as a cancelled one does (a cut body kept for a resume), but its end is not recorded
    /// and its feed is told it did not start (`FeedJob.End.notStarted`), so a shared queue hands it
    /// to another runner. What a stopping watcher does after its grace.
    package func releaseAll() {
        for cancellation in state.withLock({ $0.entries.values.map(\.cancellation) }) { cancellation.release() }
    }

    package func isRunning(key: String) -> Bool { state.withLock { $0.entries[key] != nil } }

    /// Number of running tasks.
    package var count: Int { state.withLock { $0.entries.count } }

    /// The running keys with the time each task started.
    package var running: [(key: String, startedAt: Date)] {
        state.withLock { $0.entries.map { ($0.key, $0.value.startedAt) } }
    }
}
