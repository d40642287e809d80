import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `submit`, `watch`, `cancel` and `status` on a PostgreSQL queue (`--queue URL` or
/// `$RUNNER_QUEUE`) instead of the spool folder: runners on many machines share its jobs.
enum QueueCommands {
    // MARK: - submit

    static let uniqueOption = CommandOption<Bool>.flag(
        "unique", help: "With --queue: leave out each job whose key is queued or running already (as \"unique\": true does for one job).")
    static let waitOption = CommandOption<Bool>.flag(
        "wait", help: "With --queue: wait until every job of the batch ended, print the counts as run does and exit as run would (0, 1, or 4 when none succeeded).")

    /// What `submit --queue` does with its batch.
    struct BatchOptions {
        var unique = false
        var wait = false
        var maxFailed: RunSummary.FailureAllowance?

        init(_ arguments: ParsedArguments, queue: String?) throws(UsageError) {
            unique = try arguments[uniqueOption]
            wait = try arguments[waitOption]
            maxFailed = try arguments[RunCommand.maxFailed]
            if queue == nil, unique || wait || maxFailed != nil {
                throw UsageError("--unique, --wait and --max-failed need --queue (or $RUNNER_QUEUE): a folder's batches are files, followed with 'runner status'")
            }
            if maxFailed != nil && !wait { throw UsageError("--max-failed needs --wait") }
        }
    }

    /// Every job of every file in one transaction, or none, as one batch. The files are valid
    /// (checked first).
    static func submit(_ inputs: JobFileArguments, registry: KindRegistry, url: String, batch options: BatchOptions) async -> Int32 {
        var submissions: [QueueSubmission] = []
        var counts: [Int] = []
        for file in inputs.files {
            guard var jobs = Self.submissions(of: file, name: (inputs.display(file) as NSString).lastPathComponent, registry: registry) else {
                Console.error(inputs.display(message: "changed while it was being queued; nothing was queued"))
                return 1
            }
            if options.unique { for index in jobs.indices { jobs[index].unique = true } }
            submissions += jobs
            counts.append(jobs.count)
        }
        let queue: JobQueue
        let batch = JobQueue.newBatchID()
        let submitted: QueueSubmitted
        do {
            queue = try JobQueue(url: url)
            submitted = try queue.submit(submissions, batch: batch)
        } catch {
            Console.err("Nothing was queued.")
            return QueueOptions.fail(error)
        }
        for (file, jobs) in zip(inputs.files, counts) {
            let name = (inputs.display(file) as NSString).lastPathComponent
            let left = submitted.leftOut.filter { $0.file == name }.count
            let queued = "\(jobs - left) job\(jobs - left == 1 ? "" : "s")"
            Console.out("queued \(inputs.display(file)) in \(queue.connection.display) (\(queued)\(left > 0 ? ", \(left) left out" : ""))")
        }
        if !submitted.leftOut.isEmpty {
            let left = submitted.leftOut.map(\.key)
            let shown = left.prefix(5).map { Printable.escaped($0) }.joined(separator: ", ") + (left.count > 5 ? ", and \(left.count - 5) more" : "")
            let held = options.wait && !submitted.holding.isEmpty ? "; --wait waits for them too" : ""
            Console.out("left out \(left.count) unique job\(left.count == 1 ? "" : "s") whose key is queued or running already: \(shown)\(held)")
        }
        Console.out("batch \(batch): \(submitted.inserted) job\(submitted.inserted == 1 ? "" : "s") ('runner status --queue URL --batch \(batch)')")
        guard options.wait else { return 0 }
        return await waitForBatch(batch, holding: submitted.holding, queue: queue, allowing: options.maxFailed)
    }

    /// Waits until no job of `batch` is queued or running, nor any of `holding` (the jobs of
    /// other batches that hold keys the submit left out), saying how far it got now and then on
    /// stderr; prints the counts and the failed jobs as `run` does, and returns `run`'s exit code
    /// for them. A held key's job counts as one top-level job of the batch: it did the work.
    static func waitForBatch(
        _ batch: String, holding: [String] = [], queue: JobQueue, allowing allowance: RunSummary.FailureAllowance?
    ) async -> Int32 {
        var said = ContinuousClock.now
        var unreachable = false
        while true {
            let status: QueueBatchStatus
            let held: (pending: Int, ended: [String: Int])
            do {
                status = try queue.batchStatus(batch)
                held = try queue.jobsStatus(holding)
                if unreachable { Console.err("runner: the queue is back") }
                unreachable = false
            } catch {
                if !unreachable { Console.err("runner: the queue could not be read (\(error)); trying again every second") }
                unreachable = true
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            if status.isOver && held.pending == 0 {
                var summary = status.summary
                for (name, count) in held.ended { summary.add(JobStatus(rawValue: name) ?? .failed, count: count) }
                printFailures(of: batch, queue: queue)
                Console.out("\(summary.countsText). Batch \(batch) in \(queue.connection.display).")
                return summary.exitCode(allowing: allowance)
            }
            if said.duration(to: .now) >= .seconds(10) {
                said = .now
                var line = "runner: batch \(batch): \(status.total - status.queued - status.running) of \(status.total) ended, \(status.running) running"
                if held.pending > 0 { line += "; \(held.pending) job\(held.pending == 1 ? "" : "s") of other batches holding left-out keys" }
                Console.err(line)
            }
            try? await Task.sleep(for: .milliseconds(500))
        }
    }

    /// The batch's top-level jobs that did not succeed, as `run`'s table shows them: at most 20,
    /// then how many more (`status --batch ID --json` lists them all).
    static func printFailures(of batch: String, queue: JobQueue) {
        guard let (failures, total) = try? queue.batchFailures(batch, limit: 20), !failures.isEmpty else { return }
        let width = min(44, failures.map { $0.key.count }.max() ?? 0)
        for failure in failures {
            let key = Printable.escaped(failure.key)
            let shown = key.count > 44 ? String(key.prefix(43)) + "…" : key.padding(toLength: width, withPad: " ", startingAt: 0)
            Console.out("\(failure.status.padding(toLength: 12, withPad: " ", startingAt: 0)) \(shown)  \(Printable.escaped(failure.error))")
        }
        if total > failures.count {
            Console.out("  … and \(total - failures.count) more ('runner status --queue URL --batch \(batch) --json' lists them all)")
        }
    }

    /// `84/200 ended (80 succeeded, 4 failed), 6 running, 110 queued`.
    static func batchLine(_ status: QueueBatchStatus) -> String {
        let ended = status.ended.sorted { $0.key < $1.key }
        let endedCount = ended.reduce(0) { $0 + $1.value }
        var line = "\(endedCount)/\(status.total) ended"
        if !ended.isEmpty { line += " (" + ended.map { "\($0.value) \($0.key)" }.joined(separator: ", ") + ")" }
        if status.running > 0 { line += ", \(status.running) running" }
        if status.queued > 0 { line += ", \(status.queued) queued" }
        return line
    }

    /// The jobs of a valid job file as rows of the queue (nil: it is not valid any more).
    static func submissions(of file: String, name: String, registry: KindRegistry) -> [QueueSubmission]? {
        let reader = JobFileReader(path: file, registry: registry, limits: .producer, checkingSecrets: false)
        var submissions: [QueueSubmission] = []
        while let element = reader.next() {
            guard case .success(let job) = element, let stored = reader.lastJob else { return nil }
            let value: JSONValue = .object([("job", .object(stored.object)), ("defaults", .object(stored.defaults))])
            submissions.append(QueueSubmission(key: job.key, kind: job.kindName, job: JSONWriter.string(value), file: name, unique: job.unique))
        }
        return submissions
    }

    // MARK: - status

    static let batchOption = CommandOption<String?>.text(
        "batch", "ID", help: "With --queue: the jobs of one batch (the id submit printed): queued, running, and ended by status.")

    /// `status --queue URL --batch ID`; exit 1 when the queue holds no job of that batch.
    static func status(url: String, batch: String, json: Bool) -> Int32 {
        let status: QueueBatchStatus
        let display: String
        var failures: [(key: String, status: String, error: String)] = []
        var schedule: String?
        do {
            let queue = try JobQueue(url: url)
            status = try queue.batchStatus(batch)
            display = queue.connection.display
            schedule = (try? queue.scheduleNames(batches: [batch]))?[batch]
            if json { failures = try queue.batchFailures(batch, limit: Int(Int32.max)).failures }
        } catch {
            return QueueOptions.fail(error)
        }
        guard status.total > 0 else {
            Console.error("no job of batch \(Printable.escaped(batch)) in \(display) (finished jobs go after --keep days)")
            return 1
        }
        let ended = status.ended.sorted { $0.key < $1.key }
        if json {
            Console.out(JSONWriter.string(.object([
                ("queue", .string(display)), ("batch", .string(batch)), ("total", JSONValue(status.total)),
                ("queued", JSONValue(status.queued)), ("running", JSONValue(status.running)),
                ("ended", .object(ended.map { ($0.key, JSONValue($0.value)) })), ("over", .bool(status.isOver)),
                ("failed", .array(failures.map { .object([("key", .string($0.key)), ("status", .string($0.status)), ("error", .string($0.error))]) })),
                ("schedule", schedule.map { .string($0) } ?? .null),
            ])))
            return 0
        }
        let endedCount = ended.reduce(0) { $0 + $1.value }
        Console.out([
            "batch \(batch) in \(display)\(schedule.map { " (schedule \(Printable.escaped($0)))" } ?? ""): \(status.total) job\(status.total == 1 ? "" : "s")\(status.isOver ? ", all ended" : "")",
            "queued:   \(status.queued)",
            "running:  \(status.running)",
            "ended:    \(endedCount)" + (ended.isEmpty ? "" : " (" + ended.map { "\($0.value) \($0.key)" }.joined(separator: ", ") + ")"),
        ].joined(separator: "\n"))
        return 0
    }

    static func status(url: String, json: Bool) -> Int32 {
        let status: QueueStatus
        let display: String
        var scheduled: [String: String] = [:]
        do {
            let queue = try JobQueue(url: url)
            status = try queue.status()
            display = queue.connection.display
            scheduled = (try? queue.scheduleNames(batches: status.batches.map(\.id))) ?? [:]
        } catch {
            return QueueOptions.fail(error)
        }
        let now = Date()
        if json {
            Console.out(JSONWriter.string(.object(statusJSON(status, display: display, now: now, scheduled: scheduled))))
            return 0
        }
        // The live watchers counted and listed; the silent ones (killed, lost) apart.
        let live = status.watchers.filter(\.isLive)
        let silent = status.watchers.filter { !$0.isLive }
        var lines = ["queue:    \(display)", "watchers: \(live.count)"]
        for watcher in live { lines.append("  " + watcherLine(watcher)) }
        if !silent.isEmpty {
            lines.append("silent:   \(silent.count) (not heard from within their lease; listed for an hour)")
            for watcher in silent { lines.append("  " + watcherLine(watcher)) }
        }
        lines.append("queued:   \(status.queued)")
        for waiting in status.unclaimable {
            lines.append("  \(waiting.count) of kind \(Printable.escaped(waiting.kind)): no live watcher has this kind loaded")
        }
        lines.append("running:  \(status.running.count)")
        for job in status.running.prefix(20) {
            lines.append(
                "  \(Printable.escaped(job.key))  \(SpoolStatus.age(now.timeIntervalSince(job.startedAt)))  (runner \(job.runner)"
                    + (job.phase.map { ", \($0)" } ?? "") + ")")
        }
        if status.waiting > 0 {
            lines.append("waiting:  \(status.waiting) parent\(status.waiting == 1 ? "" : "s") for \(status.waiting == 1 ? "its" : "their") children")
            for parent in status.parents { lines.append("  \(Printable.escaped(parent.key))  \(parent.ended)/\(parent.total) children ended") }
        }
        lines.append("ended in the last 24 h:")
        lines.append("done:     \(status.done)")
        if status.notFound > 0 { lines.append("notFound: \(status.notFound)") }
        lines.append("failed:   \(status.failed)")
        for failed in status.latestFailed.prefix(5) {
            lines.append(Printable.escaped("  \(failed.key)  \(failed.status)" + (failed.reason.map { ": \($0)" } ?? "")))
        }
        if status.cancelled > 0 { lines.append("cancelled: \(status.cancelled)") }
        if status.abandoned > 0 { lines.append("abandoned: \(status.abandoned) (their watcher stopped; other watchers take them)") }
        if status.reclaimed > 0 { lines.append("reclaimed: \(status.reclaimed) (running or queued again after their watcher stopped)") }
        for paused in status.pausedHosts {
            lines.append("paused:   \(Printable.escaped(paused.host)) for \(Int((paused.left / .seconds(1)).rounded(.up))) s more (Retry-After)")
        }
        if !status.batches.isEmpty { lines.append("batches:") }
        for batch in status.batches {
            lines.append("  \(batch.id)  " + batchLine(batch.counts) + (scheduled[batch.id].map { " (schedule \(Printable.escaped($0)))" } ?? ""))
        }
        Console.out(lines.joined(separator: "\n"))
        return 0
    }

    /// `NAME on HOST (VERSION), up 2 h, running 3, heartbeat 4 s ago, kinds: a, b`; one that
    /// missed a heartbeat says how long it is silent and when its leases end.
    static func watcherLine(_ watcher: QueueWatcher) -> String {
        let seconds = Int(watcher.silentFor / .seconds(1))
        let heard: String
        if watcher.silentFor <= watcher.lease * 2 / 3 {
            heard = "heartbeat \(seconds) s ago"
        } else if watcher.isLive {
            heard = "silent for \(seconds) s, leases end in \(Int((watcher.lease - watcher.silentFor) / .seconds(1)) + 1) s"
        } else {
            heard = "silent for \(seconds) s, its leases ended (its jobs go to others)"
        }
        let up = SpoolStatus.age(Date().timeIntervalSince(watcher.startedAt))
        return Printable.escaped(
            "\(watcher.name) on \(watcher.host) (\(watcher.version)), up \(up), running \(watcher.running), \(heard), kinds: "
                + watcher.kinds.joined(separator: ", "))
    }

    /// `status --queue --json`'s members.
    static func statusJSON(
        _ status: QueueStatus, display: String, now: Date, scheduled: [String: String] = [:]
    ) -> [(key: String, value: JSONValue)] {
        let latest: JSONValue = status.latestFailed.first.map { failed in
            var fields: [(key: String, value: JSONValue)] = [
                ("key", .string(failed.key)), ("status", .string(failed.status)), ("at", .string(Timestamp.iso8601(failed.at))),
            ]
            if let reason = failed.reason { fields.append(("reason", .string(reason))) }
            return .object(fields)
        } ?? .null
        return [
            ("queue", .string(display)),
            ("watchers", .array(status.watchers.map { watcher in
                .object([
                    ("name", .string(watcher.name)), ("host", .string(watcher.host)), ("version", .string(watcher.version)),
                    ("kinds", .array(watcher.kinds.map { .string($0) })), ("startedAt", .string(Timestamp.iso8601(watcher.startedAt))),
                    ("silentMs", JSONValue(watcher.silentFor.inMilliseconds)), ("leaseMs", JSONValue(watcher.lease.inMilliseconds)),
                    ("live", .bool(watcher.isLive)), ("running", JSONValue(watcher.running)),
                ])
            })),
            ("queued", .object([
                ("count", JSONValue(status.queued)),
                ("noWatcherForKind", .array(status.unclaimable.map { .object([("kind", .string($0.kind)), ("count", JSONValue($0.count))]) })),
            ])),
            ("running", .array(status.running.map { job in
                .object([
                    ("key", .string(job.key)), ("runner", .string(job.runner)), ("startedAt", .string(Timestamp.iso8601(job.startedAt))),
                    ("ageMs", JSONValue(max(0, Int(now.timeIntervalSince(job.startedAt) * 1000)))),
                ] + (job.phase.map { [("phase", .string($0))] } ?? []))
            })),
            ("waiting", .object([
                ("count", JSONValue(status.waiting)),
                ("parents", .array(status.parents.map { .object([("key", .string($0.key)), ("ended", JSONValue($0.ended)), ("total", JSONValue($0.total))]) })),
            ])),
            ("done", .object([("count", JSONValue(status.done)), ("sinceHours", JSONValue(24))])),
            ("notFound", .object([("count", JSONValue(status.notFound)), ("sinceHours", JSONValue(24))])),
            ("failed", .object([
                ("count", JSONValue(status.failed)), ("sinceHours", JSONValue(24)), ("latest", latest),
                ("recent", .array(status.latestFailed.map { failed in
                    .object([("key", .string(failed.key)), ("status", .string(failed.status)), ("reason", failed.reason.map { .string($0) } ?? .null)])
                })),
            ])),
            ("cancelled", .object([("count", JSONValue(status.cancelled)), ("sinceHours", JSONValue(24))])),
            ("abandoned", JSONValue(status.abandoned)), ("reclaimed", JSONValue(status.reclaimed)),
            ("pausedHosts", .array(status.pausedHosts.map { .object([("host", .string($0.host)), ("leftMs", JSONValue($0.left.inMilliseconds))]) })),
            ("batches", .array(status.batches.map { batch in
                .object([
                    ("id", .string(batch.id)), ("submittedAt", .string(Timestamp.iso8601(batch.submittedAt))),
                    ("queued", JSONValue(batch.counts.queued)), ("running", JSONValue(batch.counts.running)),
                    ("ended", .object(batch.counts.ended.sorted { $0.key < $1.key }.map { ($0.key, JSONValue($0.value)) })),
                    ("total", JSONValue(batch.counts.total)),
                    ("schedule", scheduled[batch.id].map { .string($0) } ?? .null),
                ])
            })),
        ]
    }

    // MARK: - cancel

    static func cancel(key: String, url: String) -> Int32 {
        let outcome: (queued: Int, running: [String])
        let display: String
        do {
            let queue = try JobQueue(url: url)
            outcome = try queue.cancel(key: key)
            display = queue.connection.display
        } catch {
            return QueueOptions.fail(error)
        }
        guard outcome.queued > 0 || !outcome.running.isEmpty else {
            Console.err("runner: nothing with the key \(key) is running or queued in \(display)")
            return 1
        }
        var found: [String] = []
        if !outcome.running.isEmpty { found.append("its running task (runner \(outcome.running.joined(separator: ", "))) is cancelled") }
        if outcome.queued > 0 { found.append("\(outcome.queued) queued job\(outcome.queued == 1 ? "" : "s") cancelled") }
        Console.out("cancel requested for \(key) in \(display): " + found.joined(separator: "; "))
        return 0
    }
}

// MARK: - grant

extension QueueCommands {
    static let producerOption = CommandOption<String?>.text(
        "producer", "ROLE",
        help: "The existing PostgreSQL role to give what submit, submit --wait and status need, and nothing more: it may insert jobs and read the queue, never end, change or delete one.")

    static let grantSpec: CommandSpec = CommandSpec(
        name: "grant",
        summary: "Give a PostgreSQL role the rights of a producer of the queue: submit and status, never a job's end.",
        synopsis: "",
        options: [producerOption.spec, QueueOptions.queue.spec],
        run: { arguments in
            let url: String?
            let role: String?
            do {
                url = try QueueOptions.url(arguments)
                role = try arguments[producerOption]
            } catch {
                return Runner.usageError(error, spec: grantSpec)
            }
            guard let url else { return Runner.usageError(UsageError("grant needs --queue URL (or $RUNNER_QUEUE): the queue whose producer ROLE is"), spec: grantSpec) }
            guard let role, !role.isEmpty else { return Runner.usageError(UsageError("grant needs --producer ROLE"), spec: grantSpec) }
            do throws(QueueError) {
                let queue = try JobQueue(url: url)
                try queue.grant(producer: role)
                Console.out("\(Printable.escaped(role)) may now submit to \(queue.connection.display), follow a batch and read its status; it cannot end, change or delete a job")
                return 0
            } catch {
                return QueueOptions.fail(error)
            }
        })
}
