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

    /// A notifier to this socket, as systemd's environment gives it (`WATCHDOG_USEC` too, if asked).
    func notifier(watchdog: Duration? = nil) -> SystemdNotifier? {
        var environment = ["NOTIFY_SOCKET": path]
        if let watchdog { environment["WATCHDOG_USEC"] = String(watchdog.inMilliseconds * 1000) }
        return SystemdNotifier.fromEnvironment(environment)
    }
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

    /// What the watcher runs beside its feed: the notify socket, metrics (unless `metrics` is
    /// false), an events file.
    func configuration(events: EventStream? = nil, watchdog: Duration? = nil, metrics: Bool = true) -> Watcher.Configuration {
        let service = WatchService(notifier: notify.notifier(watchdog: watchdog), metricsPath: metrics ? metricsPath : nil)
        let lines = self.lines
        var configuration = Watcher.Configuration(service: service, out: folder.path + "/out", say: { line in lines.update { $0.append(line) } })
        configuration.events = events
        configuration.clock = clock
        return configuration
    }

    /// A watcher of the spool, its jobs heard by the metrics as the command's are, its
    /// heartbeat the service's (the watchdog's when there is one).
    func spoolWatcher(
        events: EventStream? = nil, grace: Duration = .seconds(10), watchdog: Duration? = nil, metrics: Bool = true
    ) throws -> Watcher {
        let configuration = configuration(events: events, watchdog: watchdog, metrics: metrics)
        var feed = SpoolFeed.Configuration(spool: spool, engine: try engine())
        feed.durable = false
        feed.grace = grace
        feed.heartbeatInterval = configuration.service.heartbeatInterval
        let observer = ObserverFanout([RecordsObserver(records: records), configuration.service.metrics] + (events.map { [$0] } ?? []))
        return try Watcher(configuration: configuration) { onEvent in
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

    /// The metrics file's samples, `name{labels}` to value.
    func metrics() -> [String: Double] {
        let text = (try? String(contentsOfFile: metricsPath, encoding: .utf8)) ?? ""
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }
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

    @Test func withAWatchdogTheWatcherPingsAtHalfItsIntervalOnTheClockAlsoWhileAJobRuns() async throws {
        w.http.script("http://watch.test/long", .hang)
        // WATCHDOG_USEC of 1 s: a ping is due every 500 ms.
        let watcher = try w.spoolWatcher(grace: .zero, watchdog: .seconds(1))
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        #expect(w.lines.value.contains { $0.hasPrefix("runner: watching ") }, "READY=1 comes after the first scan")
        w.drop("long.jsonl", [job("long")])
        #expect(await w.http.waitForRequests(1))
        func pings() -> [String] { w.notify.messages.value.filter { $0.hasPrefix("WATCHDOG=1") } }
        #expect(pings().isEmpty, "none before the clock says so")
        // The rescan sleeps 2 s, the settle tick 250 ms: within 1.5 s, the only sleep with 500 ms
        // left is the ping's, once it sleeps again.
        for count in 1...3 {
            await eventually("the ping's sleep") { w.clock.pendingSleeps.contains(.milliseconds(500)) }
            w.clock.advance(by: .milliseconds(500))
            await w.notify.messages.wait(until: { $0.filter { $0.hasPrefix("WATCHDOG=1") }.count == count }, "ping \(count)")
        }
        #expect(pings().allSatisfy { $0 == "WATCHDOG=1\nSTATUS=0 queued, 1 running, 0 done, 0 failed" }, "\(pings())")
        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
        let messages = w.notify.messages.value
        let stopping = try #require(messages.firstIndex { $0.hasPrefix("STOPPING=1") }, "\(messages)")
        #expect(messages.firstIndex { $0.hasPrefix("READY=1") }! < stopping)
        #expect(w.exists("\(w.spool.inbox)/long.jsonl"), "no grace: cancelled at once, its file back in line")
    }

    @Test func theMetricsAreWrittenAtTheStartEveryTenSecondsOnTheClockAndLastAtTheEnd() async throws {
        w.http.script("http://watch.test/good", .ok("G"))
        w.http.script("http://watch.test/broken", .status(500))
        let watcher = try w.spoolWatcher()
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        await eventually("the metrics written as the watcher starts") { w.exists(w.metricsPath) }
        w.drop("good.jsonl", [job("good")])
        w.drop("bad.jsonl", [job("broken")])
        await w.waitForLine("runner: good.jsonl: done")
        await w.waitForLine("runner: bad.jsonl: failed")
        #expect(w.metrics()[#"runner_jobs_total{kind="fetch",status="succeeded"}"#] == nil, "not written again before 10 s")
        w.clock.advance(by: .seconds(10))
        await eventually("the metrics written after 10 s") { w.metrics()[#"runner_jobs_total{kind="fetch",status="succeeded"}"#] == 1 }
        #expect(w.metrics()[#"runner_jobs_total{kind="fetch",status="failed"}"#] == 1)
        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
        let samples = w.metrics()
        #expect(samples[#"runner_spool_files_total{outcome="done"}"#] == 1, "\(samples)")
        #expect(samples[#"runner_spool_files_total{outcome="failed"}"#] == 1)
        #expect(samples["runner_queued_files"] == 0 && samples["runner_active_files"] == 0 && samples["runner_running_jobs"] == 0)
        #expect(samples[#"runner_job_duration_seconds_count{kind="fetch"}"#] == 2)
        let names = try FileManager.default.contentsOfDirectory(atPath: w.folder.path)
        #expect(names.filter { $0.contains("runner.prom") } == ["runner.prom"], "written through a temporary file, none left: \(names)")
    }

    @Test func onSIGTERMAJobThatEndsWithinTheGraceMovesItsFileOn() async throws {
        w.http.script("http://watch.test/ends", .hang)
        let watcher = try w.spoolWatcher(grace: .seconds(30))
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        // Its own deadline of 5 s on the clock ends it within the grace.
        w.drop("ends.jsonl", [#"{"kind": "fetch", "key": "ends", "url": "http://watch.test/ends", "timeout": 5}"#])
        #expect(await w.http.waitForRequests(1))
        w.signal.yield(SIGTERM)
        await w.waitForLine("runner: SIGTERM: ")
        w.clock.advance(by: .seconds(5))
        #expect(await run.value == 0, "stopped once its only job ended, not after the grace")
        #expect(w.records.value.map(\.status) == [.timedOut])
        #expect(w.exists("\(w.spool.failed)/ends.jsonl"), "its file moved on, not back to inbox/")
        #expect(w.lines.value.contains { $0.hasPrefix("runner: ends.jsonl: failed") })
    }

    @Test func signalsThatRunOutLeaveTheFeedRunningUntilItIsStopped() async throws {
        w.http.script("http://watch.test/later", .ok("L"))
        let watcher = try w.spoolWatcher(metrics: false)
        // A caller's signals: one SIGHUP, then the sequence ends.
        let (signals, signal) = AsyncStream.makeStream(of: Int32.self)
        signal.yield(SIGHUP)
        signal.finish()
        let run = Task { await watcher.run(signals: signals) }
        await w.waitForLine("runner: SIGHUP: ")
        await w.waitForLine("runner: watching ")
        w.drop("later.jsonl", [job("later")])
        await w.waitForLine("runner: later.jsonl: done")
        #expect(!w.lines.value.contains("runner: stopped"), "the watcher runs while its feed does")
        watcher.feed.shutdown(grace: nil)
        #expect(await run.value == 0)
        #expect(w.lines.value.last == "runner: stopped")
    }

    @Test func aSIGHUPWithNoFileToReopenIsSaidAndTheWatcherGoesOn() async throws {
        w.http.script("http://watch.test/after", .ok("A"))
        let watcher = try w.spoolWatcher(metrics: false)
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        w.signal.yield(SIGHUP)
        await w.waitForLine("runner: SIGHUP: ")
        #expect(w.lines.value.contains("runner: SIGHUP: no file to reopen; still watching"))
        w.drop("after.jsonl", [job("after")])
        await w.waitForLine("runner: after.jsonl: done")
        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
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
        // 7 s: no other timer of the watcher sleeps that long (heartbeat 5 s, metrics 10 s).
        let watcher = try w.spoolWatcher(grace: .seconds(7))
        let run = w.start(watcher)
        await w.waitForMessage("READY=1")
        w.drop("slow.jsonl", [job("slow")])
        #expect(await w.http.waitForRequests(1))
        w.signal.yield(SIGTERM)
        await w.waitForLine("runner: SIGTERM: ")
        await eventually("the grace's sleep") { w.clock.pendingSleeps.contains(.seconds(7)) }
        w.clock.advance(by: .seconds(6))
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
        // The metrics every 10 s: the jobs running here, and no spool's gauges.
        w.clock.advance(by: .seconds(10))
        await eventually("the metrics with the running job") { w.metrics()["runner_running_jobs"] == 1 }
        w.signal.yield(SIGTERM)
        await w.waitForMessage("STOPPING=1\nSTATUS=stopping: no more jobs are claimed")
        await eventually("the grace's sleep") { w.clock.pendingSleeps.contains(.seconds(5)) }
        w.clock.advance(by: .seconds(5))
        #expect(await run.value == 0)
        #expect(w.records.value.isEmpty, "a stopping watcher records no end: the job is the fleet's")
        #expect(store.rows.last { $0.key == "q" }?.state == "queued", "handed back for another watcher")
        #expect(w.metrics()["runner_running_jobs"] == 0, "the last metrics, at the end")
        #expect(w.metrics()["runner_queued_files"] == nil && w.metrics()[#"runner_spool_files_total{outcome="done"}"#] == nil)
    }
}
