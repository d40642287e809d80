import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

// The watcher in process: a real spool folder (or the in-memory queue), a real notify socket and
// metrics and events files in a temporary folder, signals handed in as a stream, and a test clock
// for the feed's timers, the grace and the metrics writer. What the binary's watch tests show of
// systemd, SIGHUP, SIGTERM and the grace, shown here in milliseconds.

// MARK: - The world under test

/// A datagram socket standing for systemd's notify socket: keeps every message sent to it.
private final class NotifySocket: Sendable {
    let path: String
    private let fd: Int32
    let messages = Watched<[String]>([])

    init(in folder: TemporaryFolder) {
        let path = folder.path + "/notify"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        var timeout = timeval(tv_sec: 0, tv_usec: 50_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        self.path = path
        self.fd = fd
        let messages = self.messages
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count > 0 {
                    messages.update { $0.append(String(decoding: buffer[..<count], as: UTF8.self)) }
                } else if count < 0, errno != EAGAIN, errno != EINTR {
                    return
                }
            }
        }.start()
    }

    deinit { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }

    var notifier: SystemdNotifier? { SystemdNotifier.fromEnvironment(["NOTIFY_SOCKET": path]) }
}

/// A spool or a queue, an output folder, a clock and a client; a watcher made over them and run
/// in a task, its signals handed in by the test.
private final class WatchWorld: Sendable {
    let folder = TemporaryFolder()
    let clock = TestClock()
    let http = RecordingHTTP()
    let lines = Watched<[String]>([])
    let records = Watched<[JobResult]>([])
    let notify: NotifySocket
    let spool: Spool
    let (signals, signal) = AsyncStream.makeStream(of: Int32.self)

    init() {
        notify = NotifySocket(in: folder)
        spool = Spool(root: folder.path + "/spool")
    }

    var metricsPath: String { folder.path + "/runner.prom" }
    var eventsPath: String { folder.path + "/events.jsonl" }

    func engine() throws -> JobEngine.Configuration {
        var registry = KindRegistry()
        try registry.register(PlainFetchKind.self)
        return .init(registry: registry, store: try OutputStore(root: folder.path + "/out"), http: http).with { $0.clock = clock }
    }

    /// What the watcher runs beside its feed: the notify socket, metrics, an events file.
    func configuration(events: EventStream? = nil) -> Watcher.Configuration {
        let service = WatchService(notifier: notify.notifier, metricsPath: metricsPath)
        let lines = self.lines
        var configuration = Watcher.Configuration(service: service, out: folder.path + "/out", say: { line in lines.update { $0.append(line) } })
        configuration.events = events
        configuration.clock = clock
        return configuration
    }

    /// A watcher of the spool.
    func spoolWatcher(events: EventStream? = nil, grace: Duration = .seconds(10)) throws -> Watcher {
        var feed = SpoolFeed.Configuration(spool: spool, engine: try engine())
        feed.durable = false
        feed.grace = grace
        let observer = ObserverFanout([RecordsObserver(records: records)] + (events.map { [$0] } ?? []))
        return try Watcher(configuration: configuration(events: events)) { onEvent in
            try SpoolFeed(configuration: feed, observer: observer, onEvent: onEvent)
        }
    }

    func start(_ watcher: Watcher) -> Task<Int32, Never> {
        let signals = self.signals
        return Task { await watcher.run(signals: signals) }
    }

    func drop(_ name: String, _ lines: [String]) {
        let staged = folder.write(".staged-\(name)", lines.joined(separator: "\n") + "\n")
        rename(staged, "\(spool.inbox)/\(name)")
    }

    func waitForLine(_ prefix: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        await lines.wait(until: { $0.contains { $0.hasPrefix(prefix) } }, "a line '\(prefix)…'", sourceLocation: sourceLocation)
    }

    func waitForMessage(_ part: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        await notify.messages.wait(until: { $0.contains { $0.contains(part) } }, "a notify message with \(part)", sourceLocation: sourceLocation)
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
}

private func job(_ key: String) -> String {
    #"{"kind": "fetch", "key": "\#(key)", "url": "http://watch.test/\#(key)", "timeout": 60}"#
}

// MARK: - Tests

@Suite(.timeLimit(.minutes(1)))
struct WatcherTests {
    private let w = WatchWorld()

    @Test func aSpoolWatcherTellsSystemdItIsReadyHowItIsAndThatItStopsOnSIGTERM() async throws {
        w.http.script("http://watch.test/a", .ok("A"))
        let watcher = try w.spoolWatcher()
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        #expect(w.notify.messages.value.first == "READY=1\nSTATUS=0 queued, 0 running, 0 done, 0 failed")
        await w.waitForLine("runner: watching ")
        w.drop("a.jsonl", [job("a")])
        await w.waitForLine("runner: a.jsonl: done")
        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
        await w.waitForMessage("STOPPING=1")
        #expect(w.notify.messages.value.contains("STOPPING=1\nSTATUS=stopping: no more files are taken"))
        #expect(w.lines.value.contains("runner: SIGTERM: no more files are taken; running jobs have 10.0 seconds to end"))
        #expect(w.lines.value.last == "runner: stopped")
        let metrics = try String(contentsOfFile: w.metricsPath, encoding: .utf8)
        #expect(metrics.contains("runner_spool_files_total{outcome=\"done\"} 1"), "the last metrics, written at the end: \(metrics)")
    }

