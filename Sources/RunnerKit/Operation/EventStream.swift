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
/// opened on that thread too, since opening a FIFO waits for its reader.
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
    /// Why the file could not be written (it could not be opened, or its reader went away).
    private var failure: String?

    /// Whether an existing regular file at `path` is appended to (else it is refused).
    private let append: Bool

    /// Starts the writer thread, which opens `path` (see `problem(opening:append:)`).
    public init(path: String, append: Bool = false, capacity: Int = defaultCapacity) {
        self.path = path
        self.append = append
        self.capacity = max(1, capacity)
        let thread = Thread { [self] in write() }
        thread.name = "runner events"
        thread.start()
    }

    // MARK: - Events

    private var lines: EventLines { EventLines(sink: self) }

    public func jobQueued(_ job: JobDescriptor) { lines.jobQueued(job) }
    public func jobStarted(_ job: JobDescriptor) { lines.jobStarted(job) }
    public func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) { lines.jobWaiting(job, for: reason) }
    public func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        lines.jobRetrying(job, attempt: attempt, after: delay, reason: reason)
    }
    public func jobFinished(_ result: JobResult) { lines.jobFinished(result) }
    public func hookFailed(_ result: JobResult, reason: String) { lines.hookFailed(result, reason: reason) }

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

    /// Writes what is queued, then waits for more, until `finish`.
    private func write() {
        let refused = Self.problem(opening: path, append: append)
        let fd = refused == nil ? Self.open(path, append: append) : -1
        if fd < 0 {
            let reason = refused ?? "cannot open \(path): \(String(cString: strerror(errno)))"
            condition.lock()
            failure = reason
            queue.removeAll()
            finished = true
            condition.broadcast()
            condition.unlock()
            return
        }
        defer { close(fd) }
        while true {
            condition.lock()
            while queue.isEmpty && dropped == 0 && !closing { condition.wait() }
            if queue.isEmpty && dropped == 0 {
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

            var bytes = batch.flatMap { $0 }
            if lost > 0 {
                bytes += EventLines.line("dropped", [("count", JSONValue(lost))])
            }
            if let problem = Self.writeAll(bytes, to: fd) {
                condition.lock()
                failure = "cannot write \(path): \(problem)"
                queue.removeAll()
                finished = true
                condition.broadcast()
                condition.unlock()
                return
            }
        }
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
    private static func writeAll(_ bytes: [UInt8], to fd: Int32) -> String? {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return String(cString: strerror(errno))
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

    public init(sink: any EventLineSink) { self.sink = sink }

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

    private func emit(_ event: String, _ key: String, _ kind: String, _ fields: [(key: String, value: JSONValue)] = []) {
        guard sink.wantsLines else { return }
        sink.take(Self.line(event, [("key", .string(key)), ("kind", .string(kind))] + fields))
    }

    /// One event's line: `time`, `event`, then `fields`.
    public static func line(_ event: String, _ fields: [(key: String, value: JSONValue)]) -> [UInt8] {
        var line: [UInt8] = []
        JSONWriter.write(.object([("time", .string(Timestamp.iso8601(Date()))), ("event", .string(event))] + fields), into: &line)
        line.append(0x0A)
        return line
    }
}
