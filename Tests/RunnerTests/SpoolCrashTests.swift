import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The spool under kill -9, and several watchers on one spool.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct SpoolCrashTests {
    @Test func twoHundredJobsSurviveThreeKillNineAndAllEndDoneWithResults() async throws {
        let s = try SpoolWorld()
        let count = 200
        for i in 0..<count { try s.drop("job-\(i).json", s.imageJob("image:\(i)", query: "?delay=30")) }

        var kills: [Int] = []
        for round in 0..<3 {
            let watcher = try s.startWatcher(["--concurrency", "8"], name: "watch\(round)")
            let moment = Int.random(in: 80...450)
            kills.append(moment)
            try await Task.sleep(for: .milliseconds(moment))
            kill(watcher.processIdentifier, SIGKILL)
            _ = await s.exit(of: watcher, upTo: .seconds(5))
        }
        let leftBehind = s.activeFiles().count
        let last = try s.startWatcher(["--concurrency", "8"], name: "watch-last")
        let finished = await s.wait(upTo: .seconds(40)) { s.jobFiles(s.spool.done).count + s.jobFiles(s.spool.failed).count >= count }
        last.terminate()
        #expect(await s.exit(of: last, upTo: .seconds(15)) == 0)
        #expect(finished, "killed at \(kills) ms; done \(s.jobFiles(s.spool.done).count), inbox \(s.names(s.spool.inbox).count), active \(s.activeFiles().count)")

        let done = s.jobFiles(s.spool.done)
        #expect(done.count == count, "every file is in done/")
        #expect(s.jobFiles(s.spool.failed).isEmpty)
        #expect(s.names(s.spool.inbox).isEmpty && s.activeFiles().isEmpty)
        var keys: Set<String> = []
        for name in done {
            let records = s.records(s.spool.done, name)
            // A job fetched again after a crash revalidates the payload its killed run wrote: 304.
            let status = records.first?["status"]?.stringValue
            #expect(records.count == 1 && (status == "succeeded" || status == "notModified"), "\(name) is done with its result")
            records.compactMap { $0["key"]?.stringValue }.forEach { keys.insert($0) }
        }
        #expect(keys == Set((0..<count).map { "image:\($0)" }))
        for i in 0..<count { #expect(["succeeded", "notModified"].contains(try s.w.status("image:\(i)"))) }
        #expect(s.log("watch-last").contains("put back in line") || leftBehind == 0)
        print("kill -9 at \(kills) ms after each start; \(leftBehind) file(s) left in active/ were put back; \(s.w.server.totalRequests) fetches for \(count) jobs")
    }

    /// A file whose watcher was killed runs again, but not the jobs of it that had ended: their
    /// records stand, with their own status (not the `notModified` of a second fetch).
    @Test func aFileRunAgainAfterKillNineRunsOnlyTheJobsThatHadNotEnded() async throws {
        let s = try SpoolWorld()
        let jobs = [
            #"{"kind": "entry", "key": "entry:fast", "id": "imgly.A.1", "url": "\#(s.base)/entries/{id}.json"}"#,
            #"{"kind": "entry", "key": "entry:slow", "id": "imgly.A.2", "url": "\#(s.base)/entries/{id}.json?delay=2500", "timeout": 30}"#,
        ]
        try s.drop("mixed.jsonl", jobs.joined(separator: "\n") + "\n")
        let first = try s.startWatcher(["--concurrency", "2"], name: "first")
        // Its line beside the file in active/, which follows its record: what says the job ended.
        let fastLine = await s.wait(upTo: .seconds(20)) {
            s.names(s.spool.active).contains { watcher in
                s.text("\(s.spool.active)/\(watcher)/.mixed.jsonl\(Spool.resultsSuffix)").split(separator: "\n", omittingEmptySubsequences: false)
                    .dropLast().contains { $0.contains(#""key":"entry:fast""#) }
            }
        }
        #expect(fastLine, "\(s.log("first"))")
        kill(first.processIdentifier, SIGKILL)
        _ = await s.exit(of: first, upTo: .seconds(5))

        let second = try s.startWatcher(["--concurrency", "2"], name: "second")
        defer { if second.isRunning { second.terminate() } }
        #expect(await s.wait(upTo: .seconds(20)) { s.jobFiles(s.spool.done) == ["mixed.jsonl"] }, "\(s.log("second"))")
        let records = s.records(s.spool.done, "mixed.jsonl")
        let statuses = Dictionary(records.compactMap { record in record["key"]?.stringValue.map { ($0, record["status"]?.stringValue ?? "") } }) { a, _ in a }
        #expect(statuses == ["entry:fast": "succeeded", "entry:slow": "succeeded"], "\(records)")
        #expect(s.w.server.requestCount(path: "/entries/imgly.A.1.json") == 1, "the job that had ended did not run again")
        #expect(s.w.server.requestCount(path: "/entries/imgly.A.2.json") == 2, "the one that had not ran again")
        second.terminate()
        #expect(await s.exit(of: second, upTo: .seconds(15)) == 0)
    }

    @Test func twoWatchersOnOneSpoolFetchEachFileExactlyOnce() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let a = try s.startWatcher(["--concurrency", "4"], name: "a")
        let b = try s.startWatcher(["--concurrency", "4"], name: "b")
        await s.wait(upTo: .seconds(5)) { s.names(s.spool.active).count == 2 }
        let count = 100
        for i in 0..<count { try s.drop("f\(i).json", s.imageJob("image:f\(i)", query: "?delay=20&n=\(i)")) }
        let finished = await s.wait(upTo: .seconds(30)) { s.jobFiles(s.spool.done).count == count }
        a.terminate()
        b.terminate()
        #expect(await s.exit(of: a, upTo: .seconds(15)) == 0)
        #expect(await s.exit(of: b, upTo: .seconds(15)) == 0)
        #expect(finished, "done: \(s.jobFiles(s.spool.done).count)")
        #expect(s.w.server.totalRequests == count, "each file fetched exactly once: \(s.w.server.totalRequests) requests for \(count) files")
        let byA = s.log("a").components(separatedBy: ": done").count - 1
        let byB = s.log("b").components(separatedBy: ": done").count - 1
        #expect(byA + byB == count)
        print("watcher a ran \(byA) files, watcher b \(byB); \(s.w.server.totalRequests) requests")
    }

    @Test func oneKeyNeverRunsInTwoProcessesAtOnce() async throws {
        let s = try SpoolWorld()
        let a = try s.startWatcher(["--concurrency", "1"], name: "a")
        defer { a.terminate() }
        try s.drop("first.json", s.imageJob("image:shared", query: "?hang=1"))
        await s.wait(upTo: .seconds(10)) { !s.names(s.spool.locks).isEmpty }
        let b = try s.startWatcher(["--concurrency", "1"], name: "b")
        defer { b.terminate() }
        try s.drop("second.json", s.imageJob("image:shared"))
        let refused = await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.failed) == ["second.json"] }
        #expect(refused, "\(s.log("b"))")
        let record = s.records(s.spool.failed, "second.json").first
        #expect(record?["status"] == .string("duplicate"))
        #expect(record?["error"]?.stringValue?.contains("in another process") == true)
        #expect(s.w.server.requestCount(path: "/images/png.png") == 1)
    }
}
