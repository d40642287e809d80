/// The fleet's housekeeping, which every watcher does with its heartbeat: jobs that dying
/// runners abandoned too often ended, and old finished jobs removed.
package protocol QueueMaintenance: Sendable {
    /// Ends `failed` the jobs abandoned `JobQueue.maxClaims` times; returns how many.
    func failAbandoned() async throws(QueueError) -> QueueAbandoned
    /// Removes finished jobs older than `age`; returns how many.
    func prune(olderThan age: Duration) async throws(QueueError) -> Int
}
