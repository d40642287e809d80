import Foundation

/// Schedules in the queue. Tables (made on first use, when missing): `schedules` (one row a
/// schedule: its timing, zone, catch-up, the jobs of its files as `submit` would insert them,
/// when it fires next, its last tick and batch, and when a watcher last looked at it) and
/// `ticks` (one row a tick fired: the schedule, the tick, the batch; its primary key is what
/// makes a tick fire once across the fleet, inserted in the transaction that inserts the batch).
extension JobQueue {
    /// Makes the schedules' tables if missing; returns whether they exist (a role that may not
    /// make them finds none).
    @discardableResult
    func prepareSchedules(making: Bool) throws(QueueError) -> Bool {
        let present = Self.value(try connection.query("SELECT to_regclass('runner.schedules') IS NOT NULL")) == "t"
        if present || !making { return present }
        try connection.transaction { db throws(QueueError) in
            try db.query("SELECT pg_advisory_xact_lock(74170001)")
            guard Self.value(try db.query("SELECT to_regclass('runner.schedules') IS NOT NULL")) != "t" else { return }
            try db.query("""
                CREATE TABLE runner.schedules (
                    id bigserial PRIMARY KEY,
                    name text NOT NULL UNIQUE,
                    cron text,
                    every_s bigint,
                    zone text NOT NULL,
                    catch_up text NOT NULL,
                    jobs text NOT NULL,
                    files text NOT NULL,
                    job_count integer NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now(),
                    next_at timestamptz,
                    last_tick timestamptz,
                    last_batch text,
                    checked_at timestamptz NOT NULL DEFAULT now())
                """)
            try db.query("""
                CREATE TABLE runner.ticks (
                    schedule_id bigint NOT NULL,
                    tick timestamptz NOT NULL,
                    schedule text NOT NULL,
                    batch text NOT NULL,
                    covers integer NOT NULL DEFAULT 1,
                    fired_by text,
                    fired_at timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (schedule_id, tick))
                """)
            try db.query("CREATE INDEX ticks_batch ON runner.ticks (batch)")
        }
        return true
    }

    /// The database's clock: every watcher fires on it, whatever its own says.
    private static func now(_ db: PostgresConnection) throws(QueueError) -> Date {
        Date(timeIntervalSince1970: Double(value(try db.query("SELECT extract(epoch FROM now())::float8")) ?? "0") ?? 0)
    }

    private static func timestamp(_ date: Date?) -> String? { date.map { String(format: "%.6f", $0.timeIntervalSince1970) } }

    /// Adds a schedule; refused (usage) when one of its name exists. Its first tick is the
    /// first after now.
    package func addSchedule(_ schedule: Schedule) throws(QueueError) -> Schedule {
        try prepareSchedules(making: true)
        return try connection.transaction { db throws(QueueError) -> Schedule in
            let now = try Self.now(db)
            var made = schedule
            made.nextAt = schedule.timing.next(after: now)
            let columns = schedule.columns
            let rows = try db.query(
                """
                INSERT INTO runner.schedules (name, cron, every_s, zone, catch_up, jobs, files, job_count, next_at)
                VALUES ($1, $2, $3::bigint, $4, $5, $6, $7, $8::integer, to_timestamp($9::float8))
                ON CONFLICT (name) DO NOTHING RETURNING id
                """,
                [schedule.name, columns.cron, columns.every, columns.zone, schedule.catchUp.rawValue, Schedule.encode(schedule.jobs),
                 Self.array(schedule.files.map { Optional($0) }), String(schedule.jobs.count), Self.timestamp(made.nextAt)])
            guard !rows.isEmpty else {
                throw QueueError("a schedule named \(Printable.escaped(schedule.name)) exists already in the queue; 'runner schedule remove' it first", usage: true)
            }
            // Watchers sleeping until their next tick look again.
            try db.query("SELECT pg_notify('runner_jobs', '')")
            return made
        }
    }

