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
/// opened on that thread too, since opening a FIFO waits for its reader. When a FIFO's reader
/// goes away, the FIFO is opened again for the next one (what was lost meanwhile is counted to
/// it and said at once through `report`); `reopen()` (SIGHUP) opens the path anew, as after a
/// log rotation.
public final class EventStream: RunObserver, EventLineSink, @unchecked Sendable {  // state behind `condition`
    /// Lines held for a reader that is behind.
    public static let defaultCapacity = 10_000

    public let path: String
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
    public let runner: String?

    /// Starts the writer thread, which opens `path` (see `problem(opening:append:)`).
    public init(
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

    public func jobQueued(_ job: JobDescriptor) { lines.jobQueued(job) }
    public func jobStarted(_ job: JobDescriptor) { lines.jobStarted(job) }
    public func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) { lines.jobWaiting(job, for: reason) }
    public func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) { lines.jobProgress(job, bytes: bytes, total: total) }
    public func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        lines.jobRetrying(job, attempt: attempt, after: delay, reason: reason)
    }
    public func jobFinished(_ result: JobResult) { lines.jobFinished(result) }
    public func hookFailed(_ result: JobResult, reason: String) { lines.hookFailed(result, reason: reason) }
    public func hookNotice(_ result: JobResult, message: String) { lines.hookNotice(result, message: message) }

    /// Queues one line for the writer thread, or counts it as dropped.
    public func take(_ line: [UInt8]) {
        condition.lock()
        if queue.count < capacity && !closing {
            queue.append(line)
            // The writer waits only on an empty queue: wake it for the first line, not each.
            if queue.count == 1 { condition.signal() }
        } else {
            dropped += 1
        }
        condition.unlock()
    }

    // MARK: - Writing

    /// Opens the path anew before the next line (the file was rotated): a file that is there now
    /// is appended to, one that is not is made. Safe from any thread.
    public func reopen() {
        condition.lock()
        reopening = true
        condition.signal()
        condition.unlock()
    }

    /// Writes what is queued, then waits for more, until `finish`.
    private func write() {
        let refused = Self.problem(opening: path, append: append)
        var fd = refused == nil ? Self.open(path, append: append) : -1
        if fd < 0 { return fail(refused ?? "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        while true {
            condition.lock()
            while queue.isEmpty && dropped == 0 && !closing && !reopening { condition.wait() }
            let reopen = reopening
            reopening = false
            if queue.isEmpty && dropped == 0 && !reopen {
                finished = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            let lost = dropped
            dropped = 0
            condition.unlock()

            if reopen {
                close(fd)
                // Rotated away: made anew; still there (copied and truncated): appended to.
                fd = Self.problem(opening: path, append: true) == nil ? Self.open(path, append: true) : -1
                if fd < 0 { return fail("cannot open \(path) again: \(Self.problem(opening: path, append: true) ?? String(cString: strerror(errno)))") }
            }
            // What was lost comes first: the reader learns of it before the lines after it.
            var bytes = lost > 0 ? EventLines.line("dropped", [("count", JSONValue(lost))]) : []
            for line in batch { bytes += line }
            guard let problem = Self.writeAll(bytes, to: fd) else { continue }
            guard problem.code == EPIPE, Self.isFIFO(path) else { return fail("cannot write \(path): \(problem.text)") }
            // The FIFO's reader went away: these lines are lost, counted, and said at once; the
            // next reader gets the count first. Opening the FIFO again waits for that reader
            // here, on this thread, while the engine goes on (lines are held, then counted).
            let missed = batch.count + lost
            condition.lock()
            dropped += missed
            condition.unlock()
            report("--events: the reader of \(path) went away; \(missed) line\(missed == 1 ? "" : "s") lost so far, counted to the next reader")
            close(fd)
            fd = Self.open(path, append: true)
            if fd < 0 { return fail("cannot open \(path) again: \(String(cString: strerror(errno)))") }
        }
    }

    /// Gives up writing: every line from now on is dropped, and `finish` says why.
    private func fail(_ reason: String) {
        condition.lock()
        failure = reason
        queue.removeAll()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    static func isFIFO(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO
    }

    /// Why `path` will not be opened, or nil: it is a symbolic link (never followed), or a
    /// regular file that exists while `append` is false (a second run must not mix its lines
    /// into the first's unasked). A FIFO, a character device or a new file is fine.
    public static func problem(opening path: String, append: Bool) -> String? {
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
    public func finish(timeout: Duration = .seconds(2)) -> String? {
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
public protocol EventLineSink: Sendable {
    /// Whether anybody takes lines now; when not, no line is made.
    var wantsLines: Bool { get }
    func take(_ line: [UInt8])
}

extension EventLineSink {
    public var wantsLines: Bool { true }
}

/// The engine's events as the lines of `--events` (and of the live page's event stream): every
/// event has `time`, `event`, `key` and `kind`.
public struct EventLines: RunObserver {
    public let sink: any EventLineSink
    /// The name of the queue's watcher whose events these are, as `runner` on each (nil: none).
    public let runner: String?

    public init(sink: any EventLineSink, runner: String? = nil) {
        self.sink = sink
        self.runner = runner
    }

    public func jobQueued(_ job: JobDescriptor) {
        guard sink.wantsLines else { return }
        var fields: [(key: String, value: JSONValue)] = [("url", JSONValue(job.recordURL))]
        if let parent = job.parent { fields.append(("parent", .string(parent))) }
        emit("queued", job.key, job.kindName, fields)
    }

    public func jobStarted(_ job: JobDescriptor) { emit("started", job.key, job.kindName) }

    public func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) {
        emit("waiting", job.key, job.kindName, [("for", .string(reason.rawValue))])
    }

    public func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {
        emit("progress", job.key, job.kindName, [("bytes", JSONValue(bytes)), ("total", total.map { JSONValue($0) } ?? .null)])
    }

    public func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        emit("attempt", job.key, job.kindName, [
            ("attempt", JSONValue(attempt - 1)), ("error", .string(reason)), ("delayMs", JSONValue(delay.inMilliseconds)),
        ])
    }

    public func jobFinished(_ result: JobResult) {
        guard sink.wantsLines else { return }
        emit("finished", result.key, result.kind, [("status", .string(result.status.rawValue)), ("record", result.json)])
    }

    public func hookFailed(_ result: JobResult, reason: String) {
        emit("hook", result.key, result.kind, [("error", .string(reason))])
    }

    public func hookNotice(_ result: JobResult, message: String) {
        emit("hook", result.key, result.kind, [("notice", .string(message))])
    }

    private func emit(_ event: String, _ key: String, _ kind: String, _ fields: [(key: String, value: JSONValue)] = []) {
        guard sink.wantsLines else { return }
        sink.take(Self.line(event, [("key", .string(key)), ("kind", .string(kind))] + fields + (runner.map { [("runner", .string($0))] } ?? [])))
    }

    /// One event's line: `time`, `event`, then `fields`.
    public static func line(_ event: String, _ fields: [(key: String, value: JSONValue)]) -> [UInt8] {
        var line: [UInt8] = []
        JSONWriter.write(.object([("time", .string(Timestamp.iso8601(Date()))), ("event", .string(event))] + fields), into: &line)
        line.append(0x0A)
        return line
    }
}
