import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// `stall` and `lowSpeed`: a body that stops (or crawls below `lowSpeed`) fails its attempt as
/// `timedOut` after `stall` seconds, long before its deadline; one that keeps moving is never cut.
/// (Its bounds are wide enough to share the machine: it runs beside other suites.)
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct StallTests {
    @Test(arguments: ["curl", "urlsession"])
    func aBodyThatStopsFailsAfterItsStallAndAMovingOneIsNeverCut(http: String) async throws {
        let w = try Workspace()
        let entry = "\(w.base)/entries/{id}.json"
        w.write("jobs.jsonl", """
            {"kind": "entry", "id": "imgly.A.1", "key": "stops", "url": "\(entry)?trickleAfter=20&trickle=60000", "timeout": 30, "stall": 2}
            {"kind": "entry", "id": "imgly.A.1", "key": "crawls", "url": "\(entry)?trickle=20", "timeout": 30, "stall": 2, "lowSpeed": 200}
            {"kind": "entry", "id": "imgly.A.1", "key": "moves", "url": "\(entry)?trickle=20", "timeout": 30, "stall": 2, "lowSpeed": 10}
            """)
        let started = ContinuousClock.now
        let result = try await w.run(["run", "jobs.jsonl", "--http", http])
        let took = started.duration(to: .now)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(took < .seconds(20), "the stalled ones ended after their stall, not their 30 s deadline: \(took)")

        let stops = try w.record("stops")
        #expect(stops["status"] == .string("timedOut"), "\(stops)")
        #expect(stops["error"]?.stringValue?.hasPrefix("stalled: 0 bytes in the last 2 s") == true, "\(stops)")
        let crawls = try w.record("crawls")
        #expect(crawls["status"] == .string("timedOut") && crawls["error"]?.stringValue?.hasPrefix("stalled: ") == true, "\(crawls)")
        let moves = try w.record("moves")
        #expect(moves["status"] == .string("succeeded"), "50 bytes a second is above its lowSpeed of 10: \(moves)")
        #expect((moves["durationMs"]?.intValue ?? 0) > 2500, "it took longer than the stall, moving all along: \(moves)")
    }

    @Test func aStalledAttemptIsRetriedAndTheFieldsAreChecked() async throws {
        let w = try Workspace()
        w.write("bad.json", #"{"kind": "entry", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json", "stall": 0}"#)
        let bad = try await w.run(["run", "bad.json"])
        #expect(bad.status == 2 && bad.stderr.contains("stall"), "\(bad.stderr)")
        w.write("negative.json", #"{"kind": "entry", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json", "lowSpeed": -1}"#)
        #expect(try await w.run(["run", "negative.json"]).status == 2)

        w.write("retried.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "retried", "url": "\#(w.base)/entries/{id}.json?trickleAfter=10&trickle=60000", "timeout": 30, "stall": 1, "retries": 1}"#)
        let retried = try await w.run(["run", "retried.json"])
        #expect(retried.status != 0)
        let record = try w.record("retried")
        #expect(record["attempts"]?.intValue == 2 && record["status"] == .string("timedOut"), "\(record)")
        #expect(record["error"]?.stringValue?.contains("still failing after 2 attempts: stalled:") == true, "\(record)")
    }
}
