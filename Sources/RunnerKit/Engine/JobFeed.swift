import Foundation

/// Where an engine's jobs come from, and what is done when each ends: the job files of
/// `runner run` (`BatchFeed`), a spool folder (`SpoolFeed`), or a program's own jobs (any
/// sequence of jobs, through `JobEngine.run(_:)`).
///
/// The engine asks for one job at a time and asks again only once that one has a task, so a
/// feed of millions of jobs is never all in memory. Everything else (slots, one task per key,
/// attempts, records, the observer) is the engine's.
public protocol JobFeed: Sendable {
    /// The next job, waiting until there is one; nil once the feed is through.
    func next() async -> FeedJob?
}

/// A job as a feed hands it to the engine, with what the feed wants to hear of it.
public struct FeedJob: Sendable {
    /// What to do with a job about to start.
    public enum Start: Sendable, Equatable {
        /// Run it, as a nil `start` does.
        case run
        /// Record it `cancelled` with this reason, without running it.
        case cancel(String)
        /// Leave it: no run, no record (the feed takes it back, e.g. on shutdown). Heeded only
        /// before the job takes its key.
        case skip
    }

    /// How a job ended, as the feed is told.
    public enum End: Sendable {
        /// It ran, or was refused or cancelled: its record is written; `line` is that record as
        /// one line of JSON (no newline).
        case recorded(JobResult, line: [UInt8])
        /// It was left (`Start.skip`, or the engine stopped before it started), or released
        /// while it ran (`TaskManager.releaseAll`: its runner stops): no record.
        case notStarted
    }

    /// The job to run; what it leaves unset (`timeout`, `retries`, `maxBytes`, headers) the engine
    /// fills from its `jobDefaults`.
    public var job: JobDescriptor
    /// Asked as the job, holding a slot, is about to take its key (`skip` leaves it there), and
    /// again once it holds the key (`cancel` then records it cancelled: a cancel request made
    /// meanwhile is never missed). Nil: run it.
    public var start: (@Sendable () -> Start)?
    /// Told once the job ended and its record is on its way to disk (written, when the feed is
    /// told). Nil: the engine does not wait for the record.
    public var ended: (@Sendable (End) async -> Void)?
    /// The key's last record as a feed that several runners share keeps it (the queue's),
    /// when it may be newer than this runner's `results/` file: the job revalidates with its
    /// validators and falls back to its payload. Nil: the record in `results/`.
    public var lastRecord: JSONValue?
    /// Takes the job's children instead of the engine running them (a queue queues them, for
    /// any runner): called before its record is written, which is then its own fetch's. Nil:
    /// the engine runs them, and counts them into the record.
    public var takesChildren: (@Sendable (ChildJobs) -> Void)?

    /// A job and the feed's hooks, each nil unless given: then it runs, nothing is told when it
    /// ends, its last record is read from `results/` and the engine runs its children.
    public init(
        _ job: JobDescriptor, start: (@Sendable () -> Start)? = nil, ended: (@Sendable (End) async -> Void)? = nil,
        lastRecord: JSONValue? = nil, takesChildren: (@Sendable (ChildJobs) -> Void)? = nil
    ) {
        self.job = job
        self.start = start
        self.ended = ended
        self.lastRecord = lastRecord
        self.takesChildren = takesChildren
    }
}

/// The jobs of a sequence, as a feed: nothing to hear when they end.
final class SequenceFeed<Jobs: Sequence<JobDescriptor>>: JobFeed, @unchecked Sendable {  // taken by one task at a time
    private var iterator: Jobs.Iterator

    init(_ jobs: Jobs) { iterator = jobs.makeIterator() }

    func next() async -> FeedJob? { iterator.next().map { FeedJob($0) } }
}
