import Foundation
import RunnerKit

/// `image-list`: a JSON array of `{"id": …, "imageUrl": "…"}`; one child `image` job per element.
public struct ImageListKind: JobKind {
    public static let name = "image-list"
    public static let summary = "Fetches a list of images and starts one image job per element."
    public static let parameters = [
        KindParameter("idField", type: .string, default: "id", "The element field that names the image (its key is image:<id>)."),
        KindParameter("urlField", type: .string, default: "imageUrl", "The element field that holds the image URL (relative URLs resolve against the list's)."),
    ]
    public static let accept: String? = "application/json"

    /// The element member that names each image: a non-empty string or a whole number, making the
    /// child's key `image:<id>`. Default `id`.
    public let idField: String
    /// The element member holding each image's URL; a relative one resolves against the URL that
    /// answered with the list. Default `imageUrl`.
    public let urlField: String

    /// A list job's parameters; unlike a job file's, empty member names are not refused here.
    public init(idField: String = "id", urlField: String = "imageUrl") {
        self.idField = idField
        self.urlField = urlField
    }

    public init(fields: inout JobFields) throws(JobSpecError) {
        idField = try fields.string("idField") ?? "id"
        urlField = try fields.string("urlField") ?? "imageUrl"
        if idField.isEmpty { throw JobSpecError(field: "idField", "must not be empty") }
        if urlField.isEmpty { throw JobSpecError(field: "urlField", "must not be empty") }
    }

    public func run(in context: JobContext) async throws -> KindOutcome {
        let (document, fetch) = try await JSONPayload.fetchDocument(context, folder: "lists", expected: "a JSON image list")
        guard case .array(let elements) = document else {
            throw JobFailure.failed("expected an image list (an array), but the JSON holds \(document.typeDescription)", httpStatus: JSONPayload.status(fetch))
        }
        let base: URL
        if case .fetched(let response) = fetch { base = response.head.url } else { base = context.job.url }
        // Every element is checked before any child runs: a malformed list fails as a whole.
        let found = try await PayloadCheck.run(bytes: JSONPayload.size(fetch)) { _ in
            try children(of: elements, base: base)
        }
        let jobs = ChildJobs(count: found.count) { index in
            .success(ChildJob(kind: "image", url: found[index].url, key: "image:\(found[index].id)"))
        }
        return .fetched(fetch, folder: "lists", fileExtension: "json", details: [("elements", JSONValue(elements.count))], children: jobs)
    }

    /// Each element's id and absolute URL; throws naming the first malformed element.
    private func children(of elements: [JSONValue], base: URL) throws -> [(id: String, url: String)] {
        var children: [(id: String, url: String)] = []
        children.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            let position = "element \(index + 1)"
            guard case .object = element else {
                throw JobFailure.failed("the image list is malformed: \(position) is \(element.typeDescription), not an object")
            }
            let id: String
            switch element[idField] {
            case .string(let s)? where !s.isEmpty: id = s
            case let value? where value.intValue != nil: id = String(value.intValue!)
            default: throw JobFailure.failed("the image list is malformed: \(position) has no string or integer '\(idField)'")
            }
            guard let text = element[urlField]?.stringValue,
                let url = URL(string: text, relativeTo: base)?.absoluteURL
            else {
                throw JobFailure.failed("the image list is malformed: \(position) has no valid '\(urlField)'")
            }
            do {
                _ = try JobDescriptor.validateURL(url.absoluteString, field: urlField)
            } catch {
                throw JobFailure.failed("the image list is malformed: \(position): \(error)")
            }
            children.append((id, url.absoluteString))
        }
        return children
    }
}
