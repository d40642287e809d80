import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

// The queue feed in process: the in-memory store (the rules of the PostgreSQL one), a recording
// HTTP double for every fetch, and a test clock for every timer (polling, leases, heartbeat,
// grace, retries and the jobs' deadlines). QueueTests show the same through the binary against
// a real PostgreSQL; QueueStoreContractTests hold both stores to one contract.

// MARK: - The world under test

/// A queue, an output folder, a clock and a client; feeds made over them, run in tasks.
private final class QueueWorld: Sendable {
    let folder = TemporaryFolder()
    let clock = TestClock()
    let http = RecordingHTTP()
    let store: InMemoryQueueStore
    let events = Watched<[(runner: String, event: QueueFeed.Event)]>([])
    let records = Watched<[JobResult]>([])
    /// Where jobs of the `gated` kind wait.
    let gate = Gate()

    init() {
        store = InMemoryQueueStore(lease: .seconds(30), clock: clock)
        currentGate.withLock { [gate] in $0 = gate }
    }

    /// A feed named `runner` with the test's changes to its configuration.
    func feed(_ runner: String = "a", _ change: (inout QueueFeed.Configuration) -> Void = { _ in }) throws -> QueueFeed {
        var registry = KindRegistry()
        try registry.register(PlainFetchKind.self)
        try registry.register(GatedKind.self)
        try registry.register(ListKind.self)
        var configuration = QueueFeed.Configuration(
            engine: .init(registry: registry, store: try OutputStore(root: folder.path + "/out"), http: http).with { $0.clock = clock },
            store: store.connection())
        configuration.runner = runner
        configuration.durable = false
        change(&configuration)
        let (events, records) = (events, records)
        return try QueueFeed(
            configuration: configuration, observer: RecordsObserver(records: records),
            onEvent: { event in events.update { $0.append((runner, event)) } })
    }

    func start(_ feed: QueueFeed) -> Task<Void, Never> { Task { await feed.run() } }

    /// Queues jobs of the test kind (or `kind`), one per key, as `submit --queue` does.
    func submit(_ keys: [String], kind: String = "fetch", batch: String? = nil) {
        store.submit(keys.map { key in
            let job = #"{"job": {"kind": "\#(kind)", "key": "\#(key)", "url": "http://queue.test/\#(key)", "timeout": 60}, "defaults": {}}"#
            return QueueSubmission(key: key, kind: kind, job: job, file: "test.jsonl")
        }, batch: batch)
    }

    func row(_ key: String) -> InMemoryQueueStore.Row? { store.rows.last { $0.key == key } }

    /// A feed running a job of `key` whose end comes while the store is away: returns once the
    /// store refused its record.
    func runWhileTheStoreIsAway(_ key: String) async throws -> (QueueFeed, Task<Void, Never>) {
        http.script("http://queue.test/\(key)", .ok(key))
        let feed = try self.feed()
        let run = start(feed)
        submit([key], kind: "gated")
        #expect(await gate.waitForStarted(1))
        store.available = false
        gate.open()
        await eventually("the record refused") { problems.contains { $0.contains("\(key): the record could not be stored in the queue") } }
        return (feed, run)
    }

    func waitDone(_ keys: [String], sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("\(keys) done", sourceLocation: sourceLocation) { keys.allSatisfy { row($0)?.state == "done" } }
    }

    var problems: [String] {
        events.read { $0.compactMap { if case .problem(let text) = $0.event { text } else { nil } } }
    }
}


/// The gate of the test running now (the suite runs one test at a time).
private let currentGate = Locked(Gate())

private struct GatedKind: JobKind {
    static let name = "gated"
    static let summary = "Waits at the test's gate, then fetches (for tests)."
    static let parameters: [KindParameter] = []

    init(fields: inout JobFields) throws(JobSpecError) {}

    func run(in context: JobContext) async throws -> KindOutcome {
        await currentGate.value.pass()
        return .fetched(try await context.fetch(folder: "fetched"), folder: "fetched", fileExtension: "bin")
    }
}


/// A list of URLs, one a line, each a child job of the `fetch` kind (`gated` for a line that
/// starts `gated `) keyed by its last path part; a line starting `invalid` cannot be made into one.
private struct ListKind: JobKind {
    static let name = "list"
    static let summary = "Fetches a list of URLs, each a child job (for tests)."
    static let parameters: [KindParameter] = []

    init(fields: inout JobFields) throws(JobSpecError) {}

    func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "lists")
        guard case .fetched(let response) = fetch else { return .fetched(fetch, folder: "lists", fileExtension: "txt") }
        let lines = String(decoding: try response.payload.bytes(), as: UTF8.self).split(separator: "\n").map(String.init)
        let children = ChildJobs(count: lines.count) { index in
            let line = lines[index]
            if line.hasPrefix("invalid") { return .failure(ChildJobs.Invalid("not a URL: \(line)")) }
            let gated = line.hasPrefix("gated ")
            let url = gated ? String(line.dropFirst(6)) : line
            return .success(ChildJob(kind: gated ? "gated" : "fetch", url: url, key: "child:" + (url.split(separator: "/").last.map(String.init) ?? "")))
        }
        return .fetched(fetch, folder: "lists", fileExtension: "txt", children: children)
    }
}

