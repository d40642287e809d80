import Foundation

/// The attempts of one job: each under the policy (connectivity wait, deadline) holding its
/// host's slot and a token of its host's pace, retried after a transient failure with backoff,
/// every error classified in one place. A 429 or 503 with `Retry-After` pauses the host for
/// every job of the process.
struct AttemptLoop: Sendable {
    let policy: AttemptPolicy
    let backoff: Backoff
    let clock: any Clock<Duration>

    /// How the attempts ended.
    struct Report: Sendable {
        /// What the last attempt committed, when it succeeded.
        var committed: Committed?
        /// Why the last attempt failed, when it did.
        var failure: JobFailure?
        var attempts = 0
        var waitedForNetwork = Duration.zero
        /// Time spent waiting for the host's slot and pace, before the attempts' deadlines.
        var waitedForHost = Duration.zero
        /// The validators the server sent in the last attempt.
        var validators: Validators?
        /// Body bytes received over the network, all attempts together.
        var transferred = 0
        /// Bytes of the payload the last attempt kept from an earlier one.
        var resumedFrom = 0
        /// Why bytes kept from an earlier attempt were fetched again, when they were.
        var startedOver: String?
        /// A deadline cancelled the task the attempts were called in (which stays cancelled).
        var deadlineCancelledTask = false
    }

    /// Runs the attempts of `job`; `operation` is one attempt's work inside the deadline.
    /// `host` is the job's URL's (read once per job by the caller). With `cancellation` (the
    /// engine's), the attempts run in the calling task and a deadline cancels it: the retries
    /// after such an attempt go on in a fresh task, and `Report.deadlineCancelledTask` tells
    /// the caller that its task stays cancelled.
    func run(
        _ job: JobDescriptor, host: String, hostSlots: SlotLimiter, pacer: HostPacer, observer: any RunObserver,
        cancellation: JobCancellation? = nil,
        makeContext: @escaping @Sendable () -> JobContext,
        operation: @escaping @Sendable (JobContext) async throws -> Committed
    ) async -> Report {
        await run(
            job, host: host, hostSlots: hostSlots, pacer: pacer, observer: observer, cancellation: cancellation, makeContext: makeContext,
            operation: operation, from: Report(), after: nil)
    }

    /// The attempts from `report` on, the next one after `delay` when it is not nil.
    private func run(
        _ job: JobDescriptor, host: String, hostSlots: SlotLimiter, pacer: HostPacer, observer: any RunObserver,
        cancellation: JobCancellation?, makeContext: @escaping @Sendable () -> JobContext,
        operation: @escaping @Sendable (JobContext) async throws -> Committed, from start: Report, after delay: Duration?
    ) async -> Report {
        var report = start
        var delay = delay
        while true {
            if let wait = delay {
                do {
                    try await clock.sleep(for: wait, tolerance: nil)
                } catch {
                    report.failure = JobFailure(.cancelled, "cancelled")
                    break
                }
            }
            report.attempts += 1
            // The slot, then the token, both before the deadline starts: waiting for either
            // costs the job none of its timeout.
            do {
                report.waitedForHost += try await hostSlots.acquire { observer.jobWaiting(job, for: .host) }
            } catch {
                report.failure = JobFailure(.cancelled, "cancelled")
                break
            }
            do {
                report.waitedForHost += try await pacer.acquire(host: host) { observer.jobWaiting(job, for: .pace) }
            } catch {
                hostSlots.release()
                report.failure = JobFailure(.cancelled, "cancelled")
                break
            }
            let context = makeContext()
            let number = report.attempts
            let onNotice: @Sendable () -> Void = { observer.jobNotice(job, message: "no network connection") }
            let onWaiting = { observer.jobWaiting(job, for: .network) }
            let attemptOperation: @Sendable () async throws -> Committed = {
                observer.jobAttempting(job, attempt: number)
                return try await operation(context)
            }
            let attempt: AttemptPolicy.Report<Committed>
            if cancellation != nil {
                let (ended, cancelledTask) = await policy.attemptInCallingTask(
                    host: host, timeout: job.timeout, noticeAfter: job.noticeAfter, onNotice: onNotice, onWaiting: onWaiting,
                    operation: attemptOperation)
                attempt = ended
                report.deadlineCancelledTask = report.deadlineCancelledTask || cancelledTask
            } else {
                attempt = await policy.attempt(
                    host: host, timeout: job.timeout, noticeAfter: job.noticeAfter, onNotice: onNotice, onWaiting: onWaiting,
                    operation: attemptOperation)
            }
            hostSlots.release()
            context.discardLeftovers()
            report.validators = context.validators
            let transfer = context.transfer
            report.transferred += transfer.received
            report.resumedFrom = transfer.resumedFrom
            report.startedOver = transfer.startedOver ?? report.startedOver
            report.waitedForNetwork += attempt.waitedForNetwork
            report.committed = nil
            switch attempt.outcome {
            case .completed(.success(let committed)):
                report.committed = committed
                report.failure = nil
            case .completed(.failure(let error)):
                report.failure = error as? JobFailure ?? JobFailure(classifying: error)
            case .offline:
                report.failure = JobFailure(.offline, "no network connection to \(host) within the deadline of \(Self.seconds(job.timeout))", isTransient: true)
            case .timedOut:
                report.failure = JobFailure(.timedOut, "\(context.unfinished) within the deadline of \(Self.seconds(job.timeout))", isTransient: true)
            case .cancelled:
                report.failure = JobFailure(.cancelled, "cancelled")
            }
            if let failure = report.failure, let retryAfter = failure.retryAfter, failure.httpStatus == 429 || failure.httpStatus == 503 {
                await pacer.pauseForTheFleet(host: host, for: retryAfter)
            }
            guard let failure = report.failure, failure.isTransient, !Self.isCancelled(report, cancellation) else { break }
            guard report.attempts <= job.retries else {
                // Retried out: the message says so, not only how the last attempt ended.
                if report.attempts > 1 {
                    report.failure?.message = "still failing after \(report.attempts) attempts: \(failure.message)"
                }
                break
            }
            let wait = backoff.delay(afterAttempt: report.attempts, retryAfter: failure.retryAfter)
            observer.jobRetrying(job, attempt: report.attempts + 1, after: wait, reason: failure.message)
            if report.deadlineCancelledTask, Task.isCancelled, let cancellation {
                // A deadline cancelled this task, for good: the retries go on in a fresh one.
                let resumed = report
                return await cancellation.inFreshTask {
                    await self.run(
                        job, host: host, hostSlots: hostSlots, pacer: pacer, observer: observer, cancellation: cancellation,
                        makeContext: makeContext, operation: operation, from: resumed, after: wait)
                }
            }
            delay = wait
        }
        return report
    }

    /// Whether the job was cancelled: its task says so, unless a deadline cancelled the task
    /// (then only a cancel of the job itself counts).
    static func isCancelled(_ report: Report, _ cancellation: JobCancellation?) -> Bool {
        guard report.deadlineCancelledTask, let cancellation else { return Task.isCancelled }
        return cancellation.isRequested
    }

    static func seconds(_ duration: Duration) -> String {
        let ms = duration.inMilliseconds
        return ms % 1000 == 0 ? "\(ms / 1000) s" : String(format: "%.1f s", Double(ms) / 1000)
    }
}
