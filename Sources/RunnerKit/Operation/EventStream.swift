import Foundation
import Glibc

/// `--events FILE`: what the engine does, one JSON object a line, as it happens. Every event has
/// `time`, `event`, `key` and `kind`: `queued` (the engine took the job), `started` (its first
/// attempt begins), `waiting` (`for`: `network`, `host` or `pace`), `attempt` (one failed: its
/// number, `error` and `delayMs` before the next), `finished` (the whole record under `record`)
/// and `hook` (its `--on-finish` hook failed: `error`).
///
/// Lines are written and flushed by a thread of the stream's own, so a slow reader never slows a
/// job: events wait in a buffer of `capacity` lines, and past it they are dropped and counted,
/// and a `{"event": "dropped", "count": N}` line says so once the reader catches up. The file is
/// opened on that thread too, once a reader has the FIFO open. When a FIFO's reader goes away,
/// the path is opened again for the next one, also when the FIFO was removed and made anew
/// there (what was lost meanwhile is counted to it and said at once through `report`);
/// `reopen()` (SIGHUP) opens the path anew, as after a log rotation, and says whether it did.
package final class EventStream: RunObserver, EventLineSink, @unchecked Sendable {  // state behind `condition`
    /// Lines held for a reader that is behind.
    package static let defaultCapacity = 10_000

    package let path: String
    private let capacity: Int
    private let condition = NSCondition()
    private var queue: [[UInt8]] = []
    private var dropped = 0
    private var closing = false
    private var finished = false
    /// Why the file could not be written (it could not be opened, or could not be written).
    private var failure: String?
    /// `reopen()` was asked for.
    private var reopening = false
    private let report: @Sendable (String) -> Void

    /// Whether an existing regular file at `path` is appended to (else it is refused).
    private let append: Bool

    /// The watcher's name in its queue, on every line (nil: none).
    package let runner: String?

    /// Starts the writer thread, which opens `path` (see `problem(opening:append:)`).
    package init(
        path: String, append: Bool = false, capacity: Int = defaultCapacity, runner: String? = nil,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.runner = runner
        self.path = path
        self.append = append
        self.report = report
        self.capacity = max(1, capacity)
        let thread = Thread { [self] in write() }
        thread.name = "runner events"
        thread.start()
    }

    // MARK: - Events

    private var lines: EventLines { EventLines(sink: self, runner: runner) }

    package func jobQueued(_ job: JobDescriptor) { lines.jobQueued(job) }
    package func jobStarted(_ job: JobDescriptor) { lines.jobStarted(job) }
    package func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) { lines.jobWaiting(job, for: reason) }
    package func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) { lines.jobProgress(job, bytes: bytes, total: total) }
    package func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        lines.jobRetrying(job, attempt: attempt, after: delay, reason: reason)
    }
    package func jobFinished(_ result: JobResult) { lines.jobFinished(result) }
    package func hookFailed(_ result: JobResult, reason: String) { lines.hookFailed(result, reason: reason) }
    package func hookNotice(_ result: JobResult, message: String) { lines.hookNotice(result, message: message) }

    /// Queues one line for the writer thread, or counts it as dropped.
    package func take(_ line: [UInt8]) {
        condition.lock()
        if queue.count < capacity && !closing {
            queue.append(line)
            // The writer waits only on an empty queue: wake it for the first line, not each.
            if queue.count == 1 { condition.broadcast() }
        } else {
            dropped += 1
        }
        condition.unlock()
    }

    // MARK: - Writing

    /// What `reopen()` did.
    package enum Reopened: Sendable, Equatable {
        /// The path was opened anew.
        case reopened
        /// A FIFO is at the path (or none yet, where one was) and no reader has it open: it is
        /// opened anew when a reader comes.
        case waitingForReader
        /// The writer is held by a reader that is behind; it opens the path anew once it can.
        case pending
        /// The path cannot be written (from now on, no line is).
        case failed(String)
    }

    /// Opens the path anew (the file was rotated): a file that is there now is appended to, one
    /// that is not is made, a FIFO is opened once a reader has it. Safe from any thread; waits
    /// at most `timeout` for the writer to say what it did.
    @discardableResult
    package func reopen(timeout: Duration = .seconds(2)) -> Reopened {
        condition.lock()
        defer { condition.unlock() }
        if finished { return .failed(failure ?? "\(path) is closed") }
        reopening = true
        reopenAnswer = nil
        condition.broadcast()
        let deadline = Date().addingTimeInterval(timeout.inSeconds)
        while reopenAnswer == nil && !finished {
            if !condition.wait(until: deadline) { break }
        }
        if let answer = reopenAnswer { return answer }
        return finished ? .failed(failure ?? "\(path) is closed") : .pending
    }

    /// What the writer did of the last `reopen()`, nil until it did it.
    private var reopenAnswer: Reopened?

    private func answerReopen(_ answer: Reopened) {
        condition.lock()
        reopenAnswer = answer
        condition.broadcast()
        condition.unlock()
    }

    /// Writes what is queued, then waits for more, until `finish`.
    private func write() {
        if let refused = Self.problem(opening: path, append: append) { return fail(refused) }
        guard var fd = openWaiting(append: append, fifoOnly: false, held: 0) else { return }
        while true {
            condition.lock()
            while queue.isEmpty && dropped == 0 && !closing && !reopening { condition.wait() }
            let reopen = reopening
            reopening = false
            if queue.isEmpty && dropped == 0 && !reopen {
                finished = true
                condition.broadcast()
                condition.unlock()
                close(fd)
                return
            }
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            let lost = dropped
            dropped = 0
            condition.unlock()

            if reopen {
                let wasFIFO = Self.isFIFO(fd)
                close(fd)
                // Rotated away: made anew; still there (copied and truncated): appended to; a
                // FIFO: once its reader comes (a FIFO removed and not made yet: waited for).
                guard let opened = openWaiting(append: true, fifoOnly: wasFIFO, held: batch.count + lost, answering: true) else { return }
                fd = opened
                answerReopen(.reopened)
            }
            // What was lost comes first: the reader learns of it before the lines after it.
            var bytes = lost > 0 ? EventLines.line("dropped", [("count", JSONValue(lost))]) : []
            for line in batch { bytes += line }
            guard let problem = Self.writeAll(bytes, to: fd) else { continue }
            guard problem.code == EPIPE, Self.isFIFO(fd) else {
                close(fd)
                return fail("cannot write \(path): \(problem.text)")
            }
            // The FIFO's reader went away: these lines are lost, counted, and said at once; the
            // next reader gets the count first. The path is opened again when a reader has the
            // FIFO there, the one this was or one made anew in its place.
            let missed = batch.count + lost
            condition.lock()
            dropped += missed
            condition.unlock()
            report("--events: the reader of \(path) went away; \(missed) line\(missed == 1 ? "" : "s") lost so far, counted to the next reader")
            close(fd)
            guard let opened = openWaiting(append: true, fifoOnly: true, held: 0) else { return }
            fd = opened
        }
    }

    /// Opens the path for writing; nil when it cannot (then `fail` said why) or when `finish`
    /// came first. A FIFO is opened only when a reader has it open, tried again every 100 ms
    /// meanwhile, each time by its path: a FIFO removed and made anew is the one opened, and the
    /// writer never waits on one that is gone. With `fifoOnly`, no file at the path is waited
    /// for too (a FIFO being made anew), not made. `held`: lines the caller holds, lost if
    /// `finish` comes first. With `answering`, a wait answers `reopen()` at once.
    private func openWaiting(append: Bool, fifoOnly: Bool, held: Int, answering: Bool = false) -> Int32? {
        var answered = !answering
        while true {
            var info = stat()
            let exists = lstat(path, &info) == 0
            if exists && (info.st_mode & S_IFMT) == S_IFIFO {
                let fd = Glibc.open(path, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
                if fd >= 0 {
                    // Writes wait for the reader from now on (lines queue meanwhile).
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
                    return fd
                }
                guard errno == ENXIO || errno == ENOENT || errno == EINTR else {
                    fail("cannot open \(path): \(String(cString: strerror(errno)))")
                    return nil
                }
            } else if exists || !fifoOnly {
                if let problem = Self.problem(opening: path, append: append) {
                    fail(problem)
                    return nil
                }
                let fd = Self.open(path, append: append)
                guard fd >= 0 else {
                    fail("cannot open \(path): \(String(cString: strerror(errno)))")
                    return nil
                }
                return fd
            }
            condition.lock()
            if closing {
                let lost = queue.count + dropped + held
                if lost > 0 { failure = "\(path): its reader took no more events; \(lost) were not written" }
                queue.removeAll()
                finished = true
                condition.broadcast()
                condition.unlock()
                return nil
            }
            if reopening || !answered {
                // Nothing to open anew before a reader comes: said so, and still waited for.
                reopening = false
                answered = true
                reopenAnswer = .waitingForReader
                condition.broadcast()
            }
            _ = condition.wait(until: Date().addingTimeInterval(0.1))
            condition.unlock()
        }
    }

    /// Gives up writing: every line from now on is dropped, and `finish` says why.
    private func fail(_ reason: String) {
        condition.lock()
        failure = reason
        queue.removeAll()
        finished = true
        reopenAnswer = .failed(reason)
        condition.broadcast()
        condition.unlock()
    }

    static func isFIFO(_ fd: Int32) -> Bool {
        var info = stat()
        return fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO
    }

    static func isFIFO(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO
    }

    /// Why `path` will not be opened, or nil: it is a symbolic link (never followed), or a
    /// regular file that exists while `append` is false (a second run must not mix its lines
    /// into the first's unasked). A FIFO, a character device or a new file is fine.
    package static func problem(opening path: String, append: Bool) -> String? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFLNK: return "\(path) is a symbolic link, which --events does not follow"
        case S_IFREG: return append ? nil : "\(path) exists; pass --events-append to add to it, or name a new file"
        case S_IFIFO, S_IFCHR: return nil
        default: return "\(path) is not a regular file, a FIFO or a device"
        }
    }

    /// Opens `path` for writing, never through a link: a new regular file (made here, not one
    /// that appeared meanwhile), an existing one to append to, a FIFO (waiting for its reader)
    /// or a device. -1 with errno when it cannot.
    private static func open(_ path: String, append: Bool) -> Int32 {
        let flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC
        var info = stat()
        if lstat(path, &info) == 0 { return Glibc.open(path, flags) }
        return Glibc.open(path, flags | O_CREAT | (append ? 0 : O_EXCL), 0o644)
    }

    /// Writes all of `bytes`; the reason it could not, or nil.
    private static func writeAll(_ bytes: [UInt8], to fd: Int32) -> (code: Int32, text: String)? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return (errno, String(cString: strerror(errno)))
            }
            offset += written
        }
        return nil
    }

    /// Writes what is queued and stops the thread; waits at most `timeout` for a reader that is
    /// behind (or a FIFO nobody opened). Returns why events were lost, if they were.
    @discardableResult
    package func finish(timeout: Duration = .seconds(2)) -> String? {
        condition.lock()
        closing = true
        condition.broadcast()
        let deadline = Date().addingTimeInterval(timeout.inSeconds)
        while !finished {
            if !condition.wait(until: deadline) { break }
        }
        let outcome: String?
        if let failure {
            outcome = failure
        } else if !finished {
            outcome = "\(path): its reader took no more events; \(queue.count + dropped) were not written"
        } else {
            outcome = nil
        }
        condition.unlock()
        return outcome
    }
}

