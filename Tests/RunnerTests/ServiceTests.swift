import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner watch` and `runner run` as services through the binary: Prometheus metrics, a closed
/// standard output, cancelled parents. WatcherTests shows the watcher's service in process (the
/// notify protocol, metrics on the clock, signals); WatchRealTimeTests the watchdog on the
/// real clock.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct ServiceTests {
    // MARK: - Metrics

    static let promtool: String? = ["/usr/bin/promtool", "/bin/promtool"].first { access($0, X_OK) == 0 }

    /// The metrics file passes `promtool check metrics`; its counts match the records.
    @Test(.enabled(if: promtool != nil, "promtool is not installed (Debian's prometheus package)"))
    func runWritesMetricsThatPromtoolAcceptsAndThatMatchTheRecords() async throws {
        let w = try Workspace()
        let lines = (0..<6).map { #"{"kind": "image", "key": "image:m\#($0)", "url": "\#(w.base)/images/png.png?m=\#($0)"}"# }
            + [#"{"kind": "image", "key": "image:gone", "url": "\#(w.base)/images/none.png"}"#,
               #"{"kind": "image", "key": "image:bad", "url": "\#(w.base)/images/png.png?status=500", "retries": 2}"#,
               #"{"kind": "tree", "key": "tree:t", "url": "\#(w.base)/data.json", "entries": "\#(w.base)/entries/{id}.json"}"#]
        let jobs = w.write("jobs.jsonl", lines.joined(separator: "\n"))
        let result = try await w.run(["run", jobs, "--out", w.out, "--metrics", "\(w.root)/runner.prom"])
        #expect(result.status == 1, "\(result.stderr)")
        let text = try String(contentsOfFile: "\(w.root)/runner.prom", encoding: .utf8)

        let check = try await RunnerBinary.runExecutable(Self.promtool!, ["check", "metrics"], in: w.root, stdin: text)
        #expect(check.status == 0, "promtool: \(check.stdout) \(check.stderr)\n\(text)")

        // Counts by kind and status, from the run log (every job, children included).
        let runs = try FileManager.default.contentsOfDirectory(atPath: "\(w.out)/runs")
        let log = try String(contentsOfFile: "\(w.out)/runs/\(try #require(runs.first))", encoding: .utf8)
        var expected: [String: Int] = [:]
        var retries = 0
        for line in log.split(separator: "\n") {
            let record = try JSONParser.parse(Array(line.utf8))
            expected["runner_jobs_total{kind=\"\(record["kind"]!.stringValue!)\",status=\"\(record["status"]!.stringValue!)\"}", default: 0] += 1
            retries += (record["attempts"]?.intValue ?? 1) - 1
        }
        let samples = Self.samples(text)
        let reported = samples.filter { $0.key.hasPrefix("runner_jobs_total{") }.mapValues { Int($0) }
        #expect(reported == expected)
        #expect(expected.values.reduce(0, +) > 9, "the tree's children are counted too")
        #expect(samples["runner_retries_total{kind=\"image\"}"].map { Int($0) } == retries)
        #expect(retries == 2)
        #expect(samples["runner_job_duration_seconds_count{kind=\"image\"}"].map { Int($0) } == expected.filter { $0.key.contains("\"image\"") }.values.reduce(0, +))
        #expect((samples["runner_payload_bytes_total{kind=\"image\"}"] ?? 0) > 0)
        #expect(samples["runner_last_run_success"] == 0)
        let end = try #require(samples["runner_last_run_end_timestamp_seconds"])
        #expect(abs(end - Date().timeIntervalSince1970) < 60)
    }

    @Test(.enabled(if: promtool != nil, "promtool is not installed (Debian's prometheus package)"))
    func watchWritesMetricsWithTheSpoolAtExit() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let path = "\(s.w.root)/watch.prom"
        let watcher = try s.startWatcher(["--metrics", path])
        defer { watcher.terminate() }
        try s.drop("a.json", s.imageJob("image:a"))
        try s.drop("b.json", #"{"kind": "image", "key": "image:b", "url": "\#(s.base)/images/none.png"}"#)
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.done).count == 1 && s.jobFiles(s.spool.failed).count == 1 })
        #expect(await s.wait(upTo: .seconds(5)) { FileManager.default.fileExists(atPath: path) }, "written at start, before 10 s")
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await s.exit(of: watcher, upTo: .seconds(10)) == 0)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let check = try await RunnerBinary.runExecutable(Self.promtool!, ["check", "metrics"], in: s.w.root, stdin: text)
        #expect(check.status == 0, "promtool: \(check.stdout) \(check.stderr)\n\(text)")
        let samples = Self.samples(text)
        #expect(samples["runner_jobs_total{kind=\"image\",status=\"succeeded\"}"] == 1)
        #expect(samples["runner_jobs_total{kind=\"image\",status=\"notFound\"}"] == 1)
        #expect(samples["runner_spool_files_total{outcome=\"done\"}"] == 1)
        #expect(samples["runner_spool_files_total{outcome=\"failed\"}"] == 1)
        #expect(samples["runner_queued_files"] == 0)
        #expect(samples["runner_running_jobs"] == 0)
        #expect(s.names(s.w.root).allSatisfy { !$0.hasPrefix(".tmp-") }, "written through a temporary file, none left")
    }

    /// `name{labels} value` lines of the text format.
    static func samples(_ text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    // MARK: - Signals and cancels

    /// `runner run --json | head -1`: the closed pipe ends the printing, not the run.
    @Test func aClosedStdoutDoesNotStopTheRun() async throws {
        let w = try Workspace()
        let count = 300
        let jobs = w.write("jobs.jsonl", (0..<count).map { #"{"kind": "image", "key": "image:p\#($0)", "url": "\#(w.base)/images/png.png?p=\#($0)"}"# }.joined(separator: "\n"))
        let script = "\"$RUNNER\" run \"$JOBS\" --json --concurrency 4 --out \"$OUT\" | head -1; echo \"status ${PIPESTATUS[0]}\""
        let result = try await RunnerBinary.runExecutable(
            "/bin/bash", ["-c", script], in: w.root, environment: ["RUNNER": RunnerBinary.path, "JOBS": jobs, "OUT": w.out])
        #expect(result.stdout.contains("status 0"), "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2, "one line through head, then the status")
        let records = try FileManager.default.contentsOfDirectory(atPath: "\(w.out)/results")
        #expect(records.count == count, "every record is written")
    }

    /// A tree whose children hang: cancelled beyond the grace, the parent ends cancelled (not
    /// failed because its children were), and its file goes back to inbox/.
    @Test func aCancelledParentEndsCancelledAndItsFileGoesBackToInbox() async throws {
        let s = try SpoolWorld()
        let watcher = try s.startWatcher(["--grace", "0.3"])
        try s.drop("tree.json", #"{"kind": "tree", "key": "tree:slow", "url": "\#(s.base)/data.json", "entries": "\#(s.base)/entries/{id}.json?hang=1", "timeout": 30}"#)
        #expect(await s.wait(upTo: .seconds(10)) { s.w.server.requestCount(path: "/data.json") == 1 && s.names(s.spool.locks).count > 1 })
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await s.exit(of: watcher, upTo: .seconds(10)) == 0)
        let record = try s.w.record("tree:slow")
        #expect(record["status"] == .string("cancelled"), "\(record)")
        #expect(s.names(s.spool.inbox) == ["tree.json"], "back in line: \(s.log())")
        #expect(s.jobFiles(s.spool.failed).isEmpty)
    }
}
