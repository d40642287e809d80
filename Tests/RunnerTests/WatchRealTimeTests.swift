import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The watcher through the binary where the real clock is the subject: systemd's watchdog fed on
/// time, and the page answering on time while hostile clients press on it. It runs alone, so
/// that what it measures is the watcher, not the other suites. WatcherTests shows the same
/// notices on the test clock, LiveServerTests the server's limits in process.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(3)))
struct WatchRealTimeTests {
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

    @Test func aWatcherStartedBySystemdFeedsItsWatchdogOnTime() async throws {
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

    /// Ten thousand idle connections, slow requests and 1 GiB bodies while jobs run: the jobs
    /// finish, the API still answers, and the watcher's memory stays small.
    @Test func hostileClientsNeitherStopJobsNorGrowMemory() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Live/hostile-clients.py").standardized.path
        let world = try SpoolWorld()
        let (watcher, port) = try await LiveTests.startWatcher(world)
        defer { if watcher.isRunning { watcher.terminate() } }
        let before = PeakMemory.highWaterMark(pid: watcher.processIdentifier) ?? 0

        // 20 s: the server closes a slow request 10 s after it accepted it, which a loaded machine
        // may do seconds into the attack; each slow request must be closed before it ends.
        let attack = try ChildProcess(
            "/usr/bin/env", ["python3", script, "--port", String(port), "--token", LiveTests.token, "--seconds", "20"], stdout: .pipe, stderr: .inherit)
        defer { attack.terminate() }
        try await Task.sleep(for: .seconds(3))  // the attack under way

        // 60 jobs, a quarter of a second each, dropped while it goes on.
        var lines: [String] = []
        for index in 0..<60 {
            lines.append(#"{"kind": "entry", "key": "live:h\#(index)", "id": "imgly.A.1", "url": "\#(world.base)/entries/{id}.json?delay=250&n=\#(index)", "timeout": 20}"#)
        }
        try world.drop("during.jsonl", lines.joined(separator: "\n") + "\n")
        let finished = await world.wait(upTo: .seconds(30)) { world.jobFiles(world.spool.done).contains("during.jsonl") }
        #expect(finished, "\(world.log())")
        #expect(world.records(world.spool.done, "during.jsonl").filter { $0["status"]?.stringValue == "succeeded" }.count == 60)

        let output = try #require(attack.output)
        let report = try JSONParser.parse(Array(await offThePool { output.readDataToEndOfFile() }))
        await attack.waitUntilExit()
        #expect(attack.terminationStatus == 0)
        #expect((report["idleOpened"]?.intValue ?? 0) >= 5_000, "\(report)")
        #expect(report["bigPostStatus"]?.intValue == 413, "\(report)")
        #expect(report["bigPostSentMiB"]?.intValue ?? 1024 < 64, "the 1 GiB body was refused before it was read: \(report)")
        #expect(report["slowClosed"]?.intValue == report["slowOpened"]?.intValue, "every slow request was closed: \(report)")
        #expect((report["statusAnswered"]?.intValue ?? 0) >= 5, "the API answered during the attack: \(report)")
        #expect((report["statusWorstMs"]?.intValue ?? 99_999) < 3_000, "\(report)")
        let peak = PeakMemory.highWaterMark(pid: watcher.processIdentifier) ?? 0
        #expect(peak - before < 64 << 20, "memory grew by \((peak - before) >> 20) MiB (from \(before >> 20) MiB)")
        // Still serving once it is over.
        #expect(try await RawHTTP.exchange(port: port, "GET /api/status HTTP/1.1", headers: LiveTests.auth).status == 200)
        await LiveTests.stop(watcher, world)
    }
}