/// Where `EventLines` hands each event's line (a JSON object and a line feed).
package protocol EventLineSink: Sendable {
    /// Whether anybody takes lines now; when not, no line is made.
    var wantsLines: Bool { get }
    func take(_ line: [UInt8])
}

extension EventLineSink {
    package var wantsLines: Bool { true }
}

/// The engine's events as the lines of `--events` (and of the live page's event stream): every
/// event has `time`, `event`, `key` and `kind`.
package struct EventLines: RunObserver {
    package let sink: any EventLineSink
    /// The name of the queue's watcher whose events these are, as `runner` on each (nil: none).
    package let runner: String?

    package init(sink: any EventLineSink, runner: String? = nil) {
        self.sink = sink
        self.runner = runner
    }

    package func jobQueued(_ job: JobDescriptor) {
        guard sink.wantsLines else { return }
        var fields: [(key: String, value: JSONValue)] = [("url", JSONValue(job.recordURL))]
        if let parent = job.parent { fields.append(("parent", .string(parent))) }
        emit("queued", job.key, job.kindName, fields)
    }

    package func jobStarted(_ job: JobDescriptor) { emit("started", job.key, job.kindName) }

    package func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) {
        emit("waiting", job.key, job.kindName, [("for", .string(reason.rawValue))])
    }

    package func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {
        emit("progress", job.key, job.kindName, [("bytes", JSONValue(bytes)), ("total", total.map { JSONValue($0) } ?? .null)])
    }

    package func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        emit("attempt", job.key, job.kindName, [
            ("attempt", JSONValue(attempt - 1)), ("error", .string(reason)), ("delayMs", JSONValue(delay.inMilliseconds)),
        ])
    }

    package func jobFinished(_ result: JobResult) {
        guard sink.wantsLines else { return }
        emit("finished", result.key, result.kind, [("status", .string(result.status.rawValue)), ("record", result.json)])
    }

    package func hookFailed(_ result: JobResult, reason: String) {
        emit("hook", result.key, result.kind, [("error", .string(reason))])
    }

    package func hookNotice(_ result: JobResult, message: String) {
        emit("hook", result.key, result.kind, [("notice", .string(message))])
    }

    private func emit(_ event: String, _ key: String, _ kind: String, _ fields: [(key: String, value: JSONValue)] = []) {
        guard sink.wantsLines else { return }
        // Every string capped, a record's included: one line must never be too long for a reader.
        sink.take(Self.line(
            event, [("key", .string(key)), ("kind", .string(kind))] + fields.map { ($0.key, $0.value.capped()) } + (runner.map { [("runner", .string($0))] } ?? [])))
    }

    /// One event's line: `time`, `event`, then `fields`.
    package static func line(_ event: String, _ fields: [(key: String, value: JSONValue)]) -> [UInt8] {
        var line: [UInt8] = []
        JSONWriter.write(.object([("time", .string(Timestamp.iso8601(Date()))), ("event", .string(event))] + fields), into: &line)
        line.append(0x0A)
        return line
    }
}
