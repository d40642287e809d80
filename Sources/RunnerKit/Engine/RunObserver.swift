/// Hears what the engine does, for a command line (progress, `--json`, notices) or a host program.
public protocol RunObserver: Sendable {
    /// A job is about to make its first attempt.
    func jobStarted(_ job: JobDescriptor)
    /// Something the user should hear about a running job, e.g. "no network connection".
    func jobNotice(_ job: JobDescriptor, message: String)
    /// A job's attempt failed transiently; attempt number `attempt` comes after `delay`.
    func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String)
    /// A job ended; its record has been written.
    func jobFinished(_ result: JobResult)
    /// A problem outside any one job's status, e.g. a record that could not be written.
    func problem(_ message: String)
}

extension RunObserver {
    public func jobStarted(_ job: JobDescriptor) {}
    public func jobNotice(_ job: JobDescriptor, message: String) {}
    public func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {}
    public func jobFinished(_ result: JobResult) {}
    public func problem(_ message: String) {}
}

/// An observer that hears nothing.
public struct SilentObserver: RunObserver {
    public init() {}
}
