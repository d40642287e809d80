import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

// The engine in process: a test clock for every deadline and backoff, a recording HTTP double
// for every fetch, a real output store in a temporary folder. No test sleeps on the real clock.
//
// What touches the engine's API (making an engine, the test kind) is gathered in this first
// section; the tests below assert on results and on the records on disk.

// MARK: - The engine and the kind under test

/// An engine over `http`, with every wait on `clock`.
private func makeEngine(
    _ folder: TemporaryFolder, http: RecordingHTTP, clock: TestClock,
    monitor: any ConnectivityMonitoring = AlwaysReachable(), backoff: Backoff = Backoff(), limits: JobLimits = .none,
    concurrency: Int = 4, observer: any RunObserver = SilentObserver()
) throws -> JobEngine {
    let store = try OutputStore(root: folder.path)
    var registry = KindRegistry()
    try registry.register(FetchKind.self)
    return try JobEngine(configuration: .init(registry: registry, store: store, http: http).with {
        $0.monitor = monitor
        $0.clock = clock
        $0.limits = limits
        $0.concurrency = concurrency
        $0.backoff = backoff
    }, observer: observer)
}

/// A job of the test kind: fetches `url`, writes what arrived as its payload, and starts one
/// child job (of the same kind) per URL in `children`.
private func job(
    _ url: String, key: String? = nil, retries: Int = 0, timeout: Duration = .seconds(60), children: [String] = [],
    holdsUntilCancelled: Bool = false
) -> JobDescriptor {
    JobDescriptor(
        FetchKind(children: children, holdsUntilCancelled: holdsUntilCancelled), key: key, url: URL(string: url)!, timeout: timeout,
        retries: retries)
}

/// The test kind: the smallest kind that fetches, writes and fans out.
private struct FetchKind: JobKind {
    static let name = "fetch"
    static let summary = "Fetches a URL as it is (for tests)."
    static let parameters: [KindParameter] = []
    var children: [String] = []
    /// After the fetch, waits until its task is cancelled and then succeeds all the same: an
    /// attempt whose deadline comes as it ends.
    var holdsUntilCancelled = false

    init(children: [String], holdsUntilCancelled: Bool = false) {
        self.children = children
        self.holdsUntilCancelled = holdsUntilCancelled
    }

    init(fields: inout JobFields) throws(JobSpecError) {}

    func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "fetched")
        while holdsUntilCancelled && !Task.isCancelled { await Task.yield() }
        let children = self.children
        return .fetched(
            fetch, folder: "fetched", fileExtension: "bin",
            children: ChildJobs(count: children.count) { .success(ChildJob(kind: "fetch", url: children[$0])) })
    }
}

// MARK: - Tests

@Suite(.timeLimit(.minutes(1)))
struct EngineTests {
    let folder = TemporaryFolder()
    let http = RecordingHTTP()
    let clock = TestClock()

    /// The record of `key` as written in `results/`.
    func record(_ key: String) throws -> JSONValue {
        try #require(try OutputStore(root: folder.path).readRecord(forKey: key), "no record for \(key)")
    }

    /// The bytes of a payload path inside the output directory.
    func payload(_ output: String?) -> [UInt8]? {
        output.flatMap { FileManager.default.contents(atPath: "\(folder.path)/\($0)") }.map { [UInt8]($0) }
    }

    /// Temporary files left anywhere in the output directory.
    var leftovers: [String] { folder.files().filter { $0.split(separator: "/").last?.hasPrefix(".tmp-") == true } }

    // MARK: Retries and backoff

    /// A watcher whose claims did not hold (frozen past its lease) writes no record over one of
    /// a later attempt of the key (the watcher that took the job over); one whose claims held,
    /// or a plain run, writes its own as always.
    @Test func aRunThatLostItsClaimWritesNoRecordOverANewerOne() async throws {
        for held in [false, true] {
            let folder = TemporaryFolder()
            let http = RecordingHTTP()
            let url = "http://host.test/frozen"
            http.script(url, .ok("late"))
            let store = try OutputStore(root: folder.path)
            var registry = KindRegistry()
            try registry.register(FetchKind.self)
            let engine = try JobEngine(configuration: .init(registry: registry, store: store, http: http).with {
                $0.clock = TestClock()
                $0.claimHeld = { held }
            })
            let later = Timestamp.iso8601(Date().addingTimeInterval(60))
            let newer = #"{"key":"k","kind":"fetch","status":"succeeded","output":"fetched/other.bin","startedAt":"\#(later)","finishedAt":"\#(later)"}"#
            folder.write("results/\(OutputStore.fileName(forKey: "k")).json", newer + "\n")
            let result = await engine.run(job(url, key: "k"))
            #expect(result.status == .succeeded)
            let stored = try #require(store.readRecord(forKey: "k"))
            #expect((stored["startedAt"]?.stringValue == later) == !held, "claims held: \(held); \(stored)")
        }
    }

