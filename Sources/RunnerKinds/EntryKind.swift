import RunnerKit

/// `entry`: one entry JSON object, fetched by id (`{id}` in the URL is replaced). The object's
/// own `id`, when it has one, must be the job's: `details.id` says which entry the payload is.
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
            if let found = document["id"], !names(found) {
                throw JobFailure(
                    .failed, "the entry's id is \(Self.shown(found)), not the job's id \(Self.shown(.string(id)))",
                    httpStatus: response.head.status, reason: .invalidPayload)
            }
        }
        return .fetched(fetch, folder: "entries", fileExtension: "json", details: [("id", .string(id))])
    }

    /// Whether an entry's `id` member is this job's id: the same string, or a whole number
    /// written as the id is (`7` for the id "7"), as a job's `id` may be either.
    private func names(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): text == id
        case .number: value.intValue.map(String.init) == id
        default: false
        }
    }

    /// A value as a message quotes it: JSON, cut to 200 bytes.
    private static func shown(_ value: JSONValue) -> String {
        JSONValue.cut(JSONWriter.string(value), toBytes: 200)
    }
}
