import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// How watchers of one queue share it as a fleet, through the binary against a real PostgreSQL:
/// names, fair shares of a short queue, who is silent, one task per key, kinds only some have.
/// What reaches every watcher (notices, cancels, a host's pace and pause, the page) is in
/// QueueNoticeTests; one bandwidth for all is timed in LimitRateTests, alone.
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

}