// MARK: - Tests

@Suite(.serialized, .timeLimit(.minutes(1)))
struct QueueFeedTests {
    private let w = QueueWorld()

    @Test func theWatchPresetEmbedsTheRunPresetAndRefusesSecretReferences() {
        let watch = QueueFeed.Configuration.watch(queue: "postgresql:///jobs", registry: KindRegistry())
        #expect(watch.engine.monitor == nil)
        #expect(watch.engine.deadlines as? DeadlineTimer === DeadlineTimer.shared)
        #expect(!watch.engine.limits.allowsSecretReferences)
        #expect(watch.url == "postgresql:///jobs" && watch.store == nil)
        #expect(watch.lease == .seconds(30) && watch.grace == .seconds(10) && watch.rescanInterval == .seconds(2))
    }

    @Test func queuedJobsRunAndTheirRecordsAreStoredInTheirRows() async throws {
        w.http.script("http://queue.test/a", .ok("A"))
        w.http.script("http://queue.test/b", .status(500))
        let feed = try w.feed()
        let run = w.start(feed)
        w.submit(["a", "b"])
        await w.waitDone(["a", "b"])
        #expect(w.row("a")?.status == "succeeded" && w.row("b")?.status == "failed")
        #expect(w.row("a")?.record?.contains(#""key":"a""#) == true, "\(w.row("a")?.record ?? "")")
        #expect(w.row("b")?.reason?.isEmpty == false)
        feed.shutdown()
        await run.value
        #expect(w.records.value.count == 2)
    }

    /// Jobs of one file that came in six claims (one slot, one job a claim) are said to have
    /// ended once, when the last of them ended, with the counts of them all.
    @Test func aFileWhoseJobsCameInManyClaimsIsSaidToHaveEndedOnce() async throws {
        let keys = (1...6).map { "f\($0)" }
        for key in keys { w.http.script("http://queue.test/\(key)", key == "f6" ? .status(404) : .ok(key)) }
        let feed = try w.feed {
            $0.engine.concurrency = 1
            $0.prefetch = 1
        }
        let run = w.start(feed)
        w.submit(keys)
        await w.waitDone(keys)
        await eventually("the file said to have ended") {
            w.events.read { $0.contains { if case .fileEnded = $0.event { true } else { false } } }
        }
        feed.shutdown()
        await run.value
        let ended = w.events.read { $0.compactMap { if case .fileEnded(let name, let counts) = $0.event { (name, counts) } else { nil } } }
        #expect(ended.count == 1, "one line for the file: \(ended)")
        #expect(ended.first?.0 == "test.jsonl" && ended.first?.1 == [.succeeded: 5, .notFound: 1], "\(ended)")
    }

    /// Two batches of one file name, their jobs running here at once, are said to have ended
    /// each with its own counts (a watcher that ran both together once said only the last).
    @Test func twoBatchesOfOneFileNameAreEachSaidToHaveEnded() async throws {
        for key in ["a1", "a2", "b1"] { w.http.script("http://queue.test/\(key)", .ok(key)) }
        w.http.script("http://queue.test/b2", .status(404))
        // Both queued before the feed starts: its first claim takes the four together.
        w.submit(["a1", "a2"], batch: "first")
        w.submit(["b1", "b2"], batch: "second")
        let feed = try w.feed()
        let run = w.start(feed)
        await w.waitDone(["a1", "a2", "b1", "b2"])
        await eventually("both batches said to have ended") {
            w.events.read { $0.filter { if case .fileEnded = $0.event { true } else { false } }.count == 2 }
        }
        feed.shutdown()
        await run.value
        let ended = w.events.read { $0.compactMap { if case .fileEnded(let name, let counts) = $0.event { (name, counts) } else { nil } } }
        #expect(ended.map(\.0) == ["test.jsonl", "test.jsonl"], "\(ended)")
        let counts = Set(ended.map { "\($0.1[.succeeded] ?? 0) succeeded, \($0.1[.notFound] ?? 0) notFound" })
        #expect(counts == ["2 succeeded, 0 notFound", "1 succeeded, 1 notFound"], "\(ended)")
    }

    @Test func aNoticeWakesAnIdleFeedBeforeItsRescan() async throws {
        w.http.script("http://queue.test/late", .ok("late"))
        let feed = try w.feed { $0.rescanInterval = .seconds(60) }
        let run = w.start(feed)
        // Idle: the renewal and the wait for jobs (until a notice, or a minute) sleep.
        #expect(await w.clock.waitForSleepers(2))
        w.submit(["late"])
        await w.waitDone(["late"])
        #expect(w.clock.now.offset == .zero, "no time passed: the notice woke it")
        feed.shutdown()
        await run.value
    }

