/// Hears what the engine does, for a command line (progress, `--json`, notices) or a host program.
public protocol RunObserver: TransferProgressObserving {
    /// The engine took a job (from its feed, or a parent's children); it waits for a slot.
    func jobQueued(_ job: JobDescriptor)
    /// A job is about to make its first attempt.
    func jobStarted(_ job: JobDescriptor)
    /// A job's attempt waits before its deadline starts (`host`, `pace`) or inside it (`network`).
    func jobWaiting(_ job: JobDescriptor, for reason: WaitReason)
    /// An attempt's work begins (`attempt` from 1): its host slot and turn taken, the network there.
    func jobAttempting(_ job: JobDescriptor, attempt: Int)
    /// How a running job's body comes along (a job whose deadline is over 5 s), at most once a
    /// second while it moves: bytes so far, of `total` when known.
    func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?)
    /// Something the user should hear about a running job, e.g. "no network connection".
    func jobNotice(_ job: JobDescriptor, message: String)
    /// A line a running job's kind logged (`JobContext.log(_:)`): each line an executable kind's
    /// program writes to stderr, without its line break. The kind's words, not the runner's
    /// (those are notices), and as many as it writes; called from the kind's thread.
    func jobLog(_ job: JobDescriptor, line: String)
    /// A job's attempt failed transiently; attempt number `attempt` comes after `delay`.
    func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String)
    /// A job ended; its record has been written.
    func jobFinished(_ result: JobResult)
    /// A problem outside any one job's status, e.g. a record that could not be written.
    func problem(_ message: String)
    /// A job's `--on-finish` hook failed or timed out (the job's status stands).
    func hookFailed(_ result: JobResult, reason: String)
    /// A job's `--on-finish` hook runs, but not as asked: e.g. its record's output did not lie
    /// inside the output, so the hook gets no path.
    func hookNotice(_ result: JobResult, message: String)
}

/// What a job waits for.
public enum WaitReason: String, Sendable {
    /// A route to its host (the connectivity wait).
    case network
    /// A slot at its host (`--per-host`, a host's `perHost`).
    case host
    /// Its turn at a paced host (`--rate`, a host's `rate`, a `Retry-After` pause).
    case pace
}

extension RunObserver {
    public func jobQueued(_ job: JobDescriptor) {}
    public func jobStarted(_ job: JobDescriptor) {}
    public func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) {}
    public func jobAttempting(_ job: JobDescriptor, attempt: Int) {}
    public func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {}
    public func jobNotice(_ job: JobDescriptor, message: String) {}
    public func jobLog(_ job: JobDescriptor, line: String) {}
    public func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {}
    public func jobFinished(_ result: JobResult) {}
    public func problem(_ message: String) {}
    public func hookFailed(_ result: JobResult, reason: String) {}
    public func hookNotice(_ result: JobResult, message: String) {}
}

/// An observer that hears nothing.
public struct SilentObserver: RunObserver {
    public init() {}
}
