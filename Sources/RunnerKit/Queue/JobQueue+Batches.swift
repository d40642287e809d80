/// Batches as `submit --wait`, `status --batch` and `forget --not-in-batch` see them.
extension JobQueue {
    /// The jobs of `batch` (none: no such batch).
    package func batchStatus(_ batch: String) throws(QueueError) -> QueueBatchStatus {
        var status = QueueBatchStatus()
        for row in try connection.query(
            """
            SELECT state, coalesce(status, ''), parent_id IS NULL, count(*), coalesce(sum(children_invalid), 0)
            FROM runner.jobs WHERE batch = $1 GROUP BY 1, 2, 3
            """, [batch])
        {
            let count = Int(row[3] ?? "0") ?? 0
            switch row[0] {
            case "queued": status.queued += count
            case "running", "waiting": status.running += count
            default:
                status.ended[row[1] ?? "", default: 0] += count
                if row[2] == "t" { status.topLevel[row[1] ?? "", default: 0] += count }
                status.invalidChildren += Int(row[4] ?? "0") ?? 0
            }
        }
        return status
    }

    /// The ended top-level jobs of `batch` that did not succeed (nor were not modified), as
    /// `run`'s table shows them: key, status and why; at most `limit`, oldest end first, and how
    /// many there are in all.
    package func batchFailures(_ batch: String, limit: Int) throws(QueueError) -> (failures: [(key: String, status: String, error: String)], total: Int) {
        let rows = try connection.query(
            """
            SELECT key, status, coalesce(reason, ''), count(*) OVER ()
            FROM runner.jobs
            WHERE batch = $1 AND parent_id IS NULL AND state = 'done' AND status NOT IN ('succeeded', 'notModified')
            ORDER BY finished_at, id LIMIT $2
            """, [batch, String(limit)])
        let total = rows.first.flatMap { Int($0[3] ?? "0") } ?? 0
        return (rows.map { ($0[0] ?? "", $0[1] ?? "", $0[2] ?? "") }, total)
    }

    /// How many of the jobs `ids` are still queued or running, and how the others ended.
    package func jobsStatus(_ ids: [String]) throws(QueueError) -> (pending: Int, ended: [String: Int]) {
        guard !ids.isEmpty else { return (0, [:]) }
        var pending = 0
        var ended: [String: Int] = [:]
        for row in try connection.query(
            "SELECT state, coalesce(status, ''), count(*) FROM runner.jobs WHERE id = ANY($1::bigint[]) GROUP BY 1, 2", [Self.array(ids)])
        {
            let count = Int(row[2] ?? "0") ?? 0
            if row[0] == "done" { ended[row[1] ?? "", default: 0] += count } else { pending += count }
        }
        return (pending, ended)
    }

    /// The keys of every job of `batch`, children included (they carry their parent's batch),
    /// and how many of its jobs are not over yet (queued, running, waiting for children): a
    /// batch that is not over may still add children. What a mirror's batch still lists, for
    /// `forget --not-in-batch`.
    package func batchKeys(_ batch: String) throws(QueueError) -> (keys: Set<String>, pending: Int) {
        var keys = Set<String>()
        var pending = 0
        for row in try connection.query(
            "SELECT key, state IN ('queued', 'running', 'waiting') FROM runner.jobs WHERE batch = $1", [batch])
        {
            if let key = row[0] { keys.insert(key) }
            if row[1] == "t" { pending += 1 }
        }
        return (keys, pending)
    }
}
