/// Hands each observer call to several observers in turn: the command line's reporter and the
/// metrics, for instance.
package struct ObserverFanout: RunObserver {
    private let observers: [any RunObserver]

    package init(_ observers: [any RunObserver]) { self.observers = observers }

    package func jobQueued(_ job: JobDescriptor) { for observer in observers { observer.jobQueued(job) } }
    package func jobStarted(_ job: JobDescriptor) { for observer in observers { observer.jobStarted(job) } }
    package func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) { for observer in observers { observer.jobWaiting(job, for: reason) } }
    package func jobAttempting(_ job: JobDescriptor, attempt: Int) { for observer in observers { observer.jobAttempting(job, attempt: attempt) } }
    package func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {
        for observer in observers { observer.jobProgress(job, bytes: bytes, total: total) }
    }
    package func jobNotice(_ job: JobDescriptor, message: String) { for observer in observers { observer.jobNotice(job, message: message) } }
    package func jobLog(_ job: JobDescriptor, line: String) { for observer in observers { observer.jobLog(job, line: line) } }
    package func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        for observer in observers { observer.jobRetrying(job, attempt: attempt, after: delay, reason: reason) }
    }
    package func jobFinished(_ result: JobResult) { for observer in observers { observer.jobFinished(result) } }
    package func problem(_ message: String) { for observer in observers { observer.problem(message) } }
    package func hookFailed(_ result: JobResult, reason: String) {
        for observer in observers { observer.hookFailed(result, reason: reason) }
    }
    package func hookNotice(_ result: JobResult, message: String) {
        for observer in observers { observer.hookNotice(result, message: message) }
    }
}
