import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

// The spool feed in process: a real spool folder and inotify, a recording HTTP double for every
// fetch, and a test clock for every timer (rescan, settle, heartbeat, grace and the jobs'
// deadlines). What the end-to-end spool tests show through the binary in real time, shown here in
// milliseconds.

// MARK: - The world under test

/// A spool, an output folder, a clock and a client; a feed made over them and run in a task.
private final class SpoolWorld: Sendable {
    let folder = TemporaryFolder()
    let clock = TestClock()
    let http = RecordingHTTP()
    let events = Watched<[SpoolFeed.Event]>([])
    let records = Watched<[JobResult]>([])
    let spool: Spool

    init() { spool = Spool(root: folder.path + "/spool") }

    /// A feed with the test's changes to its configuration.
    func feed(_ change: (inout SpoolFeed.Configuration) -> Void = { _ in }) throws -> SpoolFeed {
        var registry = KindRegistry()
        try registry.register(PlainFetchKind.self)
        var configuration = SpoolFeed.Configuration(
            spool: spool,
            engine: .init(registry: registry, store: try OutputStore(root: folder.path + "/out"), http: http).with { $0.clock = clock })
        configuration.durable = false
        change(&configuration)
        let events = self.events
        return try SpoolFeed(
            configuration: configuration, observer: RecordsObserver(records: records),
            onEvent: { event in events.update { $0.append(event) } })
    }

    /// Runs `feed` until `run()` returns; waits for its first scan first.
    func start(_ feed: SpoolFeed) async -> Task<Void, any Error> {
        let task = Task { try await feed.run() }
        await events.wait(until: { $0.contains { if case .ready = $0 { true } else { false } } }, "the feed's first scan")
        return task
    }

    /// A job file written elsewhere and renamed into inbox/, as `submit` does.
    func drop(_ name: String, _ lines: [String]) {
        let staged = write(name, lines)
        rename(staged, "\(spool.inbox)/\(name)")
    }

    /// A job file written beside the spool, not yet in inbox/.
    func write(_ name: String, _ lines: [String]) -> String {
        folder.write(".staged-\(name)", lines.joined(separator: "\n") + "\n")
    }

    /// The reports of files that went through, by name.
    var finished: [String: SpoolFeed.FileReport] {
        events.read { events in
            var reports: [String: SpoolFeed.FileReport] = [:]
            for case .finished(let report) in events { reports[report.name] = report }
            return reports
        }
    }

    @discardableResult
    func waitFinished(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) async -> SpoolFeed.FileReport? {
        await events.wait(
            until: { $0.contains { if case .finished(let report) = $0 { report.name == name } else { false } } },
            "\(name) to go through", sourceLocation: sourceLocation)
        return finished[name]
    }

