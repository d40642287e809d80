import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// Schedules through the binary against a real PostgreSQL: three watchers fire a schedule of
/// `--every 2s`, one killed with SIGKILL and the database restarted meanwhile; every tick is one
/// batch, none twice, none missing. Then all stopped for longer than a lease and one back: the
/// missed ticks are one batch (`--catch-up one`). `remove` ends it.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct ScheduleQueueTests {
    /// The ticks fired: seconds since 1970, how many ticks each stands for, its batch.
    static func ticks(_ db: PostgresServer) async throws -> [(at: Int, covers: Int, batch: String)] {
        try await db.psql("SELECT extract(epoch FROM tick)::bigint || ' ' || covers || ' ' || batch FROM runner.ticks ORDER BY tick")
            .split(separator: "\n").compactMap { line in
                let words = line.split(separator: " ")
                guard words.count == 3, let at = Int(words[0]), let covers = Int(words[1]) else { return nil }
                return (at, covers, String(words[2]))
            }
    }

    /// Ten watchers started at once on a schedule of every second: each tick is one batch,
    /// none twice, none missing.
    @Test func tenWatchersStartedAtOnceFireEachTickOnce() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("tick.jsonl", QueueTests.jobs(world, 1, prefix: "s:ten", delay: 0))
        #expect(try await world.w.run(["schedule", "add", "ten", "--every", "1s", file, "--queue", db.url]).status == 0)
        let watchers = try (1...10).map { try QueueTests.startWatcher(world, db, "ten\($0)", lease: 10) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        #expect(await world.wait(upTo: .seconds(30)) { ((try? await Self.ticks(db)) ?? []).count >= 6 })
        for watcher in watchers { kill(watcher.processIdentifier, SIGTERM) }
        for watcher in watchers { #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0) }
        let ticks = try await Self.ticks(db)
        #expect(ticks.allSatisfy { $0.covers == 1 }, "\(ticks)")
        #expect(zip(ticks, ticks.dropFirst()).allSatisfy { $1.at - $0.at == 1 }, "no tick twice, none missing: \(ticks.map(\.at))")
        let batches = try await db.psql("SELECT count(DISTINCT batch) || ' ' || count(*) FROM runner.jobs").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(batches == "\(ticks.count) \(ticks.count)", "one batch of one job a tick: \(batches)")
    }

    @Test func watchersFireEachTickOnceThroughKillsRestartsAndAStopOfTheWholeFleet() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("tick.jsonl", QueueTests.jobs(world, 1, prefix: "s:tick", delay: 0))
        // A bad expression is one line saying which field and why, exit 2.
        let bad = try await world.w.run(["schedule", "add", "bad", "--cron", "61 * * * *", file, "--queue", db.url])
        #expect(bad.status == 2 && bad.stderr == "Error: --cron \"61 * * * *\": minute: 61 is not in 0-59\n", "\(bad)")
        let added = try await world.w.run(["schedule", "add", "tick", "--every", "2s", file, "--queue", db.url])
        #expect(added.status == 0 && added.stdout.hasPrefix("schedule tick in "), "\(added)")
        let again = try await world.w.run(["schedule", "add", "tick", "--every", "2s", file, "--queue", db.url])
        #expect(again.status == 2 && again.stderr.contains("exists already"), "\(again)")

        // Three watchers, a lease of 10 s (a fleet silent that long has missed its ticks).
        var watchers = try (1...3).map { try QueueTests.startWatcher(world, db, "watcher\($0)", lease: 10) }
        defer { watchers.forEach { if $0.isRunning { $0.terminate() } } }
        #expect(await world.wait(upTo: .seconds(20)) { (1...3).allSatisfy { world.log("watcher\($0)").contains("watching the queue") } })
        #expect(await world.wait(upTo: .seconds(20)) { ((try? await Self.ticks(db)) ?? []).count >= 3 })
        kill(watchers[0].processIdentifier, SIGKILL)
        _ = await world.exit(of: watchers[0], upTo: .seconds(5))
        #expect(await world.wait(upTo: .seconds(20)) { ((try? await Self.ticks(db)) ?? []).count >= 6 })
        try await db.restart()
        #expect(await world.wait(upTo: .seconds(30)) { ((try? await Self.ticks(db)) ?? []).count >= 10 })
        for watcher in watchers[1...] { #expect(await QueueTests.stop(watcher, world) == 0) }
        let running = try await Self.ticks(db)
        // Every 2 s from the first, each on its own, each one batch of one job.
        #expect(running.map(\.covers).allSatisfy { $0 == 1 }, "\(running)")
        #expect(zip(running, running.dropFirst()).allSatisfy { $1.at - $0.at == 2 }, "no tick twice, none missing: \(running.map(\.at))")
        let batches = try await db.psql("SELECT batch || ' ' || count(*) FROM runner.jobs GROUP BY batch ORDER BY batch").split(separator: "\n")
        #expect(batches.count == running.count && batches.allSatisfy { $0.hasSuffix(" 1") }, "\(batches)")
        #expect(Set(running.map(\.batch)) == Set(batches.map { String($0.split(separator: " ")[0]) }))

        // The whole fleet stopped for longer than its lease, then one back: one batch for the
        // ticks missed, then every tick again.
        try await Task.sleep(for: .seconds(13))
        let events = "\(world.w.root)/back-events.jsonl"
        watchers.append(try QueueTests.startWatcher(world, db, "back", lease: 10, ["--events", events]))
        #expect(await world.wait(upTo: .seconds(20)) { ((try? await Self.ticks(db)) ?? []).count >= running.count + 3 })
        let after = try await Self.ticks(db)
        let caughtUp = after[running.count]
        #expect(caughtUp.covers >= 6 && caughtUp.at - running.last!.at == 2 * caughtUp.covers, "one batch for the missed ticks: \(after)")
        #expect(after[(running.count + 1)...].allSatisfy { $0.covers == 1 }, "\(after)")
        #expect(world.log("back").contains("runner: schedule tick: tick "), "\(world.log("back"))")

        // The schedule and its batches, as people see them.
        let list = try await world.w.run(["schedule", "list", "--queue", db.url])
        #expect(list.status == 0 && list.stdout.hasPrefix("tick: every 2s, catch-up one, 1 job of "), "\(list)")
        #expect(list.stdout.contains("  next:  ") && list.stdout.contains("(batch "), "\(list)")
        let status = try await world.w.run(["status", "--queue", db.url])
        #expect(status.stdout.contains("(schedule tick)"), "\(status)")
        let json = try JSONParser.parse(try await world.w.run(["status", "--queue", db.url, "--json"]).stdout)
        #expect(json["batches"]?.arrayValue?.first?["schedule"] == .string("tick"), "\(json)")
        let lines = ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
        #expect(lines.contains { $0["event"] == .string("scheduled") && $0["schedule"] == .string("tick") && $0["batch"]?.stringValue != nil }, "\(lines.prefix(3))")
        let batch = try await world.w.run(["status", "--queue", db.url, "--batch", after.last!.batch])
        #expect(batch.stdout.hasPrefix("batch \(after.last!.batch) in ") && batch.stdout.contains(" (schedule tick): 1 job"), "\(batch)")

        // Removed: no tick more.
        let removed = try await world.w.run(["schedule", "remove", "tick", "--queue", db.url])
        #expect(removed.status == 0, "\(removed)")
        try await Task.sleep(for: .seconds(1))
        let atRemoval = try await Self.ticks(db).count
        try await Task.sleep(for: .seconds(5))
        #expect(try await Self.ticks(db).count == atRemoval)
        let gone = try await world.w.run(["schedule", "remove", "tick", "--queue", db.url])
        #expect(gone.status == 1, "\(gone)")
        #expect(await QueueTests.stop(watchers.last!, world) == 0)
    }
}

