/// Typed, checked access to the fields of one job object.
///
/// Each read marks the field as known; after decoding, fields the job set itself that nobody
/// read are reported as unknown. Fields that came from a batch's `defaults` are never unknown:
/// they apply only to the kinds that accept them.
public struct JobFields: Sendable {
    private var values: [String: JSONValue]
    private let explicit: [String]
    private var read: Set<String> = []

    /// `job` wins over `defaults` field by field.
    public init(_ job: [(key: String, value: JSONValue)], defaults: [(key: String, value: JSONValue)] = []) {
        var values: [String: JSONValue] = [:]
        for (key, value) in defaults { values[key] = value }
        for (key, value) in job { values[key] = value }
        self.values = values
        self.explicit = job.map(\.key)
    }

    public func has(_ name: String) -> Bool { values[name] != nil && values[name] != .null }

    /// The raw value of a field, marking it read.
    public mutating func value(_ name: String) -> JSONValue? {
        read.insert(name)
        guard let value = values[name], value != .null else { return nil }
        return value
    }

    public mutating func string(_ name: String) throws(JobSpecError) -> String? {
        guard let value = value(name) else { return nil }
        guard case .string(let s) = value else { throw mistyped(name, "a string", value) }
        return s
    }

    public mutating func requiredString(_ name: String) throws(JobSpecError) -> String {
        guard let s = try string(name) else { throw JobSpecError(field: name, "is missing") }
        guard !s.isEmpty else { throw JobSpecError(field: name, "must not be empty") }
        return s
    }

    /// A string, or a whole number written as a string (ids arrive both ways).
    public mutating func identifier(_ name: String) throws(JobSpecError) -> String? {
        guard let value = value(name) else { return nil }
        switch value {
        case .string(let s): return s
        case .number: if let i = value.intValue { return String(i) }
        default: break
        }
        throw mistyped(name, "a string or a whole number", value)
    }

    public mutating func number(_ name: String) throws(JobSpecError) -> Double? {
        guard let value = value(name) else { return nil }
        guard case .number(let d) = value else { throw mistyped(name, "a number", value) }
        return d
    }

    public mutating func int(_ name: String) throws(JobSpecError) -> Int? {
        guard let value = value(name) else { return nil }
        guard let i = value.intValue else { throw mistyped(name, "a whole number", value) }
        return i
    }

    public mutating func bool(_ name: String) throws(JobSpecError) -> Bool? {
        guard let value = value(name) else { return nil }
        guard case .bool(let b) = value else { throw mistyped(name, "true or false", value) }
        return b
    }

    /// The first field the job set itself that no decoder read.
    public func firstUnknownField() -> String? {
        explicit.first { !read.contains($0) }
    }

    private func mistyped(_ name: String, _ expected: String, _ value: JSONValue) -> JobSpecError {
        JobSpecError(field: name, "must be \(expected), not \(value.typeDescription)")
    }
}
