/// Typed, checked access to the fields of one job object.
///
/// Each read marks the field as known; after decoding, fields the job set itself that nobody
/// read are reported as unknown. Fields that came from a batch's `defaults` are never unknown:
/// they apply only to the kinds that accept them.
public struct JobFields: Sendable {
    /// The job's own fields in the job's order, then the defaults it does not override.
    /// A job has a handful of fields, so a linear search beats hashing every name.
    private var fields: [Field]

    private struct Field: Sendable {
        var name: String
        var value: JSONValue
        /// Set by the job itself rather than by `defaults`.
        var explicit: Bool
        var read = false
    }

    /// `job` wins over `defaults` field by field.
    public init(_ job: [(key: String, value: JSONValue)], defaults: [(key: String, value: JSONValue)] = []) {
        var fields: [Field] = []
        fields.reserveCapacity(job.count + defaults.count)
        // A hostile job of many thousand members must not cost their square: past a few
        // fields, names are found through a dictionary.
        var positions: [String: Int]? = job.count + defaults.count > 16 ? [:] : nil
        func find(_ key: String) -> Int? {
            if let positions { return positions[key] }
            return fields.firstIndex(where: { $0.name == key })
        }
        func add(_ field: Field) {
            positions?[field.name] = fields.count
            fields.append(field)
        }
        for (key, value) in job {
            if let i = find(key) {
                fields[i].value = value
            } else {
                add(Field(name: key, value: value, explicit: true))
            }
        }
        for (key, value) in defaults {
            if let i = find(key) {
                if !fields[i].explicit { fields[i].value = value }
            } else {
                add(Field(name: key, value: value, explicit: false))
            }
        }
        self.fields = fields
    }

    private func index(_ name: String) -> Int? {
        for i in fields.indices where fields[i].name == name { return i }
        return nil
    }

    public func has(_ name: String) -> Bool {
        guard let i = index(name) else { return false }
        if case .null = fields[i].value { return false }
        return true
    }

    /// The raw value of a field, marking it read.
    public mutating func value(_ name: String) -> JSONValue? {
        guard let i = index(name) else { return nil }
        fields[i].read = true
        if case .null = fields[i].value { return nil }
        return fields[i].value
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
        fields.first { $0.explicit && !$0.read }?.name
    }

    private func mistyped(_ name: String, _ expected: String, _ value: JSONValue) -> JobSpecError {
        JobSpecError(field: name, "must be \(expected), not \(value.typeDescription)")
    }
}
