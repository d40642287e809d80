import RunnerKit

/// `entry`: one entry JSON object, fetched by id (`{id}` in the URL is replaced).
public struct EntryKind: JobKind {
    public static let name = "entry"
    public static let summary = "Fetches one entry object by id; 404 and 410 end notFound."
    public static let parameters = [
        KindParameter("id", type: .identifier, required: true, "The entry's id; replaces {id} in the url."),
    ]
    public static let accept: String? = "application/json"

    /// The entry's id, as text (a whole number in a job is written in decimal): it fills `{id}` in
    /// the URL and makes the key `entry:<id>`.
    public let id: String

    /// An entry job's parameters for `id`; unlike a job file's, an empty id is not refused here.
    public init(id: String) { self.id = id }

    public init(fields: inout JobFields) throws(JobSpecError) {
        guard let id = try fields.identifier("id") else { throw JobSpecError(field: "id", "is missing") }
        guard !id.isEmpty else { throw JobSpecError(field: "id", "must not be empty") }
        self.id = id
    }

    public func resolveURL(_ template: String) -> String { URLTemplate.fill(template) { $0 == "id" ? id : nil } }

    public func defaultKey(kind: String, url: String) -> String { "entry:\(id)" }

    public func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: "entries")
        if case .fetched(let response) = fetch {
            let document = try await JSONPayload.parse(response.payload, expected: "an entry object")
            guard case .object = document else {
                throw JobFailure.failed("expected an entry object, but the JSON holds \(document.typeDescription)", httpStatus: response.head.status)
            }
        }
        return .fetched(fetch, folder: "entries", fileExtension: "json", details: [("id", .string(id))])
    }
}
