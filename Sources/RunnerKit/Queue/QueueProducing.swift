/// What a producer asks of the queue, for a watcher's live page: the fleet's status, a job
/// file queued as one batch, a key cancelled across the fleet. The page reads a snapshot that a
/// task beside the feed refreshes through this, and its writes come through it too, so no page
/// request waits on the database and the page's thread never calls it.
package protocol QueueProducing: Sendable {
    /// The fleet as `status --queue` shows it, and the schedules that made its recent batches.
    func producerStatus() async throws(QueueError) -> QueueProducerStatus
    /// Queues `jobs` as one batch, or none; a unique job whose key is queued or running is
    /// left out (the answer names it).
    func queueJobs(_ jobs: [QueueSubmission]) async throws(QueueError) -> QueueSubmitted
    /// `runner cancel KEY --queue`: the key's queued jobs end cancelled (a waiting parent's
    /// queued children with it) and the runners that run it are told. Returns how many were
    /// queued and which runners run it now.
    func cancelJobs(key: String) async throws(QueueError) -> (queued: Int, running: [String])
}

/// The queue's status and, by batch id, the schedule that fired each recent batch.
package struct QueueProducerStatus: Sendable {
    package var status: QueueStatus
    package var scheduled: [String: String]

    package init(status: QueueStatus, scheduled: [String: String] = [:]) {
        self.status = status
        self.scheduled = scheduled
    }
}
