import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// A mirror as an operator keeps one with the real binary: payloads placed by their URL's path,
/// the built-in file kind for large files, `forget --not-in` after each night's run, `prune --out`.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct MirrorCleanupTests {
    static func jobs(_ w: Workspace, _ names: [String]) -> String {
        names.map { #"{"kind": "file", "url": "\#(w.base)/ranged/\#(1000 + $0.count)?id=\#($0)", "name": "\#($0)"}"# }.joined(separator: "\n") + "\n"
    }

    static func runLog(_ w: Workspace, newest: Bool = true) throws -> String {
        let names = try FileManager.default.contentsOfDirectory(atPath: "\(w.out)/runs").sorted()
        return try #require(newest ? names.last : names.first)
    }

    @Test func forgetNotInForgetsWhatTheLastRunNoLongerListed() async throws {
        let w = try Workspace()
        w.write("night1.jsonl", Self.jobs(w, ["a", "b", "c", "d"]))
        #expect(try await w.run(["run", "night1.jsonl"]).status == 0)
        // The catalog dropped c and d.
        try await Task.sleep(for: .seconds(1.1))  // run ids have a second's resolution
        w.write("night2.jsonl", Self.jobs(w, ["a", "b"]))
        #expect(try await w.run(["run", "night2.jsonl"]).status == 0)
        let log = try Self.runLog(w)

        let dry = try await w.run(["forget", "--not-in", log, "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.contains("would forget file:c: files/c.bin, results/") && dry.stdout.contains("would forget file:d:"), "\(dry.stdout)")
        #expect(dry.stdout.contains("would forget 2 keys the run did not include") && !dry.stdout.contains("file:a"), "\(dry.stdout)")
        #expect(w.payload("files/c.bin") != nil, "a dry run removes nothing")
        let json = try await w.run(["forget", "--not-in", "out/runs/\(log)", "--dry-run", "--json"])
        let listed = try JSONParser.parse(json.stdout)
        #expect(listed["dryRun"] == .bool(true) && listed["keys"]?.arrayValue?.compactMap { $0["key"]?.stringValue } == ["file:c", "file:d"], "\(json.stdout)")
        #expect(listed["keys"]?.arrayValue?.first?["files"]?.arrayValue?.contains(.string("files/c.bin")) == true, "\(json.stdout)")

        let done = try await w.run(["forget", "--not-in", log])
        #expect(done.status == 0 && done.stdout.contains("forgot 2 keys the run did not include"), "\(done.stdout)\(done.stderr)")
        #expect(w.payload("files/c.bin") == nil && w.payload("files/d.bin") == nil)
        #expect((try? w.record("file:c")) == nil)
        #expect(w.payload("files/a.bin") != nil && w.payload("files/b.bin") != nil && (try? w.record("file:a")) != nil, "what the run listed stays")
        let again = try await w.run(["forget", "--not-in", log])
        #expect(again.status == 0 && again.stdout.contains("nothing to forget"), "\(again.stdout)")
    }

    @Test func forgetNotInForgetsNothingByALogItCannotTrust() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, ["a", "b"]))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        let before = w.outputFiles()
        w.write("empty.jsonl", "")
        let empty = try await w.run(["forget", "--not-in", "empty.jsonl"])
        #expect(empty.status == 2 && empty.stderr.contains("nothing was forgotten") && empty.stderr.contains("holds no result records"), "\(empty.stderr)")
        let missing = try await w.run(["forget", "--not-in", "no-such.jsonl"])
        #expect(missing.status == 2 && missing.stderr.contains("cannot be read"), "\(missing.stderr)")
        // A log of another output shares no key with this one.
        w.write("other.jsonl", #"{"key": "file:elsewhere", "status": "succeeded"}"# + "\n")
        let foreign = try await w.run(["forget", "--not-in", "other.jsonl"])
        #expect(foreign.status == 2 && foreign.stderr.contains("is it of this output directory?"), "\(foreign.stderr)")
        let both = try await w.run(["forget", "file:a", "--not-in", "other.jsonl"])
        #expect(both.status == 2, "\(both.stderr)")
        let noQueue = try await w.run(["forget", "--not-in-batch", "20261127-000000-abcd"], environment: ["RUNNER_QUEUE": ""])
        #expect(noQueue.status == 2 && noQueue.stderr.contains("needs --queue"), "\(noQueue.stderr)")
        #expect(w.outputFiles().filter { !$0.hasPrefix("runs/") } == before.filter { !$0.hasPrefix("runs/") }, "nothing was forgotten")
    }

    @Test func pruneTakesOutAndListsEveryPathAsJSON() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", Self.jobs(w, ["a"]))
        #expect(try await w.run(["run", "jobs.jsonl"]).status == 0)
        // 25 files no record points to, older than a minute.
        try FileManager.default.createDirectory(atPath: "\(w.out)/files/old", withIntermediateDirectories: true)
        var times = [timespec(tv_sec: time(nil) - 90, tv_nsec: 0), timespec(tv_sec: time(nil) - 90, tv_nsec: 0)]
        for index in 0..<25 {
            w.write("out/files/old/\(index).bin", String(repeating: "x", count: index + 1))
            utimensat(AT_FDCWD, "\(w.out)/files/old/\(index).bin", &times, 0)
        }
        let dry = try await w.run(["prune", "--out", "out", "--dry-run"])
        #expect(dry.status == 0 && dry.stdout.contains("  files/old/24.bin\n") && !dry.stdout.contains("more"), "every path: \(dry.stdout)")
        let json = try await w.run(["prune", "--out", "out", "--dry-run", "--json"])
        let listed = try JSONParser.parse(json.stdout)
        #expect(listed["files"]?.arrayValue?.count == 25 && listed["bytes"]?.intValue == (1...25).reduce(0, +), "\(json.stdout)")
        #expect(listed["files"]?.arrayValue?.contains(.object([("path", .string("files/old/3.bin")), ("bytes", JSONValue(4))])) == true, "\(json.stdout)")
        #expect(w.payload("files/old/0.bin") != nil, "a dry run removes nothing")
        let both = try await w.run(["prune", "out", "--out", "out"])
        #expect(both.status == 2 && both.stderr.contains("not both"), "\(both.stderr)")
        let done = try await w.run(["prune", "out", "--json"])
        #expect(try JSONParser.parse(done.stdout)["files"]?.arrayValue?.count == 25, "the positional form still works: \(done.stdout)")
        #expect(w.payload("files/old/0.bin") == nil && w.payload("files/a.bin") != nil)
    }

    @Test func theFileKindFetchesAnEightyMiBFileWithNothingRaised() async throws {
        let w = try Workspace()
        let size = 80 << 20
        w.write("big.json", #"{"kind": "file", "url": "\#(w.base)/ranged/\#(size)?id=\#(UUID().uuidString)"}"#)
        // 30 MiB a second: more than two and a half seconds, past the 2 s other kinds default to.
        let started = ContinuousClock.now
        let result = try await w.run(["run", "big.json", "--limit-rate", "30M"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(ContinuousClock.now - started > .seconds(2), "the limit held the body past 2 s")
        let record = try JSONParser.parse(Array(try #require(FileManager.default.contents(
            atPath: "\(w.out)/results/" + (try FileManager.default.contentsOfDirectory(atPath: "\(w.out)/results").first ?? "")))))
        #expect(record["status"]?.stringValue == "succeeded" && record["bytes"]?.intValue == size, "\(record)")
        #expect(record["output"]?.stringValue?.hasPrefix("files/") == true && record["output"]?.stringValue?.hasSuffix(".bin") == true, "\(record)")
        let json = try await w.run(["run", "-"], input: Array(#"{"kind": "json", "url": "\#(w.base)/ranged/\#(size)"}"#.utf8))
        #expect(json.status != 0, "another kind's defaults (64 MiB) fail it: \(json.stdout)")
    }

    @Test func aListsChildrenArePlacedByTheirURLsPath() async throws {
        let w = try Workspace()
        w.write("list.json", #"{"kind": "image-list", "url": "\#(w.base)/images.json", "output": "site/{urlPath}", "childOutput": "site/{urlPath}"}"#)
        let result = try await w.run(["run", "list.json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(w.payload("site/images.json") != nil, "\(w.outputFiles())")
        #expect(w.payload("site/images/png.png")?.prefix(4) == [0x89, 0x50, 0x4E, 0x47], "\(w.outputFiles())")
        w.write("bad.json", #"{"kind": "file", "url": "\#(w.base)/runs/x", "output": "{urlPath}"}"#)
        let bad = try await w.run(["validate", "bad.json"])
        #expect(bad.status != 0 && bad.stderr.contains("field 'output' is 'runs/x' for this URL"), "\(bad.stderr)")
    }
}

/// `forget --not-in-batch ID --queue URL`: the keys of a batch of the queue, children included.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)), .enabled(if: PostgresServer.bin != nil, "postgresql is not installed"))
struct ForgetNotInBatchTests {
    @Test func forgetNotInBatchForgetsWhatTheBatchNoLongerHadChildrenIncluded() async throws {
        let db = try await PostgresServer()
        let world = try SpoolWorld()
        let watcher = try QueueTests.startWatcher(world, db, "watcher")
        defer { if watcher.isRunning { watcher.terminate() } }
        #expect(await world.wait(upTo: .seconds(10)) { world.log("watcher").contains("watching the queue") })
        let list = #"{"kind": "image-list", "key": "list", "url": "\#(world.base)/images.json", "timeout": 10}"#
        let lone = #"{"kind": "file", "name": "lone", "url": "\#(world.base)/ranged/1000?id=lone", "timeout": 10}"#
        let first = world.w.write("first.jsonl", list + "\n" + lone + "\n")
        #expect(try await world.w.run(["submit", "--queue", db.url, "--wait", first]).status <= 1)
        #expect(QueueTests.records(world)["file:lone"] == "succeeded", "\(QueueTests.records(world))")
        let second = world.w.write("second.jsonl", list + "\n")
        let waited = try await world.w.run(["submit", "--queue", db.url, "--wait", second])
        #expect(waited.status <= 1, "\(waited.stdout)\(waited.stderr)")
        let batch = String(try #require(waited.stdout.split(separator: "\n").first { $0.hasPrefix("batch ") }?.split(separator: " ")[1].dropLast()))

        let dry = try await world.w.run(["forget", "--not-in-batch", batch, "--queue", db.url, "--dry-run", "--json"])
        #expect(dry.status == 0, "\(dry.stderr)")
        let keys = try JSONParser.parse(dry.stdout)["keys"]?.arrayValue?.compactMap { $0["key"]?.stringValue }
        #expect(keys == ["file:lone"], "the list's children are the batch's too: \(dry.stdout)")
        let done = try await world.w.run(["forget", "--not-in-batch", batch, "--queue", db.url])
        #expect(done.status == 0 && done.stdout.contains("forgot 1 key the batch did not include"), "\(done.stdout)\(done.stderr)")
        #expect(QueueTests.records(world)["file:lone"] == nil && QueueTests.records(world)["list"] != nil)
        #expect(QueueTests.records(world).keys.contains { $0.hasPrefix("image:") })
        let unknown = try await world.w.run(["forget", "--not-in-batch", "no-such-batch", "--queue", db.url])
        #expect(unknown.status == 2 && unknown.stderr.contains("no job of batch no-such-batch"), "\(unknown.stderr)")
    }
}
