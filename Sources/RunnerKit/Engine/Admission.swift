import Synchronization

/// Who may run now: a concurrency slot per running job, one task per key (in this engine
/// through the TaskManager and, through key locks, across engines and processes), and per-host
/// slots and tokens (the pacer) that an attempt takes before its deadline starts.
final class Admission: Sendable {
    let taskManager: TaskManager
    private let slots: SlotLimiter
    private let hosts: HostLimiter
    /// The pace of each host (`--rate`, the config's `rate`) and its `Retry-After` pauses.
    let pacer: HostPacer
    /// Taken in turn once the TaskManager admitted a key (the spool's or queue's, then the output's).
    private let keyLocks: [any KeyLocking]

    init(concurrency: Int, perHost: Int, keyLocks: [any KeyLocking], taskManager: TaskManager, pacer: HostPacer) {
        self.taskManager = taskManager
        self.slots = SlotLimiter(limit: max(1, concurrency))
        self.hosts = HostLimiter(limit: max(1, perHost), requests: pacer.requests)
        self.pacer = pacer
        self.keyLocks = keyLocks
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

    /// Runs `body` as the task of `key` unless that key is running here or, through a key
    /// lock, in another engine or process. `body` runs in the calling task and gets the job's
    /// cancellation; `continuations`: the group whose cancel reaches the fresh tasks the job may
    /// go on in.
    func admit<Value: Sendable>(
        key: String, continuations: Continuations, _ body: @escaping @Sendable (JobCancellation) async -> Value
    ) async -> Admitted<Value> {
        let keyLocks = self.keyLocks
        let admitted = await taskManager.run(key: key, continuations: continuations) { cancellation async -> Admitted<Value> in
            var releases: [@Sendable () -> Void] = []
            // Let go of in the reverse order they were taken.
            defer { for release in releases.reversed() { release() } }
            for keyLock in keyLocks {
                // A lock that cannot be taken is never "no lock".
                switch await keyLock.lock(key: key) {
                case .acquired(let held): releases.append(held)
                case .heldElsewhere: return .duplicate(elsewhere: true)
                case .unavailable(let reason): return .lockUnavailable(reason)
                }
            }
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
