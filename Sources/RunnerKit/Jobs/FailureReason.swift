/// Why a job did not succeed, as a program tells cases apart: a closed set, in the record as
/// `reason` beside the sentence in `error`. Every record whose status is neither `succeeded` nor
/// `notModified` has one.
public enum FailureReason: String, Sendable, Codable, CaseIterable {
    /// The server answered with a status that ends the job (`httpStatus` says which): 404 and
    /// 410 (`notFound`), 401, 403, 429, 5xx, …
    case httpStatus
    /// What arrived is not what the kind accepts (not an image, not the JSON expected, …).
    case invalidPayload
    /// The payload is larger than the job's `maxBytes`.
    case tooLarge
    /// The payload's SHA-256 is not the job's `checksum`.
    case checksum
    /// The attempt overran the job's deadline (`timedOut`).
    case deadline
    /// The body stopped moving (`timedOut`, "stalled").
    case stalled
    /// No connectivity to the host before the deadline (`offline`).
    case offline
    /// Cancelled by key, with its run, or by the engine's shutdown (`cancelled`).
    case cancelled
    /// The connection failed: the name did not resolve, the connection was refused or lost, the
    /// response was malformed or refused by the address policy.
    case transport
    /// A task with the same key was running (`duplicate`).
    case duplicate
    /// The payload or its record could not be written, or the key's lock not taken.
    case storage

    /// The reason a failure without one of its own has: from its status, and for `failed`, from
    /// whether a server's status ended it (`httpStatus`), else what arrived (`invalidPayload`).
    package static func inferred(status: JobStatus, httpStatus: Int?) -> FailureReason? {
        switch status {
        case .succeeded, .notModified: nil
        case .notFound: .httpStatus
        case .failed: httpStatus != nil ? .httpStatus : .invalidPayload
        case .offline: .offline
        case .timedOut: .deadline
        case .cancelled: .cancelled
        case .duplicate: .duplicate
        }
    }
}
