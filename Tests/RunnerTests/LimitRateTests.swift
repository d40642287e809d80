import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// `--limit-rate`: every transfer together at most RATE bytes a second; a config host's
/// `limitRate`: every transfer from that host.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)))
struct LimitRateTests {
    @Test(arguments: ["curl", "urlsession"])
    func twoTransfersTogetherKeepToTheRate(http: String) async throws {
        let w = try Workspace()
        // Two JSON documents of about 400 KB each: 800 KB at 320 KiB a second take about 2.4 s.
        w.write("jobs.jsonl", """
            {"kind": "json", "key": "a", "url": "\(w.base)/object/30000?n=1", "timeout": 30, "maxBytes": 10000000}
            {"kind": "json", "key": "b", "url": "\(w.base)/object/30000?n=2", "timeout": 30, "maxBytes": 10000000}
            """)
        let unlimited = ContinuousClock.now
        let fast = try await w.run(["run", "jobs.jsonl", "--http", http])
        let alone = unlimited.duration(to: .now)
        #expect(fast.status == 0, "\(fast.stdout)\(fast.stderr)")
        let bytes = try ["a", "b"].map { try #require(w.record($0)["bytes"]?.intValue) }.reduce(0, +)

        let limited = ContinuousClock.now
        let slow = try await w.run(["run", "jobs.jsonl", "--http", http, "--limit-rate", "320K"])
        let took = limited.duration(to: .now)
        #expect(slow.status == 0, "\(slow.stdout)\(slow.stderr)")
        let expected = Double(bytes) / (320 * 1024)
        #expect(took.inSeconds > expected * 0.85, "\(bytes) bytes at 320K: \(took), expected about \(expected) s (unlimited: \(alone))")
        #expect(took.inSeconds < expected * 1.6 + alone.inSeconds, "\(bytes) bytes at 320K: \(took), expected about \(expected) s")
    }

    @Test func aRateThatIsNotOneIsAUsageError() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "json", "key": "a", "url": "\#(w.base)/object/3"}"#)
        for bad in ["fast", "0", "-5K", "2X", ""] {
            let result = try await w.run(["run", "job.json", "--limit-rate", bad])
            #expect(result.status == 2 && result.stderr.contains("--limit-rate must be"), "\(bad): \(result.stderr)")
        }
        #expect(ByteRate.parse("500K") == 512_000 && ByteRate.parse("2M") == 2 << 20 && ByteRate.parse("1.5k") == 1536)
        #expect(ByteRate.parse("1000") == 1000 && ByteRate.parse("1G") == 1 << 30)
    }

    @Test func aHostsLimitRateCapsThatHostAlone() async throws {
        let w = try Workspace()
        let port = try #require(URL(string: w.base)?.port)
        // Two 400 KB documents from 127.0.0.1, capped at 320 KiB a second together; one from
        // localhost (the same server), not capped.
        w.write("config.json", #"{"hosts": {"127.0.0.1": {"limitRate": "320K"}}}"#)
        w.write("jobs.jsonl", """
            {"kind": "json", "key": "a", "url": "\(w.base)/object/30000?n=1", "timeout": 30, "maxBytes": 10000000}
            {"kind": "json", "key": "b", "url": "\(w.base)/object/30000?n=2", "timeout": 30, "maxBytes": 10000000}
            {"kind": "json", "key": "c", "url": "http://localhost:\(port)/object/30000?n=3", "timeout": 30, "maxBytes": 10000000}
            """)
        let result = try await w.run(["run", "jobs.jsonl", "--config", "config.json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let bytes = try ["a", "b"].map { try #require(w.record($0)["bytes"]?.intValue) }.reduce(0, +)
        let expected = Double(bytes) / (320 * 1024)
        let slowest = try ["a", "b"].map { try #require(w.record($0)["durationMs"]?.intValue) }.max() ?? 0
        #expect(Double(slowest) / 1000 > expected * 0.85, "\(bytes) bytes at 320K took \(slowest) ms, expected about \(expected) s")
        let free = try #require(w.record("c")["durationMs"]?.intValue)
        #expect(Double(free) / 1000 < expected * 0.5, "localhost has no cap: \(free) ms")

        w.write("bad.json", #"{"hosts": {"127.0.0.1": {"limitRate": "fast"}}}"#)
        let bad = try await w.run(["run", "jobs.jsonl", "--config", "bad.json"])
        #expect(bad.status == 2 && bad.stderr.contains("limitRate"), "\(bad.stderr)")
        w.write("bound.json", #"{"hosts": {"127.0.0.1:\#(port)": {"limitRate": 1000}}}"#)
        let bound = try await w.run(["run", "jobs.jsonl", "--config", "bound.json"])
        #expect(bound.status == 2 && bound.stderr.contains("limitRate count per host"), "\(bound.stderr)")
    }
}

/// `--limit-rate` for a fleet: one bandwidth that every watcher of a queue shares, through the
/// binary against a real PostgreSQL.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct FleetLimitRateTests {
    /// `--limit-rate` holds for the fleet: two watchers at 2M, one 3 MiB download each, move at
    /// most about 2 MiB a second together (each alone would move its file in 1.5 s); then one
    /// watcher that holds the only transfer gets all of it (4 MiB in about 2 s, not 4).
    @Test func limitRateCapsTheFleetTogetherAndOneWatcherAloneGetsAllOfIt() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        RangeResumeTests.writeKind(world.w)
        let kinds = ["--kinds", "\(world.w.root)/k"]
        let a = try QueueTests.startWatcher(world, db, "a", ["--name", "a", "--limit-rate", "2M"] + kinds)
        let b = try QueueTests.startWatcher(world, db, "b", ["--name", "b", "--limit-rate", "2M"] + kinds)
        defer { [a, b].forEach { if $0.isRunning { $0.terminate() } } }
        #expect(await QueueFleetTests.listening(world, ["a", "b"]))
        let mib = 1 << 20
        let two = world.w.write("two.jsonl", (1...2).map { index in
            #"{"kind": "file", "name": "two-\#(index)", "url": "\#(world.base)/ranged/\#(3 * mib)?n=\#(index)", "timeout": 60}"#
        }.joined(separator: "\n") + "\n")
        let started = ContinuousClock.now
        #expect(try await world.w.run(["submit", "--queue", db.url, two] + kinds).status == 0)
        #expect(await world.wait(upTo: .seconds(30)) { QueueTests.records(world).count == 2 }, "\(world.log("a")) \(world.log("b"))")
        let together = started.duration(to: .now)
        #expect(QueueTests.records(world).values.allSatisfy { $0 == "succeeded" })
        _ = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") == 2 }
        #expect(try await QueueTests.ranBy(db, prefix: "file:two") == ["a": 1, "b": 1], "one transfer on each watcher")
        // 6 MiB at 2 MiB/s: 3 s, less what bursts let through at the start; per watcher it was 1.5 s.
        #expect(together > .milliseconds(2400), "two watchers at --limit-rate 2M moved 6 MiB in \(together)")
        #expect(together < .seconds(9), "\(together)")

        let one = world.w.write("one.jsonl", #"{"kind": "file", "name": "alone", "url": "\#(world.base)/ranged/\#(4 * mib)", "timeout": 60}"# + "\n")
        let alone = ContinuousClock.now
        #expect(try await world.w.run(["submit", "--queue", db.url, one] + kinds).status == 0)
        #expect(await world.wait(upTo: .seconds(30)) { QueueTests.records(world).count == 3 })
        let took = alone.duration(to: .now)
        // 4 MiB at 2 MiB/s: 2 s; had the rate been split between the two watchers, 4 s.
        #expect(took > .milliseconds(1500) && took < .milliseconds(3400), "one watcher alone moved 4 MiB in \(took)")
        let reservations = try await db.psql("SELECT count(*) FROM runner.bandwidth")
        #expect(reservations.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "one bucket for --limit-rate: \(reservations)")
        for watcher in [a, b] { #expect(await QueueTests.stop(watcher, world) == 0) }
    }
}
