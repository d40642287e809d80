/// What is wrong with one job descriptor: the field (if one) and a short reason.
public struct JobSpecError: Error, Sendable, Equatable, CustomStringConvertible {
    public var field: String?
    public var message: String

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
        case file
        case job(Int)
        case line(Int)
        case defaults
    }

    public var file: String
    public var location: Location
    public var problem: JobSpecError

    public init(file: String, location: Location, problem: JobSpecError) {
        self.file = file
        self.location = location
        self.problem = problem
    }

    public init(file: String, _ message: String) {
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
