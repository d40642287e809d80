import RunnerKit

/// `entry`: one entry JSON object, fetched by id (`{id}` in the URL is replaced).
public struct EntryKind: JobKind {
    public static let name = "entry"
    public static let summary = "Fetches one entry object by id; 404 and 410 end notFound."
    public static let parameters = [
        KindParameter("id", type: "string", required: true, "The entry's id; replaces {id} in the url."),
    ]

    public let id: String

    public init(id: String) { self.id = id }

    public init(fields: inout JobFields) throws(JobSpecError) {
        guard let id = try fields.identifier("id") else { throw JobSpecError(field: "id", "is missing") }
        guard !id.isEmpty else { throw JobSpecError(field: "id", "must not be empty") }
        self.id = id
    }

    public func resolveURL(_ template: String) -> String { JSONPayload.fill(template, id: id) }

    public func defaultKey(url: String) -> String { "entry:\(id)" }

    public func run(in context: JobContext) async throws -> JobOutcome {
        let response = try await context.fetch(into: context.payloadFolder(default: "entries"))
        let document = try JSONPayload.parse(response.payload, expected: "an entry object")
        guard case .object = document else {
            throw JobFailure.failed("expected an entry object, but the JSON holds \(document.typeDescription)", httpStatus: response.head.status)
        }
        let path = try context.commit(response.payload, to: context.payloadPath(folder: "entries", fileExtension: "json"))
        return JobOutcome(
            output: path, httpStatus: response.head.status, bytes: response.payload.count,
            sha256: response.payload.sha256, details: [("id", .string(id))])
    }
}
