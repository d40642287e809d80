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

/// An image header is judged as soon as it arrives: a body behind a header that declares too many
/// pixels (or too few) is never fetched.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(1)))
struct ImageHeaderFirstTests {
    @Test func aBombStopsAtItsHeaderNotAtItsHundredMegabytes() async throws {
        let w = try Workspace()
        let body = 100_000_000
        // maxBytes lets the 100 MB through, so only the header can stop it. Trickled after its
        // first 64 KiB, the body would run into the 5 s deadline (`timedOut`); judged at its
        // header, it fails at once.
        w.write("bombs.jsonl", """
            {"kind": "image", "key": "fast", "url": "\(w.base)/bomb/\(body)", "timeout": 5, "maxBytes": 200000000}
            {"kind": "image", "key": "slow", "url": "\(w.base)/bomb/\(body)?trickle=50&trickleAfter=65536", "timeout": 5, "maxBytes": 200000000}
            {"kind": "image", "key": "small", "url": "\(w.base)/images/png.png?trickle=20&trickleAfter=40", "minWidth": 100, "timeout": 5}
            """ + "\n")
        let started = ContinuousClock.now
        let result = try await w.run(["run", "bombs.jsonl"])
        let took = started.duration(to: .now)
        #expect(result.status == 4)
        for key in ["fast", "slow"] {
            let record = try w.record(key)
            #expect(record["status"] == .string("failed"), "\(key): \(record)")
            let error = record["error"]?.stringValue ?? ""
            #expect(error.contains("100000x100000 = 10000000000 pixels, more than maxPixels"), "\(key): \(error)")
        }
        let small = try w.record("small")
        #expect(small["error"]?.stringValue?.contains("smaller than minWidth x minHeight (100x0)") == true, "\(small)")
        #expect(took < .seconds(4), "no job waited for its body: \(took)")
        #expect(w.leftovers().isEmpty)
    }
}
