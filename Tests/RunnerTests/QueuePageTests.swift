import Foundation
import Glibc
@testable import RunnerKit
@testable import runner
import RunnerTestSupport
import Testing

// The live page of a queue's watcher, in process: the watcher runs the queue feed on the
// in-memory store and a test clock, with the page the command line builds (`LiveSite` on a
// `LiveServer` at a loopback port, `QueueLiveSource` refreshing its snapshot beside the feed)
// over the same store. What QueueNoticeTests shows of the page through the binary against
// PostgreSQL (the fleet's view merged with this watcher's jobs, a job posted over HTTP queued and
// run, a cancel that reaches the queue, the others' ends on the event stream), shown without a
// database; a page that keeps answering while the store does not; the token file read again at
// SIGHUP.

// MARK: - The world under test

/// A kind only some watchers have (`PlainFetchKind`, `fetch`, all have).
private struct RareKind: JobKind {
    static let name = "rare"
    static let summary = "Fetches a URL as it is, on the watchers that have it (for tests)."
    static let parameters: [KindParameter] = []

    init(fields: inout JobFields) throws(JobSpecError) {}

    func run(in context: JobContext) async throws -> KindOutcome {
        .fetched(try await context.fetch(folder: "rare"), folder: "rare", fileExtension: "bin")
    }
}

/// A queue, a clock and a client; a watcher "here" that serves the page, and feeds of other
/// watchers of the same queue.
private final class PageWorld: Sendable {
    let root: String
    let clock = TestClock()
    let http = RecordingHTTP()
    let store: InMemoryQueueStore
    let lines = Watched<[String]>([])
    let (signals, signal) = AsyncStream.makeStream(of: Int32.self)
    static let token = "t0ken-of-the-queue-page"

    init() throws {
        root = FileManager.default.temporaryDirectory.path + "/runner-page-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        store = InMemoryQueueStore(lease: .seconds(30), clock: clock)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var tokenPath: String { root + "/token" }

    func writeToken(_ token: String) {
        _ = FileManager.default.createFile(atPath: tokenPath, contents: Data((token + "\n").utf8), attributes: [.posixPermissions: 0o600])
    }

    func registry(_ kinds: [any JobKind.Type]) throws -> KindRegistry {
        var registry = KindRegistry()
        for kind in kinds { try registry.register(kind) }
        return registry
    }

    func feedConfiguration(_ runner: String, kinds: [any JobKind.Type]) throws -> QueueFeed.Configuration {
        let engine = JobEngine.Configuration(registry: try registry(kinds), store: try OutputStore(root: root + "/out"), http: http)
            .with { $0.clock = clock }
        var configuration = QueueFeed.Configuration(engine: engine, store: store.connection())
        configuration.runner = runner
        configuration.durable = false
        return configuration
    }

    /// The watcher "here", serving its page as `watch --queue --listen 127.0.0.1:0 --listen-token`
    /// does.
    func pageWatcher() throws -> Watcher {
        writeToken(Self.token)
        var feed = try feedConfiguration("here", kinds: [PlainFetchKind.self])
        feed.followsFleetEvents = true
        let registry = feed.engine.registry
        let settings = LiveOptions.Settings(host: "127.0.0.1", port: 0, token: Self.token, tokenPath: tokenPath)
        let engine = Locked<JobEngine?>(nil)
        let source = QueueLiveSource(store: store.connection(), registry: registry, runner: "here")
        let live = LiveSite.make(
            settings, source: source, registry: registry, hosts: { engine.value?.hostActivity ?? [] }, runner: "here")
        let lines = self.lines
        var configuration = Watcher.Configuration(
            service: WatchService(notifier: nil, metricsPath: nil), out: root + "/out", say: { line in lines.update { $0.append(line) } })
        configuration.page = Watcher.Page(server: live.server, host: "127.0.0.1", tokenFile: tokenPath, readToken: { try LiveOptions.readToken($0) })
        configuration.clock = clock
        let clock = clock
        configuration.alongside = [{ await source.refreshing(every: .seconds(1), clock: clock) }]
        let watcher = try Watcher(configuration: configuration) { onEvent in
            try QueueFeed(configuration: feed, observer: ObserverFanout(live.observers), onEvent: onEvent)
        }
        engine.withLock { $0 = watcher.engine }
        return watcher
    }

    /// The port the page serves, once the watcher said it.
    func port() async throws -> UInt16 {
        await lines.wait(until: { $0.contains { $0.hasPrefix("runner: live page and API at http://127.0.0.1:") } }, "the page's address")
        let line = try #require(lines.value.first { $0.hasPrefix("runner: live page and API at http://127.0.0.1:") })
        return try #require(UInt16(line.dropFirst("runner: live page and API at http://127.0.0.1:".count).prefix { $0.isNumber }))
    }

    func job(_ key: String, kind: String = "fetch") -> String {
        #"{"kind": "\#(kind)", "key": "\#(key)", "url": "http://page.test/\#(key)", "timeout": 60}"#
    }

    func row(_ key: String) -> InMemoryQueueStore.Row? { store.rows.last { $0.key == key } }
}

// MARK: - Tests

@Suite(.timeLimit(.minutes(1)))
struct QueuePageTests {
    static let auth = ["Authorization: Bearer \(PageWorld.token)"]

