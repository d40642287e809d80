import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner run` and `runner watch` are built in one place: the same jobs give the same records.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct RunAndWatchTests {
    /// The members of a record that depend on when it ran.
    static let timings: Set<String> = ["startedAt", "finishedAt", "durationMs", "waitedForNetworkMs", "waitedForHostMs"]

    static func records(in out: String) throws -> [String: JSONValue] {
        var records: [String: JSONValue] = [:]
        let folder = "\(out)/results"
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasSuffix(".json") {
            let bytes = try #require(FileManager.default.contents(atPath: "\(folder)/\(name)"))
            let record = try JSONParser.parse([UInt8](bytes))
            let members = try #require(record.objectValue).filter { !timings.contains($0.key) }
            records[try #require(record["key"]?.stringValue)] = .object(members)
        }
        return records
    }

    @Test func theSameJobsGiveTheSameRecordsThroughRunAndThroughSubmitAndWatch() async throws {
        let s = try SpoolWorld()
        let base = s.base
        let jobs = """
            {"kind": "tree", "key": "tree:t", "url": "\(base)/data.json", "entries": "\(base)/entries/{id}.json"}
            {"kind": "image-list", "key": "list:l", "url": "\(base)/images.json"}
            {"kind": "entry", "id": "imgly.A.1", "url": "\(base)/entries/{id}.json", "key": "entry:own"}
            {"kind": "image", "key": "image:gone", "url": "\(base)/images/none.png"}

            """
        let file = s.w.write("jobs.jsonl", jobs)
        let runOut = "\(s.w.root)/run-out"
        let run = try await s.w.run(["run", file, "--out", runOut, "--per-host", "4"])
        #expect(run.status == 1, "the missing image ends notFound: \(run.stderr)")

        let submit = try await s.w.run(["submit", file, "--spool", s.spool.root])
        #expect(submit.status == 0, "\(submit.stderr)")
        let watcher = try s.startWatcher(["--per-host", "4"])
        defer { watcher.terminate() }
        let settled = await s.wait(upTo: .seconds(30)) { !s.jobFiles(s.spool.failed).isEmpty }
        #expect(settled, "\(s.log())")

        let fromRun = try Self.records(in: runOut)
        let fromWatch = try Self.records(in: s.w.out)
        #expect(fromRun.count > 10, "children included: \(fromRun.keys.sorted())")
        #expect(Set(fromRun.keys) == Set(fromWatch.keys))
        for (key, record) in fromRun {
            #expect(fromWatch[key] == record, "\(key)")
        }
    }
}
