import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// What every record promises, whatever its kind: `bytes` and `sha256` describe the file at its
/// `output`, and `url` is the job's URL without credentials.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct RecordTests {
    /// Every record of a directory, by key.
    static func records(_ w: Workspace) throws -> [String: JSONValue] {
        let folder = "\(w.out)/results"
        var records: [String: JSONValue] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name.hasSuffix(".json") {
            let bytes = try #require(FileManager.default.contents(atPath: "\(folder)/\(name)"))
            let record = try JSONParser.parse([UInt8](bytes))
            records[try #require(record["key"]?.stringValue)] = record
        }
        return records
    }

    static func expectRecordsDescribeTheirFiles(_ w: Workspace, kinds expected: Set<String>) throws {
        let records = try Self.records(w)
        var kinds = Set<String>()
        for (key, record) in records {
            guard let output = record["output"]?.stringValue else { continue }
            kinds.insert(record["kind"]?.stringValue ?? "")
            let file = try #require(w.payload(output), "\(key): its output \(output) exists")
            #expect(record["bytes"]?.intValue == file.count, "\(key): bytes describe \(output)")
            #expect(record["sha256"]?.stringValue == SHA256.hex(file), "\(key): sha256 describes \(output)")
        }
        #expect(kinds.isSuperset(of: expected), "records of every kind were checked: \(kinds.sorted())")
    }

    @Test func bytesAndDigestDescribeTheFileAtOutputForEveryKind() async throws {
        let w = try Workspace()
        w.write("jobs.json", """
            [{"kind": "tree", "key": "tree:t", "url": "\(w.base)/data.json", "entries": "\(w.base)/entries/{id}.json"},
             {"kind": "image-list", "key": "list:l", "url": "\(w.base)/images.json"},
             {"kind": "image", "key": "image:one", "url": "\(w.base)/images/png.png"},
             {"kind": "entry", "id": "imgly.A.1", "url": "\(w.base)/entries/{id}.json"}]
            """)
        let first = try await w.run(["run", "jobs.json"])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        try Self.expectRecordsDescribeTheirFiles(w, kinds: ["tree", "image-list", "image", "entry"])

        // The second run is answered 304 where the server can: the records carried forward still
        // describe the files.
        let second = try await w.run(["run", "jobs.json"])
        #expect(second.status == 0, "stderr: \(second.stderr)")
        #expect(try w.record("tree:t")["status"] == .string("notModified") || w.record("tree:t")["status"] == .string("succeeded"))
        try Self.expectRecordsDescribeTheirFiles(w, kinds: ["tree", "image-list", "image", "entry"])
    }

    @Test func recordsCarryTheURLWithoutCredentials() async throws {
        let w = try Workspace()
        let secret = "s3cr3t-\(UUID().uuidString.prefix(8))"
        let withCredentials = w.base.replacingOccurrences(of: "http://", with: "http://someone:\(secret)@")
        w.write("job.json", #"{"kind": "entry", "id": "imgly.A.1", "url": "\#(withCredentials)/entries/{id}.json"}"#)
        let result = try await w.run(["run", "job.json", "--json"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let record = try w.record("entry:imgly.A.1")
        #expect(record["url"] == .string("\(w.base)/entries/imgly.A.1.json"))
        #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
        for file in w.outputFiles() {
            let text = String(decoding: w.payload(file) ?? [], as: UTF8.self)
            #expect(!text.contains(secret), "\(file) holds no credentials")
        }
    }
}
