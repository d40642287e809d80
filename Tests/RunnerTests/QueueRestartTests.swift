import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// A queue when its database or a watcher goes away and comes back, through the binary against a
/// real PostgreSQL: the database restarted while jobs run, a watcher stopped in a download and
/// another resuming it, a job whose watchers keep dying, a row a dead watcher left with its hooks
/// pending. Nothing is lost, nothing runs twice. (QueueCrashTests kills watchers mid-work.)
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct QueueRestartTests {
    @Test func theDatabaseRestartedWhileJobsRunLosesNoRecordAndRunsNoJobTwice() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try QueueTests.startWatcher(world, db, "out", ["--concurrency", "4"])
        defer { if watcher.isRunning { watcher.terminate() } }
        let file = world.w.write("restart.jsonl", QueueTests.jobs(world, 20, prefix: "q:restart", delay: 600))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count >= 4 })
        try await db.restart()
        let status = try await QueueTests.status(world, db, upTo: .seconds(30)) { QueueTests.count($0, "done") == 20 }
        #expect(status["done"]?["count"]?.intValue == 20, "every record in the database: \(status) \(world.log("out"))")
        #expect(QueueTests.records(world).count == 20, "and on disk")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 20, "none fetched twice")
        let log = world.log("out")
        #expect(log.contains("notices stopped") || log.contains("could not be read") || log.contains("could not be stored"), "the outage is said: \(log)")
        #expect(log.split(separator: "\n").allSatisfy { $0.hasPrefix("runner: ") }, "every line in the runner's words, libpq's too: \(log)")
        // One line once the jobs of the file had all ended: the 20.
        let ended = {
            world.log("out").split(separator: "\n").filter { $0.hasPrefix("runner: restart.jsonl: its jobs ended; ") }
                .compactMap { line in line.split(separator: " ").last.flatMap { _ in Int(line.split(separator: "; ").last?.split(separator: " ").first ?? "") } }
                .reduce(0, +)
        }
        #expect(await world.wait(upTo: .seconds(10)) { ended() == 20 }, "\(world.log("out"))")
        #expect(world.log("out").components(separatedBy: "restart.jsonl: its jobs ended").count == 2, "one line: \(world.log("out"))")
        #expect(await QueueTests.stop(watcher, world) == 0)
    }

    /// SIGTERM of a watcher (a restart, a deploy) is not the end of the download it runs: after
    /// its grace the job goes back to the queue with its partial kept, another watcher resumes
    /// it, and no row ends `cancelled`.
    @Test func sigtermHandsARunningDownloadBackAndAnotherWatcherResumesIt() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        RangeResumeTests.writeKind(world.w)
        let kinds = ["--kinds", "\(world.w.root)/k"]
        let first = try QueueTests.startWatcher(world, db, "first", ["--grace", "1", "--limit-rate", "300K"] + kinds)
        defer { if first.isRunning { first.terminate() } }
        let file = world.w.write(
            "big.jsonl", #"{"kind": "file", "name": "big", "url": "\#(world.base)/ranged/\#(RangeResumeTests.size)", "timeout": 60}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file] + kinds).status == 0)
        func partialBytes() -> Int {
            let folder = "\(world.w.root)/out/files"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            return names.filter { $0.hasPrefix(PartialDownload.prefix) && !$0.hasSuffix(".json") }
                .compactMap { (try? FileManager.default.attributesOfItem(atPath: "\(folder)/\($0)"))?[.size] as? Int }.max() ?? 0
        }
        #expect(await world.wait(upTo: .seconds(30)) { partialBytes() > 1_300_000 }, "\(world.log("first"))")
        kill(first.processIdentifier, SIGTERM)
        #expect(await world.exit(of: first, upTo: .seconds(20)) == 0)
        let state = try await db.psql("SELECT state || ' ' || coalesce(status, '-') FROM runner.jobs")
        #expect(state.trimmingCharacters(in: .whitespacesAndNewlines) == "queued -", "handed back, not ended: \(state)")
        #expect(partialBytes() > 1_000_000, "its partial is kept")

        let second = try QueueTests.startWatcher(world, db, "second", kinds)
        defer { if second.isRunning { second.terminate() } }
        #expect(await world.wait(upTo: .seconds(30)) { QueueTests.records(world)["file:big"] == "succeeded" }, "\(world.log("second"))")
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(world.w.root)/out/results/\(OutputStore.fileName(forKey: "file:big")).json"))))
        #expect((record["resumedFrom"]?.intValue ?? 0) > 1_000_000, "the second watcher resumed: \(record)")
        #expect(record["sha256"]?.stringValue == SHA256.hex(RangeResumeTests.file()), "\(record)")
        let rows = try await db.psql("SELECT count(*) FROM runner.jobs WHERE status = 'cancelled'")
        #expect(rows.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(await QueueTests.stop(second, world) == 0)
    }

    @Test func aJobAbandonedThreeTimesEndsFailed() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("crash.jsonl", QueueTests.jobs(world, 1, prefix: "q:crash", delay: 30_000))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        for round in 1...3 {
            let watcher = try QueueTests.startWatcher(world, db, "out\(round)", lease: 1)
            defer { if watcher.isRunning { watcher.terminate() } }
            #expect(await world.wait(upTo: .seconds(20)) { world.w.server.arrivals(pathPrefix: "/entries/").count == round }, "round \(round)")
            kill(watcher.processIdentifier, SIGKILL)
            _ = await world.exit(of: watcher, upTo: .seconds(5))
        }
        let last = try QueueTests.startWatcher(world, db, "last", lease: 1)
        defer { if last.isRunning { last.terminate() } }
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "failed") == 1 }
        #expect(status["failed"]?["count"]?.intValue == 1, "\(status)")
        #expect(status["failed"]?["latest"]?["reason"]?.stringValue == "abandoned by 3 runners", "\(status)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 3, "not run a fourth time")
        #expect(await QueueTests.stop(last, world) == 0)
    }

    /// A row left in the queue as "ended, hooks pending" (as one a watcher dies with) whose record
    /// names an output outside the output folder: the hook runs without a path, and says why.
    @Test func aHookOfARecordLeftInTheQueueGetsAPathOnlyInsideTheOutput() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = try QueueTests.startWatcher(world, db, "first")
        #expect(await world.wait(upTo: .seconds(10)) { world.log("first").contains("watching the queue") })
        #expect(await QueueTests.stop(first, world) == 0)
        let logs = (try? FileManager.default.contentsOfDirectory(atPath: "\(world.w.root)/out/runs")) ?? []
        #expect(logs.isEmpty, "a watcher that ended no job leaves no run log: \(logs)")
        let record = #"{"key":"h:forged","kind":"entry","status":"succeeded","output":"../elsewhere/secret.txt","attempts":1,"#
            + #""startedAt":"2026-11-27T10:00:00.000Z","finishedAt":"2026-11-27T10:00:00.010Z"}"#
        _ = try await db.psql(
            "INSERT INTO runner.jobs (key, kind, job, file, state, status, record, claims, runner, lease_until, started_at) "
                + "VALUES ('h:forged', 'entry', '{}', 'x.jsonl', 'running', 'succeeded', '\(record)', 1, 'gone-1', now() - interval '1 minute', now())")
        let events = "\(world.w.root)/events.jsonl"
        let hooked = try QueueTests.startWatcher(
            world, db, "hooked", ["--on-finish", #"printf '%s|%s\n' "$RUNNER_KEY" "$RUNNER_OUTPUT" >> "# + "\(world.w.root)/hook.log", "--events", events])
        defer { if hooked.isRunning { hooked.terminate() } }
        let log = "\(world.w.root)/hook.log"
        // The shell makes the file before printf writes its line: wait for the line.
        #expect(await world.wait(upTo: .seconds(20)) { world.text(log).hasSuffix("\n") }, "\(world.log("hooked"))")
        #expect(world.text(log) == "h:forged|\n", "no path outside the output")
        #expect(world.log("hooked").contains("gets no RUNNER_OUTPUT"), "\(world.log("hooked"))")
        #expect(await world.wait(upTo: .seconds(5)) { ((try? String(contentsOfFile: events, encoding: .utf8)) ?? "").contains(#""notice":"#) })
        #expect(await QueueTests.stop(hooked, world) == 0)
    }
}
