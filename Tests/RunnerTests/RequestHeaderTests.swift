import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// What every request says of itself: the runner's version in the User-Agent, and in Accept
/// what the kind validates.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct RequestHeaderTests {
    @Test func requestsNameTheRunnersVersionAndWhatTheKindAccepts() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "entry", "id": "x", "key": "entry:echo", "url": "\#(w.base)/echo-headers?id={id}"}"#)
        let result = try await w.run(["run", "job.json"])
        #expect(result.status == 0, "\(result.stderr)")
        let output = try #require(try w.record("entry:echo")["output"]?.stringValue)
        let headers = try JSONParser.parse(try #require(w.payload(output)))
        #expect(headers["user-agent"] == .string("runner/\(RunnerVersion.current)"))
        #expect(headers["accept"] == .string("application/json"))
    }
}
