import Synchronization

/// The calling task, held only while it runs (its holder clears it before the task may end).
struct RunningTask: @unchecked Sendable {  // an UnsafeCurrentTask used only while its task is alive
    let task: UnsafeCurrentTask

    /// The task this is called from; nil outside a task.
    static var current: RunningTask? { withUnsafeCurrentTask { $0.map(RunningTask.init) } }

    func cancel() { task.cancel() }
}

/// How one job is cancelled (by key, or with its run), wherever its work runs.
///
/// A job runs in one task, its own. A deadline ends an attempt by cancelling that task, and a
/// task's cancellation cannot be undone: when the job must go on after that (a retry, its
/// children), it goes on in a fresh task (`inFreshTask`), which a cancel by key or of the run
/// then reaches instead. That is rare; the common job never makes a second task.
final class JobCancellation: Sendable {
    private enum Target {
        case running(RunningTask)
        case fresh(@Sendable () -> Void)

        func cancel() {
            switch self {
            case .running(let task): task.cancel()
            case .fresh(let cancel): cancel()
            }
        }
    }

    /// Where the job's work runs now (nil before and after), and whether a cancel was asked for.
    /// A running task is cancelled only under this lock, while it is known to be alive.
    private let state = Mutex<(target: Target?, requested: Bool, released: Bool, reason: String?)>((nil, false, false, nil))
    /// Fresh tasks of the group this job belongs to, cancelled with the group's task.
    private let continuations: Continuations?

    init(continuations: Continuations?) {
        self.continuations = continuations
    }

    /// Runs `body` in the calling task, as the job's.
    func running<T>(_ body: () async -> T) async -> T {
        let current = RunningTask.current
        let cancelNow = state.withLock { state -> Bool in
            state.target = current.map(Target.running)
            return state.requested
        }
        if cancelNow { current?.cancel() }
        let value = await body()
        state.withLock { $0.target = nil }
        return value
    }

    /// Cancels the job's work now, and any it goes on with later; `reason`, when given, is the
    /// error its `cancelled` record shows (the first reason given stands).
    func cancel(reason: String? = nil) {
        state.withLock { state in
            state.requested = true
            if state.reason == nil { state.reason = reason }
            state.target?.cancel()
        }
    }

    /// Why the job was cancelled by key, when a reason was given.
    var reason: String? { state.withLock { $0.reason } }

    /// Cancels the job's work because its runner stops, not because the job should end: a feed
    /// that shares its jobs hands it back, and the job's end is not recorded here.
    func release() {
        state.withLock { state in
            state.released = true
            state.requested = true
            state.target?.cancel()
        }
    }

    /// Whether the job was cancelled by `release()`.
    var isReleased: Bool { state.withLock { $0.released } }

    /// Whether the job was cancelled (by key, or with its group), whatever its task says: for a
    /// task whose cancellation a deadline has used.
    var isRequested: Bool { state.withLock { $0.requested } || continuations?.isCancelled == true }

    /// Runs `body` in a fresh task that this cancellation reaches, and returns its value: for a
    /// job whose own task a deadline has cancelled.
    func inFreshTask<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let task = Task { await body() }
        let id = continuations?.add { task.cancel() }
        let (before, cancelNow) = state.withLock { state -> (Target?, Bool) in
            let before = state.target
            state.target = .fresh { task.cancel() }
            return (before, state.requested)
        }
        if cancelNow { task.cancel() }
        let value = await task.value
        state.withLock { $0.target = before }
        if let id { continuations?.remove(id) }
        return value
    }
}

/// The fresh tasks jobs of one group (a run, a parent's children) went on in: cancelled when
/// the group's task is, which reaches its jobs' own tasks by itself but not these.
final class Continuations: Sendable {
    private let state = Mutex<(cancelled: Bool, next: UInt64, cancels: [UInt64: @Sendable () -> Void])>((false, 0, [:]))

    /// Runs `body`, cancelling the fresh tasks of the group when the calling task is cancelled.
    func cancelledWithCaller<T>(_ body: () async -> T) async -> T {
        await withTaskCancellationHandler(operation: body, onCancel: cancelAll)
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Runs `body` in a fresh task that the group's cancel reaches, and returns its value.
    func inFreshTask<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let task = Task { await body() }
        let id = add { task.cancel() }
        let value = await task.value
        remove(id)
        return value
    }

    /// Adds a fresh task's cancel (called at once when the group is cancelled already).
    func add(_ cancel: @escaping @Sendable () -> Void) -> UInt64 {
        let (id, cancelled) = state.withLock { state -> (UInt64, Bool) in
            state.next += 1
            state.cancels[state.next] = cancel
            return (state.next, state.cancelled)
        }
        if cancelled { cancel() }
        return id
    }

    func remove(_ id: UInt64) { _ = state.withLock { $0.cancels.removeValue(forKey: id) } }

    private func cancelAll() {
        let cancels = state.withLock { state in
            state.cancelled = true
            return Array(state.cancels.values)
        }
        for cancel in cancels { cancel() }
    }
}
