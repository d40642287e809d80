import Dispatch
import Synchronization

/// Work on a payload (parsing, walking a tree) that counts against the attempt's deadline
/// without holding a thread of the concurrency pool, where every other job's deadline runs.
///
/// Large work goes to threads of its own; the attempt awaits it, and when the attempt ends first
/// (the deadline, a cancel) it stops waiting at once and raises `stop`, which the work checks
/// now and then (`JSONParser` every few thousand values) to give up. Small work runs in place:
/// a hop to another thread would cost more than it.
package struct PayloadCheck: Sendable {
    /// Raised when nobody waits for the work any more; long work should check it and throw.
    package final class Stop: Sendable {
        private let raised = Atomic<Bool>(false)
        init() {}
        package var isRaised: Bool { raised.load(ordering: .relaxed) }
        func raise() { raised.store(true, ordering: .relaxed) }
    }

    /// Work on payloads of at least this many bytes leaves the concurrency pool.
    package static let offPoolBytes = 256 * 1024

    private static let queue = DispatchQueue(label: "runner.payload-checks", attributes: .concurrent)
    /// The flag of work done in place: nobody can stop waiting for it half-way.
    private static let neverRaised = Stop()

    /// Runs `work` (given the size of what it works on) inside the current attempt.
    package static func run<Value: Sendable>(
        bytes: Int, _ work: @escaping @Sendable (Stop) throws -> Value
    ) async throws -> Value {
        guard bytes >= offPoolBytes else {
            try Task.checkCancellation()
            return try work(neverRaised)
        }
        let stop = Stop()
        let state = Mutex<(continuation: CheckedContinuation<Value, any Error>?, done: Bool)>((nil, false))
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let cancelledAlready = state.withLock { state -> Bool in
                    if state.done { return true }
                    state.continuation = continuation
                    return false
                }
                if cancelledAlready {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                queue.async {
                    let result = Result { try work(stop) }
                    let waiting = state.withLock { state -> CheckedContinuation<Value, any Error>? in
                        state.done = true
                        defer { state.continuation = nil }
                        return state.continuation
                    }
                    waiting?.resume(with: result)
                }
            }
        } onCancel: {
            stop.raise()
            let waiting = state.withLock { state -> CheckedContinuation<Value, any Error>? in
                state.done = true
                defer { state.continuation = nil }
                return state.continuation
            }
            waiting?.resume(throwing: CancellationError())
        }
    }
}
