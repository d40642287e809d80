import Foundation
import RunnerKit

/// A job of a declarative kind: the kind file says what to fetch, how to check it, what to
/// record and what to fan out to.
struct DeclarativeKind: DecodedJob {
    let file: KindFile
    let parameters: FileKindParameters

    var kindName: String { file.name }
    var accept: String? { file.accept }

    func resolveURL(_ template: String) -> String { parameters.fillURL(template) }

    func defaultKey(kind: String, url: String) -> String { parameters.key(of: file, url: url) }

    func run(in context: JobContext) async throws -> KindOutcome {
        let fetch = try await context.fetch(folder: file.folder)
        var document: JSONValue?
        var base = context.job.url
        switch fetch {
        case .fetched(let response):
            base = response.head.url
            try checkContentType(response)
            document = try await check(response)
        case .notModified(let previous):
            if case .json = file.payload, !file.details.isEmpty || file.children != nil {
                do {
                    document = try await PayloadCheck.run(bytes: previous.bytes ?? 0) { _ in
                        try JSONParser.parse(context.previousPayload())
                    }
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    throw JobFailure.failed("the server said not modified, but the earlier payload cannot be read: \(error)")
                }
            }
        }
        var details: [(key: String, value: JSONValue)] = []
        var children = ChildJobs()
        if let document {
            details = Self.details(file.details, in: document)
            if let spec = file.children {
                children = try makeChildren(spec, document: document, base: base, status: JSONPayload.status(fetch))
            }
        }
        return .fetched(fetch, folder: file.folder, fileExtension: file.fileExtension, details: details, children: children)
    }

    // MARK: - Checks

    private func checkContentType(_ response: JobContext.Response) throws {
        guard let allowed = file.contentTypes else { return }
        let header = response.head.headers["content-type"] ?? ""
        let type = header.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        guard allowed.contains(type) else {
            throw JobFailure.failed(
                "expected Content-Type \(allowed.joined(separator: " or ")), but \(type.isEmpty ? "none" : type) arrived (\(ImageHeader.describe(response.payload.prefix)))",
                httpStatus: response.head.status)
        }
    }

    /// Checks the payload; returns the parsed document of a JSON payload.
    private func check(_ response: JobContext.Response) async throws -> JSONValue? {
        let payload = response.payload
        let status = response.head.status
        switch file.payload {
        case .bytes:
            return nil
        case .text:
            try await PayloadCheck.run(bytes: payload.count) { _ in
                let bytes = try payload.bytes()
                guard String(validating: bytes, as: UTF8.self) != nil else {
                    throw JobFailure.failed("expected UTF-8 text, but \(ImageHeader.describe(payload.prefix)) arrived", httpStatus: status)
                }
            }
            return nil
        case .image(let formats):
            // Checked as the image kind checks (its maxPixels included): from the first bytes,
            // reading the rest back only when the format keeps what it needs past them.
            _ = try ImageCheck(formats: formats).check(response)
            return nil
        case .json(let shape, let require):
            let expected = shape == "any" ? "a JSON document" : "a JSON \(shape)"
            let document = try await JSONPayload.parse(payload, expected: expected)
            switch (shape, document) {
            case ("object", .object), ("array", .array), ("any", _): break
            default:
                throw JobFailure.failed("expected \(expected), but the JSON holds \(document.typeDescription)", httpStatus: status)
            }
            for pointer in require where pointer.resolve(in: document) == nil {
                throw JobFailure.failed("expected the JSON to hold \(pointer.description.isEmpty ? "a document" : pointer.description), but it does not", httpStatus: status)
            }
            return document
        }
    }

    static func details(_ entries: [(name: String, detail: KindFile.Detail)], in document: JSONValue) -> [(key: String, value: JSONValue)] {
        entries.map { entry in
            switch entry.detail {
            case .value(let pointer):
                return (entry.name, pointer.resolve(in: document) ?? .null)
            case .count(let pointer):
                switch pointer.resolve(in: document) {
                case .array(let items)?: return (entry.name, JSONValue(items.count))
                case .object(let members)?: return (entry.name, JSONValue(members.count))
                default: return (entry.name, .null)
                }
            }
        }
    }

    // MARK: - Children

    private func makeChildren(
        _ spec: (each: JSONPointer, job: [(key: String, value: KindFile.JobTemplate)]), document: JSONValue, base: URL, status: Int
    ) throws -> ChildJobs {
        guard let found = spec.each.resolve(in: document) else {
            throw JobFailure.failed("expected the JSON to hold an array at '\(spec.each)' (children.each), but it holds nothing there", httpStatus: status)
        }
        guard case .array(let elements) = found else {
            throw JobFailure.failed("expected an array at '\(spec.each)' (children.each), but the JSON holds \(found.typeDescription) there", httpStatus: status)
        }
        let values = parameters.texts
        let job = spec.job
        return ChildJobs(count: elements.count) { index in
            do {
                var fields: [(key: String, value: JSONValue)] = []
                for (key, template) in job {
                    var value = try Self.fill(template, parameters: values, element: elements[index], encode: key == "url")
                    // A relative URL resolves against the parent's; an absolute one is left as
                    // written, so a `{id}` it holds stays for the child's own kind to fill.
                    if key == "url", case .string(let text) = value, !text.contains("://") {
                        guard let url = URL(string: text, relativeTo: base)?.absoluteURL else {
                            throw KindTemplate.Invalid(description: "the url '\(text)' is not a URL")
                        }
                        value = .string(url.absoluteString)
                    }
                    fields.append((key, value))
                }
                return .success(ChildJob(fields))
            } catch {
                return .failure(ChildJobs.Invalid("element \(index + 1): \(error)"))
            }
        }
    }

    private static func fill(
        _ template: KindFile.JobTemplate, parameters: [String: String], element: JSONValue, encode: Bool
    ) throws(KindTemplate.Invalid) -> JSONValue {
        switch template {
        case .value(let value):
            return value
        case .template(let text):
            return .string(try text.fill(parameters: parameters, element: element, encode: encode))
        case .object(let members):
            var out: [(key: String, value: JSONValue)] = []
            for (key, item) in members { out.append((key, try fill(item, parameters: parameters, element: element, encode: false))) }
            return .object(out)
        case .array(let items):
            var out: [JSONValue] = []
            for item in items { out.append(try fill(item, parameters: parameters, element: element, encode: false)) }
            return .array(out)
        }
    }
}
