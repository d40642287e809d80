/// Typed, checked access to the fields of one job object.
///
/// Each read marks the field as known; after decoding, fields the job set itself that nobody
/// read are reported as unknown. Fields that came from a batch's `defaults` are never unknown:
/// they apply only to the kinds that accept them.
public struct JobFields: Sendable {
    /// The job's own fields in the job's order, then the defaults it does not override.
    /// A job has a handful of fields, so a linear search beats hashing every name.
    private var fields: [Field]
    /// While a kind decodes its fields: the parameters it lists, and its name.
    private var declared: (parameters: [KindParameter], kind: String)?
    /// The first read that broke the kind's declaration while it decoded.
    private var mistake: KindDeclarationError?

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

    /// Whether the job or its defaults give the field a value other than null. Does not mark it
    /// read.
    public func has(_ name: String) -> Bool {
        guard let i = index(name) else { return false }
        if case .null = fields[i].value { return false }
        return true
    }

    /// The raw value of a field, marking it read.
    public mutating func value(_ name: String) -> JSONValue? {
        checkDeclared(name, nil)
        return rawValue(name)
    }

    private mutating func rawValue(_ name: String) -> JSONValue? {
        guard let i = index(name) else { return nil }
        fields[i].read = true
        if case .null = fields[i].value { return nil }
        return fields[i].value
    }

    /// A string field (listed as `string` or `urlTemplate`), marking it read; nil when absent or
    /// null.
    /// - Throws: naming the field, when it holds another type.
    public mutating func string(_ name: String) throws(JobSpecError) -> String? {
        checkDeclared(name, [.string, .urlTemplate])
        guard let value = rawValue(name) else { return nil }
        guard case .string(let s) = value else { throw mistyped(name, "a string", value) }
        return s
    }

    /// A string field that must be there: throws "is missing" when it is absent or null, "must not
    /// be empty" when it is empty, or as `string(_:)` does.
    public mutating func requiredString(_ name: String) throws(JobSpecError) -> String {
        guard let s = try string(name) else { throw JobSpecError(field: name, "is missing") }
        guard !s.isEmpty else { throw JobSpecError(field: name, "must not be empty") }
        return s
    }

    /// A string, or a whole number written as a string (ids arrive both ways).
    public mutating func identifier(_ name: String) throws(JobSpecError) -> String? {
        checkDeclared(name, [.identifier])
        guard let value = rawValue(name) else { return nil }
        switch value {
        case .string(let s): return s
        case .number: if let i = value.intValue { return String(i) }
        default: break
        }
        throw mistyped(name, "a string or a whole number", value)
    }

    /// A number field, marking it read; nil when absent or null.
    /// - Throws: naming the field, when it holds another type.
    public mutating func number(_ name: String) throws(JobSpecError) -> Double? {
        checkDeclared(name, [.number])
        guard let value = rawValue(name) else { return nil }
        guard case .number(let d) = value else { throw mistyped(name, "a number", value) }
        return d
    }

    /// A whole-number field (`3` or `3.0`; not `3.5`, nor beyond 2^53), marking it read; nil when
    /// absent or null.
    /// - Throws: naming the field, when it holds anything else.
    public mutating func int(_ name: String) throws(JobSpecError) -> Int? {
        checkDeclared(name, [.int])
        guard let value = rawValue(name) else { return nil }
        guard let i = value.intValue else { throw mistyped(name, "a whole number", value) }
        return i
    }

    /// A field of `true` or `false`, marking it read; nil when absent or null.
    /// - Throws: naming the field, when it holds another type.
    public mutating func bool(_ name: String) throws(JobSpecError) -> Bool? {
        checkDeclared(name, [.bool])
        guard let value = rawValue(name) else { return nil }
        guard case .bool(let b) = value else { throw mistyped(name, "true or false", value) }
        return b
    }

    /// A list of strings.
    public mutating func strings(_ name: String) throws(JobSpecError) -> [String]? {
        checkDeclared(name, [.strings])
        guard let value = rawValue(name) else { return nil }
        guard case .array(let items) = value else { throw mistyped(name, "a list of strings", value) }
        var strings: [String] = []
        for item in items {
            guard case .string(let s) = item else { throw mistyped(name, "a list of strings", item) }
            strings.append(s)
        }
        return strings
    }

    // MARK: - Kinds read what they list

    /// From here until `endKindFields(decoded:)`, only `parameters` may be read, each as its type.
    mutating func beginKindFields(_ parameters: [KindParameter], kind: String) {
        declared = (parameters, kind)
        mistake = nil
    }

    /// Ends a kind's decoding and returns the first mistake of its declaration it showed: a field
    /// read that it does not list, or as another type than listed, or (when it `decoded` the
    /// job) a listed parameter the job holds that it never read.
    mutating func endKindFields(decoded: Bool) -> KindDeclarationError? {
        guard let (parameters, kind) = declared else { return nil }
        declared = nil
        if let mistake { return mistake }
        guard decoded else { return nil }
        for parameter in parameters {
            if let i = index(parameter.name), !fields[i].read {
                return KindDeclarationError(kind: kind, field: parameter.name, "lists the parameter '\(parameter.name)' but its decoder never reads it")
            }
        }
        return nil
    }

    /// A kind's decoder reading a field it does not list, or as another type, is a mistake of
    /// the kind: the list `runner kinds` shows and the fields read would drift apart. The first
    /// is kept; registering the kind finds it (`KindRegistry.register`), and a job of a kind that
    /// shows one only on another path is refused, naming it.
    private mutating func checkDeclared(_ name: String, _ types: [KindParameter.ValueType]?) {
        guard mistake == nil, let (parameters, kind) = declared else { return }
        guard let parameter = parameters.first(where: { $0.name == name }) else {
            mistake = KindDeclarationError(kind: kind, field: name, "reads the field '\(name)', which it does not list in its parameters")
            return
        }
        if let types, !types.contains(parameter.type) {
            mistake = KindDeclarationError(
                kind: kind, field: name, "lists '\(name)' as \(parameter.type.rawValue) but reads it as \(types[0].rawValue)")
        }
    }

    /// The first field the job set itself that no decoder read.
    package func firstUnknownField() -> String? {
        fields.first { $0.explicit && !$0.read }?.name
    }

    private func mistyped(_ name: String, _ expected: String, _ value: JSONValue) -> JobSpecError {
        JobSpecError(field: name, "must be \(expected), not \(value.typeDescription)")
    }
}

/// A kind whose decoder does not read what it declares: a field read that it does not list, read
/// as another type than listed, or listed and never read. Thrown when the kind is registered.
public struct KindDeclarationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind's name.
    public var kind: String
    /// The field read or listed.
    public var field: String
    /// What is wrong, after "kind 'name' ".
    public var problem: String

    /// A mistake of `kind` about `field`; `problem` follows "kind 'name' " in `description`.
    package init(kind: String, field: String, _ problem: String) {
        self.kind = kind
        self.field = field
        self.problem = problem
    }

    public var description: String { "kind '\(kind)' \(problem)" }
}
