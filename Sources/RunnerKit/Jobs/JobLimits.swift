/// What the operator of a runner lets a job ask for (`--max-bytes`, `--max-timeout`,
/// `--max-retries`): a job asking more is invalid, and the error names the field and the cap.
/// A job that does not set a field gets the default, or the cap when the cap is lower.
public struct JobLimits: Sendable, Equatable {
    /// Largest `maxBytes` a job may set.
    public var maxBytes: Int?
    /// Longest `timeout` a job may set.
    public var maxTimeout: Duration?
    /// Most `retries` a job may set.
    public var maxRetries: Int?

    /// Whether a job's `headers` may hold `{env:NAME}` and `{file:PATH}`, read in the runner's
    /// own environment and files. Yes under `run`, where whoever wrote the jobs runs them; no
    /// for jobs a watcher takes from others (a spool, a queue, the API), whose writers must not
    /// read the watcher's secrets: those come from the operator's config, bound to their hosts.
    public var allowsSecretReferences: Bool

    /// Caps as given, nil for none; secret references are allowed unless `allowsSecretReferences`
    /// is false.
    public init(maxBytes: Int? = nil, maxTimeout: Duration? = nil, maxRetries: Int? = nil, allowsSecretReferences: Bool = true) {
        self.maxBytes = maxBytes
        self.maxTimeout = maxTimeout
        self.maxRetries = maxRetries
        self.allowsSecretReferences = allowsSecretReferences
    }

    /// No caps beyond the fields' own ranges.
    public static let none = JobLimits()

    /// What a job written by someone other than the operator may ask (`submit`, the API): no
    /// secret references, no caps.
    package static let producer = JobLimits(allowsSecretReferences: false)

    /// The longest key, in bytes of UTF-8: keys are shown on the page, in logs and in the queue.
    package static let maxKeyBytes = 1024

    /// `maxBytes` as the job set it (nil: unset), checked against the cap.
    func maxBytes(_ asked: Int?, default standard: Int) throws(JobSpecError) -> Int {
        guard let cap = maxBytes else { return asked ?? standard }
        guard let asked else { return min(standard, cap) }
        if asked > cap { throw JobSpecError(field: "maxBytes", "asks for \(asked) bytes, more than this runner allows (\(cap), set by --max-bytes)") }
        return asked
    }

    /// `timeout` as the job set it (nil: unset), checked against the cap.
    func timeout(_ asked: Duration?, default standard: Duration) throws(JobSpecError) -> Duration {
        guard let cap = maxTimeout else { return asked ?? standard }
        guard let asked else { return min(standard, cap) }
        if asked > cap {
            throw JobSpecError(field: "timeout", "asks for \(asked.secondsText) seconds, more than this runner allows (\(cap.secondsText), set by --max-timeout)")
        }
        return asked
    }

    /// `retries` as the job set it (nil: unset), checked against the cap.
    func retries(_ asked: Int?) throws(JobSpecError) -> Int {
        guard let asked else { return 0 }
        if let cap = maxRetries, asked > cap {
            throw JobSpecError(field: "retries", "asks for \(asked) retries, more than this runner allows (\(cap), set by --max-retries)")
        }
        return asked
    }

}
