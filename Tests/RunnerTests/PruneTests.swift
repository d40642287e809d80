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
}
