import Foundation
import Glibc
import RunnerTestSupport
import Testing

/// The fixture server (`runner fixture-server`) when the kernel refuses it a thread, held in a pids
/// cgroup of its own. A connection it takes is answered once a thread can be made again, or closed;
/// never left waiting for an answer that cannot come. (Foundation's `Thread.start()` ignored the
/// refusal, and a CI run's client once waited 30 s on a connection nobody served.)
@Suite(.startsProcesses, .serialized)
struct FixtureThreadLimitTests {
    /// A folder of the pids controller where this test may make a cgroup, or nil.
    static let pidsRoot: String? = {
        let version1 = "/sys/fs/cgroup/pids"
        if access("\(version1)/cgroup.procs", W_OK) == 0 { return version1 }
        let version2 = "/sys/fs/cgroup"
        let controllers = (try? String(contentsOfFile: "\(version2)/cgroup.subtree_control", encoding: .utf8)) ?? ""
        if controllers.split(separator: " ").contains(where: { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "pids" }),
            access("\(version2)/cgroup.procs", W_OK) == 0
        {
            return version2
        }
        return nil
    }()

    /// How many times the cgroup refused a task (the count after "max" in pids.events).
    static func refusals(_ group: String) -> Int {
        let text = (try? String(contentsOfFile: "\(group)/pids.events", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line -> Int? in
            let parts = line.split(separator: " ")
            return parts.count == 2 && parts[0] == "max" ? Int(parts[1]) : nil
        }.first ?? 0
    }

    static func set(_ group: String, _ file: String, _ value: String) throws {
        try value.write(toFile: "\(group)/\(file)", atomically: false, encoding: .utf8)
    }

    @Test(.enabled(if: pidsRoot != nil, "needs a pids cgroup it may make (root, cgroup v1 or v2 with pids)"))
    func aConnectionWithoutAThreadIsServedWhenOneCanBeMadeOrClosed() async throws {
        let root = try #require(Self.pidsRoot)
        let group = "\(root)/runner-test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: group, withIntermediateDirectories: false)
        let folder = NSTemporaryDirectory() + "fixture-limit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = "\(folder)/server.log"
        let server = try ChildProcess(RunnerBinary.path, ["fixture-server"], stdout: .file(log), stderr: .file(log))
        defer {
            server.terminate()
            // The cgroup can go only once its last task has.
            var tries = 0
            while rmdir(group) != 0 && errno == EBUSY && tries < 100 {
                usleep(50_000)
                tries += 1
            }
        }
        func announcedPort() -> UInt16? {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").first { $0.contains("listening on") }.flatMap { UInt16($0.split(separator: ":").last ?? "") }
        }
        await eventually("the server to say where it listens", limit: .seconds(10)) { announcedPort() != nil }
        let listening = try #require(announcedPort(), "\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        try Self.set(group, "cgroup.procs", "\(server.processIdentifier)")
        func threads() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.processIdentifier)/task"))?.count ?? 0
        }
        /// Holds the server to the threads it has, once their number held for 200 ms: the thread
        /// of an earlier connection has ended (else the limit would leave room for one more).
        func noMoreThreads() async throws {
            var count = threads(), since = ContinuousClock.now
            let end = since + .seconds(10)
            while since.duration(to: .now) < .milliseconds(200) && ContinuousClock.now < end {
                try await Task.sleep(for: .milliseconds(10))
                let now = threads()
                if now != count { (count, since) = (now, .now) }
            }
            try Self.set(group, "pids.max", "\(max(count, 1))")
        }
        let request = "GET /images/gif.gif HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"

        // Refused a thread, then let have one within the second the server keeps trying: answered.
        try await noMoreThreads()
        let before = Self.refusals(group)
        let first = try RawHTTP.connect(port: listening, timeout: .seconds(20))
        defer { close(first) }
        RawHTTP.send(first, request)
        // Off the pool, so that the limit is lifted well within that second on a busy machine too.
        let refused = try await offThePool { () throws -> Bool in
            let end = ContinuousClock.now + .seconds(10)
            while Self.refusals(group) == before && ContinuousClock.now < end { usleep(2_000) }
            try Self.set(group, "pids.max", "max")
            return Self.refusals(group) > before
        }
        #expect(refused, "the kernel refused the server a thread for the connection")
        let answer = String(decoding: await RawHTTP.readAll(first), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 200 "), "answered once a thread could be made: \(answer.prefix(80).debugDescription)")

        // Refused a thread for good: the connection is closed, not held.
        try await noMoreThreads()
        let refusedBefore = Self.refusals(group)
        let second = try RawHTTP.connect(port: listening, timeout: .seconds(20))
        defer { close(second) }
        RawHTTP.send(second, request)
        let started = ContinuousClock.now
        let closed = await RawHTTP.readAll(second)
        let waited = started.duration(to: .now)
        #expect(Self.refusals(group) > refusedBefore, "the kernel refused the server a thread again")
        #expect(closed.isEmpty && waited < .seconds(15), "closed without an answer, after \(waited): \(String(decoding: closed.prefix(80), as: UTF8.self).debugDescription)")
        #expect(waited >= .milliseconds(900), "closed once the server had tried for a second: \(waited)")

        // And once threads can be made again, the server serves as before.
        try Self.set(group, "pids.max", "max")
        let third = try RawHTTP.connect(port: listening, timeout: .seconds(20))
        defer { close(third) }
        RawHTTP.send(third, request)
        let again = String(decoding: await RawHTTP.readAll(third), as: UTF8.self)
        #expect(again.hasPrefix("HTTP/1.1 200 "), "\(again.prefix(80).debugDescription)")
    }
}
