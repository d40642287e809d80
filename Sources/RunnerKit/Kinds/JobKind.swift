import Foundation

// The nouns of kinds, as swift-jobs has `JobParameters`, `JobDefinition` and `JobRegistry`:
//
//   KindParameter     one parameter a kind declares (compiled, declarative and executable kinds alike)
//   DecodedJob        what one decoded job of a kind holds, and how that job runs
//   JobKind           what a compiled kind implements: its name, summary, declared parameters, and
//                     how its parameters decode (its values are its jobs' parameters)
//   KindDefinition    a kind as the registry holds it: name, summary, declared parameters, decoder
//   KindRegistry      kind names to definitions
//   JobDescriptor     a job: its kind's parameters and the fields every kind shares

/// What one decoded job of a kind holds (its parameters), and how to find its URL, name its key
/// and run it.
///
/// Compiled kinds conform through `JobKind`; kinds made from files (declarative, executable)
/// are other conforming types. The engine holds one of these per job and never asks its type.
public protocol DecodedJob: Sendable {
    /// The name of the kind these are parameters of, as job files and records name it.
    var kindName: String { get }
    /// The `Accept` header of the kind's requests: what it validates. Nil sends none.
    var accept: String? { get }

    /// The URL to fetch, given the job's `url` field (a kind that takes an id fills in `{id}`).
    func resolveURL(_ template: String) -> String

    /// The key of a job that names none, from its kind name and resolved URL.
    func defaultKey(kind: String, url: String) -> String

    /// Checks the resolved URL. The default takes absolute http and https URLs with a host; a
    /// kind that does its own network operation may take other schemes.
    func validateURL(_ text: String) throws(JobSpecError) -> URL

    /// Fetches and checks the payload and says what to store; may return child jobs.
    /// Throw `JobFailure` to end the job with a status and message; any other error is `failed`.
    /// The engine stores what the outcome names and fills the record's `output`, `bytes`,
    /// `sha256` and `httpStatus` from what it stored.
    func run(in context: JobContext) async throws -> KindOutcome
}

extension DecodedJob {
    public func resolveURL(_ template: String) -> String { template }
    public func defaultKey(kind: String, url: String) -> String { "\(kind):\(url)" }
    public func validateURL(_ text: String) throws(JobSpecError) -> URL { try JobDescriptor.validateURL(text) }
}

/// A kind compiled into the program: a type that names itself and decodes its own parameters.
/// It registers through `KindDefinition(SomeKind.self)`.
public protocol JobKind: DecodedJob {
    /// The name job files use in their `kind` field, e.g. `"image"`.
    static var name: String { get }
    /// One sentence for `runner kinds`.
    static var summary: String { get }
    /// The fields this kind accepts beyond the common ones. A kind reads exactly these while
    /// decoding: one that reads a field it does not list, or as another type, or never reads one
    /// it lists, is refused when registered (`KindDeclarationError`).
    static var parameters: [KindParameter] { get }
    /// The `Accept` header its requests send: what it validates. Nil sends none.
    static var accept: String? { get }
    /// The `timeout` of its jobs that set none (nil: the runner's 2 s).
    static var defaultTimeout: Duration? { get }
    /// The `maxBytes` of its jobs that set none (nil: the runner's 64 MiB).
    static var defaultMaxBytes: Int? { get }

    /// Decodes this kind's own fields. Read each field through `fields`, which reports
    /// missing, mistyped and (afterwards) unknown fields by name.
    init(fields: inout JobFields) throws(JobSpecError)
}

extension JobKind {
    public static var accept: String? { nil }
    public static var defaultTimeout: Duration? { nil }
    public static var defaultMaxBytes: Int? { nil }
    public var kindName: String { Self.name }
    public var accept: String? { Self.accept }
}

/// A parameter a kind declares (a field its jobs accept beyond the common ones), as `runner
/// kinds` lists it and as decoding checks it: the one type for compiled, declarative and
/// executable kinds.
public struct KindParameter: Sendable, Equatable {
    /// The JSON types a parameter may have.
    public enum ValueType: String, Sendable, Equatable, CaseIterable {
        /// A string, read with `JobFields.string(_:)`.
        case string
        /// A whole number (`3` or `3.0`, not `3.5`), read with `JobFields.int(_:)`.
        case int
        /// Any number, fractions included, read with `JobFields.number(_:)`.
        case number
        /// `true` or `false`, read with `JobFields.bool(_:)`.
        case bool
        /// A string that is a URL template (`{id}` and such are filled in).
        case urlTemplate = "URL template"
        /// A string or a whole number (ids arrive both ways).
        case identifier = "string or int"
        /// A list of strings.
        case strings = "list of strings"
    }

