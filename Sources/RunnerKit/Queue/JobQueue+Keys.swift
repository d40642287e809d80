/// One task per key across the fleet: a row per running key (`keys`), under the lease of the
/// runner that holds it.
extension JobQueue {
    /// Takes `key` for `runner` unless another runner holds it under a live lease.
    package func lockKey(_ key: String, runner: String) throws(QueueError) -> Bool {
        let rows = try connection.query(
            """
            INSERT INTO runner.keys (key, runner, lease_until) VALUES ($1, $2, now() + $3::interval)
            ON CONFLICT (key) DO UPDATE SET runner = EXCLUDED.runner, lease_until = EXCLUDED.lease_until
            WHERE runner.keys.lease_until < now()
            RETURNING key
            """, [key, runner, leaseText])
        return !rows.isEmpty
    }

    /// Lets go of `keys` of `runner` (those another runner took meanwhile stay); when a queued
    /// job waits for one of them, the runners are told as of new jobs.
    package func unlockKeys(_ keys: [String], runner: String) throws(QueueError) {
        guard !keys.isEmpty else { return }
        try connection.query(
            """
            WITH unlocked AS (DELETE FROM runner.keys WHERE key = ANY($1::text[]) AND runner = $2 RETURNING key)
            \(Self.wakeWaiting)
            """, [Self.array(keys), runner])
    }

    /// The end of a statement whose `unlocked` lets go of keys: a notice of new jobs when a
    /// queued job waits for one of them (the claims pass over held keys).
    private static let wakeWaiting = """
        SELECT pg_notify('runner_jobs', '')
        WHERE EXISTS (SELECT 1 FROM runner.jobs q WHERE q.key IN (SELECT key FROM unlocked) AND q.state = 'queued')
        """
}
