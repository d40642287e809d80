import Foundation

/// What a job gets for the fields it does not set, from the engine that runs it: as a job file's
/// `defaults` line is for its jobs, this is for every job of the engine (built in code, or from
/// a job file or a feed) that sets neither the field nor has it from its file's `defaults` or its
/// parent. `JobEngine.Configuration.jobDefaults`; the operator's caps (`limits`) still apply.
public struct JobDefaults: Sendable {
    /// The deadline of one attempt, waiting for connectivity included: 2 seconds.
    public var timeout: Duration = JobDescriptor.defaultTimeout
    /// Further attempts after a transient failure: none.
    public var retries = 0
    /// The largest payload accepted, after content decoding: 64 MiB.
    public var maxBytes = JobDescriptor.defaultMaxBytes
    /// Request headers of a job that has none of its own, sent to the job's own origin only
    /// (its children inherit them, still bound to it): none.
    public var headers: [HeaderTemplate] = []

    /// Defaults as given; each left out is the runner's own (2 s, no retries, 64 MiB, no headers).
    public init(timeout: Duration = JobDescriptor.defaultTimeout, retries: Int = 0, maxBytes: Int = JobDescriptor.defaultMaxBytes, headers: [HeaderTemplate] = []) {
        self.timeout = timeout
        self.retries = retries
        self.maxBytes = maxBytes
        self.headers = headers
    }

    /// The fields a job leaves to its engine's defaults.
    struct Fields: OptionSet, Sendable {
        let rawValue: UInt8
        static let timeout = Fields(rawValue: 1)
        static let retries = Fields(rawValue: 2)
        static let maxBytes = Fields(rawValue: 4)
        static let headers = Fields(rawValue: 8)
    }

    /// `job` with the fields it left unset taken from these defaults, within `limits`.
    func apply(to job: JobDescriptor, limits: JobLimits) -> JobDescriptor {
        guard !job.inherits.isEmpty else { return job }
        var job = job
        if job.inherits.contains(.timeout) { job.timeout = limits.maxTimeout.map { min(timeout, $0) } ?? timeout }
        if job.inherits.contains(.retries) { job.retries = limits.maxRetries.map { min(retries, $0) } ?? retries }
        if job.inherits.contains(.maxBytes) { job.maxBytes = limits.maxBytes.map { min(maxBytes, $0) } ?? maxBytes }
        if job.inherits.contains(.headers), !headers.isEmpty { job.headers = OriginHeaders(origin: Origin(job.url), headers: headers) }
        job.inherits = []
        return job
    }
}
