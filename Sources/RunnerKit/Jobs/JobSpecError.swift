/// What is wrong with one job descriptor: the field (if one) and a short reason.
public struct JobSpecError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The field at fault, as the job object names it (`url`, `maxBytes`, a kind's parameter); nil
    /// when the problem is the job as a whole.
    public var field: String?
    /// What is wrong, written to follow "field 'name' " (`is missing`, `must be a whole number, not
    /// a string`).
    public var message: String

    /// A problem with `field` (nil: the whole job): `JobSpecError(field: "id", "is missing")` reads
    /// "field 'id' is missing".
    public init(field: String?, _ message: String) {
        self.field = field
        self.message = message
    }

    public var description: String {
        if let field { return "field '\(field)' \(message)" }
        return message
    }
}

/// A bad job file: which file, which job (index or line) and what is wrong with it.
public struct JobFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where in the file: the whole file, the n-th job (1-based) of a document, or a line of JSON Lines.
    public enum Location: Sendable, Equatable {
        /// The file as a whole: it cannot be read, is empty, holds no jobs, or its batch is
        /// malformed.
        case file
        /// The n-th job (1-based) of a JSON document.
        case job(Int)
        /// Line n (1-based) of a JSON Lines file.
        case line(Int)
        /// The file's `defaults` object.
        case defaults
    }

    /// The job file's path, as it was given.
    public var file: String
    /// Where in the file the problem lies.
    public var location: Location
    /// What is wrong, and with which field.
    public var problem: JobSpecError

    /// A problem at `location` in `file`.
    package init(file: String, location: Location, problem: JobSpecError) {
        self.file = file
        self.location = location
        self.problem = problem
    }

    /// A problem with the whole of `file` and no one field; `message` follows the path (`is
    /// empty`).
    package init(file: String, _ message: String) {
        self.init(file: file, location: .file, problem: JobSpecError(field: nil, message))
    }

    public var description: String {
        switch location {
        case .file: return "\(file): \(problem)"
        case .job(let n): return "\(file): job \(n): \(problem)"
        case .line(let n): return "\(file): line \(n): \(problem)"
        case .defaults: return "\(file): defaults: \(problem)"
        }
    }
}
