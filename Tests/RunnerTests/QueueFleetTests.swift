import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// How watchers of one queue share it as a fleet, through the binary against a real PostgreSQL:
/// names, fair shares of a short queue, who is silent, one task per key, the pace and pauses of
/// a host, cancels and notices that reach every watcher, kinds only some have, the page. One
/// bandwidth for all is timed in LimitRateTests, alone.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct QueueFleetTests {
    static func listening(_ world: SpoolWorld, _ names: [String]) async -> Bool {
        await world.wait(upTo: .seconds(20)) { names.allSatisfy { world.log($0).contains("watching the queue") } }
    }

    /// A name is one live watcher's: a second one is refused; one restarted under the name after
    /// a kill -9 takes its own claims back at once instead of waiting out the 30 s lease.
    @Test func aNameIsOneLiveWatcherAndARestartedOneTakesItsClaimsBackAtOnce() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = try QueueTests.startWatcher(world, db, "first", ["--name", "night-1", "--concurrency", "4"])
        defer { if first.isRunning { first.terminate() } }
        #expect(await Self.listening(world, ["first"]), "\(world.log("first"))")
        let twin = try QueueTests.startWatcher(world, db, "twin", ["--name", "night-1"])
        defer { if twin.isRunning { twin.terminate() } }
        #expect(await world.exit(of: twin, upTo: .seconds(20)) == 2, "\(world.log("twin"))")
        #expect(world.log("twin").contains("a watcher named night-1 is alive"), "\(world.log("twin"))")
        let bad = try await world.w.run(["watch", "--queue", db.url, "--out", "\(world.w.root)/out", "--name", "two words"])
        #expect(bad.status == 2 && bad.stderr.contains("--name"), "\(bad.stderr)")

        let file = world.w.write("slow.jsonl", QueueTests.jobs(world, 2, prefix: "q:named", delay: 3000))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count == 2 })
        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))
        let restartedAt = ContinuousClock.now
        let events = "\(world.w.root)/events.jsonl"
        let again = try QueueTests.startWatcher(world, db, "again", ["--name", "night-1", "--concurrency", "4", "--events", events])
        defer { if again.isRunning { again.terminate() } }
        let done = await world.wait(upTo: .seconds(25)) { QueueTests.records(world).count == 2 }
        let took = restartedAt.duration(to: .now)
        #expect(done, "\(QueueTests.records(world)) \(world.log("again"))")
        #expect(took < .seconds(15), "taken back at once (3 s jobs), not after the 30 s lease: \(took)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 4, "each job run again once, by the restarted watcher")
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") == 2 }
        let names = (status["watchers"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
        #expect(names == ["night-1"], "one row for the name: \(status)")
        #expect(try await QueueTests.ranBy(db, prefix: "q:named") == ["night-1": 2])
        let lines = world.text(events).split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        #expect(lines.contains { $0["event"]?.stringValue == "finished" }, "\(lines)")
        #expect(!lines.isEmpty && lines.allSatisfy { $0["runner"]?.stringValue == "night-1" }, "each event names the watcher: \(lines)")
        #expect(await QueueTests.stop(again, world) == 0)
    }

    /// Two idle watchers with four slots each and four long jobs: each runs two, none runs four.
    @Test func twoIdleWatchersGivenFourLongJobsRunTwoEach() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let a = try QueueTests.startWatcher(world, db, "a", ["--name", "a", "--concurrency", "4"])
        let b = try QueueTests.startWatcher(world, db, "b", ["--name", "b", "--concurrency", "4"])
        defer { [a, b].forEach { if $0.isRunning { $0.terminate() } } }
        #expect(await Self.listening(world, ["a", "b"]))
        let file = world.w.write("long.jsonl", QueueTests.jobs(world, 4, prefix: "q:share", delay: 2000))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(30)) { QueueTests.records(world).count == 4 }, "\(world.log("a")) \(world.log("b"))")
        _ = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") == 4 }
        #expect(try await QueueTests.ranBy(db, prefix: "q:share") == ["a": 2, "b": 2])
        // With more work than slots, a watcher takes all it has room for.
        let many = world.w.write("many.jsonl", QueueTests.jobs(world, 12, prefix: "q:full", delay: 500))
        #expect(try await world.w.run(["submit", "--queue", db.url, many]).status == 0)
        #expect(await world.wait(upTo: .seconds(30)) { QueueTests.records(world).count == 16 })
        for watcher in [a, b] { #expect(await QueueTests.stop(watcher, world) == 0) }
    }

    /// `status` counts `notFound` apart from `failed`, the ended jobs of the last day, and the
    /// live watchers, with a killed one listed apart as silent.
    @Test func statusCountsNotFoundApartAndSilentWatchersApart() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let steady = try QueueTests.startWatcher(world, db, "steady", lease: 2, ["--name", "steady"])
        let doomed = try QueueTests.startWatcher(world, db, "doomed", lease: 2, ["--name", "doomed"])
        defer { [steady, doomed].forEach { if $0.isRunning { $0.terminate() } } }
        #expect(await Self.listening(world, ["steady", "doomed"]))
        let file = world.w.write("mixed.jsonl", ["imgly.A.1", "imgly.A.2", "imgly.B.2"].map { id in
            #"{"kind": "entry", "key": "q:\#(id)", "id": "\#(id)", "url": "\#(world.base)/entries/{id}.json", "timeout": 30}"#
        }.joined(separator: "\n") + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        // Finished longer ago than a day: not counted.
        _ = try await QueueTests.status(world, db, upTo: .seconds(20)) { QueueTests.count($0, "done") + QueueTests.count($0, "notFound") == 3 }
        _ = try await db.psql(
            "INSERT INTO runner.jobs (key, kind, job, file, state, status, finished_at) VALUES ('q:old', 'entry', '{}', 'old.jsonl', 'done', 'succeeded', now() - interval '2 days')")
        kill(doomed.processIdentifier, SIGKILL)
        _ = await world.exit(of: doomed, upTo: .seconds(5))
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { status in
            (status["watchers"]?.arrayValue ?? []).contains { $0["live"] == .bool(false) }
        }
        #expect(QueueTests.count(status, "done") == 2 && QueueTests.count(status, "notFound") == 1, "\(status)")
        #expect(QueueTests.count(status, "failed") == 0, "a 404 is no failure: \(status)")
        let text = try await world.w.run(["status", "--queue", db.url])
        let lines = text.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("watchers: 1") && lines.contains { $0.hasPrefix("silent:   1") }, "\(text.stdout)")
        let silentAt = try #require(lines.firstIndex { $0.hasPrefix("silent:") })
        #expect(lines[silentAt + 1].hasPrefix("  doomed on ") && lines[2].hasPrefix("  steady on "), "\(text.stdout)")
        #expect(lines.contains("done:     2") && lines.contains("notFound: 1") && lines.contains("failed:   0"), "\(text.stdout)")
        #expect(await QueueTests.stop(steady, world) == 0)
    }

    @Test func threeWatchersShareTheJobsAndEachIsFetchedOnce() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("many.jsonl", QueueTests.jobs(world, 300, prefix: "q:many", delay: 5))
        let watchers = try (1...3).map { try QueueTests.startWatcher(world, db, "watcher\($0)") }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        // All three listening before the jobs come, so a slow start cannot leave one out.
        let listening = await world.wait(upTo: .seconds(20)) { (1...3).allSatisfy { world.log("watcher\($0)").contains("watching the queue") } }
        #expect(listening, "\((1...3).map { world.log("watcher\($0)") })")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let done = await world.wait(upTo: .seconds(60)) { QueueTests.records(world).count >= 300 }
        #expect(done, "\(QueueTests.records(world).count)")
        #expect(QueueTests.records(world).values.allSatisfy { $0 == "succeeded" }, "every key's record in the one output folder")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 300, "each job fetched once")
        // A record is on disk before it is in the queue: the rows follow within moments.
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") == 300 }
        #expect(status["done"]?["count"]?.intValue == 300, "\(status)")
        let ranBy = try await QueueTests.ranBy(db)
        #expect(ranBy.count == 3, "every watcher took some: \(ranBy)")
        for watcher in watchers { #expect(await QueueTests.stop(watcher, world) == 0) }
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

    @Test func oneTaskPerKeyHoldsAcrossWatchers() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let jobs = (0..<24).map { index in
            let id = QueueTests.entryIDs[index % 4]
            return #"{"kind": "entry", "key": "q:key\#(index % 4)", "id": "\#(id)", "url": "\#(world.base)/entries/{id}.json?delay=300&n=\#(index)", "timeout": 30}"#
        }
        let file = world.w.write("keys.jsonl", jobs.joined(separator: "\n") + "\n")
        let watchers = try (1...3).map { try QueueTests.startWatcher(world, db, "out\($0)", ["--concurrency", "4"]) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let status = try await QueueTests.status(world, db, upTo: .seconds(30)) { QueueTests.count($0, "done") + QueueTests.count($0, "failed") == 24 }
        #expect(QueueTests.count(status, "done") + QueueTests.count(status, "failed") == 24, "\(status)")
        // A job of a key running on another watcher waits for it: none overlaps at the server,
        // and every one runs (none ends duplicate).
        var fetched = 0
        for id in QueueTests.entryIDs {
            let arrivals = world.w.server.arrivals(pathPrefix: "/entries/\(id).json").sorted()
            fetched += arrivals.count
            #expect(!arrivals.isEmpty)
            for (earlier, later) in zip(arrivals, arrivals.dropFirst()) {
                #expect(earlier.duration(to: later) >= .milliseconds(290), "two jobs of one key overlapped: \(earlier.duration(to: later))")
            }
        }
        let succeeded = status["done"]?["count"]?.intValue ?? 0
        #expect(fetched == 24 && succeeded == 24, "fetched \(fetched), succeeded \(succeeded): \(status)")
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

    /// A watcher claims only the kinds it has loaded: a job of another kind waits for a watcher
    /// that has it, and `status` lists the watchers and says why the job waits.
    @Test func aJobWaitsForAWatcherThatHasItsKindAndStatusSaysSo() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let kinds = "\(FileKindTests.jobs)/kinds"
        let plain = try QueueTests.startWatcher(world, db, "plain")
        defer { if plain.isRunning { plain.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("plain").contains("watching the queue") })
        let file = world.w.write(
            "declared.jsonl", #"{"kind": "json-entry", "key": "q:declared", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json"}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--kinds", kinds, file]).status == 0)

        let waiting = try await QueueTests.status(world, db, upTo: .seconds(10)) { status in
            status["queued"]?["noWatcherForKind"]?.arrayValue?.first?["kind"]?.stringValue == "json-entry"
        }
        #expect(waiting["queued"]?["noWatcherForKind"]?.arrayValue?.first?["count"]?.intValue == 1, "\(waiting)")
        let listed = waiting["watchers"]?.arrayValue ?? []
        #expect(listed.count == 1 && listed.first?["live"] == .bool(true), "\(listed)")
        #expect(listed.first?["kinds"]?.arrayValue?.contains(.string("entry")) == true, "\(listed)")
        let text = try await world.w.run(["status", "--queue", db.url])
        #expect(text.stdout.contains("1 of kind json-entry: no live watcher has this kind loaded"), "\(text.stdout)")
        #expect(text.stdout.contains("watchers: 1"), "\(text.stdout)")
        try await Task.sleep(for: .seconds(1))
        #expect(QueueTests.records(world).isEmpty, "the watcher without the kind left it alone")

        let declaring = try QueueTests.startWatcher(world, db, "declaring", ["--kinds", kinds])
        defer { if declaring.isRunning { declaring.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { QueueTests.records(world)["q:declared"] == "succeeded" })
        #expect(await QueueTests.stop(declaring, world) == 0)
        #expect(await QueueTests.stop(plain, world) == 0)
        let after = try await QueueTests.status(world, db)
        #expect(after["watchers"]?.arrayValue?.isEmpty == true, "watchers that stopped are off the list: \(after)")
    }

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
}
