/// Cancelling a key across the fleet, and pruning the rows of finished jobs.
extension JobQueue {
    // MARK: - Cancelling

    /// Cancels the queued jobs of `key` and asks every runner to cancel its running task.
    /// Returns how many were queued, and the runners that run the key now.
    package func cancel(key: String) throws(QueueError) -> (queued: Int, running: [String]) {
        try connection.transaction { db throws(QueueError) in
            let queued = try db.query(
                """
                UPDATE runner.jobs SET state = 'done', status = 'cancelled', reason = 'cancelled (runner cancel)', finished_at = now(),
                    record = json_build_object('key', key, 'kind', kind, 'status', 'cancelled', 'error', 'cancelled (runner cancel)')::text
                WHERE key = $1 AND state = 'queued' RETURNING id
                """, [key]).count
            let running = try db.query("SELECT DISTINCT runner FROM runner.jobs WHERE key = $1 AND state = 'running'", [key])
                .compactMap { $0[0] }
            try db.query("SELECT pg_notify('runner_cancel', $1)", [key])
            // A parent waiting for its children: the queued ones are cancelled (counted off, so
            // the parent completes once the running ones ended), the running ones asked to stop.
            let children = try db.query(
                """
                WITH waiting_parents AS (SELECT id FROM runner.jobs WHERE key = $1 AND state = 'waiting'),
                gone AS (
                    UPDATE runner.jobs c SET state = 'done', status = 'cancelled', reason = 'cancelled with its parent (runner cancel)',
                        finished_at = now(),
                        record = json_build_object('key', key, 'kind', kind, 'status', 'cancelled', 'error', 'cancelled with its parent (runner cancel)')::text
                    WHERE c.parent_id IN (SELECT id FROM waiting_parents) AND c.state = 'queued'
                    RETURNING c.parent_id),
                counted AS (
                    UPDATE runner.parents p SET children_left = p.children_left - g.n
                    FROM (SELECT parent_id, count(*) AS n FROM gone GROUP BY parent_id) g
                    WHERE p.id = g.parent_id
                    RETURNING p.id, p.children_left),
                completable AS (
                    UPDATE runner.jobs j SET state = 'running', phase = 'complete', lease_until = now()
                    FROM counted c WHERE j.id = c.id AND c.children_left = 0 AND j.state = 'waiting'
                    RETURNING j.id),
                asked AS (
                    SELECT pg_notify('runner_cancel', c.key) FROM runner.jobs c
                    WHERE c.parent_id IN (SELECT id FROM waiting_parents) AND c.state = 'running' AND c.status IS NULL)
                SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM asked), (SELECT count(*) FROM completable)
                """, [key]).first ?? []
            if children.count > 2, children[2] != "0" { try db.query("SELECT pg_notify('runner_jobs', '')") }
            let childrenCancelled = children.first.flatMap { $0.flatMap { Int($0) } } ?? 0
            return (queued + childrenCancelled, running)
        }
    }

    // MARK: - Pruning

    /// Deletes the rows of jobs that finished more than `age` ago; returns how many.
    @discardableResult
    package func prune(olderThan age: Duration) throws(QueueError) -> Int {
        let rows = try connection.query(
            "WITH gone AS (DELETE FROM runner.jobs WHERE state = 'done' AND finished_at < now() - $1::interval RETURNING 1) SELECT count(*) FROM gone",
            ["\(max(0, age.inMilliseconds)) milliseconds"])
        return Self.value(rows).flatMap { Int($0) } ?? 0
    }
}
