import Foundation
import Glibc
@testable import RunnerKit
@testable import runner
import RunnerTestSupport
import Testing

/// `runner watch --listen` through the binary: the API while jobs run, submitting and cancelling
/// over HTTP, what it refuses at start. LiveServerTests shows who may ask what (tokens, cookies,
/// the failure limiter) in process, QueuePageTests the page of a queue's watcher and its token
/// read again at SIGHUP, WatchRealTimeTests hostile clients while jobs run.
@Suite(.startsProcesses, .serialized) struct LiveTests {
    /// A watcher serving on a port the kernel chose, with a token; and that port.
    static let token = "t0ken-of-the-live-tests"

    /// A token file as the watcher wants it: the owner's alone.
    static func tokenFile(_ world: SpoolWorld, _ token: String = token, name: String = "token") -> String {
        let path = world.w.write(name, token + "\n")
        chmod(path, 0o600)
        return path
    }

    static func startWatcher(_ world: SpoolWorld, token: String? = Self.token, _ arguments: [String] = []) async throws -> (ChildProcess, UInt16) {
        var extra = ["--listen", "127.0.0.1:0"]
        if let token { extra += ["--listen-token", tokenFile(world, token)] }
        let watcher = try world.startWatcher(extra + arguments)
        var port: UInt16?
        _ = await world.wait(upTo: .seconds(20)) {
            port = world.log().split(separator: "\n").lazy.compactMap { line -> UInt16? in
                guard let range = line.range(of: "live page and API at http://127.0.0.1:") else { return nil }
                return UInt16(line[range.upperBound...].prefix { $0.isNumber })
            }.first
            return port != nil
        }
        guard let port else {
            watcher.terminate()
            throw RawHTTP.Failure("no port in: \(world.log())")
        }
        return (watcher, port)
    }

    static let auth = ["Authorization: Bearer \(token)"]

    static func json(_ answer: RawHTTP.Answer) throws -> JSONValue { try JSONParser.parse(answer.body) }

