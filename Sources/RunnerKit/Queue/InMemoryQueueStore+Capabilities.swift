import Foundation

// The in-memory store's capabilities beyond the core `QueueStore`, with the rules of the
// PostgreSQL store's statements (JobQueue+Keys, +Parents, +Results, +Roster, +Pacing, +Output).
extension InMemoryQueueStore: QueueKeyLocks {
    package func lockKey(_ key: String, runner: String) async throws(QueueError) -> Bool {
        let lease = lease
        return try withState { state, now throws(QueueError) -> Bool in
            if let held = state.keys[key], held.until >= now { return held.runner == runner }
            state.keys[key] = (runner, now + lease)
            return true
        }
    }

    package func unlockKeys(_ keys: [String], runner: String) async throws(QueueError) {
        let waiting = try withState { state, _ throws(QueueError) -> Bool in Self.unlock(keys, of: runner, in: &state) }
        if waiting { notify(.jobs) }
    }
}

extension InMemoryQueueStore: QueueParents {
    package func parentToComplete(id: Int64, runner: String) async throws(QueueError) -> QueueParentToComplete? {
        try withState { state, _ throws(QueueError) -> QueueParentToComplete? in
            guard let row = state.rows[id], row.runner == runner, row.state == "running", row.phase == "complete", let record = row.record
            else { return nil }
            var counts: [String: Int] = [:]
            for child in state.rows.values where child.parentID == id { counts[child.status ?? "failed", default: 0] += 1 }
            return QueueParentToComplete(
                id: id, key: row.key, record: record, counts: counts, invalid: row.childrenInvalid, firstInvalid: row.firstInvalid,
                total: row.childrenTotal)
        }
    }

    package func completeParent(_ finish: QueueFinish, runner: String) async throws(QueueError) -> [Int64] {
        let lease = lease
        defer { tellTheFleet([finish.id], runner: runner) }
        return try withState { state, now throws(QueueError) -> [Int64] in
            guard let row = state.rows[finish.id], row.runner == runner, row.state == "running", row.phase == "complete" else { return [] }
            state.rows[finish.id]?.status = finish.status
            state.rows[finish.id]?.reason = finish.error
            state.rows[finish.id]?.record = finish.record
            state.rows[finish.id]?.finishedAt = now
            state.rows[finish.id]?.phase = nil
            state.rows[finish.id]?.state = finish.hooksPending ? "running" : "done"
            state.rows[finish.id]?.leaseUntil = finish.hooksPending ? now + lease : nil
            state.results[row.key] = finish.record
            return Self.countOff(row, runner: runner, until: now + lease, in: &state)
        }
    }
}

extension InMemoryQueueStore: QueueClaimProgress {
    package func credit(ids: [Int64], runner: String) async throws(QueueError) {
        try withState { state, _ throws(QueueError) in
            for id in ids {
                guard let row = state.rows[id], row.runner == runner, row.state == "running", row.status == nil, row.creditedClaim != row.claims
                else { continue }
                state.rows[id]?.credits += 1
                state.rows[id]?.creditedClaim = row.claims
            }
        }
    }

    package func hooksEnded(ids: [Int64], runner: String) async throws(QueueError) {
        try withState { state, _ throws(QueueError) in
            for id in ids where state.rows[id]?.runner == runner && state.rows[id]?.state == "running" && state.rows[id]?.status != nil {
                state.rows[id]?.state = "done"
                state.rows[id]?.leaseUntil = nil
            }
        }
    }
}

extension InMemoryQueueStore: QueueMaintenance {
    package func failAbandoned() async throws(QueueError) -> QueueAbandoned {
        try withState { state, now throws(QueueError) -> QueueAbandoned in
            var abandoned = QueueAbandoned()
            for (id, row) in state.rows.sorted(by: { $0.key < $1.key })
            where row.state == "running" && (row.leaseUntil ?? now) < now && !row.isClaimable {
                state.rows[id]?.state = "done"
                state.rows[id]?.leaseUntil = nil
                if row.status == nil {
                    state.rows[id]?.status = "failed"
                    state.rows[id]?.reason = "abandoned by \(row.claims - row.credits) runners"
                    state.rows[id]?.finishedAt = now
                    abandoned.failed += 1
                } else {  // one whose hooks were left keeps its own status; its hooks failed
                    let reason = "its --on-finish hooks were left by \(row.hookClaims) runners (each stopped while running them); they did not run"
                    state.rows[id]?.hooksFailed = reason
                    abandoned.hooksFailed.append((row.key, row.record ?? "", reason))
                }
            }
            return abandoned
        }
    }

    package func prune(olderThan age: Duration) async throws(QueueError) -> Int {
        try withState { state, now throws(QueueError) -> Int in
            let old = state.rows.values.filter { $0.state == "done" && ($0.finishedAt.map { now - $0 > age } ?? false) }
            for row in old { state.rows[row.id] = nil }
            return old.count
        }
    }
}