    /// Removes the schedule `name`; false: there is none. Its batches stay, as batches do.
    package func removeSchedule(_ name: String) throws(QueueError) -> Bool {
        guard try prepareSchedules(making: false) else { return false }
        return !(try connection.query("DELETE FROM runner.schedules WHERE name = $1 RETURNING id", [name])).isEmpty
    }

    /// Every schedule, by name.
    package func schedules() throws(QueueError) -> [Schedule] {
        guard try prepareSchedules(making: false) else { return [] }
        return try connection.query(
            """
            SELECT name, cron, every_s::text, zone, catch_up, jobs, files, extract(epoch FROM next_at)::float8,
                extract(epoch FROM last_tick)::float8, last_batch
            FROM runner.schedules ORDER BY name
            """
        ).compactMap { row -> Schedule? in
            guard let name = row[0], let timing = Schedule.timing(cron: row[1], every: row[2], zone: row[3]) else { return nil }
            var schedule = Schedule(
                name: name, timing: timing, catchUp: Schedule.CatchUp(rawValue: row[4] ?? "") ?? .one, jobs: Schedule.decode(row[5] ?? "[]") ?? [],
                files: Self.textArray(row[6] ?? "{}"))
            schedule.nextAt = row[7].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
            schedule.lastTick = row[8].flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
            schedule.lastBatch = row[9]
            return schedule
        }
    }

