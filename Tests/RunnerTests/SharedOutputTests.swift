import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Processes writing to one output directory run one key once at a time: a `runner run` and a
/// `runner watch` with the same `--out` (two runs exclude each other whole: `.lock`).
@Suite(.measuresRealTime, .timeLimit(.minutes(2)))
struct SharedOutputTests {
    @Test func aRunAndAWatcherOnOneOutputNeverFetchOneKeyAtOnce() async throws {
        let s = try SpoolWorld()
        let w = s.w
        let path = "/entries/imgly.A.1.json"
        let slow = #"{"kind": "entry", "key": "shared", "id": "imgly.A.1", "url": "\#(w.base)\#(path)?delay=3000", "timeout": 30}"#
        w.write("slow.json", slow)
        // Whether a process holds the key's lock in the output: a lock of our own is refused.
        let probe = OutputKeyLock(folder: "\(w.out)/.locks")
        func held() -> Bool {
            switch probe.lock(key: "shared") {
            case .acquired(let release):
                release()
                return false
            case .heldElsewhere, .unavailable:
                return true
            }
        }
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }

        // Given a run fetching the key slowly, holding its lock in the output.
        async let run = w.run(["run", "slow.json"])
        #expect(await s.wait(upTo: .seconds(20)) { held() }, "the run holds the key")

        // When the watcher is handed a job of the same key, it ends it duplicate, unfetched.
        try s.drop("same.json", slow)
        #expect(await s.wait(upTo: .seconds(20)) { !(s.records(s.spool.done, "same.json") + s.records(s.spool.failed, "same.json")).isEmpty })
        let refused = s.records(s.spool.done, "same.json") + s.records(s.spool.failed, "same.json")
        #expect(refused.map { $0["status"] } == [.string("duplicate")], "\(refused) \(s.log())")
        #expect(refused.first?["error"]?.stringValue?.hasSuffix("in another process or engine") == true)

        // Then the run ends as it would alone, its record standing, and the server saw one fetch.
        let ran = try await run
        #expect(ran.status == 0, "\(ran.stderr)")
        #expect(try w.status("shared") == "succeeded")
        #expect(w.server.requestCount(path: path) == 1)

        // And the other way round: the watcher holds the key (asking whether the run's payload
        // is still current), the run ends it duplicate.
        try s.drop("again.json", slow)
        #expect(await s.wait(upTo: .seconds(20)) { held() }, "the watcher holds the key")
        let second = try await w.run(["run", "slow.json", "--json"])
        #expect(second.status != 0)
        #expect(second.stdout.contains(#""status":"duplicate""#), "\(second.stdout)")
        #expect(await s.wait(upTo: .seconds(20)) { s.records(s.spool.done, "again.json").first?["status"] == .string("notModified") })
        #expect(w.server.requestCount(path: path) == 2)

        // The lock folder (its one file, the key free) trips nothing that walks the output.
        #expect(await s.wait(upTo: .seconds(5)) { !held() })
        #expect((try? FileManager.default.contentsOfDirectory(atPath: "\(w.out)/.locks")) == ["keys"])
        let pruned = try await w.run(["prune", "--out", w.out])
        #expect(pruned.status == 0, "\(pruned.stderr)")
        let forgot = try await w.run(["forget", "--all", "--out", w.out])
        #expect(forgot.status == 0, "\(forgot.stderr)")
        #expect(!forgot.stdout.contains(".locks"), "\(forgot.stdout)")
    }
}
