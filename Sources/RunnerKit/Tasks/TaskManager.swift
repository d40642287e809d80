import Foundation
import Synchronization

/// Holds at most one running task per key, and cancels on request.
///
/// A second `run` with a key that is running returns nil at once (the caller records
/// `duplicate`); the key is forgotten the moment its task ends, so memory does not grow with
/// the number of keys seen.
public final class TaskManager: Sendable {
    private struct Entry {
        let token: UInt64
        let startedAt: Date
        var cancel: (@Sendable () -> Void)?
        var cancelRequested = false
    }

    private let state = Mutex<(entries: [String: Entry], nextToken: UInt64)>(([:], 0))

    public init() {}

    /// Runs `operation` as the task of `key`, unless a task with that key is running:
    /// then returns nil without running anything. Cancelling the caller cancels the task.
    public func run<T: Sendable>(key: String, _ operation: @escaping @Sendable () async -> T) async -> T? {
        let token: UInt64? = state.withLock { state in
            guard state.entries[key] == nil else { return nil }
            state.nextToken += 1
            state.entries[key] = Entry(token: state.nextToken, startedAt: Date())
            return state.nextToken
        }
        guard let token else { return nil }
        let task = Task { await operation() }
        let cancelNow = state.withLock { state -> Bool in
            guard state.entries[key]?.token == token else { return true }
            state.entries[key]?.cancel = { task.cancel() }
            return state.entries[key]?.cancelRequested ?? false
        }
        if cancelNow { task.cancel() }
        let value = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        state.withLock { state in
            if state.entries[key]?.token == token { state.entries[key] = nil }
        }
        return value
    }

    /// Cancels the running task of `key`; returns whether one was running.
    @discardableResult
    public func cancel(key: String) -> Bool {
        let cancel = state.withLock { state -> (@Sendable () -> Void)?? in
            guard state.entries[key] != nil else { return nil }
            state.entries[key]?.cancelRequested = true
            return .some(state.entries[key]?.cancel)
        }
        guard let cancel else { return false }
        cancel?()
        return true
    }

    /// Cancels every running task.
    public func cancelAll() {
        let cancels = state.withLock { state -> [(@Sendable () -> Void)?] in
            for key in state.entries.keys { state.entries[key]?.cancelRequested = true }
            return state.entries.values.map(\.cancel)
        }
        for cancel in cancels { cancel?() }
    }

    public func isRunning(key: String) -> Bool { state.withLock { $0.entries[key] != nil } }

    /// Number of running tasks.
    public var count: Int { state.withLock { $0.entries.count } }

    /// The running keys with the time each task started.
    public var running: [(key: String, startedAt: Date)] {
        state.withLock { $0.entries.map { ($0.key, $0.value.startedAt) } }
    }
}
