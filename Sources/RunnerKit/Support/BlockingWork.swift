import Dispatch
import Synchronization

/// The one home of the calls that block (a payload read back and hashed, a partial file's
/// sidecar and its syncs, `syncfs`, `getaddrinfo`) and so
/// must stay off Swift's concurrency pool, whose few threads must never wait on a disk or a
/// socket. Each lane is a thread of its own running its work in order, except `calls`, whose
/// calls run side by side. The engine's configuration hands one in (`shared` by default); a
/// database store keeps its connections' threads.
package final class BlockingWork: Sendable {
    /// Where work runs.
    package enum Lane: Sendable {
        /// Large bodies hashed as they are read back from the page cache, in order.
        case hashing
        /// Partial files' sidecars and the syncs before them, in order.
        case partials
        /// `syncfs` and other syncs a feed or a hook waits for, in order.
        case syncs
        /// Calls that may each take long and do not depend on each other (name lookups, a
        /// page's posted job files and spool cancels), side by side.
        case calls
    }

    /// The process's: its threads sleep while there is no work, and end with the process.
    package static let shared = BlockingWork()

    private let hashing = BlockingThread(name: "runner.hash")
    private let partials = BlockingThread(name: "runner.partials")
    private let syncs = BlockingThread(name: "runner.syncs")
    private let calls = DispatchQueue(label: "runner.calls", attributes: .concurrent)

    package init() {}

    /// The lanes' threads end once the work handed to them ran.
    deinit {
        for thread in [hashing, partials, syncs] { thread.stop() }
    }

    /// Runs `body` on `lane` without waiting for it.
    package func enqueue(on lane: Lane, _ body: @escaping @Sendable () -> Void) {
        switch lane {
        case .hashing: hashing.enqueue(body)
        case .partials: partials.enqueue(body)
        case .syncs: syncs.enqueue(body)
        case .calls: calls.async(execute: body)
        }
    }

    /// Runs `body` on `lane` and waits for what it returns, whatever happens to the caller
    /// meanwhile: for what must be done (a partial's sidecar kept, a read whose answer is needed).
    package func perform<Value: Sendable>(on lane: Lane, _ body: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            enqueue(on: lane) { continuation.resume(returning: body()) }
        }
    }

    /// Returns once the work queued on `lane` so far ran (a lane that runs in order).
    package func after(_ lane: Lane) async {
        await perform(on: lane) {}
    }

    /// `lane` as a value to hand on: work queued on it, or performed and waited for.
    package func lane(_ lane: Lane) -> Queue { Queue(work: self, lane: lane) }

    /// One lane of a `BlockingWork`.
    package struct Queue: Sendable {
        let work: BlockingWork
        let lane: Lane

        /// Runs `body` without waiting for it.
        package func enqueue(_ body: @escaping @Sendable () -> Void) { work.enqueue(on: lane, body) }

        /// Runs `body` and waits for what it returns, whatever happens to the caller meanwhile.
        package func run<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Value { await work.perform(on: lane, body) }
    }

    /// Runs `body` on `lane` and returns what it returned. A caller cancelled before `body`
    /// started gets `CancellationError` at once and `body` never runs; one that started runs to
    /// its end (a blocking call cannot be interrupted) and its answer is dropped.
    package func run<Value: Sendable>(on lane: Lane, _ body: @escaping @Sendable () -> Value) async throws(CancellationError) -> Value {
        let call = Call<Value>()
        let result: Result<Value, CancellationError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                guard call.wait(continuation) else { return }
                enqueue(on: lane) {
                    guard call.start() else { return }
                    call.finish(.success(body()))
                }
            }
        } onCancel: {
            call.finish(.failure(CancellationError()))
        }
        return try result.get()
    }
}

/// One call's way back to its caller: answered once, by its work or by the caller's cancel.
private final class Call<Value: Sendable>: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Result<Value, CancellationError>, Never>, started: Bool)
        case answered
    }
    private let state = Mutex<State>(.idle)

    /// Keeps the caller's continuation; false (and answered) when the caller was cancelled first.
    func wait(_ continuation: CheckedContinuation<Result<Value, CancellationError>, Never>) -> Bool {
        let cancelled = state.withLock { state -> Bool in
            if case .answered = state { return true }
            state = .waiting(continuation, started: false)
            return false
        }
        if cancelled { continuation.resume(returning: .failure(CancellationError())) }
        return !cancelled
    }

    /// The work starts: false when the caller is gone, and the work is skipped.
    func start() -> Bool {
        state.withLock { state in
            guard case .waiting(let continuation, _) = state else { return false }
            state = .waiting(continuation, started: true)
            return true
        }
    }

    func finish(_ result: Result<Value, CancellationError>) {
        let continuation = state.withLock { state -> CheckedContinuation<Result<Value, CancellationError>, Never>? in
            switch state {
            case .idle:
                state = .answered
                return nil
            case .waiting(let continuation, _):
                state = .answered
                return continuation
            case .answered:
                return nil
            }
        }
        continuation?.resume(returning: result)
    }
}
