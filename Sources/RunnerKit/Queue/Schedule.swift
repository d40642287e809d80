import Foundation

/// A schedule of the queue: job files kept in the database as `submit` would insert them, and
/// when they are due. Every watcher may fire a due tick; each tick inserts exactly one batch
/// across the fleet (a row per schedule and tick, inserted with the batch in one transaction).
package struct Schedule: Sendable {
    /// What a tick missed while no watcher of the queue ran becomes.
    package enum CatchUp: String, Sendable, CaseIterable {
        /// Nothing: the missed ticks are dropped.
        case none
        /// One batch for all of them (systemd's `Persistent=true`).
        case one
        /// One batch for each.
        case all
    }

    package var name: String
    package var timing: ScheduleTiming
    package var catchUp: CatchUp = .one
    /// The jobs of its files, as `submit` would insert them.
    package var jobs: [QueueSubmission]
    /// The files' names, as given.
    package var files: [String]
    /// When it fires next, when it last fired (the tick) and the batch it inserted then.
    package var nextAt: Date?
    package var lastTick: Date?
    package var lastBatch: String?

    package init(name: String, timing: ScheduleTiming, catchUp: CatchUp = .one, jobs: [QueueSubmission], files: [String]) {
        self.name = name
        self.timing = timing
        self.catchUp = catchUp
        self.jobs = jobs
        self.files = files
    }

    /// A tick to fire: its time, and how many ticks it stands for (more than 1: missed ticks
    /// caught up with `one`).
    package struct Tick: Sendable, Equatable {
        package var at: Date
        package var covers: Int
    }

    /// A tick fired: the schedule, the tick, the batch it inserted and how many jobs.
    package struct Fired: Sendable, Equatable {
        package var schedule: String
        package var tick: Date
        package var batch: String
        package var jobs: Int
        /// How many ticks this batch stands for (1, or the missed ones with `--catch-up one`).
        package var covers: Int
        /// Missed ticks dropped (`--catch-up none`).
        package var dropped: Int
    }

    /// At most this many ticks are enumerated in one pass; the rest are passed over.
    static let mostTicks = 10_000
    /// At most this many missed ticks fire as batches of their own with `--catch-up all`.
    package static let mostCaughtUp = 1000

    /// The ticks due after `from` (the last tick fired, or when the schedule was made) up to
    /// `now`, and what to fire for them: each on its own while the fleet was present (a
    /// watcher looked at the schedule within a lease), else as `catchUp` says. Returns the
    /// ticks to fire, how many were dropped, the last tick and the next one after `now`.
    package static func plan(
        _ timing: ScheduleTiming, catchUp: CatchUp, from: Date, now: Date, present: Bool
    ) -> (fire: [Tick], dropped: Int, last: Date?, next: Date?) {
        var due: [Date] = []
        var tick = timing.next(after: from)
        var passedOver = 0
        while let current = tick, current <= now {
            if due.count < mostTicks { due.append(current) } else { passedOver += 1 }
            if passedOver > 0 {
                tick = timing.next(after: now)
                break
            }
            tick = timing.next(after: current)
        }
        guard let last = due.last else { return ([], 0, nil, tick) }
        if present { return (due.map { Tick(at: $0, covers: 1) }, passedOver, last, tick) }
        switch catchUp {
        case .none:
            return ([], due.count + passedOver, last, tick)
        case .one:
            return ([Tick(at: last, covers: due.count + passedOver)], 0, last, tick)
        case .all:
            let kept = due.suffix(mostCaughtUp)
            return (kept.map { Tick(at: $0, covers: 1) }, due.count - kept.count + passedOver, last, tick)
        }
    }

    /// The jobs as one JSON array, as the database keeps them.
    static func encode(_ jobs: [QueueSubmission]) -> String {
        JSONWriter.string(.array(jobs.map { job in
            .object([
                ("key", .string(job.key)), ("kind", .string(job.kind)), ("job", .string(job.job)), ("file", .string(job.file)),
                ("unique", .bool(job.unique)),
            ])
        }))
    }

    static func decode(_ text: String) -> [QueueSubmission]? {
        guard let value = try? JSONParser.parse(text), let elements = value.arrayValue else { return nil }
        var jobs: [QueueSubmission] = []
        for element in elements {
            guard let key = element["key"]?.stringValue, let kind = element["kind"]?.stringValue, let job = element["job"]?.stringValue else { return nil }
            var unique = false
            if case .bool(let flag)? = element["unique"] { unique = flag }
            jobs.append(QueueSubmission(key: key, kind: kind, job: job, file: element["file"]?.stringValue ?? "", unique: unique))
        }
        return jobs
    }

    /// The timing as two columns: the cron expression or nil, the period in seconds or nil.
    var columns: (cron: String?, every: String?, zone: String) {
        switch timing {
        case .cron(let expression, let zone): return (expression.text, nil, zone.identifier)
        case .every(let seconds): return (nil, String(seconds), "UTC")
        }
    }

    static func timing(cron: String?, every: String?, zone: String?) -> ScheduleTiming? {
        if let every, let seconds = Int64(every), seconds > 0 { return .every(seconds: seconds) }
        guard let cron, let expression = try? CronExpression(cron), let zone = TimeZone(identifier: zone ?? "UTC") else { return nil }
        return .cron(expression, zone: zone)
    }
}

/// A store whose watchers fire the queue's schedules (the PostgreSQL one and the in-memory one).
package protocol ScheduleFiring: Sendable {
    /// Fires the schedules due now, each tick at most once across the fleet, as `runner`
    /// whose lease is the store's (a schedule no watcher looked at for a lease was missed);
    /// returns what was fired, and how long until the next tick of any schedule (nil: none).
    func fireDueSchedules(runner: String) async throws(QueueError) -> (fired: [Schedule.Fired], nextIn: Duration?)
    /// Whether watchers look for new schedules every `--rescan` too (true), or only when told
    /// of one (a notice of new jobs): a store whose notices cannot be lost.
    var pollsForSchedules: Bool { get }
}

extension Schedule.Fired {
    /// The watcher's log line for this tick (its batch, or the ticks dropped).
    package var line: String {
        if dropped > 0 {
            return "schedule \(schedule): \(dropped) tick\(dropped == 1 ? "" : "s") missed while no watcher ran, dropped (--catch-up none)"
        }
        let covered = covers > 1 ? ", for \(covers) ticks missed while no watcher ran" : ""
        let tick = CronExpression.iso8601(self.tick, in: TimeZone(identifier: "UTC")!)
        return "schedule \(schedule): tick \(tick), batch \(batch) (\(jobs) job\(jobs == 1 ? "" : "s")\(covered))"
    }
}
