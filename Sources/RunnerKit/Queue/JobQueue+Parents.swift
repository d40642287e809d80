import Foundation

/// A parent's children in the queue: queued with the parent's own record (`QueueFinish.children`),
/// run by any runner, counted off as they end; the runner that ends the last one (or, if it
/// dies, the next to claim the parent) completes the parent's record with their counts.
extension JobQueue {
    /// The parent `id` that `runner` is to complete (nil: not, or no longer, its to complete).
    package func parentToComplete(id: Int64, runner: String) throws(QueueError) -> QueueParentToComplete? {
        let rows = try connection.query(
            """
            SELECT p.key, p.record, coalesce(p.children_total, 0), coalesce(p.children_invalid, 0), p.first_invalid,
                (SELECT string_agg(s.status || ' ' || s.n, ' ')
                 FROM (SELECT coalesce(c.status, 'failed') AS status, count(*) AS n FROM runner.jobs c WHERE c.parent_id = p.id GROUP BY 1) s)
            FROM runner.jobs p WHERE p.id = $1 AND p.runner = $2 AND p.state = 'running' AND p.phase = 'complete'
            """, [String(id), runner])
        guard let row = rows.first, row.count > 5, let key = row[0], let record = row[1] else { return nil }
        var counts: [String: Int] = [:]
        let words = (row[5] ?? "").split(separator: " ")
        for index in stride(from: 0, to: words.count - 1, by: 2) { counts[String(words[index])] = Int(words[index + 1]) }
        return QueueParentToComplete(
            id: id, key: key, record: record, counts: counts, invalid: Int(row[3] ?? "0") ?? 0, firstInvalid: row[4],
            total: Int(row[2] ?? "0") ?? 0)
    }

    /// Stores a parent's completed record (its claim ended, or held for its hooks) and counts it
    /// off its own parent; returns the parents whose last child that was (now `runner`'s to
    /// complete).
    package func completeParent(_ finish: QueueFinish, runner: String) throws(QueueError) -> [Int64] {
        let rows = try connection.query(
            """
            WITH done AS (
                UPDATE runner.jobs j SET status = $2, reason = $3, record = $4, finished_at = now(), phase = NULL,
                    state = CASE WHEN $6::bool THEN 'running' ELSE 'done' END,
                    lease_until = CASE WHEN $6::bool THEN now() + $7::interval END
                WHERE j.id = $1 AND j.runner = $5 AND j.state = 'running' AND j.phase = 'complete'
                RETURNING j.key, j.record, j.id, j.parent_id, 0 AS waits, j.kind, j.status),
            kept AS (
                INSERT INTO runner.results AS r (key, record) SELECT key, record FROM done
                ON CONFLICT (key) DO UPDATE SET record = EXCLUDED.record, finished_at = now()),
            unlocked AS (SELECT NULL::text AS key WHERE false),
            forgotten AS (DELETE FROM runner.parents WHERE id = $1),
            \(Self.parentsOfDone(runner: "$5", lease: "$7")),
            \(Self.toldTheFleet(runner: "$5"))
            SELECT (SELECT count(*) FROM woken) + (SELECT count(*) FROM told),
                (SELECT string_agg(id::text, ' ') FROM completing)
            """,
            [String(finish.id), finish.status, finish.error, finish.record, runner, finish.hooksPending ? "t" : "f", leaseText])
        return Self.ids(rows.first.flatMap { $0.count > 1 ? $0[1] : nil })
    }

    /// Parents waiting for their children: key, children ended, children in all (elements that
    /// could not be made into jobs counted as ended), oldest first.
    package func parentsWaiting(limit: Int = 20) throws(QueueError) -> [(key: String, ended: Int, total: Int)] {
        try connection.query(
            """
            SELECT j.key, j.children_total - p.children_left, j.children_total
            FROM runner.jobs j JOIN runner.parents p ON p.id = j.id
            WHERE j.state = 'waiting' ORDER BY j.id LIMIT $1
            """, [String(limit)]
        ).compactMap { row in
            guard let key = row[0], let ended = row[1].flatMap({ Int($0) }), let total = row[2].flatMap({ Int($0) }) else { return nil }
            return (key, ended, total)
        }
    }

    /// The end of a statement whose `done` ended jobs (`parent_id` among what it returns) and
    /// whose `unlocked` let go of keys: each parent counts its children that ended (`runner.parents`); one whose
    /// last child ended is claimed by `runner` under the lease (parameters) to complete its record
    /// (`phase` `complete`); `woken` tells the runners when a queued job waits for a key let go of.
    static func parentsOfDone(runner: String, lease: String) -> String {
        """
        counted AS (
            UPDATE runner.parents p SET children_left = p.children_left - d.n
            FROM (SELECT parent_id, count(*) AS n FROM done WHERE parent_id IS NOT NULL AND waits = 0 GROUP BY parent_id) d
            WHERE p.id = d.parent_id
            RETURNING p.id, p.children_left),
        completing AS (
            UPDATE runner.jobs j SET state = 'running', phase = 'complete', runner = \(runner), lease_until = now() + \(lease)::interval
            FROM counted c WHERE j.id = c.id AND c.children_left = 0 AND j.state = 'waiting'
            RETURNING j.id),
        woken AS (
            SELECT pg_notify('runner_jobs', '')
            WHERE EXISTS (SELECT 1 FROM runner.jobs q WHERE q.key IN (SELECT key FROM unlocked) AND q.state = 'queued')
                OR EXISTS (SELECT 1 FROM done WHERE waits > 0))
        """
    }
}
