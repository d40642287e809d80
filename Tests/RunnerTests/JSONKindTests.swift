import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// The built-in `json` kind: any JSON document, with JSON Pointers it must hold.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct JSONKindTests {
    @Test func anyDocumentIsFetchedAndWhatItMustHoldIsChecked() async throws {
        let w = try Workspace()
        w.write("api.jsonl", """
            {"kind": "json", "key": "array", "url": "\(w.base)/images.json", "require": ["/0/imageUrl", "/3/id"]}
            {"kind": "json", "key": "object", "url": "\(w.base)/entries/imgly.A.1.json"}
            {"kind": "json", "key": "missing", "url": "\(w.base)/images.json", "require": ["/0/imageUrl", "/0/title", "/999"]}
            {"kind": "json", "key": "html", "url": "\(w.base)/images.json?html=1"}
            {"kind": "json", "key": "gone", "url": "\(w.base)/entries/nothing.json"}
            """)
        let result = try await w.run(["run", "api.jsonl"])
        #expect(result.status == 1, "\(result.stderr)")

        let array = try w.record("array")
        #expect(array["status"]?.stringValue == "succeeded")
        #expect(array["details"]?["type"]?.stringValue == "array")
        #expect((array["details"]?["elements"]?.intValue ?? 0) > 3)
        let output = try #require(array["output"]?.stringValue)
        #expect(output.hasPrefix("json/") && output.hasSuffix(".json"), "\(output)")
        let payload = try #require(w.payload(output))
        #expect(payload.count == array["bytes"]?.intValue)
        #expect(try JSONParser.parse(payload)["0"] == nil && payload.first == UInt8(ascii: "["), "the document as it came")

        #expect(try w.record("object")["details"]?["type"]?.stringValue == "object")
        let missing = try w.record("missing")
        #expect(missing["status"]?.stringValue == "failed")
        #expect(missing["error"]?.stringValue == "the document has nothing at /0/title, which require lists (and 1 more of the 3 required)")
        #expect(missing["output"] == .null, "nothing is written for a document that lacks what it must hold")
        #expect(try w.record("html")["error"]?.stringValue?.contains("JSON") == true)
        #expect(try w.status("gone") == "notFound")

        // Asked again, the server says not modified; what it must hold is checked again.
        let again = try await w.run(["run", "api.jsonl"])
        #expect(again.status == 1)
        #expect(try w.status("array") == "notModified")
    }

    @Test func aPointerThatIsNotOneIsRefusedBeforeAnythingRuns() async throws {
        let w = try Workspace()
        w.write("bad.json", #"{"kind": "json", "url": "\#(w.base)/images.json", "require": ["data/id"]}"#)
        let result = try await w.run(["run", "bad.json"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("field 'require'"), "\(result.stderr)")
        #expect(result.stderr.contains("must be empty or start with '/'"), "\(result.stderr)")
        #expect(w.server.totalRequests == 0)
    }
}