    @Test func transientFailuresAreRetriedAfterAnExponentialBackoffOnTheClock() async throws {
        let url = "http://host.test/flaky"
        http.script(url, .status(503), .fail(FetchError.cannotConnect("host.test")), .ok("payload"))
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(1), cap: .seconds(8)))
        let run = Task { await engine.run(job(url, key: "flaky", retries: 3)) }

        await http.waitForRequests(1)
        // After attempt 1: half of the base fixed, half random (1 s → between 0.5 s and 1 s).
        let first = try #require(await clock.nextSleep(within: .seconds(30)))
        #expect(first >= .milliseconds(500) && first <= .seconds(1), "first backoff \(first)")
        clock.advance(by: first - .milliseconds(1))
        #expect(http.requests.count == 1, "no retry before the backoff has passed")
        clock.advance(by: .milliseconds(1))

        await http.waitForRequests(2)
        // After attempt 2 the delay doubles (2 s → between 1 s and 2 s).
        let second = try #require(await clock.nextSleep(within: .seconds(30)))
        #expect(second >= .seconds(1) && second <= .seconds(2), "second backoff \(second)")
        clock.advance(by: second)

        let result = await run.value
        #expect(result.status == .succeeded)
        #expect(result.attempts == 3)
        #expect(http.requests(to: url).count == 3)
        #expect(payload(result.output) == Array("payload".utf8))
        #expect(try record("flaky")["attempts"]?.intValue == 3)
        #expect(clock.now.offset == first + second, "the only time that passed is the two backoffs")
        clock.expectNoPendingSleeps()
    }

    @Test func retryAfterIsHonouredUpToItsCap() async throws {
        let url = "http://host.test/busy"
        http.script(url, .status(429, headers: ["Retry-After": "7"]), .status(503, headers: ["Retry-After": "3600"]), .ok("done"))
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .milliseconds(100), retryAfterCap: .seconds(30)))
        let run = Task { await engine.run(job(url, key: "busy", retries: 2, timeout: .seconds(120))) }

        await http.waitForRequests(1)
        #expect(await clock.nextSleep(within: .seconds(60)) == .seconds(7), "the server's Retry-After, not the 100 ms backoff")
        clock.advance(by: .seconds(7))
        await http.waitForRequests(2)
        #expect(await clock.nextSleep(within: .seconds(60)) == .seconds(30), "an hour's Retry-After is capped at 30 s")
        clock.advance(by: .seconds(30))

        let result = await run.value
        #expect(result.status == .succeeded)
        #expect(result.attempts == 3)
        clock.expectNoPendingSleeps()
    }

    @Test(arguments: [404, 403, 400])
    func aDefiniteAnswerIsNotRetried(status: Int) async throws {
        let url = "http://host.test/\(status)"
        http.script(url, .status(status))
        let engine = try makeEngine(folder, http: http, clock: clock)
        let result = await engine.run(job(url, key: "k", retries: 3))
        #expect(result.status == (status == 404 ? .notFound : .failed))
        #expect(result.httpStatus == status)
        #expect(result.attempts == 1)
        #expect(http.requests.count == 1)
        #expect(clock.now.offset == .zero)
        clock.expectNoPendingSleeps()
    }

    @Test func anAttemptThatOverrunsItsDeadlineOnTheClockIsTimedOutAndRetried() async throws {
        let url = "http://host.test/slow"
        http.script(url, .hang, .ok("late but whole"))
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(1)))
        let run = Task { await engine.run(job(url, key: "slow", retries: 1, timeout: .seconds(2))) }

        await http.waitForRequests(1)
        #expect(await clock.nextSleep(within: .seconds(2)) == .seconds(2), "the attempt's deadline")
        clock.advance(by: .seconds(2))
        await http.waitForCancelled(1)
        let backoff = try #require(await clock.nextSleep(within: .seconds(1)))
        clock.advance(by: backoff)

        let result = await run.value
        #expect(result.status == .succeeded)
        #expect(result.attempts == 2)
        #expect(payload(result.output) == Array("late but whole".utf8))
        #expect(leftovers.isEmpty)
        clock.expectNoPendingSleeps()
    }

    // A job runs in one task, which its deadline cancels; what the job does after a deadline
    // (a retry, its children) goes on in a fresh task that a cancel must still reach.

    @Test func aKeyCancelledInTheBackoffAfterATimeoutEndsCancelled() async throws {
        let url = "http://host.test/slow"
        http.script(url, .hang, .hang)
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(4)))
        let run = Task { await engine.run(job(url, key: "slow", retries: 3, timeout: .seconds(2))) }

        await http.waitForRequests(1)
        #expect(await clock.nextSleep(within: .seconds(2)) == .seconds(2))
        clock.advance(by: .seconds(2))
        _ = try #require(await clock.nextSleep(within: .seconds(30)), "the backoff after the timed-out attempt")
        #expect(engine.taskManager.cancel(key: "slow"))
        let result = await run.value

        #expect(result.status == .cancelled)
        #expect(result.attempts == 1)
        #expect(http.requests.count == 1)
        #expect(!engine.taskManager.isRunning(key: "slow"))
        clock.expectNoPendingSleeps()
    }

    @Test func aKeyCancelledInTheRetryAfterATimeoutEndsCancelled() async throws {
        let url = "http://host.test/slow"
        http.script(url, .hang, .hang)
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(1)))
        let run = Task { await engine.run(job(url, key: "slow", retries: 3, timeout: .seconds(2))) }

        await http.waitForRequests(1)
        _ = await clock.nextSleep(within: .seconds(2))
        clock.advance(by: .seconds(2))
        let backoff = try #require(await clock.nextSleep(within: .seconds(30)))
        clock.advance(by: backoff)
        await http.waitForRequests(2)
        #expect(engine.taskManager.cancel(key: "slow"))
        let result = await run.value

        #expect(result.status == .cancelled, "\(result.error ?? "")")
        #expect(result.attempts == 2)
        #expect(http.events.filter { if case .cancelled = $0 { true } else { false } }.count == 2, "both fetches were cancelled")
        #expect(leftovers.isEmpty)
        clock.expectNoPendingSleeps()
    }

    @Test func cancellingTheRunReachesAJobRetryingAfterATimeout() async throws {
        let url = "http://host.test/slow"
        http.script(url, .hang, .hang)
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(4)))
        let run = Task { await engine.run([job(url, key: "slow", retries: 3, timeout: .seconds(2))]) }

        await http.waitForRequests(1)
        _ = await clock.nextSleep(within: .seconds(2))
        clock.advance(by: .seconds(2))
        _ = try #require(await clock.nextSleep(within: .seconds(30)))
        run.cancel()
        let summary = await run.value

        #expect(summary.counts == [.cancelled: 1])
        #expect(http.requests.count == 1)
        #expect(try record("slow")["status"] == .string("cancelled"))
        clock.expectNoPendingSleeps()
    }

    /// A feed hears of a timed-out job in a task that is not cancelled (as of any job, unless
    /// the run is cancelled): it may store the end, run hooks, or wait for a store to come back.
    @Test func aFeedHearsOfATimedOutJobOutsideTheCancelledTask() async throws {
        final class OneJob: JobFeed, @unchecked Sendable {
            let job: JobDescriptor
            let heard = Locked<[(status: JobStatus?, cancelled: Bool)]>([])
            var given = false
            init(_ job: JobDescriptor) { self.job = job }
            func next() async -> FeedJob? {
                guard !given else { return nil }
                given = true
                return FeedJob(job, ended: { [heard] end in
                    guard case .recorded(let result, _) = end else { return }
                    heard.withLock { $0.append((result.status, Task.isCancelled)) }
                })
            }
        }
        let url = "http://host.test/slow"
        http.script(url, .hang)
        let engine = try makeEngine(folder, http: http, clock: clock)
        let feed = OneJob(job(url, key: "slow", timeout: .seconds(2)))
        let run = Task { await engine.run(feed) }

        await http.waitForRequests(1)
        _ = await clock.nextSleep(within: .seconds(2))
        clock.advance(by: .seconds(2))
        _ = await run.value

        let heard = feed.heard.value
        #expect(heard.count == 1)
        #expect(heard.first?.status == .timedOut)
        #expect(heard.first?.cancelled == false, "the feed was told in the task the deadline cancelled")
    }

    @Test func aParentWhoseDeadlineCameAsItsAttemptEndedStillRunsItsChildren() async throws {
        let base = "http://host.test/items"
        http.script(base, .ok("[1, 2]"))
        http.script("\(base)/1", .ok("one"))
        http.script("\(base)/2", .ok("two"))
        let engine = try makeEngine(folder, http: http, clock: clock)
        let run = Task {
            await engine.run(job(base, key: "parent", timeout: .seconds(2), children: ["\(base)/1", "\(base)/2"], holdsUntilCancelled: true))
        }

        await http.waitForRequests(1)
        #expect(await clock.nextSleep(within: .seconds(2)) == .seconds(2))
        clock.advance(by: .seconds(2))
        let result = await run.value

        #expect(result.status == .succeeded, "the attempt returned its payload: \(result.error ?? "")")
        #expect(result.details.first { $0.key == "children" }?.value == .object([("succeeded", JSONValue(2))]))
        #expect(http.requests.count == 3)
        #expect(try record("fetch:\(base)/2")["status"] == .string("succeeded"))
    }

    // MARK: Conditional requests

    @Test func aSecondRunWithValidatorsGets304AndCarriesThePayloadForward() async throws {
        let url = "http://host.test/doc"
        let body = Array(#"{"v": 1}"#.utf8)
        let modified = "Sun, 22 Nov 2026 10:00:00 GMT"
        http.script(url, .respond(status: 200, headers: ["ETag": #""v1""#, "Last-Modified": modified], body: body), .status(304))
        let engine = try makeEngine(folder, http: http, clock: clock)

        let first = await engine.run(job(url, key: "doc"))
        #expect(first.status == .succeeded)
        #expect(http.requests[0].header("If-None-Match") == nil, "the first run asks unconditionally")
        let second = await engine.run(job(url, key: "doc"))

        let request = try #require(http.requests.last)
        #expect(request.header("If-None-Match") == #""v1""#)
        #expect(request.header("If-Modified-Since") == modified)
        #expect(second.status == .notModified)
        #expect(second.httpStatus == 304)
        #expect(second.error == nil)
        #expect(second.output == first.output)
        #expect(second.bytes == body.count)
        #expect(second.sha256 == SHA256.hex(body))
        #expect(payload(second.output) == body, "the payload on disk is untouched")

        let record = try record("doc")
        #expect(record["status"] == .string("notModified"))
        #expect(record["output"]?.stringValue == first.output)
        #expect(record["bytes"]?.intValue == body.count)
        #expect(record["sha256"]?.stringValue == SHA256.hex(body))
        #expect(record["validators"]?["etag"]?.stringValue == #""v1""#, "the validators stay for the run after")
        #expect(leftovers.isEmpty)
    }

    @Test func a304WithoutAnEarlierPayloadFails() async throws {
        let url = "http://host.test/never-seen"
        http.script(url, .status(304))
        let engine = try makeEngine(folder, http: http, clock: clock)
        let result = await engine.run(job(url, key: "never-seen"))
        #expect(result.status == .failed)
        #expect(result.output == nil)
        #expect(try record("never-seen")["status"] == .string("failed"))
    }

    // MARK: The stale fallback

    @Test(arguments: [RecordingHTTP.Reply.status(500), .fail(FetchError.cannotConnect("host.test"))])
    func aFailureAfterAGoodRunPointsAtTheGoodPayload(failure: RecordingHTTP.Reply) async throws {
        let url = "http://host.test/cached"
        http.script(url, .ok("good"), failure)
        let engine = try makeEngine(folder, http: http, clock: clock)

        let good = await engine.run(job(url, key: "cached"))
        #expect(good.status == .succeeded)
        #expect(good.stale == false)
        let bad = await engine.run(job(url, key: "cached"))
        #expect(bad.status == .failed)
        #expect(bad.stale == true)
        #expect(bad.error != nil)
        #expect(bad.output == good.output)
        #expect(payload(bad.output) == Array("good".utf8), "the good payload is left as it was")

        let record = try record("cached")
        #expect(record["status"] == .string("failed"))
        #expect(record["stale"] == .bool(true))
        #expect(record["output"]?.stringValue == good.output)
        #expect(leftovers.isEmpty)
    }

    /// The inode, size and modification time of a payload: what "left untouched" means.
    func identity(_ output: String?) -> [Int]? {
        var info = stat()
        guard let output, lstat("\(folder.path)/\(output)", &info) == 0 else { return nil }
        return [Int(info.st_ino), Int(info.st_size), info.st_mtim.tv_sec, info.st_mtim.tv_nsec]
    }

    /// A first run of `key` that fetched `good`: its result, checked.
    func goodRun(_ engine: JobEngine, _ url: String, key: String) async throws -> JobResult {
        let good = await engine.run(job(url, key: key))
        try #require(good.status == .succeeded)
        #expect(payload(good.output) == Array("good".utf8))
        return good
    }

    /// The key's result and its record on disk still name the good payload, as stale, with
    /// its size, hash and validators; the payload is the very file it was.
    func expectPointsAtGoodPayload(_ result: JobResult, _ good: JobResult, was before: [Int]?, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(result.stale == true, sourceLocation: sourceLocation)
        #expect(result.output == good.output, sourceLocation: sourceLocation)
        #expect(result.bytes == good.bytes && result.sha256 == good.sha256, sourceLocation: sourceLocation)
        let record = try record(good.key)
        #expect(record["status"] == .string(result.status.rawValue), sourceLocation: sourceLocation)
        #expect(record["stale"] == .bool(true), "\(record)", sourceLocation: sourceLocation)
        #expect(record["output"]?.stringValue == good.output, sourceLocation: sourceLocation)
        #expect(record["validators"]?["etag"]?.stringValue == #""v1""#, "the validators stay for the next conditional request: \(record)", sourceLocation: sourceLocation)
        #expect(payload(good.output) == Array("good".utf8), sourceLocation: sourceLocation)
        #expect(identity(good.output) == before && before != nil, "the payload file is untouched", sourceLocation: sourceLocation)
        #expect(leftovers.isEmpty, sourceLocation: sourceLocation)
    }

    @Test func aCancelMidTransferKeepsPointingAtTheGoodPayload() async throws {
        let url = "http://host.test/cached"
        http.script(url, .ok("good", headers: ["ETag": "\"v1\""]), .hang)
        let engine = try makeEngine(folder, http: http, clock: clock)
        let good = try await goodRun(engine, url, key: "cached")
        let before = identity(good.output)

        let run = Task { await engine.run(job(url, key: "cached", retries: 3)) }
        await http.waitForRequests(2)
        #expect(engine.taskManager.cancel(key: "cached"))
        let result = await run.value

        #expect(result.status == .cancelled)
        try expectPointsAtGoodPayload(result, good, was: before)
        clock.expectNoPendingSleeps()
    }

    @Test func aCancelWhileWaitingForASlotKeepsPointingAtTheGoodPayload() async throws {
        let url = "http://host.test/cached"
        let holder = "http://host.test/holder"
        http.script(url, .ok("good", headers: ["ETag": "\"v1\""]))
        http.script(holder, .hang)
        let engine = try makeEngine(folder, http: http, clock: clock, concurrency: 1)
        let good = try await goodRun(engine, url, key: "cached")
        let before = identity(good.output)

        // The only slot is held by a job that hangs; the key's next job waits for it.
        let holding = Task { await engine.run(job(holder, key: "holder")) }
        await http.waitForRequests(2)
        #expect(engine.freeSlots == 0)
        let waiting = Task { await engine.run(job(url, key: "cached")) }
        waiting.cancel()
        let result = await waiting.value
        #expect(engine.taskManager.cancel(key: "holder"))
        #expect(await holding.value.status == .cancelled)

        #expect(result.status == .cancelled && result.error == "cancelled before it started", "\(result.error ?? "")")
        #expect(http.requests(to: url).count == 1, "the waiting job never fetched")
        try expectPointsAtGoodPayload(result, good, was: before)
    }

    /// A feed's cancel before the start (a spool's `runner cancel` of a waiting file's job).
    @Test func aCancelBeforeTheStartKeepsPointingAtTheGoodPayload() async throws {
        let url = "http://host.test/cached"
        http.script(url, .ok("good", headers: ["ETag": "\"v1\""]))
        let engine = try makeEngine(folder, http: http, clock: clock)
        let good = try await goodRun(engine, url, key: "cached")
        let before = identity(good.output)

        final class CancelledBeforeTheStart: JobFeed, @unchecked Sendable {
            var job: JobDescriptor?
            let ended = Locked<JobResult?>(nil)
            init(_ job: JobDescriptor) { self.job = job }
            func next() async -> FeedJob? {
                defer { job = nil }
                return job.map {
                    FeedJob($0, start: { .cancel("cancelled by request before it started") }, ended: { [ended] end in
                        if case .recorded(let result, _) = end { ended.withLock { $0 = result } }
                    })
                }
            }
        }
        let feed = CancelledBeforeTheStart(job(url, key: "cached"))
        let summary = await engine.run(feed)
        #expect(summary.counts == [.cancelled: 1])
        #expect(http.requests(to: url).count == 1, "the cancelled job never fetched")
        let result = try #require(feed.ended.value)
        #expect(result.error == "cancelled by request before it started")
        try expectPointsAtGoodPayload(result, good, was: before)
    }

    @Test func aTimeoutKeepsPointingAtTheGoodPayload() async throws {
        let url = "http://host.test/cached"
        http.script(url, .ok("good", headers: ["ETag": "\"v1\""]), .hang)
        let engine = try makeEngine(folder, http: http, clock: clock)
        let good = try await goodRun(engine, url, key: "cached")
        let before = identity(good.output)

        let run = Task { await engine.run(job(url, key: "cached", timeout: .seconds(2))) }
        await http.waitForRequests(2)
        #expect(await clock.nextSleep(within: .seconds(2)) == .seconds(2))
        clock.advance(by: .seconds(2))
        let result = await run.value

        #expect(result.status == .timedOut)
        try expectPointsAtGoodPayload(result, good, was: before)
        clock.expectNoPendingSleeps()
    }

    /// A cancelled job whose key had a stale record before still points at the good payload,
    /// and the run after it asks conditionally with the good payload's validators.
    @Test func aCancelAfterAFailureStillPointsAtTheGoodPayloadAndTheNextRunIsConditional() async throws {
        let url = "http://host.test/cached"
        http.script(url, .ok("good", headers: ["ETag": "\"v1\""]), .status(500), .hang, .status(304))
        let engine = try makeEngine(folder, http: http, clock: clock)
        let good = try await goodRun(engine, url, key: "cached")
        let before = identity(good.output)
        #expect(await engine.run(job(url, key: "cached")).stale == true)

        let run = Task { await engine.run(job(url, key: "cached")) }
        await http.waitForRequests(3)
        #expect(engine.taskManager.cancel(key: "cached"))
        let cancelled = await run.value
        #expect(cancelled.status == .cancelled)
        try expectPointsAtGoodPayload(cancelled, good, was: before)

        let again = await engine.run(job(url, key: "cached"))
        #expect(again.status == .notModified && again.output == good.output && again.stale == false)
        #expect(http.requests(to: url).last?.header("If-None-Match") == "\"v1\"")
    }

    @Test func aFailureWithNoGoodRunBeforeIsNotStale() async throws {
        let url = "http://host.test/broken"
        http.script(url, .status(500))
        let engine = try makeEngine(folder, http: http, clock: clock)
        let result = await engine.run(job(url, key: "broken"))
        #expect(result.status == .failed)
        #expect(result.stale == false)
        #expect(result.output == nil)
        #expect(try record("broken")["stale"] != .bool(true))
    }

    // MARK: Children

    @Test func aParentCountsItsChildrenByStatus() async throws {
        let base = "http://host.test/items"
        http.script(base, .ok("[1, 2, 3, 4]"))
        http.script("\(base)/1", .ok("one"))
        http.script("\(base)/2", .ok("two"))
        http.script("\(base)/3", .status(404))
        http.script("\(base)/4", .status(410))
        let engine = try makeEngine(folder, http: http, clock: clock)

        let result = await engine.run(job(base, key: "parent", children: (1...4).map { "\(base)/\($0)" }))
        #expect(result.status == .succeeded, "a child that is not found does not fail its parent")
        let children = result.details.first { $0.key == "children" }?.value
        #expect(children == .object([("succeeded", JSONValue(2)), ("notFound", JSONValue(2))]))
        #expect(try record("parent")["details"]?["children"] == children)
        #expect(http.requests.count == 5)
        for id in 1...4 {
            #expect(try record("fetch:\(base)/\(id)")["parent"] == .string("parent"))
        }
    }

    /// The operator's caps hold for children too: a child that would ask more (here, the retries
    /// it inherits) is not run; it is counted invalid, and since no child at all could be made,
    /// its parent fails saying so.
    @Test func aChildAskingMoreThanTheCapsIsInvalidAndNotRun() async throws {
        let base = "http://host.test/capped"
        http.script(base, .ok("[1]"))
        let engine = try makeEngine(folder, http: http, clock: clock, limits: JobLimits(maxRetries: 1))

        let result = await engine.run(job(base, key: "capped", retries: 3, children: ["\(base)/1"]))
        #expect(result.status == .failed)
        #expect(result.error?.hasPrefix("none of its 1 children could be made into jobs; the first: child 1: ") == true, "\(result.error ?? "")")
        #expect(try record("capped")["details"]?["children"] == .object([("invalid", JSONValue(1))]))
        #expect(try record("capped")["details"]?["invalidChild"]?.stringValue?.contains("retries") == true)
        #expect(http.requests(to: "\(base)/1").isEmpty, "the child was never fetched")
    }

    /// A parent's status is its own fetch's; what its children did is counted in its details and
    /// in what it tells the run (its descendants, grandchildren included).
    @Test func aParentFetchedWellSucceedsAndCountsAChildThatFailed() async throws {
        let base = "http://host.test/list"
        http.script(base, .ok("[1, 2]"))
        http.script("\(base)/1", .ok("one"))
        http.script("\(base)/2", .status(500))
        let engine = try makeEngine(folder, http: http, clock: clock)

        let result = await engine.run(job(base, key: "list", children: ["\(base)/1", "\(base)/2"]))
        #expect(result.status == .succeeded)
        #expect(result.error == nil)
        #expect(try record("list")["details"]?["children"] == .object([("succeeded", JSONValue(1)), ("failed", JSONValue(1))]))
        #expect(result.descendants.byStatus == [.succeeded: 1, .failed: 1] && result.descendants.failures == 1)
        var summary = RunSummary()
        summary.add(result)
        #expect(summary.total == 3 && summary.failures == 1 && summary.exitCode() == 1)
        #expect(summary.exitCode(allowing: .count(1)) == 0 && summary.exitCode(allowing: .percent(20)) == 1)
    }

    // MARK: Cancelling

    @Test func cancellingARunningKeyEndsItCancelledWithoutTimePassing() async throws {
        let url = "http://host.test/hang"
        http.script(url, .hang)
        let engine = try makeEngine(folder, http: http, clock: clock)
        let run = Task { await engine.run(job(url, key: "hang", retries: 3, timeout: .seconds(2))) }

        await http.waitForRequests(1)
        #expect(engine.taskManager.isRunning(key: "hang"))
        #expect(engine.taskManager.cancel(key: "hang"))
        let result = await run.value

        #expect(result.status == .cancelled)
        #expect(result.attempts == 1, "a cancel is never retried")
        #expect(clock.now.offset == .zero, "it ended with no time passing on the clock: no deadline was needed")
        #expect(http.events.contains { if case .cancelled = $0 { true } else { false } }, "the fetch itself was cancelled")
        #expect(try record("hang")["status"] == .string("cancelled"))
        #expect(!engine.taskManager.isRunning(key: "hang"))
        #expect(leftovers.isEmpty)
        clock.expectNoPendingSleeps()
    }

    @Test func cancellingDuringTheBackoffEndsCancelledWithoutWaitingItOut() async throws {
        let url = "http://host.test/down"
        http.script(url, .status(503))
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(4)))
        let run = Task { await engine.run(job(url, key: "down", retries: 5)) }

        await http.waitForRequests(1)
        _ = await clock.nextSleep(within: .seconds(30))
        engine.taskManager.cancel(key: "down")
        let result = await run.value

        #expect(result.status == .cancelled)
        #expect(result.attempts == 1)
        #expect(http.requests.count == 1)
        #expect(clock.now.offset == .zero)
        clock.expectNoPendingSleeps()
    }

    // MARK: Connectivity

    @Test func anUnreachableHostUntilTheDeadlineIsOfflineAndNeverFetched() async throws {
        let url = "http://host.test/away"
        let monitor = ScriptedMonitor()
        let engine = try makeEngine(folder, http: http, clock: clock, monitor: monitor)
        let run = Task { await engine.run(job(url, key: "away", timeout: .seconds(2))) }

        await monitor.waitForWaiters(1)
        await clock.waitForSleepers(2)  // the deadline and the notice
        clock.advance(by: .seconds(2))
        let result = await run.value

        #expect(result.status == .offline)
        #expect(result.waitedForNetworkMs == 2000, "waited on the test clock, in no real time")
        #expect(http.requests.isEmpty)
        #expect(monitor.waiterCount == 0)
        clock.expectNoPendingSleeps()
    }

    // MARK: Events

    /// The lines of an event stream, by key, as (event, line) in the order written.
    func events(_ path: String) throws -> [String: [(event: String, line: JSONValue)]] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var byKey: [String: [(event: String, line: JSONValue)]] = [:]
        for line in text.split(separator: "\n") {
            let value = try JSONParser.parse(String(line))
            #expect(value["time"]?.stringValue?.hasSuffix("Z") == true && value["kind"]?.stringValue == "fetch", "\(line)")
            byKey[try #require(value["key"]?.stringValue), default: []].append((try #require(value["event"]?.stringValue), value))
        }
        return byKey
    }

    @Test func anEventStreamTellsEachJobsStoryInOrder() async throws {
        let path = folder.path + "/events.jsonl"
        let stream = EventStream(path: path)
        let base = "http://host.test"
        http.script("\(base)/ok", .ok("one"))
        http.script("\(base)/flaky", .status(503), .ok("two"))
        http.script("\(base)/parent", .ok("[1]"))
        http.script("\(base)/child", .ok("c"))
        let engine = try makeEngine(folder, http: http, clock: clock, backoff: Backoff(base: .seconds(1)), observer: stream)
        let run = Task {
            await engine.run([
                job("\(base)/ok", key: "ok"), job("\(base)/flaky", key: "flaky", retries: 1),
                job("\(base)/parent", key: "parent", children: ["\(base)/child"]),
            ])
        }
        let delay = try #require(await clock.nextSleep(within: .seconds(30)))
        clock.advance(by: delay)
        let summary = await run.value
        #expect(summary.allSucceeded)
        #expect(stream.finish() == nil)

        // A job's `progress` lines come from the real clock (a second of a transfer), which a
        // loaded machine may give even these: the story is told without them.
        let byKey = try events(path).mapValues { $0.filter { $0.event != "progress" } }
        #expect(byKey["ok"]?.map(\.event) == ["queued", "started", "finished"])
        #expect(byKey["flaky"]?.map(\.event) == ["queued", "started", "attempt", "finished"])
        let attempt = try #require(byKey["flaky"]?[2].line)
        #expect(attempt["attempt"]?.intValue == 1)
        #expect(attempt["error"]?.stringValue?.contains("503") == true)
        #expect(attempt["delayMs"]?.intValue == delay.inMilliseconds)
        let finished = try #require(byKey["flaky"]?.last?.line)
        #expect(finished["status"]?.stringValue == "succeeded")
        #expect(finished["record"]?["attempts"]?.intValue == 2, "the whole record")
        let child = try #require(byKey["fetch:\(base)/child"])
        #expect(child.map(\.event) == ["queued", "started", "finished"])
        #expect(child.first?.line["parent"]?.stringValue == "parent")
        #expect(byKey["parent"]?.map(\.event) == ["queued", "started", "finished"])
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        let parentEnd = try #require(lines.firstIndex { $0.contains(#""event":"finished","key":"parent""#) })
        let childEnd = try #require(lines.firstIndex { $0.contains(#""event":"finished","key":"fetch:"#) })
        #expect(parentEnd > childEnd, "a parent ends after its children")
    }

    @Test func aJobWaitingForTheNetworkSaysSo() async throws {
        let path = folder.path + "/events.jsonl"
        let stream = EventStream(path: path)
        let monitor = ScriptedMonitor()
        http.script("http://host.test/later", .ok("here"))
        let engine = try makeEngine(folder, http: http, clock: clock, monitor: monitor, observer: stream)
        let run = Task { await engine.run(job("http://host.test/later", key: "later", timeout: .seconds(5))) }
        await monitor.waitForWaiters(1)
        monitor.setReachable("host.test", true)
        #expect(await run.value.status == .succeeded)
        #expect(stream.finish() == nil)
        let later = try #require(try events(path)["later"])
        #expect(later.map(\.event) == ["queued", "started", "waiting", "finished"])
        #expect(later[2].line["for"]?.stringValue == "network")
    }
}

/// The event stream's own promise: a reader that is behind never holds a job; what does not fit
/// is dropped and counted.
struct EventStreamTests {
    private struct Kind: JobKind {
        static let name = "fetch"
        static let summary = "A kind for events."
        static let parameters: [KindParameter] = []
        init() {}
        init(fields: inout JobFields) throws(JobSpecError) {}
        func run(in context: JobContext) async throws -> KindOutcome { throw JobFailure.failed("not run") }
    }

    @Test func aReaderThatIsBehindLosesEventsButNeverWaitsAndIsToldHowMany() throws {
        // A FIFO whose read end is open, but nobody reads it yet.
        let folder = TemporaryFolder()
        let fifo = folder.path + "/events"
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        let stream = EventStream(path: fifo, capacity: 100)
        let job = JobDescriptor(Kind(), key: "k", url: URL(string: "http://host.test/")!)
        let began = ContinuousClock.now
        for _ in 0..<5000 { stream.jobStarted(job) }
        #expect(began.duration(to: .now) < .seconds(2), "emitting never waits for the reader")
        // Now the reader drains the pipe while the stream finishes.
        let done = Locked(false)
        DispatchQueue.global().async {
            _ = stream.finish(timeout: .seconds(10))
            done.withLock { $0 = true }
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let finished = done.withLock { $0 }
            let got = read(reader, &buffer, buffer.count)
            if got > 0 {
                bytes += buffer[..<got]
            } else if finished {
                break
            } else {
                usleep(1000)
            }
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map { try? JSONParser.parse(String($0)) }
        let started = lines.filter { $0?["event"]?.stringValue == "started" }.count
        let dropped = lines.compactMap { $0?["event"]?.stringValue == "dropped" ? $0?["count"]?.intValue : nil }.reduce(0, +)
        #expect(started + dropped == 5000, "every event written or counted: \(started) + \(dropped)")
        #expect(dropped > 0 && started >= 100)
    }
}

