import Foundation
import RunnerKinds
import RunnerKit
import RunnerTesting
import Testing

/// An `entry` job's payload is the entry of the job's id: `details.id` names it.
@Suite(.timeLimit(.minutes(1)))
struct EntryKindTests {
    /// The result of an entry job of `id` whose server answers `body`, and the engine's output.
    static func run(id: String, answer body: String) async throws -> (JobResult, String) {
        let url = "https://api.example.test/entries/\(id).json"
        let http = RecordingHTTP()
        http.script(url, .ok(body, headers: ["Content-Type": "application/json"]))
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("entry-\(UUID().uuidString)").path
        let engine = try JobEngine(configuration: .init(registry: BuiltInKinds.registry(), store: try OutputStore(root: out), http: http))
        let result = await engine.run(try JobDescriptor(EntryKind(id: id), url: "https://api.example.test/entries/{id}.json"))
        return (result, out)
    }

    @Test func aPayloadOfAnotherIdFailsNamingBoth() async throws {
        let (result, out) = try await Self.run(id: "imgly.A.1", answer: #"{"id": "imgly.A.2", "description": "the wrong one"}"#)
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(result.status == .failed && result.reason == .invalidPayload)
        #expect(result.error == #"the entry's id is "imgly.A.2", not the job's id "imgly.A.1""#)
        #expect(result.httpStatus == 200 && result.output == nil)
        #expect(!FileManager.default.fileExists(atPath: "\(out)/entries/imgly.A.1.json"), "nothing stored")
    }

    @Test(arguments: [
        ("7", #"{"id": 7}"#),  // a whole number, as a job's id may be
        ("imgly.A.1", #"{"id": "imgly.A.1", "createdBy": "du@ijdu.cm"}"#),
        ("imgly.A.1", #"{"createdBy": "du@ijdu.cm"}"#),  // no id to judge: taken as the job's
    ])
    func aPayloadOfTheJobsIdOrOfNoneIsTheEntry(id: String, body: String) async throws {
        let (result, out) = try await Self.run(id: id, answer: body)
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(result.status == .succeeded, "\(result.error ?? "")")
        #expect(result.detail("id")?.stringValue == id)
    }

    @Test(arguments: [#"{"id": null}"#, #"{"id": 7.5}"#, #"{"id": ["7"]}"#])
    func anIdThatIsNoIdFails(body: String) async throws {
        let (result, out) = try await Self.run(id: "7", answer: body)
        defer { try? FileManager.default.removeItem(atPath: out) }
        #expect(result.status == .failed && result.reason == .invalidPayload, "\(body)")
        #expect(result.error?.hasSuffix(#", not the job's id "7""#) == true, "\(result.error ?? "")")
    }
}
