import Foundation
import RunnerKit
import Synchronization
import RunnerTestSupport
import Testing

/// `maxBytes` holds against bodies far over it, after content decoding, in bounded memory.
/// (ImageHeaderFirstTests, which times a header judged before its body, is in SlowServerTests.swift.)
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
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
