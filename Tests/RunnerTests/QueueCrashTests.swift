import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// A queue's fleet when watchers are killed mid-work, through the binary against a real
/// PostgreSQL: in a job, among children, in a hook, across a download. Nothing is lost, nothing
/// runs twice. (QueueRestartTests: the database restarted, a watcher stopped, jobs abandoned.)
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct QueueCrashTests {
    @Test func aWatcherKilledWhileRunningHasItsJobsRunByAnotherAfterTheLease() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let file = world.w.write("slow.jsonl", QueueTests.jobs(world, 4, prefix: "q:slow", delay: 4000))
        let first = try QueueTests.startWatcher(world, db, "first", lease: 2, ["--concurrency", "4"])
        defer { if first.isRunning { first.terminate() } }
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let running = await world.wait(upTo: .seconds(20)) {
            world.w.server.arrivals(pathPrefix: "/entries/").count == 4
        }
        #expect(running)
        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))
        // Once their lease ended, status says their watcher left them.
        let left = try await QueueTests.status(world, db, upTo: .seconds(10)) { $0["abandoned"]?.intValue == 4 }
        #expect(left["abandoned"]?.intValue == 4, "\(left)")
        let second = try QueueTests.startWatcher(world, db, "second", lease: 2)
        defer { if second.isRunning { second.terminate() } }
        let taken = try await QueueTests.status(world, db, upTo: .seconds(20)) { $0["reclaimed"]?.intValue == 4 }
        #expect(taken["reclaimed"]?.intValue == 4 && taken["abandoned"]?.intValue == 0, "running again on the second: \(taken)")
        let recovered = await world.wait(upTo: .seconds(40)) { QueueTests.records(world).count == 4 }
        #expect(recovered, "\(QueueTests.records(world)) \(world.log("second"))")
        #expect(QueueTests.records(world).values.allSatisfy { $0 == "succeeded" })
        // A record is on disk before it is in the queue: the rows follow within moments.
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") == 4 }
        #expect(status["done"]?["count"]?.intValue == 4 && status["running"]?.arrayValue?.isEmpty == true, "\(status)")
        let ranBy = try await QueueTests.ranBy(db)
        #expect(ranBy.count == 1 && QueueTests.name(second, in: ranBy) != nil, "the killed watcher ended none: \(ranBy)")
        #expect(await QueueTests.stop(second, world) == 0)
    }

    /// A list's children are queue jobs: both watchers run them, `status` shows the parent's
    /// progress, a watcher killed among them loses nothing and no ended child runs again, and
    /// the parent's record is completed with their counts in the shared output.
    @Test func aListsChildrenRunOnEveryWatcherAndAKilledOneLosesNone() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let first = try QueueTests.startWatcher(world, db, "first", lease: 2, ["--concurrency", "2"])
        defer { if first.isRunning { first.terminate() } }
        let second = try QueueTests.startWatcher(world, db, "second", lease: 2, ["--concurrency", "2"])
        defer { if second.isRunning { second.terminate() } }
        #expect(await world.wait(upTo: .seconds(20)) { ["first", "second"].allSatisfy { world.log($0).contains("watching the queue") } })
        let file = world.w.write(
            "catalog.jsonl", #"{"kind": "image-list", "key": "q:catalog", "url": "\#(world.base)/list/16?image=delay%3D300", "timeout": 20}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)

        // Some children ended: the parent waits, and says how far it got.
        let progress = try await QueueTests.status(world, db, upTo: .seconds(30)) { QueueTests.count($0, "done") >= 4 }
        let parents = progress["waiting"]?["parents"]?.arrayValue ?? []
        #expect(parents.first?["key"] == .string("q:catalog") && parents.first?["total"] == JSONValue(16), "\(progress)")
        let text = try await world.w.run(["status", "--queue", db.url])
        #expect(text.stdout.contains("waiting:  1 parent for its children") && text.stdout.contains("/16 children ended"), "\(text.stdout)")
        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))

        let done = try await QueueTests.status(world, db, upTo: .seconds(60)) { QueueTests.count($0, "done") == 17 }
        #expect(QueueTests.count(done, "done") == 17 && done["waiting"]?["count"] == JSONValue(0), "\(done)")
        // The children the killed watcher held run again: those it was running, and those whose
        // files it had written but whose ends it had not yet stored in the queue (they end
        // `notModified` on the second run: their payload is on the shared output).
        let rerun = try #require(Int(try await db.psql("SELECT count(*) FROM runner.jobs WHERE parent_id IS NOT NULL AND claims > 1")
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(world.w.root)/out/results/\(OutputStore.fileName(forKey: "q:catalog")).json"))))
        let children = record["details"]?["children"]
        let succeeded = children?["succeeded"]?.intValue ?? 0, notModified = children?["notModified"]?.intValue ?? 0
        #expect(succeeded + notModified == 16 && notModified <= rerun, "\(rerun) run again: \(record)")
        // The run logs end the parent with the same counts.
        let runs = "\(world.w.root)/out/runs"
        let lines = ((try? FileManager.default.contentsOfDirectory(atPath: runs)) ?? []).flatMap { name in
            ((try? String(contentsOfFile: "\(runs)/\(name)", encoding: .utf8)) ?? "").split(separator: "\n")
        }.compactMap { try? JSONParser.parse(Array($0.utf8)) }.filter { $0["key"] == .string("q:catalog") }
        #expect(lines.contains { $0["details"]?["children"] == children }, "\(lines)")
        // Each child fetched once, but those the killed watcher held, once more each at most.
        let fetched = world.w.server.arrivals(pathPrefix: "/images/").count
        #expect(fetched >= 16 && fetched <= 16 + rerun, "only the killed watcher's children ran again: \(fetched) fetches, \(rerun) claimed again")
        let ranBy = try await QueueTests.ranBy(db)
        #expect(QueueTests.name(first, in: ranBy).map { ranBy[$0] ?? 0 } ?? 0 > 0, "the killed watcher had ended some: \(ranBy)")
        #expect(await QueueTests.stop(second, world) == 0)
    }

    /// Hooks are part of the job: it is done only once they ended; a watcher killed while they
    /// ran takes them with it, and another runs them with the job's own status, without
    /// running the job again.
    @Test func aWatcherKilledInAHookLeavesItToAnotherWithTheJobsOwnStatus() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let root = world.w.root
        let first = try QueueTests.startWatcher(world, db, "first", lease: 2, ["--on-finish", #"echo $$ > "\#(root)/hook.pid"; exec sleep 300"#])
        defer { if first.isRunning { first.terminate() } }
        let file = world.w.write("hooked.jsonl", QueueTests.jobs(world, 1, prefix: "q:hooked", delay: 0))
        #expect(try await world.w.run(["submit", "--queue", db.url, file]).status == 0)
        let pidFile = "\(root)/hook.pid"
        #expect(await world.wait(upTo: .seconds(20)) { ExecutableKindTests.writtenPid(atPath: pidFile) != nil }, "\(world.log("first"))")
        let pid = try #require(ExecutableKindTests.writtenPid(atPath: pidFile))
        let running = try await QueueTests.status(world, db)
        #expect(QueueTests.count(running, "done") == 0 && running["running"]?.arrayValue?.count == 1, "not done while its hook runs: \(running)")

        kill(first.processIdentifier, SIGKILL)
        _ = await world.exit(of: first, upTo: .seconds(5))
        let died = await world.wait(upTo: .seconds(5)) { !ExecutableKindTests.alive(pid) }
        #expect(died, "the hook died with its watcher")
        if !died { kill(pid, SIGKILL) }

        let second = try QueueTests.startWatcher(world, db, "second", lease: 2, ["--on-finish", #"echo "$RUNNER_KEY $RUNNER_STATUS" >> "\#(root)/ran.log""#])
        defer { if second.isRunning { second.terminate() } }
        let ran = await world.wait(upTo: .seconds(30)) { (try? String(contentsOfFile: "\(root)/ran.log", encoding: .utf8)) == "q:hooked0 succeeded\n" }
        #expect(ran, "\((try? String(contentsOfFile: "\(root)/ran.log", encoding: .utf8)) ?? "") \(world.log("second"))")
        let status = try await QueueTests.status(world, db, upTo: .seconds(10)) { QueueTests.count($0, "done") == 1 }
        #expect(QueueTests.count(status, "done") == 1, "\(status)")
        #expect(world.w.server.arrivals(pathPrefix: "/entries/").count == 1, "the job ran once")
        #expect(world.log("second").contains("q:hooked0: its --on-finish hooks, left by a runner that stopped, run here"), "\(world.log("second"))")
        // The claim for its hooks was no abandon of the job, and kept the job's own times.
        let row = try await db.psql("SELECT claims || ' ' || hook_claims || ' ' || (finished_at >= started_at) FROM runner.jobs WHERE key = 'q:hooked0'")
        #expect(row.trimmingCharacters(in: .whitespacesAndNewlines) == "1 1 true", "claims, hook claims, finished after it started: \(row)")
        #expect(await QueueTests.stop(second, world) == 0)
    }

    /// A large file whose watchers are killed three times, each after its partial grew and was
    /// synced, is not "abandoned by 3 runners": each of those claims made durable progress, and
    /// the fourth watcher finishes it.
    @Test func aDownloadThatProgressesAcrossThreeKillsIsNotAbandoned() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        RangeResumeTests.writeKind(world.w)
        let kinds = ["--kinds", "\(world.w.root)/k"]
        let size = 60_000_000
        let file = world.w.write(
            "big.jsonl", #"{"kind": "file", "name": "huge", "url": "\#(world.base)/ranged/\#(size)", "timeout": 120}"# + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, file] + kinds).status == 0)
        func credits() async -> Int {
            Int(((try? await db.psql("SELECT credits FROM runner.jobs WHERE key = 'file:huge'")) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        for round in 1...3 {
            let watcher = try QueueTests.startWatcher(world, db, "w\(round)", lease: 2, ["--limit-rate", "12M"] + kinds)
            defer { if watcher.isRunning { watcher.terminate() } }
            // Killed once its claim was credited: a checkpoint of its partial was synced.
            let credited = await world.wait(upTo: .seconds(60)) { await credits() >= round }
            let now = await credits()
            #expect(credited, "round \(round): \(now) \(world.log("w\(round)"))")
            kill(watcher.processIdentifier, SIGKILL)
            _ = await world.exit(of: watcher, upTo: .seconds(5))
        }
        let last = try QueueTests.startWatcher(world, db, "w4", lease: 2, kinds)
        defer { if last.isRunning { last.terminate() } }
        #expect(await world.wait(upTo: .seconds(60)) { QueueTests.records(world)["file:huge"] == "succeeded" }, "\(world.log("w4"))")
        // Four claims, the three killed ones credited (the fourth may be too: its checkpoints).
        // The row is ended just after the record is on disk: asked until it is.
        var row = ""
        _ = await world.wait(upTo: .seconds(10)) {
            row = ((try? await db.psql("SELECT status || ' ' || claims || ' ' || (credits >= 3) FROM runner.jobs WHERE key = 'file:huge'")) ?? "")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            return row.hasPrefix("succeeded")
        }
        #expect(row == "succeeded 4 true", "\(row)")
        #expect(await QueueTests.stop(last, world) == 0)
    }
}