    /// The field's name in a job object, e.g. `minLength`.
    public var name: String
    /// The JSON type a job's value must have; the kind's decoder must read the field as this type.
    public var type: ValueType
    /// Whether a job must set it: a job that leaves it out is refused as missing before the kind
    /// decodes, for every kind.
    public var required: Bool
    /// The value a job that leaves the parameter out gets, where the runner applies it (kinds
    /// read from files); a compiled kind applies its own defaults while decoding.
    public var defaultValue: JSONValue?
    /// The default as `runner kinds` shows it.
    public var defaultText: String?
    /// One sentence saying what the parameter does, for `runner kinds`.
    public var summary: String

    /// A compiled kind's parameter; `defaultText` says what the kind does without it.
    public init(_ name: String, type: ValueType, required: Bool = false, default defaultText: String? = nil, _ summary: String) {
        self.name = name
        self.type = type
        self.required = required
        self.defaultText = defaultText
        self.summary = summary
    }

    /// A parameter with a default value the runner applies (kinds read from files).
    public init(name: String, type: ValueType, required: Bool, defaultValue: JSONValue?, summary: String) {
        self.init(name, type: type, required: required, default: defaultValue.map { JSONWriter.string($0) }, summary)
        self.defaultValue = defaultValue
    }
}

/// Ends a job with a status other than success, and a sentence saying why.
public struct JobFailure: Error, Sendable, CustomStringConvertible {
    /// The status the job ends with: `failed`, `notFound`, `timedOut`….
    public var status: JobStatus
    /// Why, in a sentence: the record's `error`.
    public var message: String
    /// The server's status that caused the failure, if one did: the record's `httpStatus`.
    public var httpStatus: Int?
    /// Whether another attempt may succeed (a transient failure: offline, timed out, a connection error, 408, 429, 5xx).
    public var isTransient: Bool
    /// How long the server asked us to wait before trying again.
    public var retryAfter: Duration?
    /// Why, as the record's `reason` says it; nil: inferred from the status and `httpStatus`
    /// (`FailureReason.inferred`): a kind's own `failed` without an HTTP status is `invalidPayload`.
    public var reason: FailureReason?

    /// A failure that ends the job `status`, `message` its `error`. A transient one is retried
    /// while the job has `retries` left, after the backoff or, when given, `retryAfter` (up to
    /// `Backoff.retryAfterCap`).
    public init(
        _ status: JobStatus, _ message: String, httpStatus: Int? = nil, isTransient: Bool = false, retryAfter: Duration? = nil,
        reason: FailureReason? = nil
    ) {
        self.status = status
        self.message = message
        self.httpStatus = httpStatus
        self.isTransient = isTransient
        self.retryAfter = retryAfter
        self.reason = reason
    }

    /// A `failed` that is not retried; without an `httpStatus`, its reason is `invalidPayload`.
    public static func failed(_ message: String, httpStatus: Int? = nil) -> JobFailure {
        JobFailure(.failed, message, httpStatus: httpStatus)
    }

    public var description: String { message }

    /// How an error thrown inside an attempt ends the job: the one classifier of errors (a
    /// `JobFailure` is passed on as it is, never classified again).
    package init(classifying error: any Error) {
        switch error {
        case let failure as JobFailure: self = failure
        case is CancellationError: self.init(.cancelled, "cancelled")
        case let http as FetchError:
            if case .tooLarge = http {
                self.init(.failed, http.description, isTransient: http.isTransient, reason: .tooLarge)
            } else {
                self.init(.failed, http.description, isTransient: http.isTransient, reason: .transport)
            }
        case let tooLarge as Payload.TooLarge: self.init(.failed, tooLarge.description, reason: .tooLarge)
        case let write as OutputStore.WriteError: self.init(.failed, write.description, reason: .storage)
        default: self.init(.failed, String(describing: error))
        }
    }
}
