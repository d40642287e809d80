import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// Retries follow transient failures only, each attempt with its own deadline.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(1)))
struct RetryTests {
    @Test func transientFailuresAreRetriedAndCounted() async throws {
        let w = try Workspace()
        w.write("jobs.json", """
            [{"kind": "entry", "id": "a", "key": "503", "url": "\(w.base)/entries/imgly.A.1.json?status=503", "retries": 2},
             {"kind": "entry", "id": "a", "key": "404", "url": "\(w.base)/entries/missing.json", "retries": 3},
             {"kind": "entry", "id": "a", "key": "403", "url": "\(w.base)/entries/imgly.A.1.json?status=403", "retries": 3},
             {"kind": "image", "key": "html", "url": "\(w.base)/images/png.png?html=1", "retries": 3}]
            """)
        let result = try await w.run(["run", "jobs.json"])
        #expect(result.status == 4)
        let transient = try w.record("503")
        #expect(transient["status"] == .string("failed"))
        #expect(transient["attempts"]?.intValue == 3)
        #expect(w.server.requestCount(path: "/entries/imgly.A.1.json") == 3 + 1, "three for 503, one for 403")
        #expect(try w.record("404")["attempts"]?.intValue == 1, "404 is never retried")
        #expect(w.server.requestCount(path: "/entries/missing.json") == 1)
        #expect(try w.record("403")["attempts"]?.intValue == 1, "other 4xx are not retried")
        #expect(try w.record("html")["attempts"]?.intValue == 1, "an invalid payload is not retried")
    }

    @Test func retryAfterIsHonoured() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "entry", "id": "a", "key": "busy", "url": "\#(w.base)/entries/x.json?status=503&retryAfter=1", "retries": 1}"#)
        _ = try await w.run(["run", "job.json"])
        let record = try w.record("busy")
        #expect(record["attempts"]?.intValue == 2)
        let duration = try #require(record["durationMs"]?.intValue)
        #expect(duration >= 1000 && duration < 4000, "waited \(duration) ms for Retry-After: 1")
    }

    @Test func eachAttemptHasItsOwnDeadline() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "entry", "id": "a", "key": "slow", "url": "\#(w.base)/entries/x.json?hang=1", "timeout": 0.3, "retries": 2}"#)
        _ = try await w.run(["run", "job.json"])
        let record = try w.record("slow")
        #expect(record["status"] == .string("timedOut"))
        #expect(record["attempts"]?.intValue == 3)
        let duration = try #require(record["durationMs"]?.intValue)
        // Three deadlines of 0.3 s plus two backoffs of at least 0.125 s and 0.25 s.
        #expect(duration >= 3 * 300 + 125 + 250 && duration < 6000, "took \(duration) ms")
    }
}

@Suite struct BackoffTests {
    @Test func exponentialWithJitterAndCaps() {
        let backoff = Backoff(base: .milliseconds(250), cap: .seconds(8), retryAfterCap: .seconds(30))
        #expect(backoff.delay(afterAttempt: 1, retryAfter: nil, random: 0) == .milliseconds(125))
        #expect(backoff.delay(afterAttempt: 1, retryAfter: nil, random: 1) == .milliseconds(250))
        #expect(backoff.delay(afterAttempt: 3, retryAfter: nil, random: 1) == .milliseconds(1000))
        #expect(backoff.delay(afterAttempt: 30, retryAfter: nil, random: 1) == .seconds(8))
        #expect(backoff.delay(afterAttempt: 2, retryAfter: .seconds(3)) == .seconds(3))
        #expect(backoff.delay(afterAttempt: 2, retryAfter: .seconds(3600)) == .seconds(30))
    }
}