    /// A key's next run revalidates with the fleet's record of it, whichever runner wrote it:
    /// here the record file another machine wrote is not (yet) seen on this one.
    @Test func aKeyRunByAnotherRunnerRevalidatesWithTheQueuesRecord() async throws {
        w.http.script(
            "http://queue.test/photo", .ok("v1 bytes", headers: ["ETag": "\"v1\""]), .status(304, headers: ["ETag": "\"v1\""]))
        let first = try w.feed("a")
        let firstRun = w.start(first)
        w.submit(["photo"])
        await w.waitDone(["photo"])
        first.shutdown()
        await firstRun.value
        let file = "\(w.folder.path)/out/results/\(OutputStore.fileName(forKey: "photo")).json"
        #expect(FileManager.default.fileExists(atPath: file))
        try FileManager.default.removeItem(atPath: file)

        let second = try w.feed("b")
        let secondRun = w.start(second)
        w.submit(["photo"])
        await eventually("the second run done") { w.store.rows.filter { $0.key == "photo" && $0.state == "done" }.count == 2 }
        let asked = w.http.requests(to: "http://queue.test/photo")
        #expect(asked.count == 2 && asked.last?.header("If-None-Match") == "\"v1\"", "\(asked.map(\.headers))")
        #expect(w.row("photo")?.status == "notModified" && w.row("photo")?.runner == "b", "\(String(describing: w.row("photo")))")
        #expect(try await w.store.keyRecord("photo")?.contains(#""status":"notModified""#) == true)
        second.shutdown()
        await secondRun.value
    }

    /// With hooks, a job is done in the queue only once they ended; they get its record.
    @Test func aJobIsDoneOnlyOnceItsHooksEnded() async throws {
        w.http.script("http://queue.test/hooked", .ok("hooked"))
        let heard = Watched<[String]>([])
        let gate = Gate()
        let feed = try w.feed {
            $0.hooks = { line in
                heard.update { $0.append(String(decoding: line, as: UTF8.self)) }
                await gate.pass()
            }
        }
        let run = w.start(feed)
        w.submit(["hooked"])
        #expect(await gate.waitForStarted(1))
        #expect(heard.value.first?.contains(#""key":"hooked""#) == true && heard.value.first?.contains(#""status":"succeeded""#) == true)
        let row = try #require(w.row("hooked"))
        #expect(row.state == "running" && row.status == "succeeded", "its record is stored, its hooks run: \(row)")
        #expect(try await w.store.keyRecord("hooked") != nil)
        gate.open()
        await w.waitDone(["hooked"])
        feed.shutdown()
        await run.value
    }

    /// A runner that died while a job's hooks ran leaves them to another, which runs them with
    /// the job's own record and status, without running the job again.
    @Test func hooksADeadRunnerLeftRunOnAnotherWithTheJobsOwnRecord() async throws {
        w.submit(["left"])
        let claim = try #require(try await w.store.claim(runner: "dead", limit: 1).first)
        let record = #"{"key":"left","kind":"fetch","status":"notFound","error":"the server said 404"}"#
        try await w.store.finish(
            [QueueFinish(id: claim.id, status: "notFound", error: "the server said 404", record: record, hooksPending: true)],
            runner: "dead", unlocking: ["left"])
        let heard = Watched<[String]>([])
        let feed = try w.feed("b") { $0.hooks = { line in heard.update { $0.append(String(decoding: line, as: UTF8.self)) } } }
        let run = w.start(feed)
        #expect(await w.clock.waitForSleepers(2))
        #expect(heard.value.isEmpty, "the dead runner's lease holds")
        w.clock.advance(by: .seconds(31))
        await w.waitDone(["left"])
        #expect(heard.value == [record], "\(heard.value)")
        #expect(w.row("left")?.status == "notFound" && w.row("left")?.runner == "b", "\(String(describing: w.row("left")))")
        #expect(w.http.requests.isEmpty, "the job did not run again")
        #expect(w.problems.contains("left: its --on-finish hooks, left by a runner that stopped, run here"), "\(w.problems)")
        feed.shutdown()
        await run.value
    }

    /// Claims made only for a dead runner's hooks are not abandons of the job: hooks left by two
    /// runners after the one that ran the job still run on the next.
    @Test func hooksLeftByTwoMoreRunnersStillRun() async throws {
        w.submit(["left"])
        let claim = try #require(try await w.store.claim(runner: "dead", limit: 1).first)
        let record = #"{"key":"left","kind":"fetch","status":"succeeded"}"#
        try await w.store.finish(
            [QueueFinish(id: claim.id, status: "succeeded", error: nil, record: record, hooksPending: true)], runner: "dead", unlocking: ["left"])
        for runner in ["dead-hooks-1", "dead-hooks-2"] {
            w.clock.advance(by: .seconds(31))
            #expect(try await w.store.claim(runner: runner, limit: 1).count == 1, "\(runner) claims it for its hooks")
        }
        w.clock.advance(by: .seconds(31))
        #expect(w.row("left")?.claims == 1 && w.row("left")?.hookClaims == 2, "\(String(describing: w.row("left")))")
        let heard = Watched<[String]>([])
        let feed = try w.feed("b") { $0.hooks = { line in heard.update { $0.append(String(decoding: line, as: UTF8.self)) } } }
        let run = w.start(feed)
        await w.waitDone(["left"])
        #expect(heard.value == [record], "the hooks ran on the fourth claim: \(heard.value)")
        #expect(w.row("left")?.hooksFailed == nil && w.row("left")?.status == "succeeded")
        feed.shutdown()
        await run.value
    }

