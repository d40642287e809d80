import Foundation

/// The fleet's watchers: each listed under its name and renewing its leases with its
/// heartbeat; the jobs that dead watchers abandoned too often, ended.
extension JobQueue {
    /// Ends the jobs abandoned `maxClaims` times whose last runner died too (their lease ran
    /// out), so that a job that crashes runners does not loop for ever: a job that had not
    /// ended ends `failed` ("abandoned by 3 runners"; claims during which it made durable
    /// progress do not count); a job that had ended, and whose hooks its runners left as many
    /// times, keeps its own status and ends with its hooks failed, said in `hooks_failed`.
    @discardableResult
    package func failAbandoned() throws(QueueError) -> QueueAbandoned {
        let rows = try connection.query(
            """
            WITH gone AS (
                UPDATE runner.jobs SET state = 'done', lease_until = NULL,
                    status = coalesce(status, 'failed'), finished_at = coalesce(finished_at, now()),
                    reason = CASE WHEN status IS NULL THEN 'abandoned by ' || claims - credits || ' runners' ELSE reason END,
                    hooks_failed = CASE WHEN status IS NULL THEN hooks_failed
                        ELSE 'its --on-finish hooks were left by ' || hook_claims || ' runners (each stopped while running them); they did not run' END,
                    record = CASE WHEN status IS NULL THEN json_build_object('key', key, 'kind', kind, 'status', 'failed',
                        'error', 'abandoned by ' || claims - credits || ' runners (each stopped while running it)')::text ELSE record END
                WHERE state = 'running' AND lease_until < now() AND NOT (\(Self.claimable.replacingOccurrences(of: "$4", with: "$1")))
                RETURNING key, record, hooks_failed)
            SELECT * FROM gone
            """, [String(Self.maxClaims)])
        var abandoned = QueueAbandoned()
        for row in rows {
            if let hooks = row[2] {
                abandoned.hooksFailed.append((row[0] ?? "", row[1] ?? "", hooks))
            } else {
                abandoned.failed += 1
            }
        }
        return abandoned
    }

    /// Extends the leases of `runner`'s claims and keys, and says it is alive.
    package func renew(runner: String) throws(QueueError) {
        try connection.query(
            "UPDATE runner.jobs SET lease_until = now() + $2::interval WHERE runner = $1 AND state = 'running'", [runner, leaseText])
        try connection.query("UPDATE runner.keys SET lease_until = now() + $2::interval WHERE runner = $1", [runner, leaseText])
        try connection.query("UPDATE runner.watchers SET heartbeat_at = now() WHERE name = $1", [runner])
    }

    /// Lists `watcher` in the fleet under its name; rows of watchers silent for a day go.
    /// A name is one live watcher's: when another process holds it and is alive (its heartbeat
    /// within its lease), the watcher is refused (a usage error). When the process that held it
    /// is dead (silent past its lease, or on this host and gone), the name is taken over and the
    /// jobs that process still held under a lease are made claimable at once (their keys let
    /// go of), so a watcher restarted under its name takes its own abandoned claims back without
    /// waiting out their leases. Registering again from the same process only updates the row.
    package func register(_ watcher: QueueWatcher) throws(QueueError) {
        try connection.transaction { db throws(QueueError) in
            try db.query("SELECT pg_advisory_xact_lock(74170003, hashtext($1))", [watcher.name])
            try db.query("DELETE FROM runner.watchers WHERE heartbeat_at < now() - interval '1 day'")
            let previous = try db.query(
                """
                SELECT host, coalesce(pid, 0), coalesce(instance, ''), heartbeat_at > now() - make_interval(secs => lease_ms / 1000.0),
                    (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint
                FROM runner.watchers WHERE name = $1
                """, [watcher.name]).first
            if let previous, previous.count > 4, previous[2] != watcher.instance {
                let host = previous[0] ?? ""
                let pid = Int32(previous[1] ?? "0") ?? 0
                if previous[3] == "t" && !Self.isGone(host: host, pid: pid, seenFrom: watcher) {
                    let silent = Double(previous[4] ?? "0").map { String(format: "%.0f", $0 / 1000) } ?? "?"
                    throw QueueError(
                        "a watcher named \(Printable.escaped(watcher.name)) is alive (on \(Printable.escaped(host)), heartbeat \(silent) s ago); give this one another --name",
                        usage: true)
                }
                // The process that held the name is dead: what it held comes back now.
                let taken = try db.query(
                    """
                    WITH mine AS (
                        UPDATE runner.jobs SET lease_until = now() - interval '1 millisecond'
                        WHERE runner = $1 AND state = 'running' AND lease_until >= now() RETURNING 1),
                    keys AS (DELETE FROM runner.keys WHERE runner = $1 RETURNING 1)
                    SELECT (SELECT count(*) FROM mine)
                    """, [watcher.name])
                if Self.value(taken) != "0" { try db.query("SELECT pg_notify('runner_jobs', '')") }
            }
            try db.query(
                """
                INSERT INTO runner.watchers (name, host, version, kinds, lease_ms, events, instance, pid, slots)
                VALUES ($1, $2, $3, $4::text[], $5, $6, $7, $8, $9)
                ON CONFLICT (name) DO UPDATE SET host = EXCLUDED.host, version = EXCLUDED.version, kinds = EXCLUDED.kinds,
                    lease_ms = EXCLUDED.lease_ms, events = EXCLUDED.events, instance = EXCLUDED.instance, pid = EXCLUDED.pid,
                    slots = EXCLUDED.slots, heartbeat_at = now(),
                    started_at = CASE WHEN runner.watchers.instance IS DISTINCT FROM EXCLUDED.instance THEN now() ELSE runner.watchers.started_at END
                """, [watcher.name, watcher.host, watcher.version, Self.array(watcher.kinds), String(watcher.lease.inMilliseconds),
                      watcher.followsEvents ? "t" : "f", watcher.instance, String(watcher.pid), watcher.slots.map(String.init)])
        }
    }

    /// Whether the process `pid` on `host`, which held a watcher's name, is known to be gone as
    /// seen from `watcher`: on the same host, it is this very process id (a container restarted)
    /// or no process has that id.
    static func isGone(host: String, pid: Int32, seenFrom watcher: QueueWatcher) -> Bool {
        guard host == watcher.host, pid > 0 else { return false }
        if pid == watcher.pid { return true }
        return kill(pid, 0) != 0 && errno == ESRCH
    }

    /// Takes `runner` off the list (it stopped).
    package func unregister(runner: String) throws(QueueError) {
        try connection.query("DELETE FROM runner.watchers WHERE name = $1", [runner])
    }
}
