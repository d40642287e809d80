/// How a job ended. Every job that ran ends in exactly one of these.
public enum JobStatus: String, Sendable, CaseIterable, Codable {
    /// Payload fetched, validated and written.
    case succeeded
    /// The server said 304 to a conditional request; the payload on disk is current.
    case notModified
    /// The server said 404 or 410.
    case notFound
    /// Any other definite failure; the record's `error` says which.
    case failed
    /// No connectivity before the deadline; the operation never started.
    case offline
    /// Connectivity was there, but the operation overran the deadline.
    case timedOut
    /// Cancelled by `runner cancel`, a signal, or the library caller.
    case cancelled
    /// Refused: a task with the same key was running.
    case duplicate

    /// Whether this status counts as success for the exit code.
    public var isSuccess: Bool { self == .succeeded || self == .notModified }

    /// Whether a parent with a child in this status still succeeds: a missing entry or a
    /// child already being fetched by another task is not the parent's failure.
    package var isAcceptableForChild: Bool { isSuccess || self == .notFound || self == .duplicate }

    /// Whether an earlier good payload is offered as a stale fallback after this status: after
    /// every end that fetched nothing new but a 404 (a thing that is gone), so no end leaves the
    /// key's last good payload unnamed for `prune` to remove.
    package var allowsStaleFallback: Bool { self == .offline || self == .timedOut || self == .failed || self == .cancelled }
}
