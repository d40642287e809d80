import FixtureServer
import Foundation
import RunnerKinds
import RunnerKit
import RunnerTestSupport
import Synchronization
import Testing

/// The engine in-process with the real HTTP client ($RUNNER_HTTP) and the fixture server: nothing of an
/// attempt outlives it, and real timers end a thousand hanging fetches at their deadline.
@Suite(.measuresRealTime, .timeLimit(.minutes(2)), .serialized)
struct EngineScaleTests {
    /// The real clock, counting sleeps in progress, so a test can see no timer is left.
    final class CountingClock: Clock, Sendable {
        let base = ContinuousClock()
        let sleeping = Mutex(0)
        var now: ContinuousClock.Instant { base.now }
        var minimumResolution: Duration { base.minimumResolution }
        func sleep(until deadline: ContinuousClock.Instant, tolerance: Duration?) async throws {
            sleeping.withLock { $0 += 1 }
            defer { sleeping.withLock { $0 -= 1 } }
            try await base.sleep(until: deadline, tolerance: tolerance)
        }
        var pending: Int { sleeping.withLock { $0 } }
    }

    final class Collector: RunObserver {
        let results = Mutex<[JobResult]>([])
        func jobFinished(_ result: JobResult) { results.withLock { $0.append(result) } }
        var all: [JobResult] { results.withLock { $0 } }
    }

    func engine(_ folder: String, concurrency: Int, clock: CountingClock, http: any HTTPClient, observer: Collector) throws -> JobEngine {
        try JobEngine(
            configuration: .init(store: try OutputStore(root: folder), http: http).with {
                $0.monitor = RouteMonitor()
                $0.clock = clock
                $0.concurrency = concurrency
                $0.perHost = concurrency
            },
            observer: observer)
    }

    @Test func aThousandJobsLeaveNoTaskTimerOrTransferBehind() async throws {
        let w = try Workspace()
        let clock = CountingClock()
        let http = try testHTTPClient().make(maxConnectionsPerHost: 16)
        let collector = Collector()
        let engine = try engine(w.out, concurrency: 32, clock: clock, http: http, observer: collector)
        let ids = FixtureCatalog.treeLeafIDs.filter { !FixtureCatalog.missingEntryIDs.contains($0) }
        let jobs = (0..<1000).map { i in
            JobDescriptor(EntryKind(id: ids[i % ids.count]), key: "entry-\(i)", url: URL(string: "\(w.base)/entries/\(ids[i % ids.count]).json")!)
        }
        let summary = await engine.run(jobs)
        #expect(summary.counts[.succeeded] == 1000)
        #expect(engine.taskManager.count == 0)
        #expect(http.activeTaskCount == 0, "every transfer completed before its job ended")
        #expect(clock.pending == 0, "no deadline timer is left sleeping")
        #expect(w.leftovers().isEmpty)
    }

    /// Jobs that finish faster than their records are written: the record writer falls behind
    /// and then drains many records at a time.
    @Test func aWriterBehindStillWritesEveryRecordAndOneRunLogLineEach() async throws {
        let w = try Workspace()
        let store = try OutputStore(root: w.out)
        let runLog = try RunLog(store: store)
        let collector = Collector()
        let engine = try JobEngine(
            configuration: .init(store: store, http: RecordingHTTP.instant()).with {
                $0.concurrency = 64
                $0.runLog = runLog
                $0.perHost = 64
            },
            observer: collector)
        let count = 3000
        let jobs = (0..<count).map { i in
            JobDescriptor(EntryKind(id: "e\(i)"), key: "e\(i)", url: URL(string: "http://127.0.0.1:9/e\(i).json")!)
        }
        let summary = await engine.run(jobs)
        #expect(summary.counts[.succeeded] == count)
        #expect(collector.all.count == count, "the observer heard of every job")
        let lines = try String(contentsOfFile: runLog.path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == count)
        let keys = try lines.map { line in try #require(JSONParser.parse(Array(line.utf8))["key"]?.stringValue) }
        #expect(Set(keys) == Set((0..<count).map { "e\($0)" }))
        for i in stride(from: 0, to: count, by: 97) {
            #expect(try w.status("e\(i)") == "succeeded")
        }
        #expect(w.outputFiles().filter { $0.hasPrefix("results/") }.count == count)
    }

    @Test func aThousandHangingFetchesEndTimedOutAtTheirDeadline() async throws {
        let w = try Workspace()
        let clock = CountingClock()
        let http = try testHTTPClient().make(maxConnectionsPerHost: 64)
        let collector = Collector()
        let engine = try engine(w.out, concurrency: 1000, clock: clock, http: http, observer: collector)
        let jobs = (0..<1000).map { i in
            JobDescriptor(EntryKind(id: "h\(i)"), key: "hang-\(i)", url: URL(string: "\(w.base)/entries/h\(i).json?hang=1")!, timeout: .seconds(1))
        }
        let summary = await engine.run(jobs)
        #expect(summary.counts[.timedOut] == 1000, "\(summary.counts)")
        let durations = collector.all.map(\.durationMs).sorted()
        let late = durations.map { $0 - 1000 }
        // Generous for a debug build on a shared two-core machine, where a thousand deadlines
        // firing at once take a while to wind down; Tests/Benchmarks/engine.sh measures the spread.
        #expect(durations.first ?? 0 >= 990, "none ends before its deadline: \(durations.prefix(3))")
        #expect(late[late.count * 99 / 100] < 2500, "p99 lateness \(late[late.count * 99 / 100]) ms")
        #expect(engine.taskManager.count == 0)
        #expect(clock.pending == 0)
        // The fetches were cancelled when their deadlines came; the client winds its transfers
        // down on its own queue right after.
        let limit = ContinuousClock.now.advanced(by: .seconds(5))
        while http.activeTaskCount > 0 && ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
        #expect(http.activeTaskCount == 0)
    }

    @Test func cancelEndsARunningFetchAtOnceAndLeavesNoTemporaryFile() async throws {
        let w = try Workspace()
        let clock = CountingClock()
        let http = try testHTTPClient().make(maxConnectionsPerHost: 8)
        let collector = Collector()
        let engine = try engine(w.out, concurrency: 8, clock: clock, http: http, observer: collector)
        // The body outgrows memory at once and then trickles one byte every 100 ms, so a
        // temporary file exists when the cancel comes.
        let job = JobDescriptor(
            ImageKind(), key: "slow", url: URL(string: "\(w.base)/bytes/200000?trickle=100&trickleAfter=\(Payload.memoryLimit + 1000)")!,
            timeout: .seconds(30))
        let running = Task { await engine.run(job) }
        let started = ContinuousClock.now.advanced(by: .seconds(5))
        while w.leftovers().isEmpty && ContinuousClock.now < started { try await Task.sleep(for: .milliseconds(5)) }
        #expect(!w.leftovers().isEmpty, "the fetch has begun writing")
        let before = ContinuousClock.now
        #expect(engine.taskManager.cancel(key: "slow"))
        let result = await running.value
        let took = before.duration(to: .now)
        #expect(result.status == .cancelled)
        #expect(took < .seconds(3), "cancelled after \(took); uncancelled it trickles on to its 30 s timeout")
        #expect(w.leftovers().isEmpty)
        #expect(w.outputFiles().filter { $0.hasPrefix("images/") }.isEmpty)
    }
}
