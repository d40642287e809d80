import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// The `checksum` job field: the payload must have that SHA-256, else the job fails, is not
/// retried, and nothing is written.
@Suite(.startsProcesses, .timeLimit(.minutes(1)))
struct ChecksumTests {
    @Test func aMatchingChecksumSucceedsAndAMismatchFailsWithBothDigestsAndWritesNothing() async throws {
        let w = try Workspace()
        let right = SHA256.hex(Array(FixtureCatalog.entryJSON(id: "imgly.A.1").utf8))
        let wrong = String(repeating: "0", count: 64)
        w.write("jobs.json", """
            [{"kind": "entry", "id": "imgly.A.1", "key": "entry:right", "url": "\(w.base)/entries/{id}.json", "checksum": "sha256:\(right.uppercased())"},
             {"kind": "entry", "id": "imgly.A.1", "key": "entry:wrong", "url": "\(w.base)/entries/{id}.json", "checksum": "sha256:\(wrong)", "retries": 2}]
            """)
        let result = try await w.run(["run", "jobs.json"])
        #expect(result.status == 1, "\(result.stderr)")
        let good = try w.record("entry:right")
        #expect(good["status"] == .string("succeeded"))
        #expect(good["sha256"] == .string(right))
        let bad = try w.record("entry:wrong")
        #expect(bad["status"] == .string("failed"))
        #expect(bad["attempts"]?.intValue == 1, "a mismatch is not retried")
        #expect(bad["output"] == .null, "nothing was written for it")
        let error = bad["error"]?.stringValue ?? ""
        #expect(error.contains("sha256:\(wrong)") && error.contains("sha256:\(right)"), "\(error)")
        #expect(!w.outputFiles().contains("entries/wrong.json"))
    }

    @Test func aMalformedChecksumMakesTheFileInvalid() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "entry", "id": "x", "url": "\#(w.base)/entries/{id}.json", "checksum": "md5:abc"}"#)
        let result = try await w.run(["run", "job.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("field 'checksum' must be sha256: followed by 64 hexadecimal digits"), "\(result.stderr)")
        #expect(w.server.totalRequests == 0)
    }
}
