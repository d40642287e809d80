/// The fleet's one output: the queue's identity, the output folder its first watcher stamped,
/// and each key's last record (`results`).
extension JobQueue {
    /// The key's last record as the fleet keeps it (`results`): what the next runner of the key
    /// revalidates with.
    package func keyRecord(_ key: String) throws(QueueError) -> String? {
        Self.value(try connection.query("SELECT record FROM runner.results WHERE key = $1", [key]))
    }

    /// The queue's id, and the output folder its first watcher stamped (nil until one did).
    package func identity() throws(QueueError) -> QueueIdentity {
        Self.identity(try connection.query("SELECT id, folder, output, stamped_by FROM runner.identity LIMIT 1"))
    }

    /// Records `folder` (the id in an output folder's stamp) as the queue's output unless one
    /// is recorded already; returns the queue's identity after.
    package func recordOutput(folder: String, path: String, runner: String) throws(QueueError) -> QueueIdentity {
        try connection.query(
            """
            UPDATE runner.identity SET folder = $1, output = $2, stamped_by = $3, stamped_at = now() WHERE folder IS NULL
            """, [folder, path, runner])
        return try identity()
    }

    private static func identity(_ rows: [[String?]]) -> QueueIdentity {
        let row = rows.first ?? []
        func column(_ index: Int) -> String? { row.count > index ? row[index] : nil }
        return QueueIdentity(id: column(0) ?? "", folder: column(1), output: column(2), stampedBy: column(3))
    }
}