    /// Written under its final name, as `cat > file` does: no rename.
    func writeInPlace(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        _ = text.utf8CString.withUnsafeBufferPointer { Glibc.write(fd, $0.baseAddress!, $0.count - 1) }
        close(fd)
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    func contents(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    /// The `results/` record of `key`, parsed.
    func record(_ key: String) -> JSONValue? {
        (try? OutputStore(root: folder.path + "/out"))?.readRecord(forKey: key)
    }
}

/// A job line of the test kind.
private func job(_ key: String, timeout: Int = 60) -> String {
    #"{"kind": "fetch", "key": "\#(key)", "url": "http://spool.test/\#(key)", "timeout": \#(timeout)}"#
}


// MARK: - Tests

@Suite(.timeLimit(.minutes(1)))
struct SpoolFeedTests {
    private let w = SpoolWorld()

    @Test func theWatchPresetEmbedsTheRunPresetAndPreparingMakesTheKernelsMonitor() throws {
        let watch = SpoolFeed.Configuration.watch(spool: w.spool, registry: KindRegistry())
        let run = JobEngine.Configuration.run(registry: KindRegistry())
        for engine in [watch.engine, run] {
            #expect(engine.monitor == nil)
            #expect(engine.deadlines as? DeadlineTimer === DeadlineTimer.shared)
            #expect(engine.concurrency == JobEngine.Configuration().concurrency)
        }
        let prepared = try run.with { $0.out = w.folder.path + "/out" }.prepared()
        #if os(Linux)
        #expect(prepared.monitor is RouteMonitor)
        #endif
        #expect(prepared.store?.root == w.folder.path + "/out")
    }

    @Test func aFileRenamedInRunsItsJobsAndGoesToDoneWithTheirRecords() async throws {
        w.http.script("http://spool.test/a", .ok("A"))
        w.http.script("http://spool.test/b", .ok("B"))
        // Renamed in, a file is complete: taken at once, with no settling (the clock never moves).
        let feed = try w.feed { $0.settle = .seconds(60) }
        let run = await w.start(feed)
        w.drop("two.jsonl", [job("a"), job("b")])
        let report = await w.waitFinished("two.jsonl")
        #expect(report?.outcome == .done)
        #expect(report?.counts == [.succeeded: 2])
        #expect(w.exists("\(w.spool.done)/two.jsonl"))
        let lines = w.contents("\(w.spool.done)/two.jsonl\(Spool.resultsSuffix)").split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.contains(#""status":"succeeded""#) }, "\(lines)")
        #expect(w.record("a")?["status"] == .string("succeeded"))
        #expect(w.records.value.count == 2, "the observer heard both")
        feed.shutdown()
        try await run.value
        #expect(feed.counts.done == 1 && feed.counts.active == 0)
    }

    @Test func junkAndInvalidFilesGoToFailedWithTheirReasonAndNothingRuns() async throws {
        let feed = try w.feed()
        let run = await w.start(feed)
        w.drop("bad.json", [#"{"kind": "nope", "url": "http://spool.test/x"}"#])
        mkdir("\(w.spool.inbox)/folder.json", 0o700)
        #expect(await w.waitFinished("bad.json")?.outcome == .failed)
        #expect(w.contents("\(w.spool.failed)/bad.json\(Spool.errorSuffix)").contains("unknown kind 'nope'"))
        feed.shutdown()
        try await run.value
        #expect(w.http.requests.isEmpty)
    }

    @Test func aJobThatFailsSendsItsFileToFailedNamingTheJob() async throws {
        w.http.script("http://spool.test/gone", .status(500))
        w.http.script("http://spool.test/fine", .ok("fine"))
        let feed = try w.feed()
        let run = await w.start(feed)
        w.drop("mixed.jsonl", [job("fine"), job("gone")])
        let report = await w.waitFinished("mixed.jsonl")
        #expect(report?.outcome == .failed)
        #expect(report?.reason?.contains("gone: failed") == true, "\(report?.reason ?? "")")
        #expect(w.exists("\(w.spool.failed)/mixed.jsonl\(Spool.resultsSuffix)"), "the records go beside it")
        feed.shutdown()
        try await run.value
    }

    /// What runs before the move (`--on-finish`: the hooks of the jobs finished so far) holds a
    /// file in active/ until it ends, to done/ as to failed/: a crash meanwhile runs it again.
    @Test func aFileMovesOnOnlyOnceWhatRunsBeforeTheMoveEnded() async throws {
        w.http.script("http://spool.test/hooked", .ok("H"))
        w.http.script("http://spool.test/broken", .status(500))
        let hooks = Gate()
        let feed = try w.feed { $0.beforeMove = { await hooks.pass() } }
        let run = await w.start(feed)
        w.drop("good.jsonl", [job("hooked")])
        w.drop("bad.jsonl", [job("broken")])
        #expect(await hooks.waitForStarted(2))
        #expect(Set(w.records.value.map(\.status)) == [.succeeded, .failed], "both jobs ended, their records written")
        #expect(w.record("hooked")?["status"] == .string("succeeded"))
        #expect(w.finished.isEmpty, "no file moved on while its hooks run")
        for name in ["good.jsonl", "bad.jsonl"] {
            #expect(!w.exists("\(w.spool.done)/\(name)") && !w.exists("\(w.spool.failed)/\(name)"))
        }
        #expect(feed.counts.active == 2, "both still held in active/")
        hooks.open()
        #expect(await w.waitFinished("good.jsonl")?.outcome == .done)
        #expect(await w.waitFinished("bad.jsonl")?.outcome == .failed)
        #expect(w.exists("\(w.spool.done)/good.jsonl") && w.exists("\(w.spool.failed)/bad.jsonl"))
        feed.shutdown()
        try await run.value
    }

    @Test func aFileWrittenInPlaceIsTakenOnlyOnceUnchangedForSettleOnTheClock() async throws {
        w.http.script("http://spool.test/late", .ok("late"))
        // A minute: real time cannot get there during the test, so only the test clock can.
        let feed = try w.feed { $0.settle = .seconds(60) }
        let run = await w.start(feed)
        w.writeInPlace("\(w.spool.inbox)/inplace.jsonl", job("late") + "\n")
        await eventually("the feed to see the file settling") { feed.counts.settling == 1 }
        w.clock.advance(by: .seconds(30))
        await w.clock.waitForSleepers(2)
        #expect(w.exists("\(w.spool.inbox)/inplace.jsonl"), "not taken after half the settle time")
        #expect(w.finished.isEmpty)
        w.clock.advance(by: .seconds(30))
        #expect(await w.waitFinished("inplace.jsonl")?.outcome == .done)
        feed.shutdown()
        try await run.value
    }

    @Test func withoutInotifyTheRescanOnTheClockFindsAFileThatThenSettles() async throws {
        w.http.script("http://spool.test/found", .ok("found"))
        let feed = try w.feed {
            $0.inotify = false
            $0.settle = .seconds(60)
        }
        let run = await w.start(feed)
        w.drop("found.jsonl", [job("found")])
        await w.clock.waitForSleepers(2)
        #expect(feed.counts.queued == 0, "nothing reads inbox/ before the clock says so")
        // Polled at most 250 ms apart; found by a rescan, it is not known to have arrived by
        // rename, so it is taken once it has not changed for the settle time.
        w.clock.advance(by: .milliseconds(250))
        await eventually("the rescan to find the file") { feed.counts.settling == 1 }
        #expect(w.finished.isEmpty)
        w.clock.advance(by: .seconds(60))
        #expect(await w.waitFinished("found.jsonl")?.outcome == .done)
        feed.shutdown()
        try await run.value
    }

    @Test func heartbeatsComeOnTheClock() async throws {
        let feed = try w.feed { $0.heartbeatInterval = .seconds(5) }
        let run = await w.start(feed)
        func beats() -> Int { w.events.read { $0.filter { if case .heartbeat = $0 { true } else { false } }.count } }
        await w.clock.waitForSleepers(3)
        #expect(beats() == 0)
        w.clock.advance(by: .seconds(5))
        await w.events.wait(until: { $0.contains { if case .heartbeat = $0 { true } else { false } } }, "a heartbeat")
        #expect(beats() == 1)
        feed.shutdown()
        try await run.value
    }

    @Test func onShutdownARunningJobHasGraceThenIsCancelledAndItsFileGoesBackWithTheUnstartedJobs() async throws {
        w.http.script("http://spool.test/slow", .hang)
        let feed = try w.feed { $0.engine.concurrency = 1 }
        let run = await w.start(feed)
        w.drop("slow.jsonl", [job("slow"), job("never")])
        #expect(await w.http.waitForRequests(1))
        feed.shutdown(grace: .seconds(10))
        _ = await w.clock.nextSleep(within: .seconds(10))
        w.clock.advance(by: .seconds(9))
        #expect(w.http.events.count == 1 && w.records.value.isEmpty, "still running within the grace period")
        w.clock.advance(by: .seconds(1))
        try await run.value
        #expect(finishedOutcome("slow.jsonl") == .returned)
        #expect(w.exists("\(w.spool.inbox)/slow.jsonl"), "back in line, with its unstarted job")
        #expect(!w.exists("\(w.spool.failed)/slow.jsonl") && !w.exists("\(w.spool.done)/slow.jsonl"))
        #expect(w.records.value.map(\.status) == [.cancelled], "the running job was cancelled; the other never ran")
        #expect(w.http.requests(to: "http://spool.test/never").isEmpty)
    }

    @Test func shutdownWithNothingRunningReturnsAtOnceAndLeavesUntakenFilesInInbox() async throws {
        let feed = try w.feed { $0.filesAtOnce = 1 }
        let run = await w.start(feed)
        feed.shutdown()
        try await run.value
        w.drop("later.jsonl", [job("later")])
        #expect(w.exists("\(w.spool.inbox)/later.jsonl"))
        #expect(w.records.value.isEmpty)
    }

    @Test func aCancelRequestBeforeAJobStartsIsRecordedThroughTheEngine() async throws {
        let feed = try w.feed()
        let run = await w.start(feed)
        let staged = w.write("cancelled.jsonl", [job("doomed")])
        usleep(10_000)  // the request is made after the file was written
        _ = try w.spool.requestCancel(key: "doomed")
        await w.events.wait(until: { $0.contains { if case .cancelRequested = $0 { true } else { false } } }, "the cancel request")
        rename(staged, "\(w.spool.inbox)/cancelled.jsonl")
        let report = await w.waitFinished("cancelled.jsonl")
        #expect(report?.outcome == .failed)
        #expect(report?.counts == [.cancelled: 1])
        // Through the RecordWriter: results/, the observer (so --json and the metrics) and the
        // records beside the file.
        #expect(w.record("doomed")?["status"] == .string("cancelled"))
        #expect(w.record("doomed")?["error"] == .string("cancelled by request before it started"))
        #expect(w.records.value.map(\.status) == [.cancelled])
        #expect(w.contents("\(w.spool.failed)/cancelled.jsonl\(Spool.resultsSuffix)").contains("cancelled by request"))
        #expect(w.http.requests.isEmpty, "it never ran")
        feed.shutdown()
        try await run.value
    }

    @Test func aCancelRequestCancelsTheRunningTask() async throws {
        w.http.script("http://spool.test/stuck", .hang)
        let feed = try w.feed()
        let run = await w.start(feed)
        w.drop("stuck.jsonl", [job("stuck")])
        #expect(await w.http.waitForRequests(1))
        _ = try w.spool.requestCancel(key: "stuck")
        let report = await w.waitFinished("stuck.jsonl")
        #expect(report?.counts == [.cancelled: 1])
        #expect(w.events.read { events in
            events.contains { if case .cancelRequested(let key, let running) = $0 { key == "stuck" && running } else { false } }
        })
        feed.shutdown()
        try await run.value
    }

    private func finishedOutcome(_ name: String) -> SpoolFeed.FileReport.Outcome? { w.finished[name]?.outcome }
}
