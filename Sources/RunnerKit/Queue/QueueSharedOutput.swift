/// One output for the fleet: the output folder that every watcher of the queue writes into
/// (`QueueOutput` stamps and checks it), and each key's last record as the fleet keeps it, so
/// that any watcher revalidates a key.
package protocol QueueSharedOutput: Sendable {
    /// The queue's id, and the output folder its first watcher stamped (nil until one did).
    func identity() async throws(QueueError) -> QueueIdentity
    /// Records `folder` (the id in an output folder's stamp, seen at `path` by `runner`) as
    /// the queue's output unless one is recorded already; returns the identity after.
    func recordOutput(folder: String, path: String, runner: String) async throws(QueueError) -> QueueIdentity
    /// The key's last record as the fleet keeps it (nil: none yet).
    func keyRecord(_ key: String) async throws(QueueError) -> String?
}
