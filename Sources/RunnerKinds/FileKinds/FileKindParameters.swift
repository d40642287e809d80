import Foundation
import RunnerKit

/// The parameters of one job of a kind read from a file, defaults applied: as JSON (for an
/// executable kind's program) and as text (for templates).
struct FileKindParameters: Sendable {
    /// In the order the kind declares them; parameters the job leaves out without a default are absent.
    var values: [(key: String, value: JSONValue)]
    var texts: [String: String]

    /// Reads exactly the declared parameters, each as its declared type.
    init(_ declared: [KindParameter], fields: inout JobFields) throws(JobSpecError) {
        values = []
        texts = [:]
        for parameter in declared {
            var value: JSONValue?
            switch parameter.type {
            case .int: value = try fields.int(parameter.name).map { JSONValue($0) }
            case .number: value = try fields.number(parameter.name).map { .number($0) }
            case .bool: value = try fields.bool(parameter.name).map { .bool($0) }
            default: value = try fields.string(parameter.name).map { .string($0) }
            }
            if value == nil {
                if parameter.required { throw JobSpecError(field: parameter.name, "is missing") }
                value = parameter.defaultValue
            }
            guard let value else { continue }
            if parameter.required, case .string(let s) = value, s.isEmpty {
                throw JobSpecError(field: parameter.name, "must not be empty")
            }
            values.append((parameter.name, value))
            texts[parameter.name] = KindTemplate.scalarText(value)
        }
    }

    /// The job's URL with `{name}` of each parameter replaced by its percent-encoded value.
    func fillURL(_ template: String) -> String { URLTemplate.fill(template) { texts[String($0)] } }

    /// The kind's key template filled, or `<kind>:<url>` without one.
    func key(of file: KindFile, url: String) -> String {
        guard let key = file.key, let filled = try? key.fill(parameters: texts, element: nil, encode: false) else {
            return "\(file.name):\(url)"
        }
        return filled
    }
}
