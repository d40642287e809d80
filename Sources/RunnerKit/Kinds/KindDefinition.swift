/// A kind as the registry holds it: a value with a name, a summary, its parameters, where it
/// comes from, and a way to decode a job of it (which gives the job's way to run).
///
/// Compiled kinds become definitions with `KindDefinition(SomeKind.self)`; kinds read from files
/// are definitions made with `init(name:summary:parameters:source:accept:decode:)`.
public struct KindDefinition: Sendable {
    public let name: String
    public let summary: String
    public let parameters: [KindParameter]
    /// `built-in`, or the path of the file that defines the kind.
    public let source: String
    /// The `Accept` header of the kind's requests.
    public let accept: String?
    /// The `timeout` of a job of this kind that sets none, instead of the runner's 2 s (a kind of
    /// large bodies needs more); nil: the runner's.
    public var defaultTimeout: Duration?
    /// The `maxBytes` of a job of this kind that sets none, instead of 64 MiB; nil: the runner's.
    public var defaultMaxBytes: Int?
    private let decoder: @Sendable (inout JobFields) throws(JobSpecError) -> any JobParameters

    public init(
        name: String, summary: String, parameters: [KindParameter], source: String, accept: String? = nil,
        decode: @escaping @Sendable (inout JobFields) throws(JobSpecError) -> any JobParameters
    ) {
        self.name = name
        self.summary = summary
        self.parameters = parameters
        self.source = source
        self.accept = accept
        self.decoder = decode
    }

    /// The definition of a compiled kind.
    public init<Kind: JobKind>(_ kind: Kind.Type, source: String = "built-in") {
        self.init(
            name: Kind.name, summary: Kind.summary, parameters: Kind.parameters, source: source, accept: Kind.accept,
            decode: { (fields: inout JobFields) throws(JobSpecError) -> any JobParameters in try Kind(fields: &fields) })
        defaultTimeout = Kind.defaultTimeout
        defaultMaxBytes = Kind.defaultMaxBytes
    }

    /// Decodes the kind's own fields of one job. The kind may read only the parameters it
    /// lists, each as its listed type (`JobFields` stops the program otherwise, so the list and
    /// the decoder cannot drift apart); a listed parameter the decoder never looks at is caught
    /// the same way.
    public func decode(_ fields: inout JobFields) throws(JobSpecError) -> any JobParameters {
        fields.beginKindFields(parameters, kind: name)
        let job = try decoder(&fields)
        fields.endKindFields()
        return job
    }
}
