/// A kind as the registry holds it: a value with a name, a summary, its parameters, where it
/// comes from, and a way to decode a job of it (which gives the job's way to run).
///
/// Compiled kinds become definitions with `KindDefinition(SomeKind.self)` (their source the
/// file that makes the definition); kinds read from files are definitions made with
/// `init(name:summary:parameters:source:accept:decode:)`.
public struct KindDefinition: Sendable {
    /// The name jobs give in their `kind` field; a registry refuses a second kind of the same name.
    public let name: String
    /// One sentence for `runner kinds`.
    public let summary: String
    /// The fields the kind accepts beyond the common ones; its decoder reads exactly these.
    public let parameters: [KindParameter]
    /// Where the kind comes from, as `runner kinds` and a clash of names say it: `built-in`, the
    /// path of the kind file, or the source file of the program that registered it
    /// (`MyApp/Kinds.swift`).
    public let source: String
    /// The `Accept` header of the kind's requests.
    public let accept: String?
    /// The `timeout` of a job of this kind that sets none, instead of the runner's 2 s (a kind of
    /// large bodies needs more); nil: the runner's.
    public var defaultTimeout: Duration?
    /// The `maxBytes` of a job of this kind that sets none, instead of 64 MiB; nil: the runner's.
    public var defaultMaxBytes: Int?
    private let decoder: @Sendable (inout JobFields) throws(JobSpecError) -> any DecodedJob

    /// A kind made of its parts, as kinds read from files are: `decode` reads a job's own fields
    /// and returns the job (`decode(_:)` checks the parameters around it). `defaultTimeout` and
    /// `defaultMaxBytes` start nil.
    public init(
        name: String, summary: String, parameters: [KindParameter], source: String, accept: String? = nil,
        decode: @escaping @Sendable (inout JobFields) throws(JobSpecError) -> any DecodedJob
    ) {
        self.name = name
        self.summary = summary
        self.parameters = parameters
        self.source = source
        self.accept = accept
        self.decoder = decode
    }

    /// The definition of a compiled kind; `source` defaults to the caller's file
    /// (`#fileID`), so a name registered twice names the code that registered each.
    public init<Kind: JobKind>(_ kind: Kind.Type, source: String = #fileID) {
        self.init(
            name: Kind.name, summary: Kind.summary, parameters: Kind.parameters, source: source, accept: Kind.accept,
            decode: { (fields: inout JobFields) throws(JobSpecError) -> any DecodedJob in try Kind(fields: &fields) })
        defaultTimeout = Kind.defaultTimeout
        defaultMaxBytes = Kind.defaultMaxBytes
    }

    /// Decodes the kind's own fields of one job. A `required` parameter the job leaves out is
    /// refused first, for every kind. The kind may read only the parameters it lists, each as its
    /// listed type, and must read each it lists: registering the kind checks that
    /// (`checkDeclaration()`), and a job that shows a mistake on a path the check did not take
    /// is refused, naming the kind and the field, never a stop of the program.
    public func decode(_ fields: inout JobFields) throws(JobSpecError) -> any DecodedJob {
        for parameter in parameters where parameter.required && !fields.has(parameter.name) {
            throw JobSpecError(field: parameter.name, "is missing")
        }
        fields.beginKindFields(parameters, kind: name)
        let job: any DecodedJob
        do {
            job = try decoder(&fields)
        } catch {
            if let mistake = fields.endKindFields(decoded: false) { throw JobSpecError(field: mistake.field, mistake.description) }
            throw error
        }
        if let mistake = fields.endKindFields(decoded: true) { throw JobSpecError(field: mistake.field, mistake.description) }
        return job
    }

    /// Checks that the kind's decoder reads what it lists: it decodes a probe job holding every
    /// listed parameter (a value of its listed type each), then one holding only the required
    /// ones, and throws the first field it read that it does not list, read as another type,
    /// or (in the first probe, when it decoded) listed and never read. `KindRegistry` calls this
    /// when the kind is registered, so a mistake of a kind surfaces at start-up, not at its
    /// first job.
    package func checkDeclaration() throws(KindDeclarationError) {
        let all = parameters.map { (key: $0.name, value: Self.probeValue($0.type)) }
        let required = parameters.filter(\.required).map { (key: $0.name, value: Self.probeValue($0.type)) }
        for (index, probe) in [all, required].enumerated() {
            var fields = JobFields(probe)
            fields.beginKindFields(parameters, kind: name)
            let decoded = (try? decoder(&fields)) != nil
            if let mistake = fields.endKindFields(decoded: decoded && index == 0) { throw mistake }
        }
    }

    /// A value of `type` for a probe job.
    private static func probeValue(_ type: KindParameter.ValueType) -> JSONValue {
        switch type {
        case .string, .identifier: .string("probe")
        case .urlTemplate: .string("https://probe.invalid/")
        case .int, .number: .number(1)
        case .bool: .bool(false)
        case .strings: .array([.string("probe")])
        }
    }
}
