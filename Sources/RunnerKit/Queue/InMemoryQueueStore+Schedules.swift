import Foundation

/// The schedules of an in-memory queue, with the rules of the PostgreSQL one: a tick fires once
/// (one row a schedule and tick), a schedule no watcher looked at for a lease was missed.
struct MemorySchedules: Sendable {
    struct Entry: Sendable {
        var schedule: Schedule
        var createdAt: Date
        var checkedAt: Date
    }
    var entries: [String: Entry] = [:]
    /// The ticks fired: schedule name and tick, and the batch of each.
    var ticks: [String: String] = [:]
    /// What the store's clock's start is as a date: the tests' wall clock.
    var epoch = Date(timeIntervalSince1970: 1_800_000_000)
}

extension InMemoryQueueStore: ScheduleFiring {
    package var pollsForSchedules: Bool { false }


    /// When the store's clock started, as a date (default 2027-01-15 08:00 UTC).
    package var scheduleEpoch: Date {
        get { (try? withState { state, _ in state.scheduling.epoch }) ?? Date(timeIntervalSince1970: 0) }
        set { _ = try? withState { state, _ in state.scheduling.epoch = newValue } }
    }

    /// The wall time now on the store's clock.
    package var wallNow: Date { (try? withState { state, now in state.scheduling.epoch + now / .seconds(1) }) ?? Date() }

    /// `runner schedule add`.
    package func addSchedule(_ schedule: Schedule) throws(QueueError) {
        try withState { (state: inout State, now: Duration) throws(QueueError) in
            guard state.scheduling.entries[schedule.name] == nil else { throw QueueError("a schedule named \(schedule.name) exists", usage: true) }
            let wall = state.scheduling.epoch + now / .seconds(1)
            var made = schedule
            made.nextAt = schedule.timing.next(after: wall)
            state.scheduling.entries[schedule.name] = MemorySchedules.Entry(schedule: made, createdAt: wall, checkedAt: wall)
        }
        notify(.jobs)
    }

    /// `runner schedule remove`.
    package func removeSchedule(_ name: String) throws(QueueError) -> Bool {
        try withState { state, _ in state.scheduling.entries.removeValue(forKey: name) != nil }
    }

    /// Every schedule, by name.
    package func schedules() throws(QueueError) -> [Schedule] {
        try withState { state, _ in state.scheduling.entries.values.map(\.schedule).sorted { $0.name < $1.name } }
    }

    /// Every tick fired: schedule, tick and batch.
    package var ticks: [(schedule: String, tick: Date, batch: String)] {
        (try? withState { state, _ in
            state.scheduling.ticks.map { entry -> (schedule: String, tick: Date, batch: String) in
                let parts = entry.key.split(separator: "@", maxSplits: 1)
                return (String(parts[0]), Date(timeIntervalSince1970: Double(parts[1]) ?? 0), entry.value)
            }.sorted { ($0.tick, $0.schedule) < ($1.tick, $1.schedule) }
        }) ?? []
    }

    package func fireDueSchedules(runner: String) async throws(QueueError) -> (fired: [Schedule.Fired], nextIn: Duration?) {
        let lease = lease
        let (fired, nextIn) = try withState { (state: inout State, now: Duration) throws(QueueError) -> ([Schedule.Fired], Duration?) in
            let wall = state.scheduling.epoch + now / .seconds(1)
            var fired: [Schedule.Fired] = []
            for name in state.scheduling.entries.keys.sorted() {
                guard var entry = state.scheduling.entries[name] else { continue }
                defer { state.scheduling.entries[name] = entry }
                guard let due = entry.schedule.nextAt, due <= wall else {
                    if wall.timeIntervalSince(entry.checkedAt) >= lease / .seconds(4) { entry.checkedAt = wall }
                    continue
                }
                let present = wall.timeIntervalSince(entry.checkedAt) <= lease / .seconds(1)
                let plan = Schedule.plan(
                    entry.schedule.timing, catchUp: entry.schedule.catchUp, from: entry.schedule.lastTick ?? entry.createdAt, now: wall, present: present)
                for tick in plan.fire {
                    let id = "\(name)@\(tick.at.timeIntervalSince1970)"
                    guard state.scheduling.ticks[id] == nil else { continue }
                    let batch = JobQueue.newBatchID(now: tick.at)
                    state.scheduling.ticks[id] = batch
                    var inserted = 0
                    var seen = Set<String>()
                    for job in entry.schedule.jobs {
                        defer { seen.insert(job.key) }
                        if job.unique
                            && (seen.contains(job.key)
                                || state.rows.values.contains { $0.key == job.key && ["queued", "running", "waiting"].contains($0.state) })
                        {
                            continue
                        }
                        var row = Row(id: state.nextID, key: job.key, kind: job.kind, job: job.job, file: job.file)
                        row.batch = batch
                        state.rows[state.nextID] = row
                        state.nextID += 1
                        inserted += 1
                    }
                    entry.schedule.lastBatch = batch
                    fired.append(Schedule.Fired(schedule: name, tick: tick.at, batch: batch, jobs: inserted, covers: tick.covers, dropped: 0))
                }
                if plan.dropped > 0 {
                    fired.append(Schedule.Fired(schedule: name, tick: plan.last ?? wall, batch: "", jobs: 0, covers: 0, dropped: plan.dropped))
                }
                entry.schedule.lastTick = plan.last ?? entry.schedule.lastTick
                entry.schedule.nextAt = plan.next
                entry.checkedAt = wall
            }
            let next = state.scheduling.entries.values.compactMap(\.schedule.nextAt).min()
            return (fired, next.map { .seconds(max(0, $0.timeIntervalSince(wall))) })
        }
        if fired.contains(where: { $0.jobs > 0 }) { notify(.jobs) }
        return (fired, nextIn)
    }
}
