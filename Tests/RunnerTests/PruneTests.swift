import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner prune` and `keepStale`: what a key that became 404 leaves behind.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct PruneTests {
    static func jobs(_ w: Workspace, secondID: String, keepStale: Bool = false) -> String {
        let stale = keepStale ? #", "keepStale": true"# : ""
        return #"{"kind": "entry", "key": "first", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json"}"# + "\n"
            + #"{"kind": "entry", "key": "second", "id": "\#(secondID)", "url": "\#(w.base)/entries/{id}.json"\#(stale)}"# + "\n"
    }

    /// Every payload a minute and a half old, so prune does not take them for a watcher's
    /// payload whose record is on its way.
    static func age(_ w: Workspace) {
        var times = [timespec(tv_sec: time(nil) - 90, tv_nsec: 0), timespec(tv_sec: time(nil) - 90, tv_nsec: 0)]
        for file in w.outputFiles() where !file.hasPrefix("results/") && !file.hasPrefix("runs/") {
            utimensat(AT_FDCWD, "\(w.out)/\(file)", &times, 0)
        }
    }

    @Test func aPayloadNoRecordPointsToIsPrunedAndSaysHowManyBytes() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, secondID: "9e.A.1"))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let old = try #require(try w.record("second")["output"]?.stringValue)
        let size = try #require(w.payload(old)?.count)
        // The entry is gone now: its record points at nothing, the payload stays behind.
        w.write("jobs.jsonl", Self.jobs(w, secondID: "missing"))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 1)
        #expect(try w.record("second")["output"] == .null)
        #expect(w.payload(old) != nil)

        let young = try await w.run(["prune", "out"])
        #expect(young.stdout.contains("removed 0 payloads") && young.stdout.contains("left 1 written in the last minute"), "\(young.stdout)")
        Self.age(w)
        let dry = try await w.run(["prune", "out", "--dry-run"])
        #expect(dry.status == 0)
        #expect(dry.stdout.contains("  \(old)\n") && dry.stdout.contains("would remove 1 payload no record points to (\(size) bytes)"), "\(dry.stdout)")
        #expect(w.payload(old) != nil, "a dry run removes nothing")
        let done = try await w.run(["prune", "out"])
        #expect(done.stdout.contains("removed 1 payload no record points to; \(size) bytes freed"), "\(done.stdout)")
        #expect(w.payload(old) == nil)
        #expect(try w.record("first")["output"]?.stringValue.flatMap { w.payload($0) } != nil, "a payload a record points to stays")
        #expect(w.outputFiles().contains { $0.hasPrefix("results/") } && w.outputFiles().contains { $0.hasPrefix("runs/") })
        let elsewhere = try await w.run(["prune", "no-such-out"])
        #expect(elsewhere.status == 2 && elsewhere.stderr.contains("there is no output directory at no-such-out"), "\(elsewhere.stderr)")
    }

    @Test func keepStaleKeepsA404dKeysLastPayloadPointedAtAsStale() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, secondID: "9e.A.1", keepStale: true))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let old = try #require(try w.record("second")["output"]?.stringValue)
        w.write("jobs.jsonl", Self.jobs(w, secondID: "missing", keepStale: true))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 1)
        let record = try w.record("second")
        #expect(record["status"]?.stringValue == "notFound" && record["stale"] == .bool(true), "\(record)")
        #expect(record["output"]?.stringValue == old)
        Self.age(w)
        let pruned = try await w.run(["prune", "out"])
        #expect(pruned.stdout.contains("removed 0 payloads"), "\(pruned.stdout)")
        #expect(w.payload(old) != nil)
    }

    /// A key with a good payload whose next download is cancelled mid-transfer (SIGTERM, as
    /// `runner cancel` does to a watcher's task) keeps it: the record of the cancel points at it
    /// as stale, and `prune` neither lists nor removes it.
    @Test func aCancelledDownloadKeepsTheGoodPayloadAndPruneLeavesIt() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, secondID: "9e.A.1"))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let good = try w.record("first")
        let old = try #require(good["output"]?.stringValue)
        let bytes = try #require(w.payload(old))

        // The same key, a new version (another entry, so no 304), its body trickling one byte
        // every 100 ms: cancelled on its way.
        let slow = #"{"kind": "entry", "key": "first", "id": "imgly.A.2", "url": "\#(w.base)/entries/{id}.json?trickle=100&trickleAfter=10", "timeout": 120}"#
        w.write("slow.jsonl", slow + "\n")
        let cancelled = try await w.run(["run", "slow.jsonl"]) { process in
            await eventually("the second download started", limit: .seconds(30)) { w.server.requestCount(path: "/entries/imgly.A.2.json") >= 1 }
            try? await Task.sleep(for: .milliseconds(300))
            process.signal(SIGTERM)
        }
        #expect(cancelled.status == 143, "\(cancelled.stdout)\(cancelled.stderr)")
        let record = try w.record("first")
        #expect(record["status"] == .string("cancelled") && record["stale"] == .bool(true), "\(record)")
        #expect(record["output"]?.stringValue == old && record["sha256"] == good["sha256"] && record["validators"] == good["validators"], "\(record)")
        #expect(w.payload(old) == bytes, "the good payload is untouched")
        #expect(w.leftovers().isEmpty)

        Self.age(w)
        let dry = try await w.run(["prune", "out", "--dry-run"])
        #expect(dry.status == 0 && !dry.stdout.contains(old) && dry.stdout.contains("would remove 0 payloads"), "\(dry.stdout)")
        #expect(try await w.run(["prune", "out"]).status == 0)
        #expect(w.payload(old) == bytes)
    }

    /// The same through a watcher and `runner cancel KEY`: the cancelled download's record
    /// points at the good payload as stale, and `prune --dry-run` does not list it.
    @Test func runnerCancelOfAWatchersDownloadKeepsTheGoodPayload() async throws {
        let s = try SpoolWorld()
        let w = s.w
        w.write("jobs.jsonl", Self.jobs(w, secondID: "9e.A.1"))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let good = try w.record("first")
        let old = try #require(good["output"]?.stringValue)
        let bytes = try #require(w.payload(old))

        try s.spool.makeFolders()
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        try s.drop("slow.json", #"{"kind": "entry", "key": "first", "id": "imgly.A.2", "url": "\#(w.base)/entries/{id}.json?trickle=100&trickleAfter=10", "timeout": 120}"#)
        #expect(await s.wait(upTo: .seconds(30)) { w.server.requestCount(path: "/entries/imgly.A.2.json") >= 1 }, "\(s.log())")
        let cancel = try await w.run(["cancel", "first", "--spool", s.spool.root])
        #expect(cancel.status == 0 && cancel.stdout.contains("its running task"), "\(cancel.stdout)\(cancel.stderr)")
        #expect(await s.wait(upTo: .seconds(30)) { s.jobFiles(s.spool.failed) == ["slow.json"] }, "\(s.log())")
        watcher.signal(SIGTERM)
        #expect(await s.exit(of: watcher, upTo: .seconds(30)) != nil)

        let record = try w.record("first")
        #expect(record["status"] == .string("cancelled") && record["stale"] == .bool(true), "\(record)")
        #expect(record["output"]?.stringValue == old && record["sha256"] == good["sha256"], "\(record)")
        #expect(w.payload(old) == bytes, "the good payload is untouched")
        Self.age(w)
        let dry = try await w.run(["prune", "out", "--dry-run"])
        #expect(dry.status == 0 && !dry.stdout.contains(old) && dry.stdout.contains("would remove 0 payloads"), "\(dry.stdout)\(dry.stderr)")
    }

    /// A record of a cancel that names no payload (as a runner wrote before cancels kept pointing
    /// at the last good one) does not orphan it: `prune` keeps what the key's last good line in
    /// the run logs names. Without the run logs nothing names it any more.
    @Test func anOlderRecordOfACancelWithoutOutputStillKeepsTheGoodPayload() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, secondID: "9e.A.1"))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let old = try #require(try w.record("first")["output"]?.stringValue)
        let older = #"{"key": "first", "kind": "entry", "status": "cancelled", "output": null, "error": "cancelled"}"#
        w.write("out/results/\(OutputStore.fileName(forKey: "first")).json", older + "\n")
        Self.age(w)

        let dry = try await w.run(["prune", "out", "--dry-run"])
        #expect(dry.status == 0 && !dry.stdout.contains(old) && dry.stdout.contains("would remove 0 payloads"), "\(dry.stdout)")
        #expect(try await w.run(["prune", "out"]).status == 0)
        #expect(w.payload(old) != nil)

        try FileManager.default.removeItem(atPath: "\(w.out)/runs")
        let gone = try await w.run(["prune", "out", "--dry-run"])
        #expect(gone.stdout.contains("  \(old)\n"), "\(gone.stdout)")
    }

    /// A link planted where a payload folder is, to a folder outside holding old files, and a
    /// record naming a payload through it: `prune` and `forget` leave the outside untouched.
    @Test func aLinkPlantedWhereAPayloadFolderIsLeavesTheOutsideUntouched() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, secondID: "9e.A.1"))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let outside = "\(w.root)/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        for name in ["a.json", "b.json"] { w.write("outside/\(name)", "theirs") }
        #expect(symlink(outside, "\(w.out)/linked") == 0)
        #expect(symlink(outside + "/a.json", "\(w.out)/entries/a.json") == 0)
        let planted = #"{"key": "planted", "kind": "entry", "status": "succeeded", "output": "linked/b.json"}"#
        w.write("out/results/\(OutputStore.fileName(forKey: "planted")).json", planted + "\n")
        Self.age(w)
        var times = [timespec(tv_sec: time(nil) - 90, tv_nsec: 0), timespec(tv_sec: time(nil) - 90, tv_nsec: 0)]
        for name in ["a.json", "b.json"] { utimensat(AT_FDCWD, "\(outside)/\(name)", &times, 0) }

        let pruned = try await w.run(["prune", "out"])
        #expect(pruned.status == 0 && pruned.stdout.contains("removed 0 payloads"), "\(pruned.stdout)")
        let forgot = try await w.run(["forget", "planted", "--out", "out"])
        #expect(forgot.status == 0 && !forgot.stdout.contains("b.json"), "\(forgot.stdout)\(forgot.stderr)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: outside)) ?? []).sorted() == ["a.json", "b.json"])
        #expect(w.payload("linked/a.json") == Array("theirs".utf8))
    }
}
