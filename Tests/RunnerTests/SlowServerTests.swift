import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// A server that keeps the connection busy but sends next to nothing cannot stretch the deadline.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)))
struct SlowServerTests {
    @Test(arguments: ["/images/png.png", "/bytes/100000?chunked=1"])
    func aTricklingServerEndsTimedOutAtTheDeadline(path: String) async throws {
        let w = try Workspace()
        let separator = path.contains("?") ? "&" : "?"
        w.write("slow.json", #"{"kind": "image", "key": "slow", "url": "\#(w.base)\#(path)\#(separator)trickle=100", "timeout": 1}"#)
        let started = ContinuousClock.now
        let result = try await w.run(["run", "slow.json"])
        let wall = ContinuousClock.now - started
        #expect(result.status == 4)
        let record = try w.record("slow")
        #expect(record["status"] == .string("timedOut"), "\(record["error"] ?? .null)")
        let duration = try #require(record["durationMs"]?.intValue)
        #expect(duration >= 990 && duration < 2500, "ended after \(duration) ms, deadline 1000 ms; the whole trickle takes about 9 s")
        #expect(wall < .seconds(5), "the runner itself ended after \(wall)")
        #expect(w.outputFiles().filter { $0.hasPrefix("images/") }.isEmpty, "nothing written")
        #expect(w.leftovers().isEmpty, "the partial body was removed")
    }

    @Test func retriesDoNotStretchEachAttemptsDeadline() async throws {
        let w = try Workspace()
        w.write("slow.json", #"{"kind": "image", "key": "slow", "url": "\#(w.base)/images/png.png?trickle=100", "timeout": 0.5, "retries": 2}"#)
        let result = try await w.run(["run", "slow.json"])
        #expect(result.status == 4)
        let record = try w.record("slow")
        #expect(record["status"] == .string("timedOut"))
        #expect(record["attempts"]?.intValue == 3)
        let duration = try #require(record["durationMs"]?.intValue)
        // Three attempts of 0.5 s and two backoffs of at most 0.5 s and 1 s (with jitter); an
        // attempt without its deadline would take about 9 s.
        #expect(duration >= 1490 && duration < 6000, "ended after \(duration) ms")
    }
}
