/// How the jobs of a submitted file ended, once all of them did: what a watcher says when the
/// last job of a file ends on it.
package protocol QueueFileOutcomes: Sendable {
    /// How the jobs of job `id`'s submitted file (in its batch, children included) ended, by
    /// status, once none is left to run; nil while some are.
    func fileOutcome(of id: Int64) async throws(QueueError) -> [String: Int]?
}
