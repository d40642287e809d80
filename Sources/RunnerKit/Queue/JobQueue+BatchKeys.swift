extension JobQueue {
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
