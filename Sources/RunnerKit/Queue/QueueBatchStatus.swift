/// How the jobs of a batch stand: how many are queued, running, and ended by status.
package struct QueueBatchStatus: Sendable {
    package var queued = 0
    package var running = 0
    /// Every ended job of the batch by status, children included.
    package var ended: [String: Int] = [:]
    /// The ended jobs of the batch's files (not children) by status.
    package var topLevel: [String: Int] = [:]
    /// Elements of the batch's parents' payloads that could not be made into jobs.
    package var invalidChildren = 0
    package var total: Int { queued + running + ended.values.reduce(0, +) }
    package var isOver: Bool { queued == 0 && running == 0 }

    package init() {}

    /// The batch's counts as `run` counts its own: one top-level job a job of the files, the
    /// children each counted once, judged as children (a child's `notFound` is an answer).
    package var summary: RunSummary {
        var summary = RunSummary()
        var children = JobResult.Descendants()
        for (name, count) in ended {
            let status = JobStatus(rawValue: name) ?? .failed
            let top = topLevel[name] ?? 0
            summary.add(status, count: top)
            if count > top { children.byStatus[status, default: 0] += count - top }
        }
        children.invalid = invalidChildren
        summary.add(descendants: children)
        return summary
    }
}
