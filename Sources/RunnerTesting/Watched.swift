import Synchronization
import Testing

/// State shared between a test and the code it drives, with a way to wait until the state meets
/// a condition: every change wakes the waiters whose condition now holds, so nothing polls.
///
/// A wait is bounded by a limit of real time, which only keeps a broken test from hanging: when
/// it passes, the wait records an issue and returns false. It is never what a test measures.
public final class Watched<State: Sendable>: Sendable {
    private struct Waiter: Sendable {
        let id: UInt64
        let condition: @Sendable (State) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct Storage: Sendable {
        var state: State
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let storage: Mutex<Storage>

    /// Watched state, starting at `state`.
    public init(_ state: State) {
        storage = Mutex(Storage(state: state))
    }

    /// The state now.
    public var value: State { storage.withLock { $0.state } }

    /// Reads the state under the lock.
    public func read<Result: Sendable>(_ body: (State) -> Result) -> Result {
        storage.withLock { body($0.state) }
    }

    /// Changes the state under the lock, then wakes the waiters whose condition now holds.
    @discardableResult
    public func update<Result: Sendable>(_ body: (inout State) -> Result) -> Result {
        let (result, woken) = storage.withLock { storage -> (Result, [CheckedContinuation<Bool, Never>]) in
            let result = body(&storage.state)
            guard !storage.waiters.isEmpty else { return (result, []) }
            var woken: [CheckedContinuation<Bool, Never>] = []
            let state = storage.state
            storage.waiters.removeAll { waiter in
                guard waiter.condition(state) else { return false }
                woken.append(waiter.continuation)
                return true
            }
            return (result, woken)
        }
        for continuation in woken { continuation.resume(returning: true) }
        return result
    }

    /// Waits until `condition` holds (returns at once when it already does). Returns false, and
    /// records an issue saying `what` was awaited, when it does not hold within `limit`.
    @discardableResult
    public func wait(
        until condition: @escaping @Sendable (State) -> Bool, _ what: @autoclosure () -> String,
        limit: Duration = .seconds(5), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Bool {
        let met = await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.suspend(until: condition) }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !met {
            Issue.record("waited \(limit) for \(what()), in vain", sourceLocation: sourceLocation)
        }
        return met
    }

    /// Suspends until `condition` holds (true) or the task is cancelled (false).
    private func suspend(until condition: @escaping @Sendable (State) -> Bool) async -> Bool {
        let id = storage.withLock { storage -> UInt64 in
            storage.nextID += 1
            return storage.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = storage.withLock { storage -> Bool? in
                    if condition(storage.state) { return true }
                    if Task.isCancelled { return false }
                    storage.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = storage.withLock { storage -> Waiter? in
                guard let index = storage.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return storage.waiters.remove(at: index)
            }
            waiter?.continuation.resume(returning: false)
        }
    }
}
