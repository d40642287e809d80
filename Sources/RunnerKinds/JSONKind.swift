import RunnerKit

/// `json`: any JSON document, an object or an array, from any API: the kind a first API call
/// needs, with no kind file. `require` names JSON Pointers that must exist in it, so an answer
/// that is JSON but not the expected one (an error object with a 200) ends `failed`.
public struct JSONKind: JobKind {
    public static let name = "json"
    public static let summary = "Fetches any JSON document (an object or an array); require lists JSON Pointers that must exist in it."
    public static let parameters = [
        KindParameter("require", type: .strings, "JSON Pointers (such as /data/0/id) that must exist in the document, else the job fails."),
    ]
    public static let accept: String? = "application/json"

    /// The most pointers one job may require.
    public static let maxRequired = 64

    /// JSON Pointers that must each name a value in the document, else the job ends `failed`;
    /// empty: any object or array passes.
    public let require: [JSONPointer]

    /// A json job's parameters; unlike a job file's, more than `maxRequired` pointers are not
    /// refused here.
    public init(require: [JSONPointer] = []) { self.require = require }

    public init(fields: inout JobFields) throws(JobSpecError) {
        let texts = try fields.strings("require") ?? []
        guard texts.count <= Self.maxRequired else {
            throw JobSpecError(field: "require", "lists more than \(Self.maxRequired) pointers")
        }
        var pointers: [JSONPointer] = []
        for text in texts {
            do {
                pointers.append(try JSONPointer(text))
            } catch {
                throw JobSpecError(field: "require", error.description)
            }
        }
        require = pointers
    }

    public func run(in context: JobContext) async throws -> KindOutcome {
        let fetch: JobContext.Fetch
        let document: JSONValue?
        if require.isEmpty {
            // Nothing to look for: a 304's earlier payload was checked when it came.
            fetch = try await context.fetch(folder: "json")
            if case .fetched(let response) = fetch {
                document = try await JSONPayload.parse(response.payload, expected: "a JSON document")
            } else {
                document = nil
            }
        } else {
            (document, fetch) = try await JSONPayload.fetchDocument(context, folder: "json", expected: "a JSON document")
        }
        var details: [(key: String, value: JSONValue)] = []
        if let document {
            let status = JSONPayload.status(fetch)
            switch document {
            case .object(let members): details = [("type", .string("object")), ("members", JSONValue(members.count))]
            case .array(let elements): details = [("type", .string("array")), ("elements", JSONValue(elements.count))]
            default:
                throw JobFailure.failed("expected a JSON object or array, but the document is \(document.typeDescription)", httpStatus: status)
            }
            let missing = require.filter { $0.resolve(in: document) == nil }
            if let first = missing.first {
                let more = missing.count > 1 ? " (and \(missing.count - 1) more of the \(require.count) required)" : ""
                throw JobFailure.failed("the document has nothing at \(first.description.isEmpty ? "\"\"" : first.description), which require lists\(more)", httpStatus: status)
            }
        }
        return .fetched(fetch, folder: "json", fileExtension: "json", details: details)
    }
}
