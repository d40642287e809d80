/// What a watcher tells the queue of a claim between its start and its record, and after it:
/// durable progress (a claim that made some is not an abandon), and the end of the hooks of a
/// job whose record was stored with its hooks pending.
package protocol QueueClaimProgress: Sendable {
    /// Credits the running jobs `ids` of `runner`: their claim made durable progress, so it is
    /// not counted as an abandon (once per claim).
    func credit(ids: [Int64], runner: String) async throws(QueueError)
    /// Ends the jobs whose records were stored with their hooks pending (`QueueFinish.hooksPending`),
    /// once their hooks ran.
    func hooksEnded(ids: [Int64], runner: String) async throws(QueueError)
}
