import Synchronization

/// Who may run now: a concurrency slot per running job, one task per key (in this process
/// through the TaskManager and, with a key lock, across processes), and per-host slots and
/// tokens (the pacer) that an attempt takes before its deadline starts.
final class Admission: Sendable {
    let taskManager: TaskManager
    private let slots: SlotLimiter
    private let hosts: HostLimiter
    /// The pace of each host (`--rate`, the config's `rate`) and its `Retry-After` pauses.
    let pacer: HostPacer
    private let keyLock: (any KeyLocking)?

    init(concurrency: Int, perHost: Int, keyLock: (any KeyLocking)?, taskManager: TaskManager, pacer: HostPacer) {
        self.taskManager = taskManager
        self.slots = SlotLimiter(limit: max(1, concurrency))
        self.hosts = HostLimiter(limit: max(1, perHost), requests: pacer.requests)
        self.pacer = pacer
        self.keyLock = keyLock
    }

    /// Waits for a concurrency slot; throws when the caller is cancelled first.
    func acquireSlot() async throws -> Slot {
        try await slots.acquire()
        return Slot(slots)
    }

    /// Concurrency slots free right now.
    var freeSlots: Int { slots.available }

    /// The slots of one host, for attempts.
    func hostSlots(for host: String) -> SlotLimiter { hosts.limiter(for: host) }

    /// The per-host limiter, for what it measured.
    var hostLimiter: HostLimiter { hosts }

    enum Admitted<Value: Sendable>: Sendable {
        case ran(Value)
        /// A task with the key was running in this process, or (`elsewhere`) in another.
        case duplicate(elsewhere: Bool)
        /// The key's lock could not be asked for (the reason): the job must not run unlocked.
        case lockUnavailable(String)
    }

    /// Runs `body` as the task of `key` unless that key is running here or, with a key lock,
    /// in another process. `body` runs in the calling task and gets the job's cancellation;
    /// `continuations`: the group whose cancel reaches the fresh tasks the job may go on in.
    func admit<Value: Sendable>(
        key: String, continuations: Continuations, _ body: @escaping @Sendable (JobCancellation) async -> Value
    ) async -> Admitted<Value> {
        let keyLock = self.keyLock
        let admitted = await taskManager.run(key: key, continuations: continuations) { cancellation async -> Admitted<Value> in
            var release: (@Sendable () -> Void)?
            if let keyLock {
                // A lock that cannot be taken is never "no lock".
                switch await keyLock.lock(key: key) {
                case .acquired(let held): release = held
                case .heldElsewhere: return .duplicate(elsewhere: true)
                case .unavailable(let reason): return .lockUnavailable(reason)
                }
            }
            defer { release?() }
            return .ran(await body(cancellation))
        }
        return admitted ?? .duplicate(elsewhere: false)
    }
}

/// A held concurrency slot, released exactly once.
final class Slot: Sendable {
    private let limiter: SlotLimiter
    private let released = Atomic<Bool>(false)

    init(_ limiter: SlotLimiter) { self.limiter = limiter }

    func release() {
        if !released.exchange(true, ordering: .acquiringAndReleasing) { limiter.release() }
    }

    deinit { release() }
}
