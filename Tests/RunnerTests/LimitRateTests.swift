import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// `--limit-rate`: every transfer together at most RATE bytes a second.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)))
struct LimitRateTests {
    @Test(arguments: ["curl", "urlsession"])
    func twoTransfersTogetherKeepToTheRate(http: String) async throws {
        let w = try Workspace()
        // Two JSON documents of about 400 KB each: 800 KB at 320 KiB a second take about 2.4 s.
        w.write("jobs.jsonl", """
            {"kind": "json", "key": "a", "url": "\(w.base)/object/30000?n=1", "timeout": 30, "maxBytes": 10000000}
            {"kind": "json", "key": "b", "url": "\(w.base)/object/30000?n=2", "timeout": 30, "maxBytes": 10000000}
            """)
        let unlimited = ContinuousClock.now
        let fast = try await w.run(["run", "jobs.jsonl", "--http", http])
        let alone = unlimited.duration(to: .now)
        #expect(fast.status == 0, "\(fast.stdout)\(fast.stderr)")
        let bytes = try ["a", "b"].map { try #require(w.record($0)["bytes"]?.intValue) }.reduce(0, +)

        let limited = ContinuousClock.now
        let slow = try await w.run(["run", "jobs.jsonl", "--http", http, "--limit-rate", "320K"])
        let took = limited.duration(to: .now)
        #expect(slow.status == 0, "\(slow.stdout)\(slow.stderr)")
        let expected = Double(bytes) / (320 * 1024)
        #expect(took.inSeconds > expected * 0.85, "\(bytes) bytes at 320K: \(took), expected about \(expected) s (unlimited: \(alone))")
        #expect(took.inSeconds < expected * 1.6 + alone.inSeconds, "\(bytes) bytes at 320K: \(took), expected about \(expected) s")
    }

    @Test func aRateThatIsNotOneIsAUsageError() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "json", "key": "a", "url": "\#(w.base)/object/3"}"#)
        for bad in ["fast", "0", "-5K", "2X", ""] {
            let result = try await w.run(["run", "job.json", "--limit-rate", bad])
            #expect(result.status == 2 && result.stderr.contains("--limit-rate must be"), "\(bad): \(result.stderr)")
        }
        #expect(BandwidthLimit.parse("500K") == 512_000 && BandwidthLimit.parse("2M") == 2 << 20 && BandwidthLimit.parse("1.5k") == 1536)
        #expect(BandwidthLimit.parse("1000") == 1000 && BandwidthLimit.parse("1G") == 1 << 30)
    }
}
