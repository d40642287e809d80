import Foundation

/// The fleet as `status --queue` shows it.
extension JobQueue {
    /// How far back `status` counts the jobs that ended: a day, not every row `--keep` keeps.
    package static let recent = Duration.seconds(86_400)

    /// Counts fleet-wide (the ended jobs of the last `recent`); up to 100 running jobs and 10
    /// recent failures.
    package func status() throws(QueueError) -> QueueStatus {
        let counts = try connection.query(
            """
            SELECT count(*) FILTER (WHERE state = 'queued' OR (state = 'running' AND lease_until < now())),
                   count(*) FILTER (WHERE state = 'done' AND status IN ('succeeded', 'notModified') AND finished_at > now() - $1::interval),
                   count(*) FILTER (WHERE state = 'done' AND status = 'cancelled' AND finished_at > now() - $1::interval),
                   count(*) FILTER (WHERE state = 'done' AND status NOT IN ('succeeded', 'notModified', 'cancelled', 'notFound')
                       AND finished_at > now() - $1::interval),
                   count(*) FILTER (WHERE state = 'done' AND status = 'notFound' AND finished_at > now() - $1::interval)
            FROM runner.jobs
            """, ["\(Self.recent.inMilliseconds) milliseconds"]).first ?? []
        func number(_ index: Int) -> Int { counts.count > index ? Int(counts[index] ?? "0") ?? 0 : 0 }
        let running = try connection.query(
            """
            SELECT key, runner, extract(epoch FROM started_at)::float8,
                CASE WHEN phase = 'complete' THEN 'completing' WHEN status IS NOT NULL THEN 'hooks' END
            FROM runner.jobs
            WHERE state = 'running' AND lease_until >= now() ORDER BY started_at LIMIT 100
            """).map { row in
                QueueStatus.Running(
                    key: row[0] ?? "", runner: row[1] ?? "", startedAt: Date(timeIntervalSince1970: Double(row[2] ?? "0") ?? 0),
                    phase: row.count > 3 ? row[3] : nil)
            }
        let failed = try connection.query(
            """
            SELECT key, CASE WHEN hooks_failed IS NULL THEN status ELSE 'hooks' END, coalesce(hooks_failed, reason),
                extract(epoch FROM finished_at)::float8 FROM runner.jobs
            WHERE state = 'done' AND (status NOT IN ('succeeded', 'notModified', 'cancelled', 'notFound') OR hooks_failed IS NOT NULL)
            ORDER BY finished_at DESC LIMIT 10
            """).map { row in
                QueueStatus.Failed(key: row[0] ?? "", status: row[1] ?? "", reason: row[2], at: Date(timeIntervalSince1970: Double(row[3] ?? "0") ?? 0))
            }
        var status = QueueStatus(queued: number(0), running: running, done: number(1), failed: number(3), cancelled: number(2), latestFailed: failed)
        status.notFound = number(4)
        status.watchers = try connection.query(
            """
            SELECT w.name, w.host, w.version, array_to_string(w.kinds, ' '), w.lease_ms, extract(epoch FROM w.started_at)::float8,
                (extract(epoch FROM now() - w.heartbeat_at) * 1000)::bigint,
                (SELECT count(*) FROM runner.jobs j WHERE j.runner = w.name AND j.state = 'running')
            FROM runner.watchers w WHERE w.heartbeat_at > now() - interval '1 hour' ORDER BY w.started_at
            """).map { row in
                var watcher = QueueWatcher(
                    name: row[0] ?? "", host: row[1] ?? "", version: row[2] ?? "", kinds: (row[3] ?? "").split(separator: " ").map(String.init),
                    lease: .milliseconds(Int(row[4] ?? "0") ?? 0))
                watcher.startedAt = Date(timeIntervalSince1970: Double(row[5] ?? "0") ?? 0)
                watcher.silentFor = .milliseconds(max(0, Int(row[6] ?? "0") ?? 0))
                watcher.running = Int(row[7] ?? "0") ?? 0
                return watcher
            }
        status.parents = try parentsWaiting()
        let lost = try connection.query(
            """
            SELECT count(*) FILTER (WHERE state = 'running' AND lease_until < now()),
                   count(*) FILTER (WHERE claims > 1 AND state <> 'done')
            FROM runner.jobs WHERE state IN ('running', 'waiting', 'queued')
            """).first ?? []
        status.abandoned = lost.first.flatMap { $0.flatMap { Int($0) } } ?? 0
        status.reclaimed = lost.count > 1 ? lost[1].flatMap { Int($0) } ?? 0 : 0
        status.pausedHosts = try connection.query(
            "SELECT host, (extract(epoch FROM paused_until - now()) * 1000)::bigint FROM runner.hosts WHERE paused_until > now() ORDER BY host"
        ).compactMap { row in
            guard let host = row[0], let left = row[1].flatMap({ Int($0) }) else { return nil }
            return (host, .milliseconds(left))
        }
        status.batches = try connection.query(
            """
            SELECT batch, extract(epoch FROM min(submitted_at))::float8
            FROM runner.jobs WHERE batch IS NOT NULL GROUP BY batch ORDER BY min(submitted_at) DESC LIMIT 10
            """
        ).compactMap { row -> (String, Date, QueueBatchStatus)? in
            guard let id = row[0] else { return nil }
            return (id, Date(timeIntervalSince1970: Double(row[1] ?? "0") ?? 0), QueueBatchStatus())
        }
        for index in status.batches.indices { status.batches[index].counts = try batchStatus(status.batches[index].id) }
        status.waiting = Self.value(try connection.query("SELECT count(*) FROM runner.jobs WHERE state = 'waiting'")).flatMap { Int($0) } ?? 0
        let liveKinds = Set(status.watchers.filter(\.isLive).flatMap(\.kinds))
        status.unclaimable = try connection.query(
            "SELECT kind, count(*) FROM runner.jobs WHERE state = 'queued' GROUP BY kind ORDER BY kind"
        ).compactMap { row in
            guard let kind = row[0], !liveKinds.contains(kind) else { return nil }
            return (kind, Int(row[1] ?? "0") ?? 0)
        }
        return status
    }

    /// The record stored for the last finished job of `key`, if any.
    package func record(key: String) throws(QueueError) -> String? {
        Self.value(try connection.query(
            "SELECT record FROM runner.jobs WHERE key = $1 AND record IS NOT NULL ORDER BY finished_at DESC LIMIT 1", [key]))
    }
}