/// The libpq store keeps the contract the in-memory store keeps, with leases of 1 s on the real
/// clock: renewed within half a lease they hold, left alone they end. It runs alone, as the
/// schedules' ticks do, so that a loaded machine does not stretch the steps between.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct QueueLeaseTests {
    /// The libpq store keeps the contract the in-memory store keeps (QueueFeedTests runs the
    /// feed's logic on that one); a lease of 1 s, on the real clock.
    @Test func theLibpqStoreKeepsTheQueuesContract() async throws {
        let db = try await PostgresServer()
        let first = try await PostgresQueueStore.connect(url: db.url, lease: .seconds(1))
        let second = try await PostgresQueueStore.connect(url: db.url, lease: .seconds(1))
        defer {
            first.close()
            second.close()
        }
        let submitter = try JobQueue(url: db.url)
        let contract = QueueStoreContract(
            first: first, second: second, submit: { try submitter.submit($0) }, pass: { try? await Task.sleep(for: $0) })
        try await contract.check()
    }

    /// The server never compiles the queue's statements (JIT): a claim on a table of tens of
    /// thousands of rows took 35 ms to compile and 2 to run.
    @Test func everyConnectionRunsWithoutJIT() async throws {
        let db = try await PostgresServer()
        let queue = try JobQueue(url: db.url)
        #expect(try queue.connection.query("SHOW jit").first?.first == "off")
        #expect(try queue.connection.query("SHOW client_min_messages").first?.first == "warning")
    }

    /// A live page's calls, through the page's own connection and thread.
    @Test func theLibpqStoreAnswersAPagesCalls() async throws {
        let db = try await PostgresServer()
        let page = try await PostgresQueueStore.connect(url: db.url)
        let watcher = try await PostgresQueueStore.connect(url: db.url)
        defer {
            page.close()
            watcher.close()
        }
        try await QueueProducingContract(page: page, watcher: watcher).check()
    }
}
