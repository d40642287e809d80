import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Checking a payload counts against the attempt's deadline, and runs off the threads that
/// other jobs' deadlines run on.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(3)))
struct CheckDeadlineTests {
    @Test func aCheckThatOutlastsTheDeadlineEndsTimedOutAndOthersStayOnTime() async throws {
        let w = try Workspace()
        let members = 2_000_000
        // The server makes the body once before the test, so the time goes to the check.
        #expect(FixtureRoutesProbe.warm(w.base, members: members))
        var lines: [String] = []
        for i in 0..<3 {
            lines.append(#"{"kind": "entry", "id": "big\#(i)", "key": "big:\#(i)", "url": "\#(w.base)/object/\#(members)?n={id}", "timeout": 0.5}"#)
        }
        for i in 0..<200 {
            lines.append(#"{"kind": "entry", "id": "h\#(i)", "key": "hang:\#(i)", "url": "\#(w.base)/entries/h\#(i).json?hang=1", "timeout": 1}"#)
        }
        w.write("jobs.jsonl", lines.joined(separator: "\n") + "\n")
        let result = try await w.run(["run", "jobs.jsonl", "--concurrency", "300", "--per-host", "300"])
        #expect(result.status == 4)
        for i in 0..<3 {
            let record = try w.record("big:\(i)")
            #expect(record["status"] == .string("timedOut"), "\(record)")
            let duration = record["durationMs"]?.intValue ?? 0
            // ±100 ms on an idle machine; wider here, where the tests share two cores.
            #expect((450...1500).contains(duration), "big:\(i) ended after \(duration) ms, deadline 500 ms")
        }
        var late: [Int] = []
        for i in 0..<200 {
            let record = try w.record("hang:\(i)")
            #expect(record["status"] == .string("timedOut"))
            late.append((record["durationMs"]?.intValue ?? 0) - 1000)
        }
        late.sort()
        #expect(late.first ?? -1 >= -10, "none ends before its deadline")
        #expect(late[late.count * 99 / 100] < 2000, "p99 lateness \(late[late.count * 99 / 100]) ms")
    }
}

/// Fetches a route once so the server has made its body.
enum FixtureRoutesProbe {
    static func warm(_ base: String, members: Int) -> Bool {
        guard let url = URL(string: "\(base)/object/\(members)"), let data = try? Data(contentsOf: url) else { return false }
        return data.count > members * 10
    }
}
