/// Hands each observer call to several observers in turn: the command line's reporter and the
/// metrics, for instance.
public struct ObserverFanout: RunObserver {
    private let observers: [any RunObserver]

    public init(_ observers: [any RunObserver]) { self.observers = observers }

    public func jobQueued(_ job: JobDescriptor) { for observer in observers { observer.jobQueued(job) } }
    public func jobStarted(_ job: JobDescriptor) { for observer in observers { observer.jobStarted(job) } }
    public func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) { for observer in observers { observer.jobWaiting(job, for: reason) } }
    public func jobAttempting(_ job: JobDescriptor, attempt: Int) { for observer in observers { observer.jobAttempting(job, attempt: attempt) } }
    public func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {
        for observer in observers { observer.jobProgress(job, bytes: bytes, total: total) }
    }
    public func jobNotice(_ job: JobDescriptor, message: String) { for observer in observers { observer.jobNotice(job, message: message) } }
    public func jobLog(_ job: JobDescriptor, line: String) { for observer in observers { observer.jobLog(job, line: line) } }
    public func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        for observer in observers { observer.jobRetrying(job, attempt: attempt, after: delay, reason: reason) }
    }
    public func jobFinished(_ result: JobResult) { for observer in observers { observer.jobFinished(result) } }
    public func problem(_ message: String) { for observer in observers { observer.problem(message) } }
    public func hookFailed(_ result: JobResult, reason: String) {
        for observer in observers { observer.hookFailed(result, reason: reason) }
    }
    public func hookNotice(_ result: JobResult, message: String) {
        for observer in observers { observer.hookNotice(result, message: message) }
    }
}