    /// The elements of a text array literal as `array(_:)` writes it.
    static func textArray(_ literal: String) -> [String] {
        var elements: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in literal.dropFirst().dropLast() {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == "," && !quoted {
                elements.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.isEmpty || !elements.isEmpty { elements.append(current) }
        return elements
    }

    /// The schedules that inserted `batches`, by batch.
    package func scheduleNames(batches: [String]) throws(QueueError) -> [String: String] {
        guard !batches.isEmpty, try prepareSchedules(making: false) else { return [:] }
        var names: [String: String] = [:]
        for row in try connection.query("SELECT batch, schedule FROM runner.ticks WHERE batch = ANY($1::text[])", [Self.array(batches.map { Optional($0) })]) {
            if let batch = row[0], let name = row[1] { names[batch] = name }
        }
        return names
    }

    /// Fires the schedules due now (see `ScheduleFiring`): for each, in one transaction, the row
    /// of each tick and its batch's jobs, or nothing. A schedule no watcher looked at for a lease
    /// was missed by the fleet, and its due ticks follow its catch-up.
    package func fireDueSchedules(runner: String) throws(QueueError) -> (fired: [Schedule.Fired], nextIn: Duration?) {
        guard try prepareSchedules(making: false) else { return ([], nil) }
        let leaseSeconds = Double(max(1, lease.inMilliseconds)) / 1000
        var fired: [Schedule.Fired] = []
        // One schedule a transaction, so that a watcher killed in one loses nothing of another.
        var seen = Set<String>()
        while true {
            let more = try connection.transaction { db throws(QueueError) -> Bool in
                let rows = try db.query(
                    """
                    SELECT id, name, cron, every_s::text, zone, catch_up, jobs, extract(epoch FROM coalesce(last_tick, created_at))::float8,
                        extract(epoch FROM now() - checked_at)::float8, extract(epoch FROM now())::float8
                    FROM runner.schedules WHERE next_at <= now() AND NOT (name = ANY($1::text[]))
                    ORDER BY next_at LIMIT 1 FOR UPDATE SKIP LOCKED
                    """, [Self.array(seen.map { Optional($0) })])
                guard let row = rows.first, let id = row[0], let name = row[1] else { return false }
                seen.insert(name)
                let now = Date(timeIntervalSince1970: Double(row[9] ?? "0") ?? 0)
                guard let timing = Schedule.timing(cron: row[2], every: row[3], zone: row[4]), let jobs = Schedule.decode(row[6] ?? "") else {
                    // Written by a newer runner, or damaged: left alone, looked at again in an hour.
                    try db.query("UPDATE runner.schedules SET next_at = now() + interval '1 hour' WHERE id = $1::bigint", [id])
                    return true
                }
                let from = Date(timeIntervalSince1970: Double(row[7] ?? "0") ?? 0)
                let present = (Double(row[8] ?? "0") ?? 0) <= leaseSeconds
                let plan = Schedule.plan(timing, catchUp: Schedule.CatchUp(rawValue: row[5] ?? "") ?? .one, from: from, now: now, present: present)
                var lastBatch: String?
                for tick in plan.fire {
                    let batch = JobQueue.newBatchID(now: tick.at)
                    let claimed = try db.query(
                        """
                        INSERT INTO runner.ticks (schedule_id, tick, schedule, batch, covers, fired_by)
                        VALUES ($1::bigint, to_timestamp($2::float8), $3, $4, $5::integer, $6)
                        ON CONFLICT DO NOTHING RETURNING 1
                        """, [id, Self.timestamp(tick.at), name, batch, String(tick.covers), runner])
                    guard !claimed.isEmpty else { continue }
                    let inserted = try Self.insertJobs(jobs, batch: batch, db)
                    lastBatch = batch
                    fired.append(Schedule.Fired(schedule: name, tick: tick.at, batch: batch, jobs: inserted, covers: tick.covers, dropped: 0))
                }
                if plan.dropped > 0 {
                    fired.append(Schedule.Fired(schedule: name, tick: plan.last ?? now, batch: "", jobs: 0, covers: 0, dropped: plan.dropped))
                }
                try db.query(
                    """
                    UPDATE runner.schedules SET next_at = to_timestamp($2::float8), checked_at = now(),
                        last_tick = coalesce(to_timestamp($3::float8), last_tick), last_batch = coalesce($4, last_batch)
                    WHERE id = $1::bigint
                    """, [id, Self.timestamp(plan.next ?? now.addingTimeInterval(366 * 86_400)), Self.timestamp(plan.last), lastBatch])
                if lastBatch != nil { try db.query("SELECT pg_notify('runner_jobs', '')") }
                return true
            }
            if !more { break }
        }
        // The fleet is present: said on every schedule now and then, never waiting for another
        // watcher's lock (one that fires a schedule holds its row).
        try connection.query(
            """
            UPDATE runner.schedules SET checked_at = now() WHERE id IN (
                SELECT id FROM runner.schedules WHERE checked_at < now() - $1::interval FOR UPDATE SKIP LOCKED)
            """, ["\(max(1, lease.inMilliseconds / 4)) milliseconds"])
        let next = Self.value(try connection.query("SELECT extract(epoch FROM min(next_at) - now())::float8 FROM runner.schedules"))
        return (fired, next.flatMap(Double.init).map { .seconds(max(0, $0)) })
    }

    /// Inserts a tick's jobs as `submit` does, in the caller's transaction: a unique job whose
    /// key is queued or running is left out. Returns how many were inserted.
    static func insertJobs(_ jobs: [QueueSubmission], batch: String, _ db: PostgresConnection) throws(QueueError) -> Int {
        var seen = Set<String>()
        let kept = jobs.filter { job in
            defer { seen.insert(job.key) }
            return !(job.unique && seen.contains(job.key))
        }
        if kept.contains(where: \.unique) { try db.query("SELECT pg_advisory_xact_lock(74170002)") }
        var inserted = 0
        var start = 0
        while start < kept.count {
            let chunk = kept[start..<min(kept.count, start + 1000)]
            let rows = try db.query(
                """
                WITH given AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $6::bool[]) AS g(key, kind, job, file, uniq))
                INSERT INTO runner.jobs (key, kind, job, file, batch)
                SELECT key, kind, job, file, $5 FROM given
                WHERE NOT (uniq AND EXISTS (SELECT 1 FROM runner.jobs j WHERE j.key = given.key AND j.state IN ('queued', 'running', 'waiting')))
                RETURNING 1
                """,
                [array(chunk.map(\.key)), array(chunk.map(\.kind)), array(chunk.map(\.job)), array(chunk.map(\.file)), batch,
                 "{" + chunk.map { $0.unique ? "t" : "f" }.joined(separator: ",") + "}"])
            inserted += rows.count
            start += chunk.count
        }
        return inserted
    }
}
