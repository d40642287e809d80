import Foundation
import RunnerKit

/// `count`: a JSON array, stored as it arrived, with the number of its elements in the record.
/// The service's own kind, compiled in beside the built-in ones.
struct CountKind: JobKind {
    static let name = "count"
    static let summary = "Fetches a JSON array and counts its elements."
    static let parameters = [KindParameter("atLeast", type: .int, "Fewest elements accepted.")]
    static let accept: String? = "application/json"

    let atLeast: Int

    init(atLeast: Int = 0) { self.atLeast = atLeast }

    init(fields: inout JobFields) throws(JobSpecError) {
        atLeast = try fields.int("atLeast") ?? 0
    }

    func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "counts")
        guard case .fetched(let response) = fetch else {   // 304: the earlier payload stands
            return .fetched(fetch, folder: "counts", fileExtension: "json")
        }
        let bytes = try response.payload.bytes()
        let document = try? JSONSerialization.jsonObject(with: Data(bytes))
        guard let elements = document as? [Any], elements.count >= atLeast else {
            throw JobFailure.failed("expected a JSON array of at least \(atLeast) elements")
        }
        return .fetched(fetch, folder: "counts", fileExtension: "json", details: [("count", JSONValue(elements.count))])
    }
}
