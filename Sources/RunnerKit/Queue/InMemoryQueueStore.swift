import Synchronization

/// A queue kept in memory, with the rules of the PostgreSQL one (leases, claims counted and
/// abandoned jobs failed, one key per runner, the fleet's pacing and pauses, notices), on any
/// clock: several feeds in one process share it as watchers on several machines share the
/// database. `available` false makes every call fail as a database that went away does.
package final class InMemoryQueueStore: QueueStore {
    package struct Row: Sendable {
        package var id: Int64
        package var key: String
        package var kind: String
        package var job: String
        package var file = ""
        /// The batch it was submitted in (a schedule's tick, in these tests).
        package var batch: String?
        /// `queued`, `running` or `done`.
        package var state = "queued"
        package var runner: String?
        package var claims = 0
        /// Claims made only to run the hooks of a job that had ended.
        package var hookClaims = 0
        /// Claims during which the job made durable progress (not abandons), and the last one
        /// credited so.
        package var credits = 0
        package var creditedClaim = 0
        /// Why its hooks never ran, when runners left them `maxClaims` times.
        package var hooksFailed: String?
        package var leaseUntil: Duration?
        package var status: String?
        package var reason: String?
        package var record: String?
        package var finishedAt: Duration?
        /// A child's parent; a parent's phase (`children`, `complete`) and its children's tally.
        package var parentID: Int64?
        package var phase: String?
        package var childrenLeft = 0
        package var childrenTotal = 0
        package var childrenInvalid = 0
        package var firstInvalid: String?
    }

    struct State {
        var rows: [Int64: Row] = [:]
        var nextID: Int64 = 1
        var keys: [String: (runner: String, until: Duration)] = [:]
        var hosts: [String: (nextAt: Duration, pausedUntil: Duration)] = [:]
        var watchers: [String: QueueWatcher] = [:]
        /// Each fleet-wide bandwidth's bucket: when its bytes are paid for.
        var bandwidth: [String: Duration] = [:]
        /// When each watcher last said it was alive.
        var heartbeats: [String: Duration] = [:]
        /// Each key's last record (`runner.results`).
        var results: [String: String] = [:]
        var identity = QueueIdentity(id: "memory-" + String(UInt64.random(in: 0...UInt64.max), radix: 16))
        var available = true
        /// Keys whose records are refused (a record the database will not take).
        var refusedRecords: Set<String> = []
        /// Notices not yet read, per listener.
        var notices: [UInt64: [QueueNotice]] = [:]
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// The schedules and their ticks (`InMemoryQueueStore+Schedules.swift`).
        var scheduling = MemorySchedules()
    }

    package let lease: Duration
    package var display: String { "memory" }
    private let timeline: any Timeline
    private let state = Mutex(State())
    /// Which listener a store value is (each feed's own view of one shared queue).
    private let listenerID: UInt64
    private let shared: InMemoryQueueStore?

    /// A queue whose leases run on `clock`.
    package init(lease: Duration = .seconds(30), clock: some Clock<Duration> = ContinuousClock()) {
        self.lease = lease
        self.timeline = makeTimeline(clock)
        self.listenerID = 0
        self.shared = nil
    }

    private init(sharing store: InMemoryQueueStore, listener: UInt64) {
        self.lease = store.lease
        self.timeline = store.timeline
        self.listenerID = listener
        self.shared = store
    }

    private static let listeners = Atomic<UInt64>(1)

    /// Another watcher's view of this queue: the same rows, notices of its own.
    package func connection() -> InMemoryQueueStore {
        let root = shared ?? self
        let id = Self.listeners.wrappingAdd(1, ordering: .relaxed).newValue
        root.state.withLock { $0.notices[id] = [] }
        return InMemoryQueueStore(sharing: root, listener: id)
    }

    private var root: InMemoryQueueStore { shared ?? self }

    func withState<T: Sendable>(_ body: (inout State, Duration) throws(QueueError) -> T) throws(QueueError) -> T {
        let now = timeline.now
        return try root.state.withLock { (state: inout State) throws(QueueError) -> T in
            guard state.available else { throw QueueError("the database cannot be reached: (in memory, made unavailable)") }
            return try body(&state, now)
        }
    }

    // MARK: - What tests do

    /// Whether calls succeed; false: each fails, as when the database went away.
    package var available: Bool {
        get { root.state.withLock { $0.available } }
        set { root.state.withLock { $0.available = newValue } }
    }

    /// Makes every statement that stores a record of `key` fail, as one the database will not
    /// take (the other records of the same statement with it).
    package func refuseRecords(of key: String) { root.state.withLock { _ = $0.refusedRecords.insert(key) } }

    /// Queues jobs (`submit --queue`) and tells the watchers; a unique job whose key is queued
    /// or running (or came earlier in the same submit) is left out.
    @discardableResult
    package func submit(_ jobs: [QueueSubmission], batch: String? = nil) -> QueueSubmitted {
        let outcome = root.state.withLock { state -> QueueSubmitted in
            var outcome = QueueSubmitted()
            var seen = Set<String>()
            for job in jobs {
                let held = state.rows.values.first { $0.key == job.key && ($0.state == "queued" || $0.state == "running") }
                if job.unique && (seen.contains(job.key) || held != nil) {
                    outcome.leftOut.append(job)
                    if let held { outcome.holding.append(held.key) }
                    continue
                }
                seen.insert(job.key)
                state.rows[state.nextID] = Row(id: state.nextID, key: job.key, kind: job.kind, job: job.job, file: job.file, batch: batch)
                state.nextID += 1
                outcome.inserted += 1
            }
            return outcome
        }
        notify(.jobs)
        return outcome
    }

    /// `runner cancel KEY --queue`: queued jobs of the key end cancelled, runners are told.
    /// Returns how many were queued and the runners that run the key now.
    @discardableResult
    package func cancel(key: String) -> (queued: Int, running: [String]) {
        let now = timeline.now
        let (outcome, running, completable) = root.state.withLock { state -> ((queued: Int, running: [String]), [String], Bool) in
            var queued = 0
            for (id, row) in state.rows where row.key == key && row.state == "queued" {
                state.rows[id]?.state = "done"
                state.rows[id]?.status = "cancelled"
                queued += 1
            }
            let runners = Set(state.rows.values.filter { $0.key == key && $0.state == "running" }.compactMap(\.runner)).sorted()
            // A waiting parent's queued children are cancelled and counted off; its running
            // ones are asked to stop.
            let parents = Set(state.rows.values.filter { $0.key == key && $0.state == "waiting" }.map(\.id))
            var running: [String] = []
            var completable = false
            for (id, row) in state.rows.sorted(by: { $0.key < $1.key }) where row.parentID.map(parents.contains) ?? false {
                if row.state == "running" && row.status == nil { running.append(row.key) }
                guard row.state == "queued" else { continue }
                state.rows[id]?.state = "done"
                state.rows[id]?.status = "cancelled"
                if let parentID = row.parentID {
                    state.rows[parentID]?.childrenLeft -= 1
                    if state.rows[parentID]?.childrenLeft == 0 {
                        state.rows[parentID]?.state = "running"
                        state.rows[parentID]?.phase = "complete"
                        state.rows[parentID]?.leaseUntil = now - .milliseconds(1)  // claimable at once
                        completable = true
                    }
                }
            }
            return ((queued, runners), running, completable)
        }
        notify(.cancel(key: key))
        for child in running { notify(.cancel(key: child)) }
        if completable { notify(.jobs) }
        return outcome
    }

    /// Every row now, by id.
    package var rows: [Row] { root.state.withLock { $0.rows.values.sorted { $0.id < $1.id } } }

    func notify(_ notice: QueueNotice) {
        let waiters = root.state.withLock { state -> [CheckedContinuation<Void, Never>] in
            for id in state.notices.keys { state.notices[id]!.append(notice) }
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: - The contract

    package func claim(runner: String, limit: Int, kinds: [String]?) async throws(QueueError) -> [QueueClaim] {
        let lease = lease
        return try withState { state, now throws(QueueError) -> [QueueClaim] in
            let picked = state.rows.values.filter { row in
                (row.state == "queued" || (row.state == "running" && (row.leaseUntil ?? now) < now && row.isClaimable))
                    && (kinds?.contains(row.kind) ?? true)
                    && (row.status != nil || !((state.keys[row.key]?.until).map { $0 >= now } ?? false))
            }.sorted { $0.id < $1.id }.prefix(max(0, Self.share(of: runner, limit: limit, in: state, now: now)))
            var claims: [QueueClaim] = []
            let pauses = state.hosts.filter { $0.value.pausedUntil > now }.map { (host: $0.key, left: $0.value.pausedUntil - now) }
            for row in picked {
                state.rows[row.id]?.state = "running"
                state.rows[row.id]?.runner = runner
                if row.status == nil { state.rows[row.id]?.claims += 1 } else { state.rows[row.id]?.hookClaims += 1 }
                state.rows[row.id]?.leaseUntil = now + lease
                var locked = false
                if row.status != nil {
                    locked = false  // its hooks alone run: the key is not the claim's
                } else if let held = state.keys[row.key], held.until >= now {
                    locked = false
                } else {
                    state.keys[row.key] = (runner, now + lease)
                    locked = true
                }
                var claim = QueueClaim(id: row.id, key: row.key, kind: row.kind, job: row.job, keyLocked: locked, file: row.file, pauses: pauses)
                claim.previous = state.results[row.key]
                claim.outcome = row.status == nil ? nil : row.record
                claim.completesParent = row.phase == "complete"
                claim.batch = row.batch
                claims.append(claim)
            }
            return claims
        }
    }

    /// How many jobs a claim of `runner` takes: `limit`, or its fair share when the fleet's
    /// live watchers have more slots than there are jobs to run (as `JobQueue.claim` says).
    private static func share(of runner: String, limit: Int, in state: State, now: Duration) -> Int {
        let queuedKinds = Set(state.rows.values.filter { $0.state == "queued" }.map(\.kind))
        let fleet = state.watchers.values.filter { watcher in
            watcher.slots != nil
                && (watcher.name == runner
                    || (now - (state.heartbeats[watcher.name] ?? now) < watcher.lease && !queuedKinds.isDisjoint(with: watcher.kinds)))
        }
        let slots = fleet.reduce(0) { $0 + ($1.slots ?? 0) }
        let work = state.rows.values.filter { ($0.state == "queued" || $0.state == "running") && $0.status == nil }.count
        guard fleet.count > 1, work < slots else { return limit }
        let mine = state.rows.values.filter {
            $0.state == "running" && $0.runner == runner && $0.status == nil && ($0.leaseUntil ?? now) >= now
        }.count
        return min(limit, max(0, (work + fleet.count - 1) / fleet.count - mine))
    }

    package func nextLeaseEnd() async throws(QueueError) -> Duration? {
        try withState { state, now throws(QueueError) -> Duration? in
            state.rows.values.filter { $0.state == "running" && $0.isClaimable }
                .compactMap(\.leaseUntil).min().map { max(.zero, $0 - now) }
        }
    }

    package func finish(_ jobs: [QueueFinish], runner: String, unlocking keys: [String], durable: OutputStore?) async throws(QueueError) -> [Int64] {
        let lease = lease
        do throws(Durability.Failure) {
            try durable?.synchronize()
        } catch {
            throw .notDurable(error)
        }
        let (waiting, complete, queued) = try withState { state, now throws(QueueError) -> (Bool, [Int64], Bool) in
            if let refused = jobs.first(where: { state.rows[$0.id].map { state.refusedRecords.contains($0.key) } ?? false }) {
                throw QueueError("malformed record (in memory, refused for job \(refused.id))")
            }
            let waiting = Self.unlock(keys, of: runner, in: &state)
            var complete: [Int64] = []
            var queued = false
            for job in jobs {
                guard let row = state.rows[job.id], row.runner == runner, row.state == "running", row.status == nil else { continue }
                state.rows[job.id]?.status = job.status
                state.rows[job.id]?.reason = job.error
                state.rows[job.id]?.record = job.record
                state.rows[job.id]?.finishedAt = now
                if !job.children.jobs.isEmpty {
                    state.rows[job.id]?.state = "waiting"
                    state.rows[job.id]?.runner = nil
                    state.rows[job.id]?.leaseUntil = nil
                    state.rows[job.id]?.phase = "children"
                    state.rows[job.id]?.childrenLeft = job.children.jobs.count
                    state.rows[job.id]?.childrenTotal = job.children.jobs.count + job.children.invalid
                    state.rows[job.id]?.childrenInvalid = job.children.invalid
                    state.rows[job.id]?.firstInvalid = job.children.firstInvalid
                    for child in job.children.jobs {
                        var added = Row(id: state.nextID, key: child.key, kind: child.kind, job: child.job, file: row.file)
                        added.parentID = job.id
                        state.rows[state.nextID] = added
                        state.nextID += 1
                    }
                    queued = true
                    continue
                }
                state.rows[job.id]?.state = job.hooksPending ? "running" : "done"
                state.rows[job.id]?.leaseUntil = job.hooksPending ? now + lease : nil
                if job.isKeyRecord && job.status != JobStatus.duplicate.rawValue { state.results[row.key] = job.record }
                complete += Self.countOff(row, runner: runner, until: now + lease, in: &state)
            }
            return (waiting, complete, queued)
        }
        if waiting || queued { notify(.jobs) }
        tellTheFleet(jobs.filter { $0.children.jobs.isEmpty }.map(\.id), runner: runner)
        return complete
    }

    /// `runner_events`: each ended job, while a watcher that follows them is listed.
    func tellTheFleet(_ ids: [Int64], runner: String) {
        let ended = root.state.withLock { state -> [QueueNotice] in
            guard state.watchers.values.contains(where: \.followsEvents) else { return [] }
            return ids.compactMap { id in
                state.rows[id].map { .finished(key: $0.key, kind: $0.kind, status: $0.status ?? "", runner: runner) }
            }
        }
        for notice in ended { notify(notice) }
    }

    /// Counts an ended job off its parent; the parent whose last child it was is `runner`'s,
    /// under a lease until `until`, to complete.
    static func countOff(_ row: Row, runner: String, until: Duration, in state: inout State) -> [Int64] {
        guard let parentID = row.parentID, state.rows[parentID]?.state == "waiting" else { return [] }
        state.rows[parentID]?.childrenLeft -= 1
        guard state.rows[parentID]?.childrenLeft == 0 else { return [] }
        state.rows[parentID]?.state = "running"
        state.rows[parentID]?.phase = "complete"
        state.rows[parentID]?.runner = runner
        state.rows[parentID]?.leaseUntil = until
        return [parentID]
    }

    /// Lets go of `runner`'s `keys`; whether a queued job waits for one of them (the runners
    /// are then told, as of new jobs).
    static func unlock(_ keys: [String], of runner: String, in state: inout State) -> Bool {
        var freed = Set<String>()
        for key in keys where state.keys[key]?.runner == runner {
            state.keys[key] = nil
            freed.insert(key)
        }
        return !freed.isEmpty && state.rows.values.contains { $0.state == "queued" && freed.contains($0.key) }
    }

    package func release(ids: [Int64], runner: String) async throws(QueueError) {
        try withState { state, _ throws(QueueError) in
            for id in ids where state.rows[id]?.runner == runner && state.rows[id]?.state == "running" && state.rows[id]?.status == nil {
                state.rows[id]?.state = "queued"
                state.rows[id]?.runner = nil
                state.rows[id]?.leaseUntil = nil
                let claims = state.rows[id]?.claims ?? 1
                state.rows[id]?.claims = max(0, claims - 1)
            }
        }
        notify(.jobs)
    }

    package func register(_ watcher: QueueWatcher) async throws(QueueError) {
        let wake = try withState { state, now throws(QueueError) -> Bool in
            var taken = false
            if let previous = state.watchers[watcher.name], previous.instance != watcher.instance {
                let live = now - (state.heartbeats[watcher.name] ?? now) < previous.lease
                if live && !JobQueue.isGone(host: previous.host, pid: previous.pid, seenFrom: watcher) {
                    throw QueueError("a watcher named \(watcher.name) is alive (on \(previous.host)); give this one another --name", usage: true)
                }
                for (id, row) in state.rows where row.runner == watcher.name && row.state == "running" && (row.leaseUntil ?? now) >= now {
                    state.rows[id]?.leaseUntil = now - .milliseconds(1)
                    taken = true
                }
                state.keys = state.keys.filter { $0.value.runner != watcher.name }
            }
            state.watchers[watcher.name] = watcher
            state.heartbeats[watcher.name] = now
            return taken
        }
        if wake { notify(.jobs) }
    }

    package func unregister(runner: String) async throws(QueueError) {
        try withState { state, _ throws(QueueError) in
            state.watchers[runner] = nil
            state.heartbeats[runner] = nil
        }
    }

    /// The watchers listed now, by name.
    package var watchers: [String: QueueWatcher] { root.state.withLock { $0.watchers } }

    package func heartbeat(runner: String) async throws(QueueError) {
        let lease = lease
        try withState { state, now throws(QueueError) in
            for (id, row) in state.rows where row.runner == runner && row.state == "running" { state.rows[id]?.leaseUntil = now + lease }
            for (key, held) in state.keys where held.runner == runner { state.keys[key] = (runner, now + lease) }
            if state.watchers[runner] != nil { state.heartbeats[runner] = now }
        }
    }

    /// Waits for a notice (a timeout is not waited for: only a notice, or the task's
    /// cancellation, ends the wait, so no sleeper sits on a test clock); a timeout of zero
    /// returns what came, at once.
    package func notifications(waitingUpTo timeout: Duration) async throws(QueueError) -> [QueueNotice] {
        let id = listenerID
        while !Task.isCancelled {
            let found = try withState { state, _ throws(QueueError) -> [QueueNotice] in
                if state.notices[id] == nil { state.notices[id] = [] }
                defer { state.notices[id] = [] }
                return state.notices[id]!
            }
            if !found.isEmpty || timeout <= .zero { return found }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let resumeNow = root.state.withLock { state -> Bool in
                        if !(state.notices[id] ?? []).isEmpty || Task.isCancelled { return true }
                        if let old = state.waiters[id] { old.resume() }
                        state.waiters[id] = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            } onCancel: {
                let waiter = root.state.withLock { $0.waiters.removeValue(forKey: id) }
                waiter?.resume()
            }
        }
        return []
    }

    package func close() {}
}

extension InMemoryQueueStore.Row {
    /// Whether a running job whose lease ran out may be claimed again: abandoned fewer than
    /// `JobQueue.maxClaims` times (credited claims apart), or its hooks left fewer times.
    var isClaimable: Bool {
        status == nil ? claims - credits < JobQueue.maxClaims : hookClaims < JobQueue.maxClaims
    }
}
