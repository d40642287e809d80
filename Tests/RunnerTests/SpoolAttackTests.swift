import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The spool against files that change under the watcher and cancel requests for nothing.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct SpoolAttackTests {
    /// A file rewritten in place after it was validated: the jobs that were validated are the
    /// jobs that run (a file of up to 10 000 jobs is read once), every one gets its record, and
    /// the watcher goes on. (A longer file is read again to run; what a change then does is the
    /// same for `run` and `watch`, and BatchFeedTests show it.)
    @Test func aFileRewrittenAfterValidationRunsWhatWasValidated() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let slow = s.imageJob("image:first", query: "?delay=1500")
        let second = s.imageJob("image:second")
        let padding = String(repeating: String(repeating: " ", count: 1000) + "\n", count: 2000)
        let third = s.imageJob("image:third")
        let text = slow + "\n" + second + "\n" + padding + third + "\n"
        let watcher = try s.startWatcher(["--concurrency", "1"])
        defer { watcher.terminate() }
        try s.drop("changing.jsonl", text)

        // While the first job runs, the producer overwrites the third line in place.
        let claimed = await s.wait(upTo: .seconds(10)) { s.activeFiles() == ["changing.jsonl"] && !s.names(s.spool.locks).isEmpty }
        #expect(claimed, "\(s.log())")
        let watcherFolder = try #require(s.names(s.spool.active).first)
        let path = "\(s.spool.active)/\(watcherFolder)/changing.jsonl"
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        let head = Array(#"{"kind": "image", "url": "#.utf8)
        let garbage = head + Array(repeating: UInt8(ascii: " "), count: third.utf8.count - head.count)
        let offset = off_t(text.utf8.count - third.utf8.count - 1)
        #expect(pwrite(fd, garbage, garbage.count, offset) == garbage.count)
        close(fd)

        let settled = await s.wait(upTo: .seconds(20)) { s.jobFiles(s.spool.done) == ["changing.jsonl"] }
        #expect(settled, "done: \(s.names(s.spool.done)), failed: \(s.names(s.spool.failed)), log: \(s.log())")
        let records = s.records(s.spool.done, "changing.jsonl")
        #expect(records.compactMap { $0["key"]?.stringValue }.sorted() == ["image:first", "image:second", "image:third"])
        #expect(records.allSatisfy { $0["status"] == .string("succeeded") })
        #expect(s.activeFiles().isEmpty && s.names(s.spool.inbox).isEmpty, "the file is in done/, nowhere else")

        // The watcher goes on.
        try s.drop("after.json", s.imageJob("image:after"))
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.done).contains("after.json") })
        #expect(watcher.isRunning)
    }

    /// A producer that may write only to inbox/ drops a replay file (the records a dead watcher
    /// would leave) beside its job file, claiming the job succeeded with an output outside the
    /// output folder: the watcher does not believe it, the job runs, and the hook gets the
    /// record the watcher wrote.
    @Test func aReplayFilePlantedInInboxIsNotBelieved() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        try FileManager.default.createDirectory(atPath: "\(s.w.root)/elsewhere", withIntermediateDirectories: true)
        s.w.write("elsewhere/secret.txt", "secret\n")
        let forged = #"{"key":"image:forged","kind":"image","status":"succeeded","output":"../elsewhere/secret.txt","attempts":1,"#
            + #""startedAt":"2026-11-27T10:00:00.000Z","finishedAt":"2026-11-27T10:00:00.010Z"}"#
        s.w.write("planted", forged + "\n")
        #expect(rename("\(s.w.root)/planted", "\(s.spool.inbox)/.job.jsonl\(Spool.replaySuffix)") == 0)
        let hook = #"printf '%s|%s\n' "$RUNNER_STATUS" "$RUNNER_OUTPUT" >> hook.log"#
        let watcher = try s.startWatcher(["--on-finish", hook])
        defer { watcher.terminate() }
        try s.drop("job.jsonl", s.imageJob("image:forged"))
        #expect(await s.wait(upTo: .seconds(20)) { s.jobFiles(s.spool.done) == ["job.jsonl"] }, "\(s.log())")
        #expect(s.w.server.arrivals(pathPrefix: "/images/").count == 1, "the job ran")
        let record = try #require(s.records(s.spool.done, "job.jsonl").first)
        let output = try #require(record["output"]?.stringValue)
        #expect(!output.contains(".."), "\(record)")
        let ran = (try? String(contentsOfFile: "\(s.w.root)/hook.log", encoding: .utf8)) ?? ""
        #expect(ran == "succeeded|\(s.w.out)/\(output)\n", "the hook got the watcher's own record: \(ran)")
        #expect(try String(contentsOfFile: "\(s.w.root)/elsewhere/secret.txt", encoding: .utf8) == "secret\n")
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await s.exit(of: watcher, upTo: .seconds(20)) == 0)
    }

    /// A cancel request for a key nobody runs, and junk in cancel/: said plainly, and harmless.
    @Test func cancelRequestsForUnknownKeysAndJunkAreHarmless() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("watching") })
        // As a producer that writes cancel/ itself would (`runner cancel` makes no request for a
        // key that nothing holds).
        _ = try s.spool.requestCancel(key: "no-such-key")
        try FileManager.default.createDirectory(atPath: "\(s.spool.cancel)/a-folder", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: "\(s.spool.cancel)/binary", contents: Data([0xFF, 0xFE, 0x00, 0x80]))
        let told = await s.wait(upTo: .seconds(10)) { s.log().contains("cancel no-such-key: no task with that key is running") }
        #expect(told, "\(s.log())")

        try s.drop("later.json", s.imageJob("image:later"))
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.done) == ["later.json"] }, "\(s.log())")
        #expect(watcher.isRunning)
    }
}