    /// Hooks that runners left three times end with a hooks failure everyone sees (said, and an
    /// observer's `hookFailed`), the job keeping its own status; never silently.
    @Test func hooksLeftByThreeRunnersEndWithAHooksFailure() async throws {
        w.submit(["left"])
        let claim = try #require(try await w.store.claim(runner: "dead", limit: 1).first)
        let record = #"{"key":"left","kind":"fetch","status":"succeeded","startedAt":"2026-11-27T10:00:00.000Z","finishedAt":"2026-11-27T10:00:01.000Z"}"#
        try await w.store.finish(
            [QueueFinish(id: claim.id, status: "succeeded", error: nil, record: record, hooksPending: true)], runner: "dead", unlocking: ["left"])
        for runner in ["h1", "h2", "h3"] {
            w.clock.advance(by: .seconds(31))
            #expect(try await w.store.claim(runner: runner, limit: 1).count == 1)
        }
        w.clock.advance(by: .seconds(31))
        let heard = Watched<[String]>([])
        let feed = try w.feed("b") { $0.hooks = { line in heard.update { $0.append(String(decoding: line, as: UTF8.self)) } } }
        let run = w.start(feed)
        await w.waitDone(["left"])
        let row = try #require(w.row("left"))
        #expect(row.status == "succeeded" && row.hooksFailed?.contains("left by 3 runners") == true, "\(row)")
        #expect(heard.value.isEmpty, "not a fourth time")
        await eventually("said") { w.problems.contains { $0.hasPrefix("left: its --on-finish hooks were left by 3 runners") } }
        feed.shutdown()
        await run.value
    }

