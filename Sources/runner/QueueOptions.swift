import Foundation
import RunnerKit

/// The options and errors of a PostgreSQL queue (`--queue URL` or `$RUNNER_QUEUE`), for the
/// commands that take one instead of the spool folder.
enum QueueOptions {
    static let queue = CommandOption<String?>.text(
        "queue", "URL",
        help: "A PostgreSQL queue that runners on many machines share, instead of the spool folder: a libpq URL such as postgresql://runner@db.example/jobs.",
        defaultText: "$RUNNER_QUEUE, else the spool folder")

    static let keep = CommandOption<Int>.int(
        "keep", "DAYS", default: 7, range: 0...36_500,
        help: "With --queue: how many days finished jobs stay in the queue (for status and records) before they are removed.")

    static let name = CommandOption<String?>.text(
        "name", "NAME",
        help: "With --queue: this watcher's name in the fleet (letters, digits, . _ - @ :), shown by status; a second live watcher of the name is refused, and one restarted under it takes its own unfinished jobs back at once.",
        defaultText: "host-pid")

    /// `--name`, checked: 1 to 64 letters, digits and `. _ - @ :`.
    static func watcherName(_ arguments: ParsedArguments) throws(UsageError) -> String? {
        guard let name = try arguments[name] else { return nil }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@:")
        guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
            throw UsageError("--name: \(Printable.escaped(name)) is not a watcher's name: 1 to 64 letters, digits, '.', '_', '-', '@' or ':'")
        }
        return name
    }

    /// The queue's URL: `--queue`, else a non-empty `$RUNNER_QUEUE`; nil: the spool folder.
    /// Hooks and executable kinds never see the URL (nor its password), whatever variable the
    /// runner was given it in.
    static func url(_ arguments: ParsedArguments) throws(UsageError) -> String? {
        let environment = ProcessInfo.processInfo.environment["RUNNER_QUEUE"] ?? ""
        guard let url = try arguments[queue] ?? (environment.isEmpty ? nil : environment) else { return nil }
        ChildEnvironment.withhold(url)
        if let password = URLComponents(string: url)?.password { ChildEnvironment.withhold(password) }
        return url
    }

    /// A queue error in one line: exit 2 for the command line's fault, 1 for the database's.
    static func fail(_ error: QueueError) -> Int32 {
        Console.error(error.message)
        return error.usage ? 2 : 1
    }
}
