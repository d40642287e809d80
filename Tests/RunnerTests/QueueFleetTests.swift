import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// How watchers of one queue share it as a fleet, through the binary against a real PostgreSQL:
/// names, fair shares of a short queue, and one bandwidth for all.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
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
        let again = try QueueTests.startWatcher(world, db, "again", ["--name", "night-1", "--concurrency", "4"])
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
}