    /// A parent's children are queue jobs that any runner takes; the runner that ends the last
    /// completes the parent's record with their counts, in the queue and on disk.
    @Test func childrenGoThroughTheQueueAndTheLastCompletesTheParent() async throws {
        // The first child waits at the gate on whichever runner takes it: the other runs the rest.
        let list = ["gated http://queue.test/c1"] + (2...6).map { "http://queue.test/c\($0)" } + ["invalid line"]
        w.http.script("http://queue.test/parent", .ok(list.joined(separator: "\n")))
        for index in 1...6 { w.http.script("http://queue.test/c\(index)", index == 4 ? .status(404) : .ok("c\(index)")) }
        let heard = Watched<[String]>([])
        let setUp: (inout QueueFeed.Configuration) -> Void = {
            $0.engine.concurrency = 1
            $0.hooks = { line in heard.update { $0.append(String(decoding: line, as: UTF8.self)) } }
        }
        let a = try w.feed("a", setUp)
        let b = try w.feed("b", setUp)
        let (runA, runB) = (w.start(a), w.start(b))
        w.store.submit([QueueSubmission(
            key: "parent", kind: "list", job: #"{"job": {"kind": "list", "key": "parent", "url": "http://queue.test/parent", "timeout": 60}, "defaults": {}}"#,
            file: "lists.jsonl")])
        #expect(await w.gate.waitForStarted(1))
        // The runner held at the gate has claimed one more child ahead (it waits for its slot);
        // the other runner runs the other four.
        let gated = try #require(w.row("child:c1")?.runner)
        await eventually("the other runner ran four") { w.store.rows.filter { $0.parentID != nil && $0.state == "done" }.count == 4 }
        #expect(w.store.rows.filter { $0.parentID != nil && $0.state == "done" }.allSatisfy { $0.runner != gated })
        #expect(w.row("parent")?.state == "waiting", "the parent waits for its last children")
        w.gate.open()
        await w.waitDone(["parent"])
        let children = w.store.rows.filter { $0.parentID != nil }
        #expect(children.count == 6 && children.allSatisfy { $0.state == "done" }, "\(children.map { ($0.key, $0.state) })")
        #expect(w.http.requests.count == 7, "the list and each child once")
        let record = try JSONParser.parse(Array(try #require(w.row("parent")?.record).utf8))
        #expect(record["status"]?.stringValue == "succeeded")
        #expect(record["details"]?["children"] == .object([("succeeded", JSONValue(5)), ("notFound", JSONValue(1)), ("invalid", JSONValue(1))]), "\(record)")
        #expect(record["details"]?["invalidChild"]?.stringValue?.contains("child 7: not a URL") == true, "\(record)")
        let onDisk = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(w.folder.path)/out/results/\(OutputStore.fileName(forKey: "parent")).json"))))
        #expect(onDisk["details"]?["children"] == record["details"]?["children"], "the parent's record on disk is the completed one")
        // Each child's hooks ran once, and the parent's once, with its completed record.
        #expect(heard.value.filter { $0.contains(#""key":"parent""#) } == [String(decoding: JSONWriter.string(record).utf8, as: UTF8.self)])
        #expect(heard.value.count == 7, "\(heard.value.count)")
        a.shutdown()
        b.shutdown()
        await runA.value
        await runB.value
    }

    /// A runner killed among a parent's children loses nothing and runs no ended child again.
    @Test func aRunnerThatDiesAmongTheChildrenLeavesTheRestToAnother() async throws {
        let list = (1...4).map { "http://queue.test/d\($0)" }
        w.http.script("http://queue.test/list", .ok(list.joined(separator: "\n")))
        for index in 1...4 { w.http.script("http://queue.test/d\(index)", .ok("d\(index)")) }
        let first = try w.feed("a") { $0.engine.concurrency = 1 }
        let run = w.start(first)
        w.store.submit([QueueSubmission(
            key: "list", kind: "list", job: #"{"job": {"kind": "list", "key": "list", "url": "http://queue.test/list", "timeout": 60}, "defaults": {}}"#,
            file: "lists.jsonl")])
        await eventually("the children queued") { w.store.rows.filter { $0.parentID != nil }.count == 4 }
        first.shutdown()
        await run.value
        // Another runner claimed two and died with them.
        let taken = try await w.store.claim(runner: "dead", limit: 2)
        let done = w.store.rows.filter { $0.parentID != nil && $0.state == "done" }.map(\.key)
        let second = try w.feed("b")
        let secondRun = w.start(second)
        let left = w.store.rows.filter { $0.parentID != nil && !taken.map(\.id).contains($0.id) }.map(\.key)
        await w.waitDone(left)
        #expect(await w.clock.waitForSleepers(2))
        w.clock.advance(by: .seconds(31))
        await w.waitDone(["list"])
        for key in done { #expect(w.http.requests(to: "http://queue.test/\(key.dropFirst(6))").count == 1, "\(key) ran again") }
        #expect(taken.allSatisfy { w.row($0.key)?.runner == "b" && w.row($0.key)?.claims == 2 })
        let record = try JSONParser.parse(Array(try #require(w.row("list")?.record).utf8))
        #expect(record["details"]?["children"] == .object([("succeeded", JSONValue(4))]), "\(record)")
        second.shutdown()
        await secondRun.value
    }

    /// Cancelling a parent cancels its queued children; the parent completes with them counted.
    @Test func cancellingAParentCancelsItsQueuedChildren() async throws {
        // A parent whose own fetch ended on another runner, its three children queued.
        let parentJob = #"{"job": {"kind": "list", "key": "big", "url": "http://queue.test/big", "timeout": 60}, "defaults": {}}"#
        w.store.submit([QueueSubmission(key: "big", kind: "list", job: parentJob, file: "lists.jsonl")])
        let parent = try #require(try await w.store.claim(runner: "other", limit: 1).first)
        var finish = QueueFinish(id: parent.id, status: "succeeded", error: nil, record: #"{"key":"big","kind":"list","status":"succeeded","details":{}}"#)
        finish.children.jobs = (1...3).map { index in
            ("child:e\(index)", "fetch", #"{"child": {"kind": "fetch", "url": "http://queue.test/e\#(index)", "key": "child:e\#(index)"}, "of": \#(parentJob)}"#)
        }
        try await w.store.finish([finish], runner: "other", unlocking: ["big"])
        #expect(w.row("big")?.state == "waiting" && w.store.rows.filter { $0.parentID == parent.id }.count == 3)

        // When it is cancelled, then a runner comes.
        w.store.cancel(key: "big")
        let feed = try w.feed("b")
        let run = w.start(feed)
        await w.waitDone(["big"])

        // Then no child ran, and the parent's record counts them cancelled.
        let record = try JSONParser.parse(Array(try #require(w.row("big")?.record).utf8))
        #expect(record["details"]?["children"] == .object([("cancelled", JSONValue(3))]), "\(record)")
        #expect(w.http.requests.isEmpty, "no child ran")
        #expect(w.row("big")?.runner == "b" && w.row("big")?.status == "succeeded")
        feed.shutdown()
        await run.value
    }

    /// A runner that follows the fleet's events hears the jobs the others end.
    @Test func aFeedThatFollowsTheFleetHearsTheJobsOthersEnd() async throws {
        w.http.script("http://queue.test/theirs", .ok("theirs"))
        let follower = try w.feed("page") {
            $0.followsFleetEvents = true
            $0.engine.registry = KindRegistry()  // claims nothing: no kind loaded
        }
        let worker = try w.feed("worker")
        let (runFollower, runWorker) = (w.start(follower), w.start(worker))
        await eventually("both listed") { w.store.watchers.count == 2 }
        w.submit(["theirs"])
        await eventually("the end heard") {
            w.events.read { $0.contains { entry in
                if case .fleetFinished(let key, _, let status, let runner) = entry.event { return entry.runner == "page" && key == "theirs" && status == "succeeded" && runner == "worker" }
                return false
            } }
        }
        #expect(!w.events.read { $0.contains { if case .fleetFinished = $0.event { $0.runner == "worker" } else { false } } }, "a runner that does not follow hears none")
        follower.shutdown()
        worker.shutdown()
        await runFollower.value
        await runWorker.value
    }

    @Test func aLeaseThatRunsOutLetsAnotherRunnerClaimTheJob() async throws {
        w.http.script("http://queue.test/orphan", .ok("orphan"))
        w.submit(["orphan"])
        // A runner that claimed it and died: its lease is never renewed.
        _ = try await w.store.claim(runner: "dead", limit: 1)
        let feed = try w.feed("b")
        let run = w.start(feed)
        #expect(await w.clock.waitForSleepers(2))
        #expect(w.http.requests.isEmpty, "the lease holds")
        w.clock.advance(by: .seconds(29))
        #expect(await w.clock.waitForSleepers(2))
        #expect(w.http.requests.isEmpty, "the lease still holds")
        // The feed waits until that lease ends, not a whole rescan.
        w.clock.advance(by: .seconds(2))
        await w.waitDone(["orphan"])
        #expect(w.row("orphan")?.runner == "b" && w.row("orphan")?.claims == 2)
        feed.shutdown()
        await run.value
    }

    @Test func aJobAbandonedThreeTimesEndsFailedAndIsNotRunAgain() async throws {
        w.submit(["crash"])
        for runner in ["dead1", "dead2", "dead3"] {
            #expect(try await w.store.claim(runner: runner, limit: 1).count == 1)
            w.clock.advance(by: .seconds(31))
        }
        let feed = try w.feed()
        let run = w.start(feed)
        await w.waitDone(["crash"])
        #expect(w.row("crash")?.status == "failed" && w.row("crash")?.reason == "abandoned by 3 runners")
        #expect(w.http.requests.isEmpty)
        feed.shutdown()
        await run.value
    }

    @Test func shutdownGivesUnstartedClaimsBackAtOnceAndHandsRunningJobsBackAfterTheGrace() async throws {
        for key in ["one", "two", "three"] { w.http.script("http://queue.test/\(key)", .hang) }
        let feed = try w.feed {
            $0.engine.concurrency = 1
            $0.prefetch = 4
        }
        let run = w.start(feed)
        w.submit(["one", "two", "three"])
        #expect(await w.http.waitForRequests(1))
        #expect(w.store.rows.allSatisfy { $0.state == "running" && $0.runner == "a" }, "all three claimed at once")
        feed.shutdown(grace: .seconds(5))
        await eventually("the two unstarted given back") { w.store.rows.filter { $0.state == "queued" && $0.runner == nil }.count == 2 }
        #expect(w.row("one")?.state == "running", "the running job has its grace")
        w.clock.advance(by: .seconds(5))
        // Stopping the watcher is not the job's end: it goes back to the queue, unrecorded.
        await eventually("the running one given back") { w.row("one")?.state == "queued" }
        await run.value
        #expect(w.row("one")?.status == nil && w.row("one")?.runner == nil && w.row("one")?.claims == 0, "\(String(describing: w.row("one")))")
        #expect(!w.records.read { $0.contains { $0.key == "one" } }, "no record of a job that did not end")
        #expect(!FileManager.default.fileExists(atPath: w.folder.path + "/out/results/" + OutputStore.fileName(forKey: "one") + ".json"))
        #expect(w.http.requests.count == 1, "none of the others started")

        // Another runner takes them and ends them.
        for key in ["one", "two", "three"] { w.http.script("http://queue.test/\(key)", .ok(key)) }
        let other = try w.feed("b")
        let otherRun = w.start(other)
        await w.waitDone(["one", "two", "three"])
        #expect(w.row("one")?.status == "succeeded" && w.row("one")?.runner == "b")
        other.shutdown()
        await otherRun.value
    }

    /// A running job that ends within the grace is this runner's to record: done in the queue,
    /// and the feed ends then, not after the grace.
    @Test func aRunningJobThatEndsWithinTheGraceIsRecordedByItsRunner() async throws {
        w.http.script("http://queue.test/slow", .ok("slow"))
        let feed = try w.feed()
        let run = w.start(feed)
        w.submit(["slow"], kind: "gated")
        #expect(await w.gate.waitForStarted(1))
        feed.shutdown(grace: .seconds(30))
        w.gate.open()
        await run.value
        #expect(w.row("slow")?.state == "done" && w.row("slow")?.status == "succeeded" && w.row("slow")?.runner == "a", "\(String(describing: w.row("slow")))")
        #expect(w.records.value.map(\.key) == ["slow"])
    }

    /// A claim given back at shutdown gives back its key first: the runner that takes the job
    /// runs it (it does not end duplicate against the key the claim had locked).
    @Test func aClaimGivenBackAtShutdownLeavesItsKeyFreeForTheNextRunner() async throws {
        w.http.script("http://queue.test/one", .hang)
        w.http.script("http://queue.test/two", .ok("two"))
        let first = try w.feed("a") {
            $0.engine.concurrency = 1
            $0.prefetch = 2
        }
        let firstRun = w.start(first)
        w.submit(["one", "two"])
        #expect(await w.http.waitForRequests(1))
        await eventually("both claimed by a") { w.store.rows.allSatisfy { $0.runner == "a" } }
        w.http.script("http://queue.test/one", .ok("one"))  // for whoever runs it after a
        first.shutdown(grace: .seconds(5))
        await eventually("two given back") { w.row("two")?.state == "queued" }
        let second = try w.feed("b")
        let secondRun = w.start(second)
        await w.waitDone(["two"])
        #expect(w.row("two")?.status == "succeeded" && w.row("two")?.runner == "b", "\(String(describing: w.row("two")))")
        w.clock.advance(by: .seconds(5))
        await firstRun.value
        // a handed its running job back after the grace; b ran it.
        await w.waitDone(["one"])
        #expect(w.row("one")?.status == "succeeded" && w.row("one")?.runner == "b", "\(String(describing: w.row("one")))")
        second.shutdown()
        await secondRun.value
    }

    /// A second job of a key that runs waits in the queue for the key and then runs, on this
    /// runner or another: in the queue no job ends `duplicate`.
    @Test func aJobOfARunningKeyWaitsForItInsteadOfEndingDuplicate() async throws {
        w.http.script("http://queue.test/same", .ok("first"), .ok("second"))
        let first = try w.feed("a") { $0.engine.concurrency = 4 }
        let second = try w.feed("b") { $0.engine.concurrency = 4 }
        let runs = [w.start(first), w.start(second)]
        w.submit(["same"], kind: "gated")
        w.submit(["same"], kind: "gated")
        #expect(await w.gate.waitForStarted(1))
        try await Task.sleep(for: .milliseconds(200))
        #expect(w.gate.started == 1, "one job of the key at a time")
        #expect(w.store.rows.filter { $0.state == "queued" }.count == 1, "the other waits in the queue: \(w.store.rows)")
        w.gate.open()
        await eventually("both ran") { w.store.rows.allSatisfy { $0.state == "done" } }
        #expect(w.store.rows.map(\.status) == ["succeeded", "succeeded"], "\(w.store.rows)")
        #expect(w.records.value.allSatisfy { $0.status == .succeeded }, "no duplicate: \(w.records.value.map(\.status))")
        first.shutdown()
        second.shutdown()
        for run in runs { await run.value }
    }

    @Test func aCancelNoticeCancelsTheRunningTask() async throws {
        w.http.script("http://queue.test/long", .hang)
        let feed = try w.feed()
        let run = w.start(feed)
        w.submit(["long"])
        #expect(await w.http.waitForRequests(1))
        w.store.cancel(key: "long")
        await w.waitDone(["long"])
        #expect(w.row("long")?.status == "cancelled")
        #expect(w.events.read { $0.contains { if case .cancelRequested("long", true) = $0.event { true } else { false } } })
        feed.shutdown()
        await run.value
    }

    @Test func whileTheStoreIsAwayRunningJobsFinishAndTheirRecordsAreStoredOnceItIsBack() async throws {
        let (feed, run) = try await w.runWhileTheStoreIsAway("kept")
        #expect(w.records.value.map(\.key) == ["kept"], "the job finished and its record is on disk")
        w.store.available = true
        // The retry sleeps on the clock.
        for _ in 0..<20 where w.row("kept")?.state != "done" {
            w.clock.advance(by: .seconds(1))
            try await Task.sleep(for: .milliseconds(5))
        }
        await w.waitDone(["kept"])
        #expect(w.row("kept")?.status == "succeeded")
        // Said once the store took it, just after the row is done.
        await eventually("the record said stored") { w.problems.contains("the queue is back: kept's record is stored") }
        feed.shutdown()
        await run.value
    }

    @Test func aShutdownWhileTheStoreRefusesEndsWithinTheGracePlusFiveSeconds() async throws {
        let (feed, run) = try await w.runWhileTheStoreIsAway("stuck")
        feed.shutdown(grace: .seconds(2))
        let ended = Watched(false)
        Task {
            await run.value
            ended.update { $0 = true }
        }
        while !ended.value && w.clock.now.offset < .seconds(60) {
            w.clock.advance(by: .milliseconds(100))
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(ended.value)
        #expect(w.clock.now.offset <= .seconds(7) + .milliseconds(300), "ended at \(w.clock.now.offset): the grace (2 s) and 5 s")
        #expect(w.problems.contains { $0.contains("stuck: the record was not stored in the queue; it is on disk") }, "\(w.problems)")
        #expect(w.row("stuck")?.state == "running", "its lease will end and another runner runs it")
    }

    /// A record the store will not take holds none of those that ended with it: they are stored
    /// each alone, and the refused one is given up on a shutdown's grace and 5 s later.
    @Test func aRecordTheStoreRefusesHoldsNoOther() async throws {
        let keys = ["fine1", "bad", "fine2"]
        for key in keys { w.http.script("http://queue.test/\(key)", .ok(key)) }
        w.store.refuseRecords(of: "bad")
        let feed = try w.feed()
        let run = w.start(feed)
        // The three end together, so their records go to the store in one statement.
        w.submit(keys, kind: "gated")
        #expect(await w.gate.waitForStarted(3))
        w.gate.open()
        await w.waitDone(["fine1", "fine2"])
        #expect(w.row("bad")?.state == "running")
        // Said once each record was tried alone, just after the others' rows are done.
        await eventually("the refused record said") {
            w.problems.contains { $0.hasPrefix("bad: the record could not be stored in the queue (malformed record") }
        }
        feed.shutdown(grace: .zero)
        while w.clock.now.offset < .seconds(10) {
            w.clock.advance(by: .milliseconds(200))
            try await Task.sleep(for: .milliseconds(2))
        }
        await run.value
        #expect(w.problems.contains { $0.hasPrefix("bad: the record was not stored in the queue; it is on disk") }, "\(w.problems)")
    }

    @Test func twoFeedsInOneProcessShareTheFleetsPace() async throws {
        let keys = (0..<4).map { "p\($0)" }
        for key in keys { w.http.script("http://queue.test/\(key)", .ok(key)) }
        w.submit(keys)
        // One at a time, one claim ahead: the first feed holds p0 to p2 while p1 waits for its
        // turn at the host; the second feed finds p3.
        let paced: (inout QueueFeed.Configuration) -> Void = {
            $0.engine.requests.rate = 1
            $0.engine.concurrency = 1
            $0.prefetch = 1
        }
        let first = try w.feed("a", paced)
        let runs = [w.start(first)]
        #expect(await w.http.waitForRequests(1))
        await eventually("the first feed holding three") { w.store.rows.filter { $0.runner == "a" }.count == 3 }
        let second = try w.feed("b", paced)
        let all = runs + [w.start(second)]
        await eventually("the second feed holding p3") { w.row("p3")?.runner == "b" }
        try await Task.sleep(for: .milliseconds(100))
        #expect(w.http.requests.count == 1, "one request a second for the fleet: the others wait")
        for expected in 2...4 {
            w.clock.advance(by: .seconds(1))
            #expect(await w.http.waitForRequests(expected))
            try await Task.sleep(for: .milliseconds(50))
            #expect(w.http.requests.count == expected, "\(expected) after \(expected - 1) s")
        }
        await w.waitDone(keys)
        #expect(w.row("p3")?.runner == "b" && w.row("p0")?.runner == "a")
        first.shutdown()
        second.shutdown()
        for run in all { await run.value }
    }

    /// A `Retry-After` one runner was given holds for a runner that never heard the notice of
    /// it: the pause is stored before the job's record, and comes with every claim made while
    /// it lasts.
    @Test func aPauseOfTheFleetHoldsARunnerThatMissedItsNotice() async throws {
        w.http.script("http://queue.test/limited", .status(429, headers: ["Retry-After": "30"]))
        w.http.script("http://queue.test/other", .ok("other"))
        let limited = #"{"job": {"kind": "fetch", "key": "limited", "url": "http://queue.test/limited", "timeout": 60, "retries": 0}, "defaults": {}}"#
        w.store.submit([QueueSubmission(key: "limited", kind: "fetch", job: limited, file: "test.jsonl")])
        let first = try w.feed("a")
        let firstRun = w.start(first)
        await w.waitDone(["limited"])
        first.shutdown()
        await firstRun.value
        #expect(w.row("limited")?.status == "failed")

        // Made after the notice went out, so it never hears it.
        let second = try w.feed("b")
        let secondRun = w.start(second)
        w.submit(["other"])
        await eventually("the second runner holding the other job") { w.row("other")?.runner == "b" }
        try await Task.sleep(for: .milliseconds(100))
        #expect(w.http.requests.count == 1, "nothing sent to the host while the fleet's pause lasts")
        w.clock.advance(by: .seconds(29))
        try await Task.sleep(for: .milliseconds(100))
        #expect(w.http.requests.count == 1, "nothing sent to the host while the fleet's pause lasts")
        w.clock.advance(by: .seconds(2))
        #expect(await w.http.waitForRequests(2))
        await w.waitDone(["other"])
        second.shutdown()
        await secondRun.value
    }
}

/// The in-memory store keeps the contract the PostgreSQL one keeps (QueueTests checks that one).
@Suite(.timeLimit(.minutes(1)))
struct InMemoryQueueStoreTests {
    @Test func theInMemoryStoreKeepsTheQueuesContract() async throws {
        let clock = TestClock()
        let store = InMemoryQueueStore(lease: .seconds(30), clock: clock)
        let contract = QueueStoreContract(
            first: store.connection(), second: store.connection(), submit: { store.submit($0) },
            pass: { clock.advance(by: $0) })
        try await contract.check()
    }

    @Test func theInMemoryStoreAnswersAPagesCalls() async throws {
        let store = InMemoryQueueStore(lease: .seconds(30), clock: TestClock())
        try await QueueProducingContract(page: store.connection(), watcher: store.connection()).check()
    }
}
