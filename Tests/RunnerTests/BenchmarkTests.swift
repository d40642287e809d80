import FixtureServer
import Foundation
import Glibc
import RunnerKinds
import RunnerKit
import RunnerTestSupport
import Synchronization
import Testing

/// Measurements, not assertions: run by Tests/Benchmarks/engine.sh (RUNNER_BENCH=1, release
/// build), which prints the rows. Skipped in the ordinary test run.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["RUNNER_BENCH"] != nil))
struct BenchmarkTests {
    static func row(_ name: String, _ value: String, _ target: String) {
        print("| \(name) | \(value) | \(target) |")
    }

    static func residentMiB() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
            let pages = text.split(separator: " ").dropFirst().first.flatMap({ Double($0) })
        else { return 0 }
        return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1_048_576
    }

    @Test func engineCostPerJob() async throws {
        let w = try Workspace()
        let engine = try JobEngine(configuration: .init(store: try OutputStore(root: w.out), http: RecordingHTTP.instant()).with {
            $0.concurrency = 64
            $0.perHost = 64
        })
        let count = 100_000
        let jobs = (0..<count).lazy.map { i in
            JobDescriptor(EntryKind(id: "e\(i)"), key: "e\(i)", url: URL(string: "http://127.0.0.1:9/e\(i)")!)
        }
        let start = ContinuousClock.now
        let summary = await engine.run(jobs)
        let elapsed = start.duration(to: .now)
        let micros = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
        Self.row("engine cost, \(count) jobs (payload + record written each)", String(format: "%.1f µs/job", micros / Double(count)), "≤ 20 µs")
        #expect(summary.counts[.succeeded] == count)
    }

    /// What the files of `engineCostPerJob` cost by themselves: per job a plain loop makes,
    /// writes and renames a payload in entries/ and a record in results/, and appends a run-log
    /// line, with the system calls the output store uses, on one thread. (The engine writes
    /// payloads and records on different threads, so on a slow disk it may beat this loop.)
    @Test func fileSystemFloorPerJob() throws {
        let w = try Workspace()
        let count = 100_000
        func folder(_ name: String) throws -> Int32 {
            try FileManager.default.createDirectory(atPath: "\(w.out)/\(name)", withIntermediateDirectories: true)
            return open("\(w.out)/\(name)", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        let entries = try folder("entries")
        let results = try folder("results")
        let runs = try folder("runs")
        let logFD = openat(runs, "run.jsonl", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        defer { close(entries); close(results); close(runs); close(logFD) }
        let payload = Array(#"{"id":"x"}"#.utf8)
        let record = [UInt8](repeating: UInt8(ascii: "x"), count: 400)
        func atomicWrite(_ bytes: [UInt8], in folder: Int32, name: String, temporary: String) {
            let fd = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o666)
            precondition(fd >= 0, "openat failed: \(errno)")
            _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress!, $0.count) }
            close(fd)
            precondition(renameat(folder, temporary, folder, name) == 0, "renameat failed: \(errno)")
        }
        let recordNames = (0..<count).map { OutputStore.fileName(forKey: "e\($0)") + ".json" }
        let start = ContinuousClock.now
        for i in 0..<count {
            atomicWrite(payload, in: entries, name: "e\(i).json", temporary: ".tmp-\(i)")
            atomicWrite(record, in: results, name: recordNames[i], temporary: ".tmp-\(i)")
            _ = record.withUnsafeBytes { Glibc.write(logFD, $0.baseAddress!, 300) }
        }
        let elapsed = start.duration(to: .now)
        let micros = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
        Self.row("file-system floor: the same two files and run-log line per job, plain system calls on one thread",
                 String(format: "%.1f µs/job", micros / Double(count)), "(no target)")
        #expect(w.outputFiles().count == 2 * count + 1)
    }

    @Test func timersAtScale() async throws {
        let w = try Workspace()
        final class Collector: RunObserver {
            let results = Mutex<[Int]>([])
            func jobFinished(_ result: JobResult) { results.withLock { $0.append(result.durationMs) } }
        }
        let collector = Collector()
        let engine = try JobEngine(
            configuration: .init(store: try OutputStore(root: w.out), http: try testHTTPClient().make(maxConnectionsPerHost: 64)).with {
                $0.monitor = RouteMonitor()
                $0.concurrency = 1000
                $0.perHost = 1000
            },
            observer: collector)
        let jobs = (0..<1000).map { i in
            JobDescriptor(EntryKind(id: "h\(i)"), key: "h\(i)", url: URL(string: "\(w.base)/entries/h\(i).json?hang=1")!, timeout: .seconds(1))
        }
        let summary = await engine.run(jobs)
        let late = collector.results.withLock { $0 }.map { $0 - 1000 }.sorted()
        Self.row("1000 hanging jobs, deadline 1 s: ms past the deadline", "p50 \(late[late.count / 2]), p99 \(late[late.count * 99 / 100]), max \(late.last ?? 0)", "p99 ≤ 100")
        #expect(summary.counts[.timedOut] == 1000)
    }

    @Test func taskManagerMemoryOverDistinctKeys() async {
        let manager = TaskManager()
        for i in 0..<10_000 { _ = await manager.run(key: "warm-\(i)") { i } }
        let before = Self.residentMiB()
        for i in 0..<100_000 { _ = await manager.run(key: "key-\(i)") { i } }
        let after = Self.residentMiB()
        for i in 0..<100_000 { _ = await manager.run(key: "more-\(i)") { i } }
        let again = Self.residentMiB()
        Self.row("TaskManager, resident memory before / after 100 000 keys / after 200 000",
                 String(format: "%.1f / %.1f / %.1f MiB", before, after, again), "flat")
        #expect(manager.count == 0)
    }
}