    private func get(_ port: UInt16, _ target: String, headers: [String] = auth) async throws -> RawHTTP.Answer {
        try await RawHTTP.exchange(port: port, "GET \(target) HTTP/1.1", headers: headers)
    }

    @Test func aQueueWatchersPageShowsTheFleetFeedsTheQueueAndReachesItsJobs() async throws {
        let w = try PageWorld()
        w.http.script("http://page.test/q:live", .hang)
        w.http.script("http://page.test/q:elsewhere", .hang)
        let watcher = try w.pageWatcher()
        let run = Task { await watcher.run(signals: w.signals) }
        let port = try await w.port()

        // An event-stream reader from the start.
        let reader = try RawHTTP.connect(port: port, timeout: .seconds(30))
        defer { close(reader) }
        RawHTTP.send(reader, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(PageWorld.token)\r\n\r\n")
        var stream: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 2000", into: &stream))

        // A job posted over HTTP is validated as submit does, queued in the store, claimed and run.
        let bad = #"{"kind": "nope", "key": "q:bad", "url": "http://page.test/bad"}"#
        #expect(try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array(bad.utf8), headers: Self.auth).status == 400)
        #expect(w.store.rows.isEmpty, "nothing queued")
        let posted = try await RawHTTP.exchange(
            port: port, "POST /api/jobs?name=live.jsonl HTTP/1.1", body: Array(w.job("q:live").utf8), headers: Self.auth)
        #expect(posted.status == 202, "\(posted.body)")
        #expect(w.row("q:live")?.file == "live.jsonl")
        #expect(await w.http.waitForRequests(1))
        #expect(w.row("q:live")?.runner == "here")

        // The queue's view of its running jobs, merged with this watcher's: the phase.
        var running: JSONValue = .null
        await eventually("q:live running with its phase in /api/status") {
            let status = try? JSONParser.parse(try await get(port, "/api/status").body)
            running = status?["running"]?.arrayValue?.first { $0["key"]?.stringValue == "q:live" } ?? .null
            return running["phase"]?.stringValue == "running"
        }
        #expect(running["runner"]?.stringValue == "here", "\(running)")
        let page = try await get(port, "/")
        #expect(page.status == 200 && page.body.contains("jobs queued") && page.body.contains("q:live"), "\(page.body)")

        // A job of a kind only another watcher has runs there: a row of the fleet's table here.
        let there = try QueueFeed(configuration: try w.feedConfiguration("there", kinds: [PlainFetchKind.self, RareKind.self]))
        let thereRun = Task { await there.run() }
        w.store.submit([QueueSubmission(
            key: "q:elsewhere", kind: "rare", job: #"{"job": \#(w.job("q:elsewhere", kind: "rare")), "defaults": {}}"#, file: "rare.jsonl")])
        #expect(await w.http.waitForRequests(2))
        #expect(w.row("q:elsewhere")?.runner == "there")
        // The page shows the fleet as its last snapshot saw it, renewed every second.
        var fleet = ""
        await eventually("q:elsewhere on the page once the snapshot is renewed") {
            w.clock.advance(by: .seconds(1))
            fleet = (try? await get(port, "/?part=main").body) ?? ""
            return fleet.contains("Running elsewhere in the fleet") && fleet.contains("<td>q:elsewhere</td>")
        }
        #expect(fleet.contains("jobs queued"), "\(fleet)")

        // A cancel over HTTP reaches the queue and the watcher that runs the job.
        let cancelled = try await RawHTTP.exchange(port: port, "DELETE /api/jobs/q:live HTTP/1.1", headers: Self.auth)
        #expect(cancelled.status == 202 && cancelled.body.contains(#""running":true"#), "\(cancelled.body)")
        await eventually("q:live cancelled in the queue") { w.row("q:live")?.status == "cancelled" }
        #expect(try await RawHTTP.exchange(port: port, "DELETE /api/jobs/q:nothing HTTP/1.1", headers: Self.auth).status == 404)
        // The stream: this watcher's job, named by it, and the fleet's end of the other's.
        #expect(await RawHTTP.read(reader, until: #""event":"finished""#, into: &stream))
        w.store.cancel(key: "q:elsewhere")
        #expect(await RawHTTP.read(reader, until: #""key":"q:elsewhere","kind":"rare","status":"cancelled","runner":"there""#, into: &stream),
            "\(String(decoding: stream, as: UTF8.self).suffix(600))")
        let events = String(decoding: stream, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("data: ") }
            .compactMap { try? JSONParser.parse(String($0.dropFirst(6))) }.filter { $0["key"]?.stringValue == "q:live" }
        #expect(events.compactMap { $0["event"]?.stringValue } == ["queued", "started", "finished"], "\(events)")
        #expect(events.allSatisfy { $0["runner"]?.stringValue == "here" }, "\(events)")

        // SIGHUP reads the token file again: the old token lets nothing in.
        w.writeToken("another-token-of-the-queue-page")
        w.signal.yield(SIGHUP)
        await w.lines.wait(until: { $0.contains { $0.hasPrefix("runner: SIGHUP: ") } }, "the SIGHUP line")
        #expect(w.lines.value.contains("runner: SIGHUP: reopened --listen-token \(w.tokenPath); still watching"), "\(w.lines.value)")
        #expect(try await get(port, "/api/status").status == 401)
        #expect(try await get(port, "/api/status", headers: ["Authorization: Bearer another-token-of-the-queue-page"]).status == 200)

        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
        #expect((try? RawHTTP.connect(port: port, timeout: .seconds(1))).map { fd in close(fd) } == nil, "the page stopped with the watcher")
        there.shutdown(grace: .zero)
        await thereRun.value
    }

    @Test func thePageAnswersFromItsSnapshotWhileTheQueueCannotBeReached() async throws {
        let w = try PageWorld()
        let watcher = try w.pageWatcher()
        let run = Task { await watcher.run(signals: w.signals) }
        let port = try await w.port()
        await eventually("the first snapshot read") {
            (try? JSONParser.parse(try await get(port, "/api/status").body))?["queued"] != nil
        }

        // The database goes away: the page still answers at once, with the last snapshot and
        // then with why it cannot read the queue; a posted file is refused, nothing queued.
        w.store.available = false
        #expect(try await get(port, "/").status == 200)
        await eventually("the snapshot says the queue cannot be read") {
            w.clock.advance(by: .seconds(1))
            return (try? JSONParser.parse(try await get(port, "/api/status").body))?["error"]?.stringValue?.contains("cannot be reached") == true
        }
        let refused = try await RawHTTP.exchange(port: port, "POST /api/jobs?name=later.jsonl HTTP/1.1", body: Array(w.job("q:later").utf8), headers: Self.auth)
        #expect(refused.status == 500 && refused.body.contains("cannot be reached"), "\(refused.body)")
        #expect(try await RawHTTP.exchange(port: port, "DELETE /api/jobs/q:later HTTP/1.1", headers: Self.auth).status == 500)

        // Back: the same file is queued, and the snapshot counts again.
        w.store.available = true
        let posted = try await RawHTTP.exchange(port: port, "POST /api/jobs?name=later.jsonl HTTP/1.1", body: Array(w.job("q:later").utf8), headers: Self.auth)
        #expect(posted.status == 202, "\(posted.body)")
        #expect(w.row("q:later")?.file == "later.jsonl")
        await eventually("the snapshot read again") {
            w.clock.advance(by: .seconds(1))
            return (try? JSONParser.parse(try await get(port, "/api/status").body))?["error"] == nil
        }

        w.signal.yield(SIGTERM)
        #expect(await run.value == 0)
    }
}
