import Foundation
import RunnerKit
import Synchronization
import RunnerTestSupport
import Testing

/// `maxBytes` holds against bodies far over it, after content decoding, in bounded memory.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)))
struct SizeLimitTests {
    static let hugeBody = 300 << 20
    static let memoryCeiling = 200 << 20

    @Test(arguments: [
        "/gzip/\(hugeBody)",  // about 300 KiB on the wire, 300 MiB once inflated
        "/bytes/\(hugeBody)",  // Content-Length says 300 MiB
        "/bytes/\(hugeBody)?chunked=1",  // no length: counted as it arrives
    ])
    func hugeBodyFailsNamingTheLimitInBoundedMemory(path: String) async throws {
        let w = try Workspace()
        w.write("huge.json", #"{"kind": "image", "key": "huge", "url": "\#(w.base)\#(path)", "timeout": 30}"#)
        let peak = Mutex(0)
        let result = try await w.run(["run", "huge.json"]) { process in
            let value = await PeakMemory.watch(process)
            peak.withLock { $0 = value }
        }
        #expect(result.status == 4)
        let record = try w.record("huge")
        #expect(record["status"] == .string("failed"))
        let error = record["error"]?.stringValue ?? ""
        #expect(error.contains("maxBytes (67108864 bytes"), "\(error)")
        #expect(w.outputFiles().filter { !$0.hasPrefix("results/") && !$0.hasPrefix("runs/") && $0 != ".lock" } == [], "nothing written")
        #expect(w.leftovers().isEmpty)
        let mebibytes = Double(peak.withLock { $0 }) / 1_048_576
        print("peak resident memory for \(path): \(String(format: "%.1f", mebibytes)) MiB")
        #expect(peak.withLock { $0 } > 0, "the peak was measured")
        #expect(peak.withLock { $0 } < Self.memoryCeiling, "peak \(mebibytes) MiB")
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
