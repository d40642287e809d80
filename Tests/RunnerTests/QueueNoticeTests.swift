import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// What one watcher of a queue does reaches the others, through the binary against a real
/// PostgreSQL: new jobs wake an idle watcher, a cancel reaches the task that runs the key, a
/// host's pace and pause hold for the fleet, and a watcher's page shows the fleet and its ends.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct QueueNoticeTests {
    @Test func anIdleWatcherIsWokenByANotifyNotByItsRescan() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try QueueTests.startWatcher(world, db, "out")  // --rescan 30: only NOTIFY wakes it in time
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("out").contains("watching the queue") })
        try await Task.sleep(for: .seconds(1))
        let file = world.w.write("one.jsonl", QueueTests.jobs(world, 1, prefix: "q:idle", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let submitted = ContinuousClock.now
        #expect(await world.wait(upTo: .seconds(15)) { !world.w.server.arrivals(pathPrefix: "/entries/").isEmpty })
        let arrival = try #require(world.w.server.arrivals(pathPrefix: "/entries/").first)
        #expect(submitted.duration(to: arrival) < .seconds(15), "woken by NOTIFY, not the 30 s rescan: \(submitted.duration(to: arrival))")
        #expect(await QueueTests.stop(watcher, world) == 0)
    }

    @Test func cancelReachesTheRunningTaskOnItsWatcherAndTheQueuedJobsOfTheKey() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try QueueTests.startWatcher(world, db, "out", ["--concurrency", "1"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let file = world.w.write("cancel.jsonl", QueueTests.jobs(world, 3, prefix: "q:cancel", delay: 20_000, keys: 1))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count == 1 })
        let cancel = try await world.w.run(["cancel", "q:cancel0", "--queue", db.url])
        let asked = ContinuousClock.now
        #expect(cancel.status == 0, "\(cancel.stderr)")
        #expect(cancel.stdout.contains("its running task"), "\(cancel.stdout)")
        #expect(await world.wait(upTo: .seconds(15)) { QueueTests.records(world)["q:cancel0"] == "cancelled" }, "\(world.log("out"))")
        #expect(asked.duration(to: .now) < .seconds(15), "the running task ended soon after the cancel, not after its 20 s: \(asked.duration(to: .now))")
        // The other two (queued, or claimed and waiting for a slot) end cancelled without running.
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "cancelled") == 3 }
        #expect(status["cancelled"]?["count"]?.intValue == 3, "\(status)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 1, "the other two never ran")
        let nothing = try await world.w.run(["cancel", "q:nothing", "--queue", db.url])
        #expect(nothing.status == 1)
        #expect(await QueueTests.stop(watcher, world) == 0)
    }

    /// `cancel PARENT` cancels its queued children and stops its running one; the parent
    /// completes with them counted.
    @Test func cancellingAParentCancelsItsChildren() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try QueueTests.startWatcher(world, db, "out", ["--concurrency", "1"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let file = world.w.write(
            "catalog.jsonl", #"{"kind": "image-list", "key": "q:parent", "url": "\#(world.base)/list/5?image=delay%3D20000", "timeout": 30}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/images/").count == 1 }, "a child runs")
        let cancel = try await world.w.run(["cancel", "q:parent", "--queue", db.url])
        // The watcher claimed one more child ahead (--concurrency 1): that one is asked to stop too.
        #expect(cancel.status == 0 && cancel.stdout.contains(" queued jobs cancelled"), "\(cancel.stdout)\(cancel.stderr)")
        let done = try await QueueTests.status(world, db, upTo: .seconds(20)) { $0["waiting"]?["count"] == JSONValue(0) && $0["running"]?.arrayValue?.isEmpty == true }
        #expect(done["waiting"]?["count"] == JSONValue(0), "\(done)")
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(world.w.root)/out/results/\(OutputStore.fileName(forKey: "q:parent")).json"))))
        #expect(record["details"]?["children"]?["cancelled"] == JSONValue(5), "the running one stopped, the queued ones never ran: \(record)")
        #expect(world.w.server.arrivals(pathPrefix: "/images/").count == 1)
        #expect(await QueueTests.stop(watcher, world) == 0)
    }

    @Test func a429SeenByOneWatcherPausesTheHostForAll() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watchers = try (1...2).map { try QueueTests.startWatcher(world, db, "watcher\($0)", ["--concurrency", "1"]) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        let limited = world.w.write(
            "limited.jsonl",
            #"{"kind": "entry", "key": "q:limited", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?status=429&retryAfter=3", "retries": 0}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, limited]).status == 0)
        // Its record is written after the pause was taken and told to the fleet.
        #expect(await world.wait(upTo: .seconds(20)) { QueueTests.records(world)["q:limited"] != nil })
        let limitedAt = try #require(world.w.server.arrivals(pathPrefix: "/entries/").first)
        let paused = try await QueueTests.status(world, db)["pausedHosts"]?.arrayValue?.first
        #expect(paused?["host"]?.stringValue == "127.0.0.1" && (paused?["leftMs"]?.intValue ?? 0) > 0, "the fleet holds the host back: \(String(describing: paused))")
        let file = world.w.write("others.jsonl", QueueTests.jobs(world, 8, prefix: "q:other", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let done = await world.wait(upTo: .seconds(30)) { QueueTests.records(world).count >= 9 }
        #expect(done)
        _ = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") >= 8 }  // the rows follow the records
        let ranBy = try await QueueTests.ranBy(db, prefix: "q:other")
        #expect(ranBy.count == 2, "both watchers ran some of the others: \(ranBy)")
        let others = world.w.server.arrivals(pathPrefix: "/entries/").dropFirst()
        #expect(others.count == 8)
        for arrival in others {
            #expect(limitedAt.duration(to: arrival) >= .milliseconds(2900), "sent during the pause: \(limitedAt.duration(to: arrival))")
        }
        for watcher in watchers { #expect(await QueueTests.stop(watcher, world) == 0) }
    }

    @Test func rateHoldsForTheWholeFleet() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("paced.jsonl", QueueTests.jobs(world, 24, prefix: "q:paced", delay: 0))
        let watchers = try (1...3).map { try QueueTests.startWatcher(world, db, "watcher\($0)", ["--rate", "4", "--concurrency", "8"]) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        let listening = await world.wait(upTo: .seconds(20)) { (1...3).allSatisfy { world.log("watcher\($0)").contains("watching the queue") } }
        #expect(listening, "\((1...3).map { world.log("watcher\($0)") })")
        let submitted = ContinuousClock.now
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let done = await world.wait(upTo: .seconds(40)) { QueueTests.records(world).count >= 24 }
        #expect(done, "\(QueueTests.records(world).count)")
        #expect(QueueTests.records(world).values.allSatisfy { $0 == "succeeded" })
        let ranBy = try await QueueTests.ranBy(db)
        #expect(ranBy.count == 3, "every watcher ran some: \(ranBy)")
        let arrivals = world.w.server.arrivals(pathPrefix: "/entries/")
        #expect(arrivals.count == 24)
        let busiest = RateTests.busiestSecond(arrivals)
        #expect(busiest <= RateTests.allowed(rate: 4), "three watchers at --rate 4 share one pace: \(busiest) requests within one second")
        let span = RateTests.span(since: submitted, arrivals)
        #expect(span >= .milliseconds(5600), "24 requests 250 ms apart take 5.75 s (each watcher on its own, 1.75 s): \(span)")
        for watcher in watchers { #expect(await QueueTests.stop(watcher, world) == 0) }
    }

    @Test func theLivePageAndAPIOfAQueueWatcherShowTheFleetAndFeedTheQueue() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try QueueTests.startWatcher(world, db, "out", ["--listen", "127.0.0.1:0", "--listen-token", LiveTests.tokenFile(world)])
        defer { if watcher.isRunning { watcher.terminate() } }
        var port: UInt16?
        _ = await world.wait(upTo: .seconds(20)) {
            port = world.log("out").split(separator: "\n").lazy.compactMap { line -> UInt16? in
                guard let range = line.range(of: "live page and API at http://127.0.0.1:") else { return nil }
                return UInt16(line[range.upperBound...].prefix { $0.isNumber })
            }.first
            return port != nil
        }
        let live = try #require(port, "\(world.log("out"))")
        let auth = LiveTests.auth

        // A job posted over HTTP is validated, queued in the database, claimed and run.
        let bad = #"{"kind": "entry", "key": "q:bad", "url": "http://x.test/{id}"}"#
        #expect(try await RawHTTP.exchange(port: live, "POST /api/jobs HTTP/1.1", body: Array(bad.utf8), headers: auth).status == 400)
        let slow = QueueTests.jobs(world, 1, prefix: "q:live", delay: 2000)
        let posted = try await RawHTTP.exchange(port: live, "POST /api/jobs?name=live.jsonl HTTP/1.1", body: Array(slow.utf8), headers: auth)
        #expect(posted.status == 202, "\(posted.body)")
        var running: JSONValue = .null
        _ = await world.wait(upTo: .seconds(10)) {
            guard let status = try? LiveTests.json(await RawHTTP.exchange(port: live, "GET /api/status HTTP/1.1", headers: auth)) else { return false }
            running = status["running"]?.arrayValue?.first { $0["key"]?.stringValue == "q:live0" } ?? .null
            return running["phase"] != nil
        }
        #expect(running["runner"]?.stringValue?.isEmpty == false, "the queue's view, merged with this watcher's: \(running)")
        #expect(running["phase"]?.stringValue != nil, "\(running)")
        let page = try await RawHTTP.exchange(port: live, "GET / HTTP/1.1", headers: auth)
        let html = page.body
        #expect(page.status == 200 && html.contains("jobs queued") && html.contains("q:live0"), "\(html)")
        #expect(await world.wait(upTo: .seconds(20)) { QueueTests.records(world)["q:live0"] == "succeeded" })
        let stored = try await QueueTests.status(world, db, upTo: .seconds(5)) { QueueTests.count($0, "done") == 1 }
        #expect(QueueTests.count(stored, "done") == 1, "stored in the queue once durable on disk")

        // Cancel over HTTP reaches the queue.
        let other = QueueTests.jobs(world, 1, prefix: "q:gone", delay: 20_000)
        #expect(try await RawHTTP.exchange(port: live, "POST /api/jobs HTTP/1.1", body: Array(other.utf8), headers: auth).status == 202)
        #expect(await world.wait(upTo: .seconds(10)) { world.w.server.arrivals(pathPrefix: "/entries/").count == 2 })
        #expect(try await RawHTTP.exchange(port: live, "DELETE /api/jobs/q:gone0 HTTP/1.1", headers: auth).status == 202)
        #expect(await world.wait(upTo: .seconds(10)) { QueueTests.records(world)["q:gone0"] == "cancelled" })
        #expect(try await RawHTTP.exchange(port: live, "DELETE /api/jobs/q:nothing HTTP/1.1", headers: auth).status == 404)

        // A job another watcher runs (of a kind only it has) is a row of the page's fleet table,
        // and its end is in this watcher's event stream.
        let reader = try RawHTTP.connect(port: live, timeout: .seconds(30))
        defer { close(reader) }
        RawHTTP.send(reader, "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(LiveTests.token)\r\n\r\n")
        var stream: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 2000", into: &stream))
        let kinds = "\(FileKindTests.jobs)/kinds"
        let declaring = try QueueTests.startWatcher(world, db, "declaring", ["--kinds", kinds])
        defer { if declaring.isRunning { declaring.terminate() } }
        let declared = world.w.write(
            "declared.jsonl",
            #"{"kind": "json-entry", "key": "q:elsewhere", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?delay=3000", "timeout": 20}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--kinds", kinds, declared]).status == 0)
        var fleetPage = ""
        _ = await world.wait(upTo: .seconds(15)) {
            fleetPage = (try? await RawHTTP.exchange(port: live, "GET /?part=main HTTP/1.1", headers: auth).body) ?? ""
            return fleetPage.contains("<td>q:elsewhere</td>")
        }
        #expect(fleetPage.contains("Running elsewhere in the fleet") && fleetPage.contains("<td>q:elsewhere</td>"), "\(fleetPage)")
        #expect(fleetPage.contains("<span>watchers</span>"), "\(fleetPage)")
        #expect(await RawHTTP.read(reader, until: #""key":"q:elsewhere","kind":"json-entry","status":"succeeded","runner":""#, into: &stream),
            "\(String(decoding: stream, as: UTF8.self).suffix(600))")
        #expect(await QueueTests.stop(declaring, world) == 0)
        #expect(await QueueTests.stop(watcher, world) == 0)
    }
}