    static func stop(_ watcher: ChildProcess, _ world: SpoolWorld) async {
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0, "\(world.log())")
    }

    @Test func theAPIFollowsAJobSubmittedOverHTTPFromQueuedToFinished() async throws {
        let world = try SpoolWorld()
        let (watcher, port) = try await Self.startWatcher(world)
        defer { if watcher.isRunning { watcher.terminate() } }

        // An event-stream reader from the start.
        let reader = try RawHTTP.connect(port: port, timeout: .seconds(30))
        defer { close(reader) }
        RawHTTP.send(reader, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
        var stream: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 2000", into: &stream))

        let job = #"{"kind": "entry", "key": "live:slow", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?delay=2500", "timeout": 20}"#
        let posted = try await RawHTTP.exchange(port: port, "POST /api/jobs?name=slow.json HTTP/1.1", body: Array(job.utf8), headers: Self.auth)
        #expect(posted.status == 202, "\(posted.body)")
        #expect(try Self.json(posted)["queued"]?.stringValue == "slow.json")
        #expect(try Self.json(posted)["jobs"]?.intValue == 1)

        // While it runs: its phase, its host's slot.
        var running: JSONValue?
        let seen = await world.wait(upTo: .seconds(10)) {
            guard let status = try? Self.json(await RawHTTP.exchange(port: port, "GET /api/status HTTP/1.1", headers: Self.auth)) else { return false }
            running = status["running"]?.arrayValue?.first { $0["key"]?.stringValue == "live:slow" && $0["phase"]?.stringValue == "running" }
            if running != nil { #expect(status["hosts"]?.arrayValue?.first?["inUse"]?.intValue == 1, "\(status)") }
            return running != nil
        }
        #expect(seen, "the running job with its phase in /api/status")
        #expect(running?["kind"]?.stringValue == "entry")
        let page = try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: Self.auth)
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        #expect(page.body.contains("<tr data-key=\"live:slow\"><td>live:slow</td><td>entry</td><td class=\"phase\">running"), "\(page.body)")
        #expect(!page.body.contains("src=\"http"), "no external assets")

        // The stream: queued, started, finished, in that order, the record in the last.
        #expect(await RawHTTP.read(reader, until: "\"event\":\"finished\"", into: &stream))
        #expect(await RawHTTP.read(reader, until: "}}\n\n", into: &stream))
        let events = String(decoding: stream, as: UTF8.self).split(separator: "\n").filter { $0.hasPrefix("data: ") }
            .compactMap { try? JSONParser.parse(String($0.dropFirst(6))) }.filter { $0["key"]?.stringValue == "live:slow" }
        #expect(events.compactMap { $0["event"]?.stringValue } == ["queued", "started", "finished"], "\(events)")
        #expect(events.last?["record"]?["status"]?.stringValue == "succeeded")

        // After: the job among the finished, its record on disk.
        let status = try Self.json(await RawHTTP.exchange(port: port, "GET /api/status HTTP/1.1", headers: Self.auth))
        #expect(status["finished"]?.arrayValue?.first?["key"]?.stringValue == "live:slow")
        #expect(status["jobs"]?["succeeded"]?.intValue == 1)
        #expect(try world.w.status("live:slow") == "succeeded")
        await Self.stop(watcher, world)
    }

    @Test func submittingOverHTTPIsValidatedAsSubmitIsAndCancellingReachesTheRunningJob() async throws {
        let world = try SpoolWorld()
        let (watcher, port) = try await Self.startWatcher(world)
        defer { if watcher.isRunning { watcher.terminate() } }

        let bad = #"{"kind": "entry", "key": "live:bad", "url": "\#(world.base)/entries/{id}.json"}"#
        let refused = try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array(bad.utf8), headers: Self.auth)
        #expect(refused.status == 400)
        #expect(refused.body.contains("'id'"), "the reason, as submit gives it: \(refused.body)")
        #expect(world.names(world.spool.inbox).isEmpty && world.jobFiles(world.spool.done).isEmpty, "nothing queued")
        let unauthorized = try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array(bad.utf8))
        #expect(unauthorized.status == 401)

        let slow = #"{"kind": "entry", "key": "live:cancel-me", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?delay=20000", "timeout": 30}"#
        #expect(try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array(slow.utf8), headers: Self.auth).status == 202)
        let started = await world.wait(upTo: .seconds(10)) {
            let status = try? Self.json(await RawHTTP.exchange(port: port, "GET /api/status HTTP/1.1", headers: Self.auth))
            return status?["running"]?.arrayValue?.contains { $0["key"]?.stringValue == "live:cancel-me" } == true
        }
        #expect(started)
        let began = ContinuousClock.now
        let cancelled = try await RawHTTP.exchange(port: port, "DELETE /api/jobs/live:cancel-me HTTP/1.1", headers: Self.auth)
        #expect(cancelled.status == 202, "\(cancelled.body)")
        #expect(try Self.json(cancelled)["running"] == .bool(true))
        #expect(await world.wait(upTo: .seconds(15)) { (try? world.w.status("live:cancel-me")) == "cancelled" }, "\(world.log())")
        #expect(began.duration(to: .now) < .seconds(15), "cancelled, not left to its 20 s")
        let unknown = try await RawHTTP.exchange(port: port, "DELETE /api/jobs/live:nothing HTTP/1.1", headers: Self.auth)
        #expect(unknown.status == 404)
        #expect(try await RawHTTP.exchange(port: port, "GET /nowhere HTTP/1.1", headers: Self.auth).status == 404)
        #expect(try await RawHTTP.exchange(port: port, "PUT /api/jobs HTTP/1.1", headers: Self.auth).status == 405)
        await Self.stop(watcher, world)
    }

    /// A kind's details copied from what a server sent are capped: a whole 2 MB list, a 6 KB
    /// string, in the record and in the event stream's line.
    @Test func detailsCopiedFromThePayloadAreCapped() async throws {
        let world = try SpoolWorld()
        try FileManager.default.createDirectory(atPath: "\(world.w.root)/k", withIntermediateDirectories: true)
        world.w.write("k/copy.json", #"{"kind": "copy", "payload": {"json": "any"}, "details": {"all": ""}}"#)
        let (watcher, port) = try await Self.startWatcher(world, ["--kinds", "\(world.w.root)/k"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let reader = try RawHTTP.connect(port: port, timeout: .seconds(30))
        defer { close(reader) }
        RawHTTP.send(reader, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\n\r\n")
        var stream: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 2000", into: &stream))
        let text = "%22" + String(repeating: "x", count: 6_000) + "%22"
        try world.drop("copy.jsonl", """
            {"kind": "copy", "key": "copy:list", "url": "\(world.base)/list/30000"}
            {"kind": "copy", "key": "copy:text", "url": "\(world.base)/say?text=\(text)"}

            """)
        #expect(await world.wait(upTo: .seconds(30)) { world.jobFiles(world.spool.done).contains("copy.jsonl") }, "\(world.log())")
        let list = try world.w.record("copy:list")
        #expect(list["status"]?.stringValue == "succeeded", "\(list)")
        #expect((list["details"]?["all"]?.arrayValue?.count ?? 0) == 64, "\(String(describing: list["details"]).prefix(300))")
        let string = try world.w.record("copy:text")
        #expect(string["status"]?.stringValue == "succeeded", "\(string)")
        let kept = string["details"]?["all"]?.stringValue ?? ""
        #expect(kept.utf8.count <= 1024 && kept.hasPrefix("xxxx") && kept.contains("more bytes"), "\(kept.prefix(100))")
        // Both finished events, whole (an event ends in a blank line).
        func finishedLines() -> [Substring] {
            String(decoding: stream, as: UTF8.self).components(separatedBy: "\n\n").dropLast().map { Substring($0) }
                .filter { $0.hasPrefix("data: ") && $0.contains("\"event\":\"finished\"") }
        }
        for _ in 0..<40 where finishedLines().count < 2 {
            // What comes next (a read returns once something came that ends in a blank line).
            var more: [UInt8] = []
            _ = await RawHTTP.read(reader, until: "\n\n", into: &more, upTo: .seconds(5))
            stream += more
        }
        let lines = finishedLines()
        #expect(lines.count == 2, "\(lines.map { $0.prefix(200) })")
        #expect(lines.allSatisfy { $0.utf8.count < 64 * 1024 }, "\(lines.map { $0.utf8.count })")
        await Self.stop(watcher, world)
    }

    /// A list naming thousands of hosts keeps the page and the status small: the 50 busiest
    /// hosts are shown, and how many more there are.
    @Test func theHostTableShowsTheBusiestHostsAndCountsTheRest() throws {
        let hosts = (0..<30_000).map { index in
            JobEngine.HostActivity(
                host: "h\(index).example", inUse: index == 29_999 ? 3 : 0, limit: 8, waiting: index == 7 ? 2 : 0, rate: nil,
                pausedFor: index == 12 ? .seconds(5) : .zero)
        }
        let (shown, more) = LiveSite.busiest(hosts)
        #expect(shown.count == 50 && more == 29_950)
        #expect(Array(shown.prefix(3).map(\.host)) == ["h29999.example", "h7.example", "h12.example"], "busiest first, then paused")
        let page = LivePage.main(LiveBoard().snapshot, overview: LiveOverview(counts: []), hosts: hosts)
        #expect(page.contains("29950 more hosts"), "\(page.suffix(300))")
        #expect(page.utf8.count < 20_000, "\(page.utf8.count) bytes")
    }

    /// A token file written on Windows (CRLF) or with trailing spaces gives the token itself.
    @Test func aTokenFileLineEndsWithoutItsCRAndSpaces() throws {
        let world = try SpoolWorld()
        for (text, name) in [("\(Self.token)\r\n", "crlf"), ("  \(Self.token) \r\nsecond line\n", "spaces"), (Self.token, "bare")] {
            let path = Self.tokenFile(world, "", name: name)
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
            chmod(path, 0o600)
            #expect(try LiveOptions.readToken(path) == Self.token, "\(name)")
        }
    }

    @Test func whatListenRefusesAtStartIsOneLineAndExit2() async throws {
        let world = try SpoolWorld()
        let token = Self.tokenFile(world)
        let empty = Self.tokenFile(world, "", name: "empty")
        let short = Self.tokenFile(world, "abc", name: "short")
        let shared = world.w.write("shared", Self.token + "\n")
        chmod(shared, 0o644)
        let cases: [([String], String)] = [
            (["--listen", "0.0.0.0:0"], "not a loopback address; serving it needs --listen-token FILE"),
            (["--listen", "127.0.0.1"], "expected HOST:PORT"),
            (["--listen", "example.com:80", "--listen-token", token], "HOST must be an IP address or localhost"),
            (["--listen", "127.0.0.1:99999"], "the port must be a number"),
            (["--listen", "127.0.0.1:0", "--listen-token", "\(world.w.root)/missing"], "cannot be read"),
            (["--listen", "127.0.0.1:0", "--listen-token", empty], "the file is empty"),
            (["--listen", "127.0.0.1:0", "--listen-token", short], "the token has 3 characters; use at least 16"),
            (["--listen", "127.0.0.1:0", "--listen-token", shared], "others may read it (mode 644); make it the watcher's own: chmod 600"),
            (["--listen-token", token], "--listen-token needs --listen"),
        ]
        for (arguments, expected) in cases {
            let result = try await world.w.run(["watch", "--spool", world.spool.root, "--out", world.w.out] + arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("abc"), "the token is never printed")
        }
    }
}