extension InMemoryQueueStore: QueuePacing {
    package func reservePace(host: String, interval: Duration) async throws(QueueError) -> Duration {
        try withState { state, now throws(QueueError) -> Duration in
            let entry = state.hosts[host] ?? (.zero, .zero)
            let slot = max(entry.nextAt, now, entry.pausedUntil)
            state.hosts[host] = (slot + interval, entry.pausedUntil)
            return slot - now
        }
    }

    package func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async throws(QueueError) -> Duration {
        try withState { state, now throws(QueueError) -> Duration in
            let cost = Duration.nanoseconds(Int64(bytes) * 1_000_000_000 / Int64(max(1, rate)))
            let paid = max(state.bandwidth[name] ?? .zero, now - .milliseconds(100)) + cost
            state.bandwidth[name] = paid
            return paid - now
        }
    }

    package func pause(host: String, for duration: Duration, from runner: String) async throws(QueueError) {
        try withState { state, now throws(QueueError) in
            let entry = state.hosts[host] ?? (.zero, .zero)
            state.hosts[host] = (entry.nextAt, max(entry.pausedUntil, now + duration))
        }
        notify(.pause(host: host, milliseconds: max(1, duration.inMilliseconds), runner: runner))
    }
}

extension InMemoryQueueStore: QueueSharedOutput {
    package func identity() async throws(QueueError) -> QueueIdentity {
        try withState { state, _ throws(QueueError) -> QueueIdentity in state.identity }
    }

    package func recordOutput(folder: String, path: String, runner: String) async throws(QueueError) -> QueueIdentity {
        try withState { state, _ throws(QueueError) -> QueueIdentity in
            if state.identity.folder == nil {
                state.identity.folder = folder
                state.identity.output = path
                state.identity.stampedBy = runner
            }
            return state.identity
        }
    }

    package func keyRecord(_ key: String) async throws(QueueError) -> String? {
        try withState { state, _ throws(QueueError) -> String? in state.results[key] }
    }
}

extension InMemoryQueueStore: QueueFileOutcomes {
    package func fileOutcome(of id: Int64) async throws(QueueError) -> [String: Int]? {
        try withState { state, _ throws(QueueError) -> [String: Int]? in
            guard let file = state.rows[id]?.file else { return [:] }
            let batch = state.rows[id]?.batch
            var counts: [String: Int] = [:]
            for row in state.rows.values where row.file == file && row.batch == batch {
                if row.state == "queued" || row.state == "waiting" || (row.state == "running" && row.status == nil) { return nil }
                counts[row.status ?? "", default: 0] += 1
            }
            return counts
        }
    }
}

extension InMemoryQueueStore: QueueProducing {
    /// The counts, running jobs, failures and watchers of `status --queue` from the rows (every
    /// ended row counts: nothing here is older than a day); batches, parents and paused hosts
    /// are left empty.
    package func producerStatus() async throws(QueueError) -> QueueProducerStatus {
        try withState { state, now throws(QueueError) -> QueueProducerStatus in
            let rows = state.rows.values.sorted { $0.id < $1.id }
            let done = rows.filter { $0.state == "done" }
            func ended(_ statuses: Set<String>) -> Int { done.filter { statuses.contains($0.status ?? "") }.count }
            let failed = done.filter { !["succeeded", "notModified", "cancelled", "notFound"].contains($0.status ?? "") }
            let live = rows.filter { $0.state == "running" && ($0.leaseUntil ?? now) >= now }
            var status = QueueStatus(
                queued: rows.filter { $0.state == "queued" || ($0.state == "running" && ($0.leaseUntil ?? now) < now) }.count,
                running: live.map { row in
                    QueueStatus.Running(
                        key: row.key, runner: row.runner ?? "", startedAt: Date(),
                        phase: row.phase == "complete" ? "completing" : row.status != nil ? "hooks" : nil)
                },
                done: ended(["succeeded", "notModified"]), failed: failed.count, cancelled: ended(["cancelled"]),
                latestFailed: failed.suffix(10).reversed().map { QueueStatus.Failed(key: $0.key, status: $0.status ?? "", reason: $0.reason, at: Date()) })
            status.notFound = ended(["notFound"])
            status.waiting = rows.filter { $0.state == "waiting" }.count
            status.watchers = state.watchers.values.sorted { $0.name < $1.name }.map { watcher in
                var watcher = watcher
                watcher.silentFor = now - (state.heartbeats[watcher.name] ?? now)
                watcher.running = live.filter { $0.runner == watcher.name }.count
                return watcher
            }
            return QueueProducerStatus(status: status)
        }
    }

    package func queueJobs(_ jobs: [QueueSubmission]) async throws(QueueError) -> QueueSubmitted {
        guard available else { throw QueueError("the database cannot be reached: (in memory, made unavailable)") }
        return submit(jobs, batch: JobQueue.newBatchID())
    }

    package func cancelJobs(key: String) async throws(QueueError) -> (queued: Int, running: [String]) {
        guard available else { throw QueueError("the database cannot be reached: (in memory, made unavailable)") }
        return cancel(key: key)
    }
}
