import Foundation

/// What a shell may offer where the command line takes a value: the completion scripts and the
/// man page read it from the command table.
enum ValueCompletion: Sendable, Equatable {
    /// Free text (a number, a key): nothing to offer.
    case nothing
    case files
    case directories
    /// The names of the registered job kinds.
    case kinds
    /// The subcommands listed in the top help.
    case subcommands
    /// A fixed set of words.
    case words([String])

    /// The completion a placeholder suggests: `DIR` a folder, `FILE` or `RUNLOG` a file (`RUNLOG|DIR` a file or a folder).
    static func guess(_ placeholder: String) -> ValueCompletion {
        let word = placeholder.replacingOccurrences(of: "…", with: "").uppercased()
        switch word {
        case "DIR": return .directories
        case "FILE", "RUNLOG", "RUNLOG|DIR": return .files
        case "KIND": return .kinds
        default: return .nothing
        }
    }
}