    @Test func aHeartbeatEveryIntervalOnTheEnginesClockSaysHowTheWatcherIs() async throws {
        var feed = SpoolFeed.Configuration(spool: w.spool, engine: try w.engine())
        feed.durable = false
        feed.heartbeatInterval = .seconds(5)
        let watcher = try Watcher(configuration: w.configuration()) { onEvent in try SpoolFeed(configuration: feed, onEvent: onEvent) }
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        #expect(w.notify.messages.value.count == 1)
        w.clock.advance(by: .seconds(5))
        await w.notify.messages.wait(until: { $0.count == 2 }, "a heartbeat")
        #expect(w.notify.messages.value.last == "STATUS=0 queued, 0 running, 0 done, 0 failed", "no watchdog set: a status line alone")
        w.signal.yield(SIGINT)
        #expect(await run.value == 0)
        #expect(w.lines.value.contains { $0.hasPrefix("runner: SIGINT: no more files are taken") })
    }

    @Test func aSIGHUPOpensTheMetricsAndEventsFilesAnewAndTheWatcherGoesOn() async throws {
        let events = EventStream(path: w.eventsPath, append: true)
        defer { _ = events.finish() }
        w.http.script("http://watch.test/b", .ok("B"))
        let watcher = try w.spoolWatcher(events: events)
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        #expect(w.exists(w.metricsPath), "written as the watcher starts")
        // logrotate moves both away, then sends SIGHUP.
        rename(w.metricsPath, w.metricsPath + ".1")
        rename(w.eventsPath, w.eventsPath + ".1")
        w.signal.yield(SIGHUP)
        await w.waitForLine("runner: SIGHUP: ")
        #expect(w.lines.value.contains("runner: SIGHUP: reopened --events \(w.eventsPath), --metrics \(w.metricsPath); still watching"))
        #expect(w.exists(w.metricsPath), "the metrics file made anew at once")
        // The watcher goes on: a file dropped now runs, its job's events in the new file.
        w.drop("b.jsonl", [job("b")])
        await w.waitForLine("runner: b.jsonl: done")
        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
        _ = events.finish()
        let written = try String(contentsOfFile: w.eventsPath, encoding: .utf8)
        #expect(written.contains(#""key":"b""#), "the new file has the job that ran after SIGHUP: \(written)")
    }

    @Test func onSIGTERMARunningJobHasTheGraceOnTheEnginesClockThenItsFileGoesBack() async throws {
        w.http.script("http://watch.test/slow", .hang)
        let watcher = try w.spoolWatcher(grace: .seconds(10))
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        w.drop("slow.jsonl", [job("slow")])
        #expect(await w.http.waitForRequests(1))
        w.signal.yield(SIGTERM)
        await w.waitForLine("runner: SIGTERM: ")
        _ = await w.clock.nextSleep(within: .seconds(10))
        w.clock.advance(by: .seconds(9))
        #expect(w.records.value.isEmpty, "still running within the grace")
        w.clock.advance(by: .seconds(1))
        #expect(await run.value == 0)
        #expect(w.records.value.map(\.status) == [.cancelled])
        #expect(w.exists("\(w.spool.inbox)/slow.jsonl"), "back in line")
        #expect(w.lines.value.contains { $0.hasPrefix("runner: slow.jsonl: back in inbox (not finished before shutdown); 1 cancelled") })
    }

    @Test func aQueueWatcherGivesItsRunningJobBackAfterTheGraceOnSIGTERM() async throws {
        let store = InMemoryQueueStore(lease: .seconds(30), clock: w.clock)
        store.submit([QueueSubmission(
            key: "q", kind: "fetch", job: #"{"job": \#(job("q")), "defaults": {}}"#, file: "q.jsonl")])
        w.http.script("http://watch.test/q", .hang)
        var feed = QueueFeed.Configuration(engine: try w.engine(), store: store.connection())
        feed.runner = "w1"
        feed.durable = false
        feed.grace = .seconds(5)
        let watcher = try Watcher(configuration: w.configuration()) { onEvent in try QueueFeed(configuration: feed, onEvent: onEvent) }
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        #expect(w.notify.messages.value.first?.hasPrefix("READY=1\nSTATUS=0 running; watching the queue ") == true)
        #expect(w.lines.value.contains { $0.hasPrefix("runner: watching the queue ") && $0.hasSuffix(" as w1; results in \(w.folder.path)/out/") })
        #expect(await w.http.waitForRequests(1))
        w.signal.yield(SIGTERM)
        await w.waitForMessage("STOPPING=1\nSTATUS=stopping: no more jobs are claimed")
        _ = await w.clock.nextSleep(within: .seconds(5))
        w.clock.advance(by: .seconds(5))
        #expect(await run.value == 0)
        #expect(w.records.value.isEmpty, "a stopping watcher records no end: the job is the fleet's")
        #expect(store.rows.last { $0.key == "q" }?.state == "queued", "handed back for another watcher")
    }
}
