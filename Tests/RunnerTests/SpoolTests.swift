import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The spool end to end: the built binary's submit, watch, cancel and status on real folders,
/// against the fixture server. SpoolFeedTests and WatcherTests show the feed and the watcher in
/// process on the test clock.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct SpoolTests {
    @Test func submitValidatesEverythingFirstThenQueuesAtomically() async throws {
        let s = try SpoolWorld()
        let good = s.w.write("good.json", s.imageJob("image:good"))
        let lines = s.w.write("batch.jsonl", s.imageJob("image:l1") + "\n" + s.imageJob("image:l2") + "\n")
        let bad = s.w.write("bad.json", #"{"kind": "image", "url": "ftp://example.com/x.png"}"#)

        let refused = try await s.w.run(["submit", good, bad, "--spool", s.spool.root])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("bad.json"), "\(refused.stderr)")
        #expect(s.names(s.spool.inbox).isEmpty, "nothing is queued when one file is bad")

        let queued = try await s.w.run(["submit", good, lines, good, "--spool", s.spool.root])
        #expect(queued.status == 0, "\(queued.stderr)")
        #expect(s.names(s.spool.inbox) == ["batch.jsonl", "good-2.json", "good.json"], "a taken name is kept, never replaced")
        #expect(queued.stdout.contains("(2 jobs)"))
        for folder in [s.spool.active, s.spool.done, s.spool.failed, s.spool.cancel] {
            #expect(FileSystemCheck.isDirectory(folder), "\(folder) made on demand")
        }
        #expect(FileManager.default.fileExists(atPath: good), "submit copies; the producer's file stays")
    }

    @Test func watchRunsFilesToDoneWithRecordsAndJunkToFailedWithReasons() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        // Junk of every sort, then good files: the watcher takes the good ones all the same.
        try FileManager.default.createDirectory(atPath: "\(s.spool.inbox)/folder.json", withIntermediateDirectories: true)
        let target = s.w.write("target.json", s.imageJob("image:target"))
        try FileManager.default.createSymbolicLink(atPath: "\(s.spool.inbox)/link.json", withDestinationPath: target)
        s.w.write("garbage.json", "")
        _ = FileManager.default.createFile(atPath: "\(s.w.root)/garbage.json", contents: Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7919 &+ 13) }))
        rename("\(s.w.root)/garbage.json", "\(s.spool.inbox)/garbage.json")
        let big = open("\(s.w.root)/big.json", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        ftruncate(big, 50 << 20)
        close(big)
        rename("\(s.w.root)/big.json", "\(s.spool.inbox)/big.json")
        try s.drop("broken.json", #"{"kind": "image", "url": "#)
        try s.drop("unknown.json", #"{"kind": "video", "url": "http://x/y"}"#)

        let watcher = try s.startWatcher(["--concurrency", "4", "--json"], keepingStdout: true)
        defer { watcher.terminate() }
        try s.drop("one.json", s.imageJob("image:one"))
        try s.drop("two.jsonl", s.imageJob("image:two-a") + "\n" + s.imageJob("image:two-b"))
        try s.drop("half.json", "[\(s.imageJob("image:ok")), \(s.imageJob("image:missing").replacingOccurrences(of: "png.png", with: "none.png"))]")

        let junk = ["big.json", "broken.json", "folder.json", "garbage.json", "link.json", "unknown.json"]
        let settled = await s.wait(upTo: .seconds(20)) {
            s.jobFiles(s.spool.done).count == 2 && s.jobFiles(s.spool.failed).count == junk.count + 1
        }
        #expect(settled, "done: \(s.names(s.spool.done)), failed: \(s.names(s.spool.failed)), log: \(s.log())")
        #expect(s.jobFiles(s.spool.done) == ["one.json", "two.jsonl"])
        #expect(s.jobFiles(s.spool.failed) == (junk + ["half.json"]).sorted())
        #expect(watcher.isRunning, "junk never stops the watcher")

        let two = s.records(s.spool.done, "two.jsonl")
        #expect(Set(two.compactMap { $0["key"]?.stringValue }) == ["image:two-a", "image:two-b"])
        #expect(two.allSatisfy { $0["status"] == .string("succeeded") })
        #expect(try s.w.status("image:one") == "succeeded", "records in out/results as with runner run")
        // --json: each job's record on standard output, one line each, nothing else there.
        let printed = s.text("\(s.w.root)/watch.stdout").split(separator: "\n").map { try? JSONParser.parse(String($0)) }
        #expect(Set(printed.compactMap { $0?["key"]?.stringValue }) == ["image:one", "image:two-a", "image:two-b", "image:ok", "image:missing"], "\(printed)")

        let reasons = Dictionary(uniqueKeysWithValues: junk.map { ($0, s.text("\(s.spool.failed)/\($0)\(Spool.errorSuffix)")) })
        #expect(reasons["folder.json"]?.contains("is a directory") == true)
        #expect(reasons["link.json"]?.contains("symbolic link") == true)
        #expect(reasons["garbage.json"]?.contains("not UTF-8") == true, "\(reasons["garbage.json"] ?? "")")
        #expect(reasons["big.json"]?.contains("JSON Lines") == true, "\(reasons["big.json"] ?? "")")
        #expect(reasons["broken.json"]?.contains("not valid JSON") == true)
        #expect(reasons["unknown.json"]?.contains("unknown kind 'video'") == true)
        let half = s.text("\(s.spool.failed)/half.json\(Spool.errorSuffix)")
        #expect(half.contains("1 of 2 jobs did not succeed") && half.contains("image:missing: notFound"), "\(half)")
        #expect(s.records(s.spool.failed, "half.json").count == 2)
        #expect(FileManager.default.fileExists(atPath: target), "a symlink is moved, never followed")
        #expect(s.activeFiles().isEmpty)
    }

    @Test func cancelAndStatusSayWhatTheyFoundAndOldRequestsAreNotRepeated() async throws {
        let s = try SpoolWorld()
        // No spool there: said, exit 2, and nothing is made.
        let missing = "\(s.w.root)/no-spool"
        for arguments in [["status", "--spool", missing], ["cancel", "image:x", "--spool", missing]] {
            let result = try await s.w.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("there is no spool at"), "\(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing))

        // Nothing holds the key: exit 1, and no request is left behind.
        try s.spool.makeFolders()
        let nothing = try await s.w.run(["cancel", "image:none", "--spool", s.spool.root])
        #expect(nothing.status == 1)
        #expect(nothing.stderr.contains("nothing with the key image:none is running or waiting"), "\(nothing.stderr)")
        #expect(s.names(s.spool.cancel).isEmpty)

        // A waiting file holds it: named.
        try s.drop("waiting.json", s.imageJob("image:w"))
        let queued = try await s.w.run(["cancel", "image:w", "--spool", s.spool.root])
        #expect(queued.status == 0, "\(queued.stderr)")
        #expect(queued.stdout.contains("its jobs in 1 waiting file (waiting.json) will not run"), "\(queued.stdout)")

        // A watcher started after the request applies it without announcing it again, and the
        // file's reason says "cancelled" once.
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.failed) == ["waiting.json"] }, "\(s.log())")
        #expect(!s.log().contains("cancel image:w"), "an old request is not said again at start: \(s.log())")
        let reason = s.text("\(s.spool.failed)/waiting.json\(Spool.errorSuffix)")
        #expect(reason.contains("image:w: cancelled by request before it started"), "\(reason)")
        #expect(!reason.contains("cancelled: cancelled"), "\(reason)")
    }

    @Test func statusWorksWithAndWithoutAWatcher() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let empty = try await s.w.run(["status", "--json", "--spool", s.spool.root])
        #expect(empty.status == 0, "\(empty.stderr)")
        let idle = try JSONParser.parse(Array(empty.stdout.utf8))
        #expect(idle["queued"]?["count"]?.intValue == 0)
        #expect(idle["done"]?["count"]?.intValue == 0)

        try s.drop("waiting.json", s.imageJob("image:w"))
        let queued = try await s.w.run(["status", "--spool", s.spool.root])
        #expect(queued.stdout.contains("queued:   1 (waiting.json)"), "\(queued.stdout)")
        #expect(queued.stdout.contains("none running"))

        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        try s.drop("hang.json", s.imageJob("image:slow", query: "?hang=1"))
        try s.drop("bad.json", "{}")
        await s.wait(upTo: .seconds(10)) { !s.names(s.spool.locks).isEmpty && s.jobFiles(s.spool.done).count == 1 && s.jobFiles(s.spool.failed).count == 1 }
        try await Task.sleep(for: .milliseconds(200))
        let busy = try await s.w.run(["status", "--json", "--spool", s.spool.root])
        let state = try JSONParser.parse(Array(busy.stdout.utf8))
        let running = state["running"]?.arrayValue ?? []
        #expect(running.count == 1)
        #expect(running.first?["key"] == .string("image:slow"))
        #expect((running.first?["ageMs"]?.intValue ?? 0) >= 200)
        #expect(state["done"]?["count"]?.intValue == 1)
        #expect(state["done"]?["latest"]?["name"] == .string("waiting.json"))
        #expect(state["failed"]?["latest"]?["name"] == .string("bad.json"))
        #expect(state["failed"]?["latest"]?["reason"]?.stringValue?.contains("bad.json") == true)
        #expect(state["active"]?.arrayValue?.first?["files"] == .array([.string("hang.json")]))
        let text = try await s.w.run(["status", "--spool", s.spool.root])
        #expect(text.stdout.contains("image:slow"), "\(text.stdout)")
    }

    /// SIGINT beyond the grace: the running job is cancelled, and its file goes back to inbox/
    /// with the files never started. WatcherTests shows the grace on the test clock, a job
    /// that ends within it and SIGTERM; this is SIGINT and --grace through the binary.
    @Test func sigintCancelsWhatRunsBeyondTheGraceAndReturnsTheRestToInbox() async throws {
        let s = try SpoolWorld()
        let watcher = try s.startWatcher(["--grace", "0.3", "--concurrency", "1"])
        try s.drop("hang.json", s.imageJob("image:hang", query: "?hang=1"))
        await s.wait(upTo: .seconds(10)) { !s.names(s.spool.locks).isEmpty }
        try s.drop("next.json", s.imageJob("image:next"))
        try s.drop("after.json", s.imageJob("image:after"))
        let signalled = ContinuousClock.now
        kill(watcher.processIdentifier, SIGINT)
        #expect(await s.exit(of: watcher, upTo: .seconds(10)) == 0)
        let took = signalled.duration(to: .now)
        #expect(took >= .milliseconds(300), "exited \(took) after SIGINT, before the grace")
        #expect(s.log().contains("runner: SIGINT: no more files are taken; running jobs have 0.3 seconds to end"), "\(s.log())")
        #expect(s.names(s.spool.inbox) == ["after.json", "hang.json", "next.json"])
        #expect(s.names(s.spool.active).isEmpty, "the watcher's folder is gone")
        #expect(s.names(s.spool.locks).isEmpty)
        #expect(s.jobFiles(s.spool.failed).isEmpty)
        #expect(try s.w.status("image:hang") == "cancelled")
    }
}

enum FileSystemCheck {
    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}
