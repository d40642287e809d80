import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner watch` and `runner run` as services: systemd's notify protocol, Prometheus metrics,
/// signals, cancelled parents.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(3)))
struct ServiceTests {
    // MARK: - The notify protocol

    /// A listener on a Unix datagram socket, as systemd's NOTIFY_SOCKET; messages with the
    /// time they arrived.
    final class NotifyListener: @unchecked Sendable {
        let path: String
        private let fd: Int32
        private let messages = Locked<[(at: ContinuousClock.Instant, text: String)]>([])

        init(path: String) throws {
            self.path = path
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            self.fd = fd
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: Array(path.utf8) + [0])
            }
            let bound = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard bound == 0 else { throw Workspace.Missing(what: "bind \(path): \(String(cString: strerror(errno)))") }
            var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let messages = messages
            let thread = Thread {
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    if n > 0 {
                        let text = String(decoding: buffer[0..<n], as: UTF8.self)
                        messages.withLock { $0.append((.now, text)) }
                    } else if n < 0 && errno != EAGAIN && errno != EINTR {
                        return
                    }
                }
            }
            thread.start()
        }

        deinit {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
            unlink(path)
        }

        var received: [(at: ContinuousClock.Instant, text: String)] { messages.value }
        func lines(_ prefix: String) -> [(at: ContinuousClock.Instant, text: String)] {
            received.filter { $0.text.split(separator: "\n").contains { $0.hasPrefix(prefix) } }
        }
    }

    @Test func watchSpeaksTheNotifyProtocol() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let listener = try NotifyListener(path: "\(s.w.root)/notify.sock")
        // WATCHDOG_USEC of 1 s: WATCHDOG=1 due every 500 ms.
        let watcher = try s.startWatcher(environment: ["NOTIFY_SOCKET": listener.path, "WATCHDOG_USEC": "1000000"])
        defer { watcher.terminate() }

        #expect(await s.wait(upTo: .seconds(10)) { !listener.lines("READY=1").isEmpty })
        let ready = try #require(listener.lines("READY=1").first)
        #expect(ready.text.contains("STATUS=0 queued, 0 running, 0 done, 0 failed"), "\(ready.text)")
        #expect(s.log().contains("watching"), "READY=1 comes after the first scan")

        try s.drop("job.json", s.imageJob("image:notify"))
        #expect(await s.wait(upTo: .seconds(10)) { listener.lines("STATUS=").contains { $0.text.contains("1 done") } }, "\(listener.received.map(\.text))")
        // Over 2.5 s waited for on purpose, 5 pings are due: at least 3 must come, none more than
        // the watchdog's interval after the one before.
        let before = listener.lines("WATCHDOG=1").count
        try await Task.sleep(for: .milliseconds(2500))
        let pings = listener.lines("WATCHDOG=1").map(\.at)
        #expect(pings.count - before >= 3, "WATCHDOG=1 every 500 ms: \(pings.count - before) in 2.5 s")
        let gaps = zip(pings, pings.dropFirst()).map { $0.duration(to: $1) }
        #expect(gaps.allSatisfy { $0 < .seconds(1) }, "gaps \(gaps)")

        kill(watcher.processIdentifier, SIGTERM)
        #expect(await s.exit(of: watcher, upTo: .seconds(10)) == 0)
        let messages = listener.received.map(\.text)
        let stopping = try #require(messages.firstIndex { $0.hasPrefix("STOPPING=1") }, "\(messages)")
        #expect(messages.firstIndex { $0.hasPrefix("READY=1") }! < stopping)
    }

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

    /// SIGHUP is logrotate's: files are opened anew (here there are none) and the watcher goes
    /// on taking files; SIGTERM stops it.
    @Test func sighupIsLoggedAndTheWatcherGoesOn() async throws {
        let s = try SpoolWorld()
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("watching") })
        kill(watcher.processIdentifier, SIGHUP)
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("runner: SIGHUP: no file to reopen; still watching") }, "\(s.log())")
        try s.drop("after.json", s.imageJob("image:after"))
        #expect(await s.wait(upTo: .seconds(20)) { s.names(s.spool.done).contains("after.json") }, "\(s.log())")
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await s.exit(of: watcher, upTo: .seconds(10)) == 0)
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
