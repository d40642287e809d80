import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner run FILE… --resume RUNLOG`: only the jobs that did not end well run again.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct ResumeTests {
    @Test func resumeRunsOnlyTheJobsThatDidNotSucceed() async throws {
        // Given a batch in which some jobs failed,
        let w = try Workspace()
        func jobs(failing: Bool) -> String {
            (0..<20).map { n in
                let fails = failing && n % 4 == 0
                return #"{"kind": "image", "key": "image:\#(n)", "url": "\#(w.base)/images/png.png?n=\#(n)\#(fails ? "&status=500" : "")"}"#
            }.joined(separator: "\n") + "\n"
        }
        w.write("first.jsonl", jobs(failing: true))
        let first = try await w.run(["run", "first.jsonl"])
        #expect(first.status == 1)
        let log = try #require(w.outputFiles().first { $0.hasPrefix("runs/") })
        #expect(w.server.requestCount(path: "/images/png.png") == 20)

        // when the batch runs again with --resume,
        w.write("second.jsonl", jobs(failing: false))
        let second = try await w.run(["run", "second.jsonl", "--resume", "out/\(log)", "--json"])

        // then only the 5 failed jobs are fetched again, and now succeed.
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(w.server.requestCount(path: "/images/png.png") == 25)
        let keys = Set(second.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0))["key"]?.stringValue })
        #expect(keys == Set(stride(from: 0, to: 20, by: 4).map { "image:\($0)" }))
        for n in stride(from: 0, to: 20, by: 4) { #expect(try w.status("image:\(n)") == "succeeded") }
    }

    /// A cron chain: each run resumes the log of the one before. The third run fetches only what
    /// is still failing, not what the first run fetched well; `--resume out/` decides from each
    /// key's last record.
    @Test func resumedRunsChainAndTheOutputFolderResumesToo() async throws {
        let w = try Workspace()
        func jobs(failing: (Int) -> Bool) -> String {
            (0..<20).map { n in
                #"{"kind": "entry", "id": "imgly.A.1", "key": "entry:\#(n)", "url": "\#(w.base)/entries/{id}.json?n=\#(n)\#(failing(n) ? "&status=500" : "")"}"#
            }.joined(separator: "\n") + "\n"
        }
        var logs = Set<String>()
        func newestLog() throws -> String {
            let now = Set(w.outputFiles().filter { $0.hasPrefix("runs/") })
            defer { logs = now }
            return try #require(now.subtracting(logs).first.map { "out/" + $0 })
        }
        func ranKeys(_ output: RunnerBinary.Output) -> Set<String> {
            Set(output.stdout.split(separator: "\n").compactMap { try? JSONParser.parse(String($0))["key"]?.stringValue })
        }
        w.write("jobs.jsonl", jobs { $0 % 4 == 0 })  // 0, 4, 8, 12, 16 fail
        let first = try await w.run(["run", "jobs.jsonl", "--json"])
        #expect(first.status == 1)
        let firstLog = try newestLog()

        w.write("jobs.jsonl", jobs { $0 % 8 == 0 })  // 0, 8, 16 still fail
        let second = try await w.run(["run", "jobs.jsonl", "--resume", firstLog, "--json"])
        #expect(second.status == 1, "\(second.stderr)")
        #expect(ranKeys(second) == ["entry:0", "entry:4", "entry:8", "entry:12", "entry:16"])
        #expect(second.stderr.contains("--resume: 15 jobs skipped"), "\(second.stderr)")
        let secondLog = try newestLog()
        #expect(secondLog != firstLog)

        w.write("jobs.jsonl", jobs { _ in false })
        let third = try await w.run(["run", "jobs.jsonl", "--resume", secondLog, "--json"])
        #expect(third.status == 0, "\(third.stderr)")
        #expect(ranKeys(third) == ["entry:0", "entry:8", "entry:16"], "only what was still failing")
        #expect(third.stderr.contains("--resume: 17 jobs skipped"), "\(third.stderr)")

        let fromFolder = try await w.run(["run", "jobs.jsonl", "--resume", "out", "--json"])
        #expect(fromFolder.status == 0, "\(fromFolder.stderr)")
        #expect(ranKeys(fromFolder).isEmpty, "every key's last record succeeded")
        #expect(fromFolder.stderr.contains("--resume: 20 jobs skipped"), "\(fromFolder.stderr)")
        let empty = try await w.run(["run", "jobs.jsonl", "--resume", w.root])
        #expect(empty.status == 2)
        #expect(empty.stderr.contains("has no readable results/"), "\(empty.stderr)")
    }

    @Test func theLastTopLevelRecordOfAKeyDecides() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-resume-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = """
            {"key": "a", "status": "failed"}
            {"key": "a", "status": "succeeded"}
            {"key": "b", "status": "succeeded"}
            {"key": "b", "status": "timedOut"}
            {"key": "c", "status": "notModified"}
            {"key": "c", "status": "duplicate"}
            {"key": "d", "status": "failed", "parent": "tree:t"}
            {"key": "tree:t", "status": "succeeded"}
            {"key": "e", "stat
            """
        _ = FileManager.default.createFile(atPath: "\(folder)/run.jsonl", contents: Data(log.utf8))
        #expect(try RunLog.settledKeys(atPath: "\(folder)/run.jsonl") == ["a", "c", "tree:t"])
        let carried = log + "\n" + #"{"key": "b", "settledIn": "out/runs/older.jsonl"}"#
        _ = FileManager.default.createFile(atPath: "\(folder)/run2.jsonl", contents: Data(carried.utf8))
        #expect(try RunLog.settledKeys(atPath: "\(folder)/run2.jsonl") == ["a", "b", "c", "tree:t"])
        _ = FileManager.default.createFile(atPath: "\(folder)/jobs.json", contents: Data(#"{"kind": "image", "url": "http://h/x"}"#.utf8))
        #expect(throws: RunLog.ResumeError.self) { try RunLog.settledKeys(atPath: "\(folder)/jobs.json") }
        #expect(throws: RunLog.ResumeError.self) { try RunLog.settledKeys(atPath: "\(folder)/missing.jsonl") }
    }

    @Test func aRunLogThatCannotBeReadIsAUsageError() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "image", "url": "\#(w.base)/images/png.png"}"#)
        let result = try await w.run(["run", "job.json", "--resume", "nowhere.jsonl"])
        #expect(result.status == 2)
        #expect(result.stderr.hasPrefix("Error: --resume: nowhere.jsonl: cannot be read"), "\(result.stderr)")
        #expect(w.server.totalRequests == 0)
    }
}
