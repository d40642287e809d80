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
    }

    /// Runs the attempts of `job`; `operation` is one attempt's work inside the deadline.
    /// `host` is the job's URL's (read once per job by the caller).
    func run(
        _ job: JobDescriptor, host: String, hostSlots: SlotLimiter, pacer: HostPacer, observer: any RunObserver,
        makeContext: @Sendable () -> JobContext,
        operation: @escaping @Sendable (JobContext) async throws -> Committed
    ) async -> Report {
        var report = Report()
        while true {
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
            let attempt = await policy.attempt(
                host: host, timeout: job.timeout, noticeAfter: job.noticeAfter,
                onNotice: { observer.jobNotice(job, message: "no network connection") },
                onWaiting: { observer.jobWaiting(job, for: .network) }
            ) {
                observer.jobAttempting(job, attempt: number)
                return try await operation(context)
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
            guard let failure = report.failure, failure.isTransient, !Task.isCancelled else { break }
            guard report.attempts <= job.retries else {
                // Retried out: the message says so, not only how the last attempt ended.
                if report.attempts > 1 {
                    report.failure?.message = "still failing after \(report.attempts) attempts: \(failure.message)"
                }
                break
            }
            let delay = backoff.delay(afterAttempt: report.attempts, retryAfter: failure.retryAfter)
            observer.jobRetrying(job, attempt: report.attempts + 1, after: delay, reason: failure.message)
            do {
                try await clock.sleep(for: delay, tolerance: nil)
            } catch {
                report.failure = JobFailure(.cancelled, "cancelled")
                break
            }
        }
        return report
    }

    static func seconds(_ duration: Duration) -> String {
        let ms = duration.inMilliseconds
        return ms % 1000 == 0 ? "\(ms / 1000) s" : String(format: "%.1f s", Double(ms) / 1000)
    }
}
